#!/usr/bin/env python3
"""Compares the machine code of the kernels of two cubins, section by section.

    nvcc -arch=sm_90 -cubin -std=c++20 -O3 -I. kernels/cuda/topk_kernel.cu -o before.cubin
    (the change)
    nvcc ... -o after.cubin
    kernels/cuda/scripts/cubin_text_hashes.py before.cubin after.cubin

Prints, for each kernel of the second cubin (its `.text.<mangled name>` section, demangled with
c++filt where it exists), the SHA-256 of its bytes and whether the first cubin holds a section
with the same bytes, under any name: a new template parameter renames every instance, so names
alone would not pair them. For a changed kernel it adds its instructions before and after and how
many differ in place (two are a relocated operand, thousands new code). Exit status 0 when every
kernel of the first cubin is found unchanged in the second, 1 otherwise (a kernel added by the
change is listed as new and does not count).
Reads ELF64 little-endian, which is what nvcc writes for every current architecture.
"""
import hashlib
import shutil
import struct
import subprocess
import sys


def text_sections(path):
    """{mangled kernel name: the bytes of its .text section} of an ELF64 cubin."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"{path}: not a little-endian ELF64 file")
    section_offset = struct.unpack_from("<Q", data, 0x28)[0]
    entry_size, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size)
               for i in range(count)]
    names_at = headers[names_index][4]
    sections = {}
    for name_at, kind, _, _, offset, size, *_ in headers:
        end = data.index(b"\0", names_at + name_at)
        name = data[names_at + name_at:end].decode()
        if name.startswith(".text.") and kind != 8:  # 8: SHT_NOBITS
            sections[name[len(".text."):]] = data[offset:offset + size]
    return sections


def demangled(names):
    if not shutil.which("c++filt"):
        return {name: name for name in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return dict(zip(names, out.stdout.splitlines()))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: cubin_text_hashes.py BEFORE.cubin AFTER.cubin")
    before_text = text_sections(sys.argv[1])
    after_text = text_sections(sys.argv[2])
    before = {name: hashlib.sha256(text).hexdigest() for name, text in before_text.items()}
    after = {name: hashlib.sha256(text).hexdigest() for name, text in after_text.items()}
    readable = demangled(sorted(set(before) | set(after)))
    before_by_hash = {digest: name for name, digest in before.items()}
    # Mangled names of anonymous-namespace kernels carry a hash of the source: the demangled ones
    # pair a kernel with its earlier build.
    before_by_readable = {readable[name]: name for name in before}
    found = set()
    for name in sorted(after, key=lambda n: readable[n]):
        digest = after[name]
        detail = ""
        if digest in before_by_hash:
            found.add(before_by_hash[digest])
            verdict = "unchanged"
        elif readable[name] in before_by_readable:
            verdict = "CHANGED"
            # How much: instructions (16 bytes each) before and after, and how many of them differ
            # at the same place (a relocated operand or two, or new code).
            old = before_text[before_by_readable[readable[name]]]
            new = after_text[name]
            differ = sum(old[i:i + 16] != new[i:i + 16] for i in range(0, min(len(old), len(new)), 16))
            detail = f" ({len(old) // 16} -> {len(new) // 16} instructions, {differ} differ)"
        else:
            verdict = "new"
        print(f"{digest[:16]} {verdict:9} {readable[name]}{detail}")
    missing = sorted(set(before) - found)
    for name in missing:
        print(f"{before[name][:16]} {'CHANGED':9} (before) {readable[name]}")
    print(f"{len(before) - len(missing)} of {len(before)} kernels of {sys.argv[1]} unchanged")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
