// Warp-level building blocks of the CUDA top-k: scans, reductions, a register bitonic sort, and
// selection of the largest keys of a shared-memory array. Every function here is called by all 32
// lanes of a warp in convergent code (full-mask shuffles); none of them touches global memory.
//
// Keys are unsigned integers (uint32_t or uint64_t) compared as integers; "descending" means the
// largest key first. Padding for partial arrays is the key 0, which callers keep below every real
// key they sort.
#pragma once

#include <cstdint>

namespace pk::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

// The calling thread's lane (0..31).
__device__ __forceinline__ int LaneId() { return static_cast<int>(threadIdx.x & 31u); }

// Post: every lane gets the sum of `x` over lanes 0..lane.
__device__ __forceinline__ int WarpInclusiveSum(int x) {
  const int lane = LaneId();
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int y = __shfl_up_sync(kFullMask, x, offset);
    if (lane >= offset) x += y;
  }
  return x;
}

// Post: every lane gets the sum of `x` over lanes lane..31.
__device__ __forceinline__ int WarpSuffixSum(int x) {
  const int lane = LaneId();
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int y = __shfl_down_sync(kFullMask, x, offset);
    if (lane + offset < 32) x += y;
  }
  return x;
}

// Post: every lane gets the largest `x` of the warp.
__device__ __forceinline__ uint32_t WarpMax(uint32_t x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x = max(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}

template <typename Key>
__device__ __forceinline__ Key KeyMax(Key a, Key b) {
  return a > b ? a : b;
}

template <typename Key>
__device__ __forceinline__ Key KeyMin(Key a, Key b) {
  return a < b ? a : b;
}

// One compare-exchange of a bitonic network inside a lane: keys[e] gets the larger (descending)
// or the smaller of keys[e] and keys[e + stride], keys[e + stride] the other.
template <int E, typename Key>
__device__ __forceinline__ void ExchangeInLane(Key (&keys)[E], int e, int stride, bool descending) {
  const Key a = keys[e];
  const Key b = keys[e + stride];
  keys[e] = descending ? KeyMax(a, b) : KeyMin(a, b);
  keys[e + stride] = descending ? KeyMin(a, b) : KeyMax(a, b);
}

// Unpacks / packs one 16-byte vector as keys (4 uint32 or 2 uint64), keeping them in registers.
template <typename Key>
__device__ __forceinline__ void FromVector(uint4 v, Key* out) {
  if constexpr (sizeof(Key) == 4) {
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  } else {
    out[0] = (static_cast<uint64_t>(v.y) << 32) | v.x;
    out[1] = (static_cast<uint64_t>(v.w) << 32) | v.z;
  }
}

template <typename Key>
__device__ __forceinline__ uint4 ToVector(const Key* in) {
  if constexpr (sizeof(Key) == 4) {
    return make_uint4(in[0], in[1], in[2], in[3]);
  } else {
    return make_uint4(static_cast<uint32_t>(in[0]), static_cast<uint32_t>(in[0] >> 32),
                      static_cast<uint32_t>(in[1]), static_cast<uint32_t>(in[1] >> 32));
  }
}

// Stores / loads the E keys of lane `owner` at exchange[owner * E ..], 16 bytes at a time where
// they fill whole vectors. Pre: exchange 16-byte aligned.
template <int E, typename Key>
__device__ __forceinline__ void StoreLaneKeys(Key* exchange, int owner, const Key (&in)[E]) {
  constexpr int kPerVector = 16 / sizeof(Key);
  if constexpr (E % kPerVector == 0) {
    uint4* vectors = reinterpret_cast<uint4*>(exchange + owner * E);
#pragma unroll
    for (int v = 0; v < E / kPerVector; ++v) vectors[v] = ToVector(in + v * kPerVector);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) exchange[owner * E + e] = in[e];
  }
}

template <int E, typename Key>
__device__ __forceinline__ void LoadOwnerKeys(const Key* exchange, int owner, Key (&out)[E]) {
  constexpr int kPerVector = 16 / sizeof(Key);
  if constexpr (E % kPerVector == 0) {
    const uint4* vectors = reinterpret_cast<const uint4*>(exchange + owner * E);
#pragma unroll
    for (int v = 0; v < E / kPerVector; ++v) FromVector(vectors[v], out + v * kPerVector);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) out[e] = exchange[owner * E + e];
  }
}

// One merge phase of size >= 2E of the bitonic sort: the strides >= E exchange keys with the lane
// `stride / E` away through `exchange`, the smaller strides finish within the lane.
template <int E, typename Key>
__device__ __forceinline__ void CrossLanePhase(Key (&keys)[E], Key* exchange, int size, int lane) {
  const bool descending = ((lane * E) & size) == 0;
#pragma unroll
  for (int lane_stride = size / (2 * E); lane_stride > 0; lane_stride >>= 1) {
    const bool keep_max = ((lane & lane_stride) == 0) == descending;
    StoreLaneKeys<E>(exchange, lane, keys);
    __syncwarp();
    Key other[E];
    LoadOwnerKeys<E>(exchange, lane ^ lane_stride, other);
    __syncwarp();
#pragma unroll
    for (int e = 0; e < E; ++e) {
      keys[e] = keep_max ? KeyMax(keys[e], other[e]) : KeyMin(keys[e], other[e]);
    }
  }
#pragma unroll
  for (int stride = E >> 1; stride > 0; stride >>= 1) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if ((e & stride) == 0) ExchangeInLane(keys, e, stride, descending);
    }
  }
}

// Bitonic sort of the warp's 32 * E keys, descending. Element index = lane * E + e, so strides
// below E compare within a lane; the larger ones exchange the lanes' keys through `exchange`
// (shared memory, one vector store and load per lane instead of a shuffle per key). The phases
// that cross lanes run as loops, not unrolled, to keep the code small: the kernel is bound by
// instruction fetch when every sort is unrolled at every call site.
// Pre: E is a power of two; exchange holds 32 * E keys, 16-byte aligned, warp-private.
// Post: keys[e] of lane l is the (l * E + e)-th largest.
template <int E, typename Key>
__device__ __forceinline__ void WarpSortDescending(Key (&keys)[E], Key* exchange) {
  const int lane = LaneId();
  // Phases of size 2 .. E: within the lane (the direction of size E depends on the lane).
#pragma unroll
  for (int size = 2; size <= E; size <<= 1) {
#pragma unroll
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        if ((e & stride) == 0) ExchangeInLane(keys, e, stride, ((lane * E + e) & size) == 0);
      }
    }
  }
  // Phases of size 2E .. 32E: strides >= E cross lanes, then the merge finishes in the lane.
  // Unrolled up to 4 keys a lane (one out-of-line copy each, the hot sorts); loops for more keep
  // the code small (unrolling 8 measured slower: instruction fetch again).
  if constexpr (E <= 4) {
#pragma unroll
    for (int size = 2 * E; size <= 32 * E; size <<= 1) {
      CrossLanePhase<E>(keys, exchange, size, lane);
    }
  } else {
#pragma unroll 1
    for (int size = 2 * E; size <= 32 * E; size <<= 1) {
      CrossLanePhase<E>(keys, exchange, size, lane);
    }
  }
}

// Loads keys[lane * E .. lane * E + E) (0 past `count`). Pre: keys 16-byte aligned, and readable
// up to index 32 * E.
template <int E, typename Key>
__device__ __forceinline__ void LoadLaneKeys(const Key* keys, int count, Key (&out)[E]) {
  const int first = LaneId() * E;
  constexpr int kPerVector = 16 / sizeof(Key);
  if constexpr (E % kPerVector == 0) {
    const uint4* vectors = reinterpret_cast<const uint4*>(keys + first);
#pragma unroll
    for (int v = 0; v < E / kPerVector; ++v) FromVector(vectors[v], out + v * kPerVector);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) out[e] = keys[first + e];
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    if (first + e >= count) out[e] = Key{0};
  }
}

// Sorts keys[0..count) descending and writes back the first `keep` of them.
// Pre: count <= 32 * E, keep <= 32 * E, keys 16-byte aligned, every key > 0.
template <int E, typename Key>
__device__ __noinline__ void SortSharedDescending(Key* keys, int count, int keep) {
  Key lane_keys[E];
  LoadLaneKeys<E>(keys, count, lane_keys);
  __syncwarp();
  WarpSortDescending<E>(lane_keys, keys);
  const int first = LaneId() * E;
  constexpr int kPerVector = 16 / sizeof(Key);
  bool stored = false;
  if constexpr (E % kPerVector == 0) {
    if (first + E <= keep) {
      uint4* vectors = reinterpret_cast<uint4*>(keys + first);
#pragma unroll
      for (int v = 0; v < E / kPerVector; ++v) vectors[v] = ToVector(lane_keys + v * kPerVector);
      stored = true;
    }
  }
  if (!stored) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (first + e < keep) keys[first + e] = lane_keys[e];
    }
  }
  __syncwarp();
}

// Moves the `want` largest of keys[0..count) to keys[0..want), in no particular order, by a
// most-significant-byte radix select (the CPU's SelectTop, one warp wide). The slow path for
// arrays too large to sort in registers.
// Pre: keys distinct, 1 <= want <= count; `chosen` has room for `want` keys; `histogram` has 256
// counters. Both are warp-private shared memory.
template <typename Key>
__device__ __noinline__ void WarpRadixSelect(Key* keys, int count, int want, Key* chosen, uint32_t* histogram) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  int taken = 0;
  int undecided = count;
  int wanted = want;
  for (int shift = 8 * static_cast<int>(sizeof(Key) - 1); shift >= 0 && wanted < undecided;
       shift -= 8) {
    for (int b = lane; b < 256; b += 32) histogram[b] = 0;
    __syncwarp();
    for (int i = lane; i < undecided; i += 32) {
      atomicAdd(&histogram[static_cast<uint32_t>(keys[i] >> shift) & 255u], 1u);
    }
    __syncwarp();
    // Lane l owns bins 8l .. 8l + 7; find the bin holding the wanted-th largest key.
    int local = 0;
#pragma unroll
    for (int b = 0; b < 8; ++b) local += static_cast<int>(histogram[lane * 8 + b]);
    const int above_mine = WarpSuffixSum(local) - local;  // keys in bins of higher lanes
    int bin = -1;
    int above = 0;
    if (above_mine < wanted && above_mine + local >= wanted) {
      int acc = above_mine;
      for (int b = 7; b >= 0; --b) {
        const int h = static_cast<int>(histogram[lane * 8 + b]);
        if (acc + h >= wanted) {
          bin = lane * 8 + b;
          above = acc;
          break;
        }
        acc += h;
      }
    }
    const unsigned owner = __ballot_sync(kFullMask, bin >= 0);
    const int source = __ffs(static_cast<int>(owner)) - 1;
    bin = __shfl_sync(kFullMask, bin, source);
    above = __shfl_sync(kFullMask, above, source);
    // Partition: bins above go to `chosen`, the bin itself stays undecided (compacted in place:
    // a key moves only to an index at or below its own, after the whole warp has read it).
    int kept = 0;
    for (int base = 0; base < undecided; base += 32) {
      const int i = base + lane;
      const Key key = i < undecided ? keys[i] : Key{0};
      const int digit = static_cast<int>(static_cast<uint32_t>(key >> shift) & 255u);
      const bool higher = i < undecided && digit > bin;
      const bool same = i < undecided && digit == bin;
      const unsigned higher_mask = __ballot_sync(kFullMask, higher);
      const unsigned same_mask = __ballot_sync(kFullMask, same);
      if (higher) chosen[taken + __popc(higher_mask & lanes_below)] = key;
      if (same) keys[kept + __popc(same_mask & lanes_below)] = key;
      taken += __popc(higher_mask);
      kept += __popc(same_mask);
      __syncwarp();
    }
    undecided = kept;
    wanted -= above;
  }
  // The keys still undecided all belong (distinct keys leave exactly `wanted` of them).
  for (int i = lane; i < undecided; i += 32) chosen[taken + i] = keys[i];
  __syncwarp();
  for (int i = lane; i < want; i += 32) keys[i] = chosen[i];
  __syncwarp();
}

// The k-th largest of keys[0..count) (duplicates allowed), by a most-significant-byte radix count
// that narrows a prefix instead of moving keys. Cheaper than sorting when count is large.
// Pre: 1 <= k <= count; `histogram` has 256 counters (warp-private shared memory).
__device__ __noinline__ inline uint32_t WarpKthLargest(const uint32_t* keys, int count, int k,
                                                       uint32_t* histogram) {
  const int lane = LaneId();
  uint32_t prefix = 0;
  uint32_t known = 0;  // bits of the answer fixed so far
  int wanted = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = lane; b < 256; b += 32) histogram[b] = 0;
    __syncwarp();
    for (int i = lane; i < count; i += 32) {
      const uint32_t key = keys[i];
      if ((key & known) == prefix) atomicAdd(&histogram[(key >> shift) & 255u], 1u);
    }
    __syncwarp();
    int local = 0;
#pragma unroll
    for (int b = 0; b < 8; ++b) local += static_cast<int>(histogram[lane * 8 + b]);
    const int above_mine = WarpSuffixSum(local) - local;
    int bin = -1;
    int above = 0;
    if (above_mine < wanted && above_mine + local >= wanted) {
      int acc = above_mine;
      for (int b = 7; b >= 0; --b) {
        const int h = static_cast<int>(histogram[lane * 8 + b]);
        if (acc + h >= wanted) {
          bin = lane * 8 + b;
          above = acc;
          break;
        }
        acc += h;
      }
    }
    const unsigned owner = __ballot_sync(kFullMask, bin >= 0);
    const int source = __ffs(static_cast<int>(owner)) - 1;
    bin = __shfl_sync(kFullMask, bin, source);
    above = __shfl_sync(kFullMask, above, source);
    __syncwarp();
    prefix |= static_cast<uint32_t>(bin) << shift;
    known |= 255u << shift;
    wanted -= above;
  }
  return prefix;
}

// Sorts the `keep` largest of keys[0..count) descending into keys[0..keep), for distinct 32-bit
// keys and large counts: the keep-th largest by a radix count, then only those at or above it
// are moved to `chosen` and sorted (cheaper than sorting all of them).
// Pre: keys distinct and > 0, 1 <= keep <= min(count, 256); chosen holds 256 keys, 16-byte
// aligned; histogram has 256 counters.
__device__ __forceinline__ void SelectTopSortedByCount(uint32_t* keys, int count, int keep,
                                                       uint32_t* chosen, uint32_t* histogram);

// Sorts the `keep` largest of keys[0..count) descending into keys[0..keep).
// Pre: keys distinct and > 0, 1 <= keep <= min(count, 256), keys 16-byte aligned; `chosen` has room
// for `keep` keys and `histogram` for 256 counters (used only when count > 512).
template <typename Key>
__device__ void SelectTopSorted(Key* keys, int count, int keep, Key* chosen, uint32_t* histogram) {
  if (count > 512) {
    WarpRadixSelect(keys, count, keep, chosen, histogram);
    count = keep;
  }
  const int per_lane = (count + 31) / 32;
  if (per_lane <= 1) {
    SortSharedDescending<1>(keys, count, keep);
  } else if (per_lane <= 2) {
    SortSharedDescending<2>(keys, count, keep);
  } else if (per_lane <= 4) {
    SortSharedDescending<4>(keys, count, keep);
  } else if (per_lane <= 8) {
    SortSharedDescending<8>(keys, count, keep);
  } else {
    SortSharedDescending<16>(keys, count, keep);
  }
}

}  // namespace pk::cuda

namespace pk::cuda {

__device__ __forceinline__ void SelectTopSortedByCount(uint32_t* keys, int count, int keep,
                                                       uint32_t* chosen, uint32_t* histogram) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  const uint32_t kth = WarpKthLargest(keys, count, keep, histogram);
  int taken = 0;
  for (int base = 0; base < count; base += 32) {
    const int i = base + lane;
    const uint32_t key = i < count ? keys[i] : 0u;
    const bool in = i < count && key >= kth;
    const unsigned chosen_mask = __ballot_sync(kFullMask, in);
    if (in) chosen[taken + __popc(chosen_mask & lanes_below)] = key;
    taken += __popc(chosen_mask);
  }
  __syncwarp();
  const int per_lane = (keep + 31) / 32;
  if (per_lane <= 1) {
    SortSharedDescending<1>(chosen, keep, keep);
  } else if (per_lane <= 2) {
    SortSharedDescending<2>(chosen, keep, keep);
  } else if (per_lane <= 4) {
    SortSharedDescending<4>(chosen, keep, keep);
  } else {
    SortSharedDescending<8>(chosen, keep, keep);
  }
  for (int i = lane; i < keep; i += 32) keys[i] = chosen[i];
  __syncwarp();
}

}  // namespace pk::cuda
