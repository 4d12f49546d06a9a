#!/usr/bin/env python3
"""Executed warp-instructions a row per source line of one top-k kernel instance.

Joins Nsight Compute's per-instruction table of one launch (device_profile.sh's sass_N.csv) with
the line table of the same build's cubin (`nvdisasm -gi -c` on the GPU host; nvdisasm is not on
the development host) and prints the totals by file, then the heaviest lines (innermost inlined
frame) with their stall samples and source text.

  python3 kernels/cuda/scripts/profile_lines.py DISASSEMBLY KERNEL_SUBSTRING SASS_CSV ROWS [LINES]

KERNEL_SUBSTRING picks the cubin section, e.g. TopKSmallKernelINS1_11Float32; ROWS is the
launch's row count (pk-bench-cuda --quick prints it), LINES how many lines to print (45).
"""
import collections
import csv
import os
import re
import sys


def line_table(path, kernel):
    """Instruction offset -> the (file, line) frames of its line-info comment, innermost first."""
    lines = open(path).read().split('\n')
    starts = [i for i, l in enumerate(lines) if l.startswith('.text.')]
    start = next((i for i in starts if kernel in lines[i]), None)
    if start is None:
        sys.exit(f'no section of {path} names {kernel}')
    end = next((i for i in starts if i > start), len(lines))
    table, pending, last = {}, [], []
    for text in lines[start:end]:
        frame = re.match(r'\s*//## File "([^"]+)", line (\d+)', text)
        if frame:
            pending.append((frame.group(1).split('/kernels/')[-1], int(frame.group(2))))
            continue
        instruction = re.match(r'\s*/\*([0-9a-f]{4,})\*/', text)
        if instruction:
            if pending:
                last = pending
            table[int(instruction.group(1), 16)] = last
            pending = []
    return table


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    disassembly, kernel, sass, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    shown = int(sys.argv[5]) if len(sys.argv) > 5 else 45
    table = line_table(disassembly, kernel)
    records = list(csv.reader(open(sass)))
    header = records[1]
    address = header.index('Address')
    executed = header.index('Instructions Executed')
    samples = header.index('Warp Stall Sampling (All Samples)')
    base = int(records[2][address], 16)
    by_line, by_file, stalls = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0.0
    for record in records[2:]:
        frames = table.get(int(record[address], 16) - base) or [('?', 0)]
        count = int(record[executed] or 0) / rows
        total += count
        by_line[frames[0]] += count
        by_file[frames[0][0]] += count
        stalls[frames[0]] += int(record[samples] or 0)
    print(f'{total:.0f} warp-instructions a row')
    for name, count in by_file.most_common(12):
        print(f'  {count:8.1f} {name}')
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
    sources = {}
    for (name, number), count in by_line.most_common(shown):
        path = os.path.join(root, name.replace('./', ''))
        if name not in sources:
            sources[name] = open(path).read().split('\n') if os.path.exists(path) else []
        text = sources[name][number - 1].strip()[:90] if number <= len(sources[name]) else ''
        print(f'{count:7.1f} {stalls[(name, number)]:6d} {name}:{number}  {text}')


if __name__ == '__main__':
    main()
