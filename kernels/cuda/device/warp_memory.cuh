// A warp's scratch: its slice of the block's dynamic shared memory, laid out by KernelParams'
// offsets (the pair table first, then one slice per warp, then the prefetch rooms), and
// WarpMemory<T>, the slice's typed views. The factor phase's arrays (staging, survivors) and the
// stage phase's (candidates, scores) share one region, used by one phase at a time.
#pragma once

#include <cstdint>

#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// A warp's slice of shared memory, typed.
template <class T>
struct WarpMemory {
  using Key = typename T::Key;
  float* list_value;       // [F][cap]
  uint32_t* list_column;   // [F][cap]
  float* running_value;    // [2][cap]
  uint32_t* running_slot;  // [2][cap]
  uint32_t* running_ranks; // [2][cap]: factor ranks, 8 bits each
  uint32_t* histogram;     // [256]
  uint8_t* staging;        // factor phase
  Key* buffer;             // factor phase: survivors, then `chosen` for the radix select
  Key* buffer_chosen;
  uint32_t* maxima;        // factor phase, aliases buffer (used while it is empty)
  uint64_t* candidates;    // stage phase
  uint64_t* candidates_chosen;
  uint32_t* scores;        // stage phase: survivors' score keys, then the kept pair codes
  uint32_t* survivor_codes;  // lean stages: survivors' pair codes

  __device__ WarpMemory(const KernelParams& p, uint8_t* slice) {
    const int cap = p.list_capacity;
    list_value = reinterpret_cast<float*>(slice + p.lists_offset);
    list_column = reinterpret_cast<uint32_t*>(list_value + p.factors * cap);
    running_value = reinterpret_cast<float*>(slice + p.running_offset);
    running_slot = reinterpret_cast<uint32_t*>(running_value + 2 * cap);
    running_ranks = running_slot + 2 * cap;
    histogram = reinterpret_cast<uint32_t*>(slice + p.histogram_offset);
    staging = slice + p.union_offset;
    buffer = reinterpret_cast<Key*>(staging + T::kStagingBytes);
    buffer_chosen = buffer + p.buffer_capacity;
    maxima = reinterpret_cast<uint32_t*>(buffer);
    candidates = reinterpret_cast<uint64_t*>(slice + p.union_offset);
    candidates_chosen = candidates + p.candidate_capacity;
    scores = reinterpret_cast<uint32_t*>(candidates_chosen + p.list_capacity);
    survivor_codes = scores + p.candidate_capacity;
  }
};

// Warp `warp`'s slice of the block's shared memory (the slices follow the pair table).
__device__ __forceinline__ uint8_t* WarpSlice(const KernelParams& p, unsigned warp) {
  return DynamicShared() + p.table_bytes + warp * p.warp_bytes;
}

// The calling warp's prefetch room (p.prefetch_bytes a warp, after all the slices), or nullptr
// where the launch has none.
__device__ __forceinline__ uint8_t* PrefetchRoom(const KernelParams& p) {
  if (p.prefetch_bytes == 0) return nullptr;
  return DynamicShared() + p.table_bytes + (blockDim.x >> 5) * p.warp_bytes +
         (threadIdx.x >> 5) * p.prefetch_bytes;
}

}  // namespace
}  // namespace pk::cuda
