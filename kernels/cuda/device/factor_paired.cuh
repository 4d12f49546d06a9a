// The paired-factor ranking: two bfloat16 factors of width at most 256 ranked together by one warp,
// either by thresholds and survivors sorted as the two segments of one register sort
// (RankPairedFactors) or by one sort of all their elements (SortPairedFactors, which may prefetch
// the warp's next row). Post: the same lists as SelectFactor's, or false (nothing written) when a
// factor spans more than 32 blocks, and SelectFactor ranks that row.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/factor_loads.cuh"
#include "kernels/cuda/device/warp_memory.cuh"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// The smallest power of two at least x (device side). Pre: 1 <= x <= 2^30.
__device__ __forceinline__ int PowerOfTwoAtLeastOnDevice(int x) { return 1 << (32 - __clz(x - 1)); }

// Writes the ordered keys of the maxima of `groups` (1, 2 or 4) equal groups of a bfloat16
// block's 8 elements to out[0 .. groups) (16-byte aligned when groups == 4). A group of NaNs gets
// the key of -inf.
__device__ __forceinline__ void BlockGroupMaxima(const uint32_t (&block)[4], int groups,
                                                 uint32_t* out) {
  float pair[4];
#pragma unroll
  for (int w = 0; w < 4; ++w) pair[w] = fmaxf(Bf16Type::Element(block, 2 * w), Bf16Type::Element(block, 2 * w + 1));
  if (groups == 4) {
    *AsVectors(out) = make_uint4(OrderedKey(pair[0]), OrderedKey(pair[1]), OrderedKey(pair[2]),
                                 OrderedKey(pair[3]));
  } else if (groups == 2) {
    out[0] = OrderedKey(fmaxf(pair[0], pair[1]));
    out[1] = OrderedKey(fmaxf(pair[2], pair[3]));
  } else {
    out[0] = OrderedKey(fmaxf(fmaxf(pair[0], pair[1]), fmaxf(pair[2], pair[3])));
  }
}

// Ranks both factors of a two-factor bfloat16 row whose widths are at most 256 (p.paired_factors)
// in one pass: lane l holds block l of each factor (8 elements) in registers, and the two factors'
// group maxima, then their survivors, are sorted as the two segments of one register sort
// (SortTwoSegments), so that the two selections share every exchange step, and a sort of 2 x 128
// keys takes 10 exchange steps where two sorts of 128 take 30. Thresholds and survivors are
// SelectFactor's (groups of 2-8 elements, about 2 kf of them; the kf-th largest maximum), so the
// lists are the same. buffer: the factor phase's survivor buffer (768 keys used). Returns false,
// having written nothing, when a factor spans more than 32 blocks (a misaligned width above 248):
// SelectFactor ranks that row.
// Only the paired kernel calls it, inlined, as the paired-sort kernel does SortPairedFactors: on
// the H200, 256x256 k=32 +4.5 %, 128x128 k=64 +3.4 % against the call (kernel v24, NOTES.md).
__device__ __forceinline__ bool RankPairedFactors(const KernelParams& p, float* list_value,
                                                  uint32_t* list_column, uint32_t* buffer,
                                                  const uint8_t* scores) {
  using T = Bf16Type;
  const int lane = LaneId();
  int begin[2];
  int end[2];
  int blocks[2];
  const uint8_t* window[2];
#pragma unroll
  for (int f = 0; f < 2; ++f) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(scores) + uintptr_t{p.offset[f]} * 2u;
    begin[f] = static_cast<int>(address & 15u);
    end[f] = begin[f] + static_cast<int>(p.width[f]) * 2;
    blocks[f] = (end[f] + 15) / 16;
    window[f] = reinterpret_cast<const uint8_t*>(address - static_cast<uintptr_t>(begin[f]));
  }
  if (blocks[0] > 32 || blocks[1] > 32) return false;
  uint32_t data[2][4];
#pragma unroll
  for (int f = 0; f < 2; ++f) {
    if (lane < blocks[f]) {
      LoadBlock<T>(window[f], lane, begin[f], end[f], data[f]);
    } else {
#pragma unroll
      for (int w = 0; w < 4; ++w) data[f][w] = T::kInvalidWord;
    }
  }
  // Factor f's threshold from its group maxima, where SelectFactor would take one (groups[f] > 0).
  int groups[2];
  int per_block[2];
#pragma unroll
  for (int f = 0; f < 2; ++f) {
    const int kf = p.list_size[f];
    per_block[f] = 1;
    while (per_block[f] < T::kMaxGroupsPerBlock && blocks[f] * per_block[f] < 2 * kf) per_block[f] *= 2;
    const int count = blocks[f] * per_block[f];
    groups[f] = static_cast<int>(p.width[f]) > 2 * kf && count >= kf ? count : 0;
  }
  float threshold[2] = {-INFINITY, -INFINITY};
  if (groups[0] + groups[1] > 0) {
    const int segment = max(16, PowerOfTwoAtLeastOnDevice(max(groups[0], groups[1])));
    uint32_t* maxima = buffer + 512;
#pragma unroll
    for (int f = 0; f < 2; ++f) {
      if (groups[f] > 0 && lane < blocks[f]) {
        BlockGroupMaxima(data[f], per_block[f], maxima + f * segment + lane * per_block[f]);
      }
    }
    __syncwarp();
    // The kf-th of each segment: where every used segment's kf is half the segment, the top
    // halves' smallest (no full sort), else a sort.
    uint32_t kth[2];
    const bool halves = (groups[0] == 0 || 2 * p.list_size[0] == segment) &&
                        (groups[1] == 0 || 2 * p.list_size[1] == segment) && p.half_select_maxima;
    if (halves) {
      const uint64_t both = KthOfTwoSegmentsByHalvesUpTo256(maxima, segment, groups[0], groups[1]);
      kth[0] = static_cast<uint32_t>(both);
      kth[1] = static_cast<uint32_t>(both >> 32);
    } else {
      SortTwoSegmentsUpTo256(maxima, segment, groups[0], groups[1]);
#pragma unroll
      for (int f = 0; f < 2; ++f) kth[f] = maxima[f * segment + p.list_size[f] - 1];
    }
#pragma unroll
    for (int f = 0; f < 2; ++f) {
      if (groups[f] > 0 && kth[f] > OrderedKey(-INFINITY)) threshold[f] = KeyToFloat(kth[f]);
    }
  }
  // Survivors: every element at or above the threshold, else every valid element.
  uint32_t mask[2];
#pragma unroll
  for (int f = 0; f < 2; ++f) {
    mask[f] = 0;
    if (threshold[f] > -INFINITY) {
#pragma unroll
      for (int h = 0; h < 8; ++h) {
        if (T::Element(data[f], h) >= threshold[f]) mask[f] |= 1u << h;
      }
    } else {
      mask[f] = ValidBits<T>(lane, begin[f], end[f]);
    }
  }
  // Both factors' places by one scan: factor 0's counts in the low 16 bits, factor 1's above.
  const int packed = __popc(mask[0]) | (__popc(mask[1]) << 16);
  const int inclusive = WarpInclusiveSum(packed);
  const int total = __shfl_sync(kFullMask, inclusive, 31);
  const int count[2] = {total & 0xffff, total >> 16};
  const int widest = max(count[0], count[1]);
  const bool together = widest <= 128;
  const int segment = together ? max(16, PowerOfTwoAtLeastOnDevice(widest)) : 256;
#pragma unroll
  for (int f = 0; f < 2; ++f) {
    uint32_t* region = buffer + f * segment;
    int position = ((inclusive - packed) >> (16 * f)) & 0xffff;
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      if (mask[f] & (1u << h)) {
        const uint32_t bits = (data[f][h >> 1] >> (16 * (h & 1))) & 0xffffu;
        const uint32_t column = static_cast<uint32_t>((lane * 16 + 2 * h - begin[f]) / 2);
        region[position++] = (uint32_t{OrderedKeyBf16(static_cast<uint16_t>(bits))} << 16) | column;
      }
    }
  }
  __syncwarp();
  if (together) {
    SortTwoSegmentsUpTo256(buffer, segment, count[0], count[1]);
  } else {
    SortUpTo512(buffer, count[0], p.list_size[0]);
    SortUpTo512(buffer + 256, count[1], p.list_size[1]);
  }
  const int cap = p.list_capacity;
#pragma unroll
  for (int f = 0; f < 2; ++f) {
    const uint32_t* region = buffer + f * segment;
#pragma unroll 1
    for (int r = lane; r < p.list_size[f]; r += 32) {
      const uint32_t key = region[r];
      list_value[f * cap + r] = T::KeyValue(key);
      list_column[f * cap + r] = T::KeyColumn(key);
    }
  }
  __syncwarp();
  return true;
}

// One round of TopSixtyFourOfRuns, H keys a lane: exchange holds sorted runs of 64 in index order;
// lanes L p .. L p + L - 1 (L = 64 / H) keep C[j] = max(A[j], B[63 - j]) of runs A = 2p and B =
// 2p + 1, H of its j a lane (j = H (lane % L) + e); C, the 64 largest of both, is bitonic, and the
// merge sorts it into top (index x = H (lane % L) + e within its run of 64). A round of
// KeepTopOfRuns (warp_ops.cuh) does the same for any run length; TopSixtyFourOfRuns through it
// measured 1.5 to 3.0 % slower at 256x256 k=64 (sessions 19 and 20: psf, pv), hence this copy.
template <int H>
__device__ __forceinline__ void KeepLargerHalfOfRuns(uint32_t* exchange, int lane, uint32_t (&top)[H]) {
  constexpr int kLanes = 64 / H;
  const uint32_t* a = exchange + (lane / kLanes) * 128 + (lane % kLanes) * H;
  const uint32_t* b = exchange + (lane / kLanes) * 128 + 64 + (64 - H - (lane % kLanes) * H);
  uint32_t from_a[H];
  uint32_t from_b[H];  // from_b[H - 1 - e] = B[63 - j]
#pragma unroll
  for (int v = 0; v < H / 4; ++v) FromVector(AsVectors(a)[v], from_a + 4 * v);
#pragma unroll
  for (int v = 0; v < H / 4; ++v) FromVector(AsVectors(b)[v], from_b + 4 * v);
#pragma unroll
  for (int e = 0; e < H; ++e) top[e] = max(from_a[e], from_b[H - 1 - e]);
  __syncwarp();
#pragma unroll
  for (int mask = kLanes / 2; mask > 0; mask >>= 1) {
    CrossLaneStep<H, false>(top, exchange, lane, mask, (lane & mask) == 0);
  }
  InLaneStrides<H>(top, H / 2);
}

// The 64 largest of each of the two segments of 256 keys that lanes 0-15 and 16-31 hold, 16 keys a
// lane as sorted runs of 64 (four lanes each; WarpSortSegments with segment 64), sorted descending
// into keys[0 .. 4) (lane l: ranks (l & 15) * 4 + e of its segment): a bitonic top-k in place of
// the sort's last two phases. Twice, the larger half of two sorted runs is kept and merged
// (KeepLargerHalfOfRuns), each time with half the keys a lane, so that those steps cost a half and
// a quarter of the sort's. keys[4 .. 16) are left undefined. exchange: 512 keys, warp-private,
// 16-byte aligned.
__device__ __forceinline__ void TopSixtyFourOfRuns(uint32_t (&keys)[16], uint32_t* exchange) {
  const int lane = LaneId();
  // Runs of 64 (four lanes each) to shared memory in index order: run r (r = lane / 4) at 64 r.
  uint4* vectors = AsVectors(exchange + lane * 16);
#pragma unroll
  for (int v = 0; v < 4; ++v) vectors[v] = ToVector(keys + 4 * v);
  __syncwarp();
  // Round 1, eight keys a lane: each segment's four runs become two.
  uint32_t half[8];
  KeepLargerHalfOfRuns<8>(exchange, lane, half);
  uint4* out = AsVectors(exchange + lane * 8);
  out[0] = ToVector(half);
  out[1] = ToVector(half + 4);
  __syncwarp();
  // Round 2, four keys a lane: each segment's two runs become its 64 largest.
  uint32_t top[4];
  KeepLargerHalfOfRuns<4>(exchange, lane, top);
#pragma unroll
  for (int e = 0; e < 4; ++e) keys[e] = top[e];
}

// Ranks both factors of a two-factor bfloat16 row whose widths are at most 256 (p.paired_factors)
// by one register sort of all their elements: lanes 0-15 hold factor 0's blocks, lanes 16-31 factor
// 1's, two blocks a lane, each element as its distinct composite key (ordered value << 16 |
// column; 0, below every real key, outside the factor), and the two segments of 256 keys are
// sorted at once, 16 keys a lane: 10 exchange steps, where RankPairedFactors takes 17 in its two
// sorts besides the maxima, the threshold, the marking and the survivors' compaction. The sorted
// segments are SelectFactor's lists (the same keys ranked the same way), for every kf up to 256.
// Where both lists are 64 long, only runs of 64 are sorted and TopSixtyFourOfRuns keeps their 64
// largest (256x256 k=64 +13.6 % on the H100, NOTES.md).
// exchange: 512 keys, warp-private, 16-byte aligned.
// Prefetch (p.prefetch_bytes > 0: 1 KB a warp, after all the slices): the full blocks of the
// warp's next row (`next`, or nullptr for none) are copied there asynchronously once this row's are
// read, so that the next row's loads wait on shared memory, not DRAM; `prefetched` says that the
// previous call did so for this row (every row but the warp's first). Returns false, having
// written no list, when a factor spans more than 32 blocks (a misaligned width above 248):
// SelectFactor ranks that row.
// Only the paired-sort kernel calls it, inlined: the paired kernels are bound by instruction fetch,
// and with this code in the kernel's own, 256x256 k=64 ran 1.9 % faster (kernel v23, NOTES.md).
__device__ __forceinline__ bool SortPairedFactors(const KernelParams& p, float* list_value,
                                                  uint32_t* list_column, uint32_t* exchange,
                                                  const uint8_t* scores, const uint8_t* next,
                                                  bool prefetched) {
  using T = Bf16Type;
  constexpr int E = 16;
  const int lane = LaneId();
  uint8_t* staged = PrefetchRoom(p);
  prefetched = prefetched && staged != nullptr;
  const int f = lane >> 4;
  const uint32_t offset = f == 0 ? p.offset[0] : p.offset[1];
  const uint32_t width = f == 0 ? p.width[0] : p.width[1];
  // A factor's bytes [begin, end) in the aligned window of the row at `row`.
  auto window_of = [&](const uint8_t* row, int& begin, int& end) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(row) + uintptr_t{offset} * 2u;
    begin = static_cast<int>(address & 15u);
    end = begin + static_cast<int>(width) * 2;
    return reinterpret_cast<const uint8_t*>(address - static_cast<uintptr_t>(begin));
  };
  uint8_t* lane_staged = staged + lane * 32;
  // Starts the next row's copies (once this row's staged blocks are read or not needed).
  auto prefetch_next = [&]() {
    if (staged == nullptr || next == nullptr) return;
    int next_begin;
    int next_end;
    const uint8_t* next_window = window_of(next, next_begin, next_end);
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int b = 2 * (lane & 15) + q;
      if (FullBlock(b, next_begin, next_end)) {
        CopyToSharedAsync(lane_staged + 16 * q, next_window + 16 * b);
      }
    }
  };
  if (prefetched) WaitCopiesToShared();
  int begin;
  int end;
  const uint8_t* window = window_of(scores, begin, end);
  const int blocks = (end + 15) / 16;
  if (__any_sync(kFullMask, blocks > 32)) {
    prefetch_next();
    return false;
  }
  uint32_t keys[E];
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int b = 2 * (lane & 15) + q;
    uint32_t data[4] = {};
    uint32_t valid = 0;
    if (b < blocks) {
      if (prefetched && FullBlock(b, begin, end)) {
        LoadPrefetchedBlock(lane_staged + 16 * q, data);
      } else {
        LoadBlock<T>(window, b, begin, end, data);
      }
      valid = ValidBits<T>(b, begin, end);
    }
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      const uint32_t bits = (data[h >> 1] >> (16 * (h & 1))) & 0xffffu;
      const uint32_t column = static_cast<uint32_t>(b * 8 + h - begin / 2);
      keys[q * 8 + h] = (valid >> h) & 1u
                            ? (uint32_t{OrderedKeyBf16(static_cast<uint16_t>(bits))} << 16) | column
                            : 0u;
    }
  }
  // Where both lists are 64 long, runs of 64 sorted and their 64 largest kept (TopSixtyFourOfRuns),
  // else the whole segments sorted.
  const bool top64 = p.list_size[0] == 64 && p.list_size[1] == 64;
  WarpSortSegments<E>(keys, exchange, top64 ? 64 : 16 * E);
  prefetch_next();  // this row's blocks are read: the sort used them all
  const int kf = f == 0 ? p.list_size[0] : p.list_size[1];
  if (top64) {
    TopSixtyFourOfRuns(keys, exchange);
    // Lane l holds ranks (l & 15) * 4 + e of factor l >> 4.
    const int first = (lane & 15) * 4;
    *AsVectors(list_value + f * p.list_capacity + first) =
        make_uint4(__float_as_uint(T::KeyValue(keys[0])), __float_as_uint(T::KeyValue(keys[1])),
                   __float_as_uint(T::KeyValue(keys[2])), __float_as_uint(T::KeyValue(keys[3])));
    *AsVectors(list_column + f * p.list_capacity + first) =
        make_uint4(T::KeyColumn(keys[0]), T::KeyColumn(keys[1]), T::KeyColumn(keys[2]),
                   T::KeyColumn(keys[3]));
    __syncwarp();
    return true;
  }
  // Lane l holds ranks (l & 15) * 16 + e of factor l >> 4.
  const int first = (lane & 15) * E;
  float* values = list_value + f * p.list_capacity + first;
  uint32_t* columns = list_column + f * p.list_capacity + first;
  if (first + E <= kf) {
#pragma unroll
    for (int v = 0; v < E / 4; ++v) {
      AsVectors(values)[v] = make_uint4(__float_as_uint(T::KeyValue(keys[4 * v])),
                                        __float_as_uint(T::KeyValue(keys[4 * v + 1])),
                                        __float_as_uint(T::KeyValue(keys[4 * v + 2])),
                                        __float_as_uint(T::KeyValue(keys[4 * v + 3])));
      AsVectors(columns)[v] = make_uint4(T::KeyColumn(keys[4 * v]), T::KeyColumn(keys[4 * v + 1]),
                                         T::KeyColumn(keys[4 * v + 2]), T::KeyColumn(keys[4 * v + 3]));
    }
  } else if (first < kf) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (first + e < kf) {
        values[e] = T::KeyValue(keys[e]);
        columns[e] = T::KeyColumn(keys[e]);
      }
    }
  }
  __syncwarp();
  return true;
}

// The paired ranking where the launch takes that path (bfloat16 only; a warp per row): in the
// paired kernel RankPairedFactors, in the paired-sort kernel (kSort; the launch plan sends it the
// rows with p.paired_sort) SortPairedFactors, each kernel without the other's code. Returns
// whether it ranked the row. With the sort: `next` is the warp's next row (or nullptr), and
// `prefetched` says whether this row is not the warp's first.
template <class T, bool kSort>
__device__ __forceinline__ bool RankPairedFactorsOf(const KernelParams& p, const WarpMemory<T>& m,
                                                    const uint8_t* scores, bool block_per_row,
                                                    const uint8_t* next, bool prefetched) {
  if constexpr (T::kElementBytes == 2) {
    if (p.paired_factors && !block_per_row) {
      if constexpr (kSort) {
        return SortPairedFactors(p, m.list_value, m.list_column, m.buffer, scores, next, prefetched);
      } else {
        return RankPairedFactors(p, m.list_value, m.list_column, m.buffer, scores);
      }
    }
  }
  (void)p, (void)m, (void)scores, (void)block_per_row, (void)next, (void)prefetched;
  return false;
}

}  // namespace
}  // namespace pk::cuda
