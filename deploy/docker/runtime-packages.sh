#!/usr/bin/env bash
# Prints, one a line, the installed packages that hold the shared libraries the given binaries load.
#
# The images' build stage runs it on the binaries it has just built, and the runtime stage installs
# exactly that list. So the runtime image follows whatever the binaries link, on Debian 12 and on
# Ubuntu 24.04 alike (whose names differ: libgrpc++1.51 there is libgrpc++1.51t64 here), with no
# second list to keep in step with the CMake files.
#
# The NVIDIA driver's libraries (libcuda, libnvidia-*) are not in the image: the container runtime
# mounts the host's. They are named on stderr and left out. Any other library that no package holds,
# or that the loader cannot find, is an error: the runtime image would not start.
set -euo pipefail

if (($# == 0)); then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi

# The package that holds a path, tried as given and with /usr in front of it: with a merged /usr
# the loader reports /lib/x86_64-linux-gnu/... while dpkg may have recorded /usr/lib/....
owner_of() {
  local path=$1 candidate owner
  for candidate in "$path" "/usr$path" "$(readlink -f "$path")"; do
    # dpkg -S prints "pkg[:arch][, pkg2[:arch]]: path"; keep the package names without the arch.
    owner=$(dpkg-query -S "$candidate" 2>/dev/null | head -n 1) || continue
    [[ -n "$owner" ]] || continue
    owner=${owner%%: *}
    tr ',' '\n' <<<"$owner" | sed -e 's/^ *//' -e 's/:.*$//'
    return 0
  done
  return 1
}

is_driver_library() {
  [[ $1 == libcuda.so* || $1 == libnvidia-* ]]
}

errors=0
packages=()
for binary in "$@"; do
  if [[ ! -f "$binary" ]]; then
    echo "runtime-packages: $binary: no such file" >&2
    errors=$((errors + 1))
    continue
  fi
  # ldd lines: "libx.so.1 => /path/libx.so.1 (0x...)", "libx.so.1 => not found", or the loader
  # and the vDSO without an arrow, which are part of libc6 and the kernel.
  while read -r soname arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    if [[ "$path" == "not" ]]; then
      if is_driver_library "$soname"; then
        echo "runtime-packages: $soname comes from the host's NVIDIA driver, not a package" >&2
      else
        echo "runtime-packages: $binary needs $soname, which the loader cannot find" >&2
        errors=$((errors + 1))
      fi
      continue
    fi
    if owned=$(owner_of "$path"); then
      mapfile -t -O "${#packages[@]}" packages <<<"$owned"
    elif is_driver_library "$soname"; then
      echo "runtime-packages: $soname comes from the host's NVIDIA driver, not a package" >&2
    else
      echo "runtime-packages: $binary needs $path, which no installed package holds" >&2
      errors=$((errors + 1))
    fi
  done < <(ldd "$binary")
done

((errors == 0)) || exit 1
printf '%s\n' "${packages[@]}" | sort -u
