// The small-factor ranking: when every width is at most 64, one segmented register sort ranks all
// the factors of a row at once (factor f is segment f of the warp's keys). Post: the same lists as
// SelectFactor's.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/warp_memory.cuh"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// Ranks every factor of one row with one segmented register sort (all widths <= 64): factor f's
// columns are the keys f * S .. f * S + w[f] - 1 of the warp's 32 * E (S = p.small_segment, a power
// of two >= every width), padded with key 0, so that sorting the segments of S ranks all factors
// at once, in registers. Pre: F * S <= 32 * E; exchange holds 32 * E keys (warp-private). The
// memory comes as pointers: a reference to the kernel's WarpMemory would put it in local memory.
template <class T, int E>
__device__ __forceinline__ void RankSmallFactorsInline(const KernelParams& p, float* list_value,
                                                       uint32_t* list_column, uint8_t* exchange,
                                                       const uint8_t* scores) {
  using Key = typename T::Key;
  const int lane = LaneId();
  const int shift = p.small_segment_bits;
  const int segment_mask = p.small_segment - 1;
  // Factor f's fields by selects, not by indexing the parameters with a lane-dependent f (which
  // would copy them to local memory), from registers: out of line, p is generic memory, where
  // every read is a load, so each field is read once.
  uint32_t width[kMaxFactors];
  uint32_t offset[kMaxFactors];
  int list_size[kMaxFactors];
#pragma unroll
  for (int g = 0; g < kMaxFactors; ++g) {
    width[g] = p.width[g];
    offset[g] = p.offset[g];
    list_size[g] = p.list_size[g];
  }
  auto pick = [](const auto& field, int f) {
    auto value = field[0];
#pragma unroll
    for (int g = 1; g < kMaxFactors; ++g) value = f == g ? field[g] : value;
    return value;
  };
  Key keys[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int x = lane * E + e;
    const int f = x >> shift;
    const int c = x & segment_mask;
    keys[e] = f < p.factors && c < static_cast<int>(pick(width, f))
                  ? T::Composite(scores + size_t{pick(offset, f) + static_cast<uint32_t>(c)} * T::kElementBytes,
                                 static_cast<uint32_t>(c))
                  : Key{0};
  }
  WarpSortSegments<E>(keys, reinterpret_cast<Key*>(exchange), p.small_segment);
  const int cap = p.list_capacity;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int x = lane * E + e;
    const int f = x >> shift;
    const int r = x & segment_mask;
    if (f < p.factors && r < pick(list_size, f)) {
      list_value[f * cap + r] = T::KeyValue(keys[e]);
      list_column[f * cap + r] = T::KeyColumn(keys[e]);
    }
  }
  __syncwarp();
}

template <class T, int E>
__device__ __noinline__ void RankSmallFactors(const KernelParams& p, float* list_value,
                                              uint32_t* list_column, uint8_t* exchange,
                                              const uint8_t* scores) {
  RankSmallFactorsInline<T, E>(p, list_value, list_column, exchange, scores);
}

// RankSmallFactors for E keys a lane: in line (kInline, the small-factor kernels) or the call out
// of line (the other kernels).
template <class T, int E, bool kInline>
__device__ __forceinline__ void RankSmallFactorsAt(const KernelParams& p, const WarpMemory<T>& m,
                                                   const uint8_t* scores) {
  if constexpr (kInline) {
    RankSmallFactorsInline<T, E>(p, m.list_value, m.list_column, m.staging, scores);
  } else {
    RankSmallFactors<T, E>(p, m.list_value, m.list_column, m.staging, scores);
  }
}

template <class T, bool kInline = false>
__device__ __forceinline__ void RankSmallFactorsOf(const KernelParams& p, const WarpMemory<T>& m,
                                                   const uint8_t* scores) {
  switch (p.small_per_lane) {
    case 1: return RankSmallFactorsAt<T, 1, kInline>(p, m, scores);
    case 2: return RankSmallFactorsAt<T, 2, kInline>(p, m, scores);
    case 4: return RankSmallFactorsAt<T, 4, kInline>(p, m, scores);
    default: return RankSmallFactorsAt<T, 8, kInline>(p, m, scores);
  }
}

}  // namespace
}  // namespace pk::cuda
