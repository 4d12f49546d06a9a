// Warp-level building blocks of the CUDA top-k: scans, reductions, a register bitonic sort, and
// selection of the largest keys of a shared-memory array. Every function here is called by all 32
// lanes of a warp in convergent code (full-mask shuffles); none of them touches global memory.
//
// Keys are unsigned integers (uint32_t or uint64_t) compared as integers; "descending" means the
// largest key first. Padding for partial arrays is the key 0, which callers keep below every real
// key they sort.
#pragma once

#include <cstdint>
#include <type_traits>

namespace pk::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

// The block's dynamic shared memory (16-byte aligned).
__device__ __forceinline__ uint8_t* DynamicShared() {
#if defined(PK_CUDA_EMULATION)
  return pk::emu::DynamicShared();
#else
  extern __shared__ __align__(16) uint8_t shared[];
  return shared;
#endif
}

// `pointer` as 16-byte vectors. Pre: 16-byte aligned (checked under the CPU emulator, where a
// misaligned vector access would otherwise go unnoticed).
template <class P>
__device__ __forceinline__ auto AsVectors(P* pointer) {
#if defined(PK_CUDA_EMULATION)
  if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0) std::abort();
#endif
  if constexpr (std::is_const_v<P>) {
    return reinterpret_cast<const uint4*>(pointer);
  } else {
    return reinterpret_cast<uint4*>(pointer);
  }
}

// Starts copying 16 bytes from global memory to shared memory without holding a register
// (cp.async); the bytes are the caller's to read only after WaitCopiesToShared. Pre: both
// addresses 16-byte aligned. (The emulator copies at once.)
__device__ __forceinline__ void CopyToSharedAsync(void* shared, const void* global) {
#if defined(PK_CUDA_EMULATION)
  *AsVectors(static_cast<uint4*>(shared)) = *AsVectors(static_cast<const uint4*>(global));
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(shared))),
               "l"(global)
               : "memory");
#endif
}

// Waits until the calling thread's CopyToSharedAsync copies have landed.
__device__ __forceinline__ void WaitCopiesToShared() {
#if !defined(PK_CUDA_EMULATION)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

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

// The bitonic sorts below use the variant whose comparators all put the larger key at the lower
// index: phase `size` first compares index x with x ^ (size - 1) (its mirror in the block of
// `size`), then x with x ^ stride for stride = size / 4 .. 1. After phase `size` every block of
// `size` keys is sorted descending. Index x = lane * E + e, so strides below E stay in the lane,
// where the direction is fixed at compile time (two min/max instructions a pair), and the larger
// ones pair lanes, where a lane keeps the larger key exactly when it is the lower lane.

// In-lane half of a phase: pairs (e, e ^ (size - 1)) when `mirror`, else (e, e + stride).
template <int E, typename Key>
__device__ __forceinline__ void InLaneMirror(Key (&keys)[E], int size) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int other = e ^ (size - 1);
    if (other > e) {
      const Key a = keys[e];
      const Key b = keys[other];
      keys[e] = KeyMax(a, b);
      keys[other] = KeyMin(a, b);
    }
  }
}

template <int E, typename Key>
__device__ __forceinline__ void InLaneStrides(Key (&keys)[E], int first_stride) {
#pragma unroll
  for (int stride = first_stride; stride > 0; stride >>= 1) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if ((e & stride) == 0) {
        const Key a = keys[e];
        const Key b = keys[e + stride];
        keys[e] = KeyMax(a, b);
        keys[e + stride] = KeyMin(a, b);
      }
    }
  }
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

// Lanes exchange keys through shuffles when a lane holds at most 8 bytes of them, else through
// shared memory: 16-byte vectors, vector v of lane l at vector index v * 32 + l, so that each
// store and load instruction of the warp touches 512 consecutive bytes (no bank conflicts).
template <int E, typename Key>
inline constexpr bool kExchangeByShuffle = E * sizeof(Key) <= 8;

// One cross-lane step: key e of each lane meets key e (or E - 1 - e when `mirror`) of lane
// lane ^ lane_mask, and the lane keeps the larger when keep_max, else the smaller.
// Pre: exchange is warp-private shared memory for 32 * E keys, 16-byte aligned (unused when
// lanes shuffle).
template <int E, bool kMirror, typename Key>
__device__ __forceinline__ void CrossLaneStep(Key (&keys)[E], Key* exchange, int lane,
                                              int lane_mask, bool keep_max) {
  Key other[E];
  if constexpr (kExchangeByShuffle<E, Key>) {
#pragma unroll
    for (int e = 0; e < E; ++e) other[e] = __shfl_xor_sync(kFullMask, keys[e], lane_mask);
  } else {
    constexpr int kPerVector = 16 / sizeof(Key);
    uint4* vectors = AsVectors(exchange);
#pragma unroll
    for (int v = 0; v < E / kPerVector; ++v) vectors[v * 32 + lane] = ToVector(keys + v * kPerVector);
    __syncwarp();
    const int partner = lane ^ lane_mask;
#pragma unroll
    for (int v = 0; v < E / kPerVector; ++v) FromVector(vectors[v * 32 + partner], other + v * kPerVector);
    __syncwarp();
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const Key o = other[kMirror ? E - 1 - e : e];
    keys[e] = (o > keys[e]) == keep_max ? o : keys[e];
  }
}

// Phase `size` (> E) of the sort: the lanes of each block of size / E lanes merge.
template <int E, typename Key>
__device__ __forceinline__ void CrossLanePhase(Key (&keys)[E], Key* exchange, int size, int lane) {
  const int lanes = size / E;
  CrossLaneStep<E, true>(keys, exchange, lane, lanes - 1, (lane & (lanes >> 1)) == 0);
#pragma unroll
  for (int stride = lanes >> 2; stride > 0; stride >>= 1) {
    CrossLaneStep<E, false>(keys, exchange, lane, stride, (lane & stride) == 0);
  }
  InLaneStrides<E>(keys, E >> 1);
}

// Sorts every block of `segment` consecutive keys of the warp's 32 * E descending (keys[e] of lane
// l has index l * E + e). Pre: E and segment are powers of two, 2 <= segment <= 32 * E; exchange
// as for CrossLaneStep. Post: block b's r-th largest key has index b * segment + r.
template <int E, typename Key>
__device__ __forceinline__ void WarpSortSegments(Key (&keys)[E], Key* exchange, int segment) {
  const int lane = LaneId();
#pragma unroll
  for (int size = 2; size <= E; size <<= 1) {
    if (size <= segment) {
      InLaneMirror<E>(keys, size);
      InLaneStrides<E>(keys, size >> 2);
    }
  }
#pragma unroll 1
  for (int size = 2 * E; size <= segment; size <<= 1) CrossLanePhase<E>(keys, exchange, size, lane);
}

// Bitonic sort of the warp's 32 * E keys, descending: keys[e] of lane l becomes the
// (l * E + e)-th largest. The phases that cross lanes are unrolled up to 4 keys a lane and loops
// above (the kernel is sensitive to its code size). Pre: E a power of two; exchange as for
// CrossLaneStep.
template <int E, typename Key>
__device__ __forceinline__ void WarpSortDescending(Key (&keys)[E], Key* exchange) {
  if constexpr (E <= 4) {
    const int lane = LaneId();
#pragma unroll
    for (int size = 2; size <= E; size <<= 1) {
      InLaneMirror<E>(keys, size);
      InLaneStrides<E>(keys, size >> 2);
    }
#pragma unroll
    for (int size = 2 * E; size <= 32 * E; size <<= 1) CrossLanePhase<E>(keys, exchange, size, lane);
  } else {
    WarpSortSegments<E>(keys, exchange, 32 * E);
  }
}

// Moves the 16 E largest of the warp's 32 E keys (a multiset: ties allowed) into lanes 0-15, in
// no particular order: both halves sorted descending, then the first step of the bitonic merge
// (index x meets its mirror 32 E - 1 - x; the lower lane keeps the larger). A selection needs only
// this, not the merge's remaining steps. Pre: as WarpSortSegments (E a power of two; exchange for
// 32 E keys). Post: lanes 0-15 hold the 16 E largest, lanes 16-31 the rest.
template <int E, typename Key>
__device__ __forceinline__ void WarpTopHalf(Key (&keys)[E], Key* exchange) {
  const int lane = LaneId();
  WarpSortSegments<E>(keys, exchange, 16 * E);
  CrossLaneStep<E, true>(keys, exchange, lane, 31, lane < 16);
}

// The 16 E-th largest of keys[0 .. count) (duplicates allowed), by WarpTopHalf: the smallest key
// of the top half. Pre: 16 E <= count <= 32 E; exchange warp-private shared memory for 32 E keys,
// 16-byte aligned, apart from `keys` (unused when lanes shuffle).
template <int E>
__device__ __forceinline__ uint32_t KthLargestByHalves(const uint32_t* keys, int count, uint32_t* exchange) {
  const int lane = LaneId();
  uint32_t lane_keys[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int x = e * 32 + lane;  // conflict-free; the order of a selection's input is free
    lane_keys[e] = x < count ? keys[x] : 0u;
  }
  WarpTopHalf<E>(lane_keys, exchange);
  uint32_t smallest = 0xffffffffu;
  if (lane < 16) {
#pragma unroll
    for (int e = 0; e < E; ++e) smallest = min(smallest, lane_keys[e]);
  }
  return __reduce_min_sync(kFullMask, smallest);
}

// KthLargestByHalves with E = per_lane (1, 2, 4 or 8), out of line (one call site for all four).
__device__ __noinline__ inline uint32_t KthLargestByHalvesOf(const uint32_t* keys, int count, int per_lane,
                                                         uint32_t* exchange) {
  switch (per_lane) {
    case 1: return KthLargestByHalves<1>(keys, count, exchange);
    case 2: return KthLargestByHalves<2>(keys, count, exchange);
    case 4: return KthLargestByHalves<4>(keys, count, exchange);
    default: return KthLargestByHalves<8>(keys, count, exchange);
  }
}

// Loads keys[lane * E .. lane * E + E) (0 past `count`). Pre: keys 16-byte aligned, and readable
// up to index 32 * E.
template <int E, typename Key>
__device__ __forceinline__ void LoadLaneKeys(const Key* keys, int count, Key (&out)[E]) {
  const int first = LaneId() * E;
  constexpr int kPerVector = 16 / sizeof(Key);
  if constexpr (E % kPerVector == 0) {
    const uint4* vectors = AsVectors(keys + first);
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

// Writes the warp's keys (index x = lane * E + e) with index below `keep` to keys[x].
template <int E, typename Key>
__device__ __forceinline__ void StoreLaneKeys(const Key (&lane_keys)[E], Key* keys, int keep) {
  const int first = LaneId() * E;
  constexpr int kPerVector = 16 / sizeof(Key);
  if constexpr (E % kPerVector == 0) {
    if (first + E <= keep) {
      uint4* vectors = AsVectors(keys + first);
#pragma unroll
      for (int v = 0; v < E / kPerVector; ++v) vectors[v] = ToVector(lane_keys + v * kPerVector);
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    if (first + e < keep) keys[first + e] = lane_keys[e];
  }
}

// Sorts keys[0..count) descending and writes back the first `keep` of them.
// Pre: count <= 32 * E, keep <= 32 * E, keys 16-byte aligned and readable up to index 32 * E;
// keys beyond `count` rank as 0, below every key of the array.
template <int E, typename Key>
__device__ __noinline__ void SortSharedDescending(Key* keys, int count, int keep) {
  Key lane_keys[E];
  LoadLaneKeys<E>(keys, count, lane_keys);
  __syncwarp();
  WarpSortDescending<E>(lane_keys, keys);
  StoreLaneKeys<E>(lane_keys, keys, keep);
  __syncwarp();
}

// The `run` largest of the warp's 32 E keys, sorted descending, from sorted runs of `run` keys
// (index x = lane * E + e; run a power of two, 32 <= run < 32 E), written to keys[0 .. keep): a
// bitonic top-k. Each round keeps the larger half of each pair of runs A, B (max(A[j], B[run - 1
// - j]) over j: the pair's `run` largest, a bitonic sequence) with half the keys a lane, and
// merges it, until one run is left; so the rounds' steps cost a half, a quarter, ... of the full
// sort's last phases. keep <= run; keys: warp-private shared memory of 32 E keys, 16-byte
// aligned, also the exchange.
template <int E, typename Key>
__device__ __forceinline__ void KeepTopOfRuns(Key (&lane_keys)[E], Key* keys, int run, int keep) {
  if constexpr (E >= 2) {
    constexpr int H = E / 2;
    const int lane = LaneId();
    StoreLaneKeys<E>(lane_keys, keys, 32 * E);
    __syncwarp();
    // Merged run p (p = lane / lanes) from runs 2p and 2p + 1, H of its keys a lane.
    const int lanes = run / H;
    const int p = lane / lanes;
    const int j = (lane & (lanes - 1)) * H;
    const Key* a = keys + 2 * p * run + j;
    const Key* b = keys + (2 * p + 1) * run + (run - H - j);  // b[H - 1 - t] = B[run - 1 - (j + t)]
    Key half[H];
#pragma unroll
    for (int t = 0; t < H; ++t) half[t] = KeyMax(a[t], b[H - 1 - t]);
    __syncwarp();
#pragma unroll 1
    for (int mask = lanes >> 1; mask > 0; mask >>= 1) {
      CrossLaneStep<H, false>(half, keys, lane, mask, (lane & mask) == 0);
    }
    InLaneStrides<H>(half, H >> 1);
    if (32 * H == run) {
      StoreLaneKeys<H>(half, keys, keep);
    } else {
      KeepTopOfRuns<H>(half, keys, run, keep);
    }
  }
  (void)lane_keys, (void)keys, (void)run, (void)keep;
}

// Sorts the `keep` largest of keys[0..count) descending into keys[0..keep) by sorted runs of
// max(32, keep rounded up to a power of two) and KeepTopOfRuns. Pre: E >= 2, keep <= 16 E, count
// <= 32 E; keys as for SortSharedDescending.
template <int E, typename Key>
__device__ __noinline__ void SortTopOfRunsShared(Key* keys, int count, int keep) {
  Key lane_keys[E];
  LoadLaneKeys<E>(keys, count, lane_keys);
  __syncwarp();
  const int run = max(32, 1 << (32 - __clz(max(keep, 2) - 1)));
  WarpSortSegments<E>(lane_keys, keys, run);
  KeepTopOfRuns<E>(lane_keys, keys, run, keep);
  __syncwarp();
}

// SortSharedDescending with the fewest keys a lane that hold `count`. Pre: count <= 512, and
// keys readable up to the next power of two >= count (at least 32).
template <typename Key>
__device__ __forceinline__ void SortUpTo512(Key* keys, int count, int keep) {
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

// SortUpTo512, but where `keep` is at most half the sort's 32-bit keys (2, 4 or 8 a lane), by
// sorted runs and KeepTopOfRuns (SortTopOfRunsShared) instead of a full sort. For the paired kernel's
// stages only, and for a measured reason that is the compiled kernel's rather than the method's
// (session 19, bench/RESULTS.md): with exactly these three paths the paired kernel runs 256x256
// k=64 3.3 % faster, without the 2-a-lane path (not reached there) 2.5 % slower, and its phases
// build shows the stage itself slower; in every other kernel the same sorts lost 1-18 %. A change
// here or in the paired kernel is to be timed against it.
template <typename Key>
__device__ __forceinline__ void SortTopUpTo512(Key* keys, int count, int keep) {
  if constexpr (sizeof(Key) == 4) {  // the 64-bit keys' rows are rare: no code for them
    const int per_lane = (count + 31) / 32;
    if (per_lane == 2 && keep <= 32) {
      SortTopOfRunsShared<2>(keys, count, keep);
      return;
    }
    if (per_lane > 2 && per_lane <= 4 && keep <= 64) {
      SortTopOfRunsShared<4>(keys, count, keep);
      return;
    }
    if (per_lane > 4 && per_lane <= 8 && keep <= 128) {
      SortTopOfRunsShared<8>(keys, count, keep);
      return;
    }
  }
  SortUpTo512(keys, count, keep);
}

// The lane's E keys of the two segments keys[0 .. 16 E) and keys[16 E .. 32 E), with entries at or
// past count0 in the first and count1 in the second read as 0 (below every real key).
template <int E, typename Key>
__device__ __forceinline__ void LoadTwoSegments(const Key* keys, int count0, int count1, int lane,
                                                Key (&lane_keys)[E]) {
  constexpr int kSegment = 16 * E;
  LoadLaneKeys<E>(keys, 32 * E, lane_keys);
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int x = lane * E + e;
    const int limit = x < kSegment ? count0 : count1 + kSegment;
    if (x >= limit) lane_keys[e] = Key{0};
  }
}

// Sorts keys[0 .. 16 E) and keys[16 E .. 32 E) each descending, as the two segments of one
// register sort; entries at or past count0 in the first and count1 in the second read as 0 (below
// every real key). Pre: keys 16-byte aligned, warp-private; count0, count1 <= 16 E.
template <int E, typename Key>
__device__ __noinline__ void SortTwoSegments(Key* keys, int count0, int count1) {
  constexpr int kSegment = 16 * E;
  const int lane = LaneId();
  Key lane_keys[E];
  LoadTwoSegments<E>(keys, count0, count1, lane, lane_keys);
  __syncwarp();
  WarpSortSegments<E>(lane_keys, keys, kSegment);
  constexpr int kPerVector = 16 / sizeof(Key);
  if constexpr (E % kPerVector == 0) {
    uint4* vectors = AsVectors(keys + lane * E);
#pragma unroll
    for (int v = 0; v < E / kPerVector; ++v) vectors[v] = ToVector(lane_keys + v * kPerVector);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) keys[lane * E + e] = lane_keys[e];
  }
  __syncwarp();
}

// The 8 E-th largest key of each of the two segments keys[0 .. 16 E) and keys[16 E .. 32 E)
// (entries at or past count0, count1 read as 0): each segment's halves sorted, then the mirror
// step within the segment (WarpTopHalf's selection, per segment), and the smallest of each top
// half, returned as second << 32 | first. Pre: as SortTwoSegments; count0, count1 >= 8 E where
// that segment's result is used. Post: keys served as the exchange (no order left there).
template <int E>
__device__ __noinline__ uint64_t KthOfTwoSegmentsByHalves(uint32_t* keys, int count0, int count1) {
  using Key = uint32_t;
  const int lane = LaneId();
  Key lane_keys[E];
  LoadTwoSegments<E>(keys, count0, count1, lane, lane_keys);
  __syncwarp();
  WarpSortSegments<E>(lane_keys, keys, 8 * E);
  CrossLaneStep<E, true>(lane_keys, keys, lane, 15, (lane & 8) == 0);
  Key smallest = ~Key{0};
  if ((lane & 8) == 0) {
#pragma unroll
    for (int e = 0; e < E; ++e) smallest = KeyMin(smallest, lane_keys[e]);
  }
  const uint32_t first = __reduce_min_sync(kFullMask, lane < 16 ? smallest : ~Key{0});
  const uint32_t second = __reduce_min_sync(kFullMask, lane >= 16 ? smallest : ~Key{0});
  return (uint64_t{second} << 32) | first;
}

// KthOfTwoSegmentsByHalves for segments of `segment` keys. Pre: segment a power of two, 16 <=
// segment <= 128.
__device__ __forceinline__ uint64_t KthOfTwoSegmentsByHalvesUpTo256(uint32_t* keys, int segment, int count0,
                                                                 int count1) {
  if (segment <= 16) return KthOfTwoSegmentsByHalves<1>(keys, count0, count1);
  if (segment <= 32) return KthOfTwoSegmentsByHalves<2>(keys, count0, count1);
  if (segment <= 64) return KthOfTwoSegmentsByHalves<4>(keys, count0, count1);
  return KthOfTwoSegmentsByHalves<8>(keys, count0, count1);
}

// SortTwoSegments with segments of `segment` keys. Pre: segment a power of two, 16 <= segment <=
// 128; keys as for SortTwoSegments.
template <typename Key>
__device__ __forceinline__ void SortTwoSegmentsUpTo256(Key* keys, int segment, int count0, int count1) {
  if (segment <= 16) {
    SortTwoSegments<1>(keys, count0, count1);
  } else if (segment <= 32) {
    SortTwoSegments<2>(keys, count0, count1);
  } else if (segment <= 64) {
    SortTwoSegments<4>(keys, count0, count1);
  } else {
    SortTwoSegments<8>(keys, count0, count1);
  }
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
  SortUpTo512(keys, count, keep);
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
