#!/usr/bin/env bash
# Packs built binaries with the shared libraries they load (as ldd lists them) into one folder,
# for a GPU host that has the CUDA driver but none of Debian's gRPC, Protobuf, abseil or spdlog.
# The C library, the dynamic loader and the CUDA driver stay the host's own.
#   scripts/gpu_bundle.sh OUT_DIR BINARY...
# On the GPU host: LD_LIBRARY_PATH=OUT_DIR/lib OUT_DIR/bin/pkserve --backend=cuda
set -euo pipefail
out=${1:?usage: gpu_bundle.sh OUT_DIR BINARY...}
shift
mkdir -p "$out/bin" "$out/lib"
for binary in "$@"; do
  cp "$binary" "$out/bin/"
  ldd "$binary" | awk '/=> \// {print $3}' | while read -r library; do
    case "$(basename "$library")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so.*) ;;
      *) cp -L -n "$library" "$out/lib/" ;;
    esac
  done
done
du -sh "$out"
