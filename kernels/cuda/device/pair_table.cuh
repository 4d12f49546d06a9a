// The block's pair table: every stage's staircase candidates (i << 8 | j), row by row, written once
// per block before any row is paired and read-only after that; the latency kernel's table warp
// also copies the stage bounds' corners beside it and touches the parameters first.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/emulator_hooks.cuh"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// Writes each stage's staircase pairs (i << 8 | j), row by row, into the block's table: warp 0
// (the other warps return at once), or with kAnyWarp the calling warp.
template <bool kAnyWarp>
__device__ void BuildPairTables(const KernelParams& p, uint16_t* table) {
  if (!kAnyWarp && threadIdx.x >= 32) return;
  const int lane = LaneId();
  for (int f = 1; f < p.factors; ++f) {
    const int kept = p.kept[f];
    const int rows = min(p.kept[f - 1], kept);
    const int factor = p.list_size[f];
    uint16_t* out = table + p.table_offset[f];
    int base = 0;
    for (int first = 0; first < rows; first += 32) {
      const int i = first + lane;
      const int length = i < rows ? min(factor, kept / (i + 1)) : 0;
      const int inclusive = WarpInclusiveSum(length);
      const int start = base + inclusive - length;
      for (int j = 0; j < length; ++j) out[start + j] = static_cast<uint16_t>((i << 8) | j);
      base += __shfl_sync(kFullMask, inclusive, 31);
    }
    if (kAnyWarp) {
      // The stage bounds' corners, for StageBound<true>: rectangles, then the staircase.
      uint16_t* corners = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(table) + p.corner_offset) +
                          (f - 1) * 2 * kMaxCorners;
      corners[lane] = p.corners[f][lane];
      corners[kMaxCorners + lane] = p.stair[f][lane];
    }
  }
  EmulatorDeclareTable(p, reinterpret_cast<const uint8_t*>(table));
}

// Reads one word of every 64 bytes of the parameters, so that the multiprocessor's constant cache
// holds them before the other warps' first reads of them (each launch brings new parameters; on
// the H200 this took about 0.25 us off the latency kernel's 1-64-row launches; NOTES.md).
// Returns the words' XOR, for the caller to consume (an unused load is removed).
__device__ __forceinline__ uint32_t TouchParameters(const KernelParams& p) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(&p);
  constexpr int kWords = static_cast<int>(sizeof(KernelParams) / 4);
  uint32_t touched = 0;
  for (int w = LaneId() * 16; w < kWords; w += 32 * 16) touched ^= words[w];
  return touched;
}

}  // namespace
}  // namespace pk::cuda
