// The general factor ranking: SelectFactor streams one factor through the warp's staging buffer
// in chunks of kChunkElements, takes the kf-th largest maximum of small groups of the first chunk
// as a threshold (a bisection on the 16-bit key for bfloat16, a sort or a radix count for
// float32), keeps the elements that reach it as composite keys in the survivor buffer and sorts
// their kf best into the factor's list. RankFactors and RankFactorsStreamed apply it to a row's
// factors. Post: list f holds factor f's min(k, w[f]) best (value, column) in SPEC.md's order,
// NaN as -inf.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/factor_loads.cuh"
#include "kernels/cuda/device/warp_memory.cuh"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// Writes the ordered key of the maximum of each group of kPerBlock / kGroups consecutive elements
// of the lane's blocks b < blocks to maxima[b * kGroups + g]. A group of invalid (NaN) elements
// gets the key of -inf, which no threshold is taken from.
template <class T, int kGroups>
__device__ __forceinline__ void GroupMaxima(const uint32_t (&data)[T::kBlocksPerLane][4], int lane,
                                            int blocks, uint32_t* maxima) {
  constexpr int kSize = T::kPerBlock / kGroups;
#pragma unroll
  for (int q = 0; q < T::kBlocksPerLane; ++q) {
    const int b = lane + 32 * q;
    if (b < blocks) {
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        float best = T::Element(data[q], g * kSize);
#pragma unroll
        for (int h = g * kSize + 1; h < (g + 1) * kSize; ++h) best = fmaxf(best, T::Element(data[q], h));
        maxima[b * kGroups + g] = OrderedKey(best);
      }
    }
  }
}

// The 16-bit key (SPEC.md's key of a bfloat16 value, high half) of the kf-th largest maximum of
// the groups of kPerBlock / kGroups elements of the lane's blocks b < blocks: a bisection on the
// key, each step one warp-wide count (no sort, no shared memory). A group of invalid (NaN) elements
// has the key of -inf. Pre: at least kf groups. Post: at least kf groups reach the result.
// kNarrow (narrow != 0; the streamed kernel's four maxima a lane, the default kernel's eight): the
// search starts between the smallest and the largest over the lanes of each lane's j-th largest
// maximum, j = (kf - 1) / 32 (at least 32 (j + 1) >= kf maxima reach the smallest, at most
// 32 j < kf exceed the largest), and stops at the first key that at least kf and at most
// kf + kf / 8 maxima reach: any key that at least kf maxima reach is a valid threshold, and a few
// more survivors cost nothing while they fit the survivor sort.
template <class T, int kGroups, bool kNarrow = false>
__device__ __forceinline__ uint32_t KthGroupMaximum16(const uint32_t (&data)[T::kBlocksPerLane][4],
                                                      int lane, int blocks, int kf,
                                                      int narrow = 0) {
  constexpr int kSize = T::kPerBlock / kGroups;
  constexpr int kMaxima = T::kBlocksPerLane * kGroups;
  const int used = (blocks + 31) / 32;  // blocks a lane may hold (the warp's widest)
  uint32_t maxima[kMaxima];
  uint32_t low = 0xffffu;
  uint32_t high = 0;
#pragma unroll
  for (int q = 0; q < T::kBlocksPerLane; ++q) {
    const bool valid = lane + 32 * q < blocks;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      float best = T::Element(data[q], g * kSize);
#pragma unroll
      for (int h = g * kSize + 1; h < (g + 1) * kSize; ++h) best = fmaxf(best, T::Element(data[q], h));
      const uint32_t key = OrderedKey(best) >> 16;
      maxima[q * kGroups + g] = valid ? key : 0u;
      if (valid) {
        low = min(low, key);
        high = max(high, key);
      }
    }
  }
  uint32_t enough = 0;  // kNarrow: the most reaching maxima that end the search (0: no end)
  if constexpr (kNarrow && kMaxima == 4) {
    if (narrow != 0) {
      // The lane's maxima in descending order (invalid ones are 0), then its j-th largest.
      uint32_t v[4] = {maxima[0], maxima[1], maxima[2], maxima[3]};
      auto order = [&](int a, int b) {
        const uint32_t larger = max(v[a], v[b]);
        v[b] = min(v[a], v[b]);
        v[a] = larger;
      };
      order(0, 1);
      order(2, 3);
      order(0, 2);
      order(1, 3);
      order(1, 2);
      const int j = (kf - 1) >> 5;
      const uint32_t jth = j == 0 ? v[0] : j == 1 ? v[1] : j == 2 ? v[2] : v[3];
      low = jth;
      high = jth;
      enough = static_cast<uint32_t>(kf + (kf >> 3));
    }
  } else if constexpr (kNarrow && kMaxima == 8) {
    if (narrow != 0) {
      // The lane's maxima sorted descending in registers (invalid ones are 0), then its j-th.
      uint32_t v[kMaxima];
#pragma unroll
      for (int e = 0; e < kMaxima; ++e) v[e] = maxima[e];
#pragma unroll
      for (int size = 2; size <= kMaxima; size <<= 1) {
        InLaneMirror<kMaxima>(v, size);
        InLaneStrides<kMaxima>(v, size >> 2);
      }
      const int j = (kf - 1) >> 5;
      uint32_t jth = v[0];
#pragma unroll
      for (int e = 1; e < kMaxima; ++e) jth = j == e ? v[e] : jth;
      low = jth;
      high = jth;
      enough = static_cast<uint32_t>(kf + (kf >> 3));
    }
  }
  // Invariant: at least kf maxima reach `low`, fewer than kf exceed `high`.
  low = __reduce_min_sync(kFullMask, low);
  high = __reduce_max_sync(kFullMask, high);
  while (low < high) {
    const uint32_t mid = (low + high + 1) >> 1;
    uint32_t reaching = 0;
#pragma unroll
    for (int q = 0; q < T::kBlocksPerLane; ++q) {
      if (q < used) {
#pragma unroll
        for (int g = 0; g < kGroups; ++g) reaching += maxima[q * kGroups + g] >= mid ? 1u : 0u;
      }
    }
    const uint32_t count = __reduce_add_sync(kFullMask, reaching);
    if (count >= static_cast<uint32_t>(kf)) {
      low = mid;
      if (kNarrow && count <= enough) break;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

// Sorts the `keep` best of the factor buffer's `count` keys into its front.
template <class T>
__device__ __forceinline__ void TopSorted(const WarpMemory<T>& m, int count, int keep) {
  if constexpr (sizeof(typename T::Key) == 4) {
    if (count > 256) {
      SelectTopSortedByCount(m.buffer, count, keep, m.buffer_chosen, m.histogram);
      return;
    }
  }
  SelectTopSorted(m.buffer, count, keep, m.buffer_chosen, m.histogram);
}

// Ranks factor f: its `kf` best columns by (key desc, column desc), written as values (NaN ->
// -inf) and columns to list_value / list_column. factor: the factor's first element (global).
// kNarrowPairs (the bfloat16 default and latency kernels): where a block holds two groups (eight
// maxima a lane), the maxima bisection starts narrowed (KthGroupMaximum16's kNarrow,
// p.narrow_maxima). kLatency (the latency kernel): also where a block holds one group (four maxima
// a lane), as in the streamed kernel.
// kStreamed (the streamed kernel; p.prefetch_bytes > 0: a room of one chunk a warp, after all the
// slices): once the first chunk is in registers, the full blocks of the first chunk of `next`
// (width `next_width`; nullptr: none) are copied into the room asynchronously, each lane the blocks
// it loads itself, so that the next factor (of this row, or of the warp's next row) waits on
// shared memory, not DRAM; `prefetched` says that the previous call did so for this factor.
template <class T, bool kStreamed = false, bool kNarrowPairs = false, bool kLatency = false>
__device__ void SelectFactor(const uint8_t* factor, uint32_t width, int kf, const KernelParams& p,
                             const WarpMemory<T>& m, float* list_value, uint32_t* list_column,
                             const uint8_t* next = nullptr, uint32_t next_width = 0,
                             bool prefetched = false) {
  using Key = typename T::Key;
  constexpr int kQ = T::kBlocksPerLane;
  constexpr int kE = T::kPerBlock;
  constexpr int kBytes = T::kElementBytes;
  const int lane = LaneId();
  int count = 0;                     // keys in m.buffer
  float threshold = -INFINITY;       // survivors: value >= threshold; -inf: every element
  uint8_t* room = nullptr;
  if constexpr (kStreamed) {
    room = PrefetchRoom(p);
    prefetched = prefetched && room != nullptr;
    if (prefetched) WaitCopiesToShared();
  }
  (void)next, (void)next_width;
  for (uint32_t start = 0; start < width;) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(factor) + uintptr_t{start} * kBytes;
    const int begin = static_cast<int>(address & 15u);
    const uint32_t length =
        min(width - start, static_cast<uint32_t>((T::kStagingBytes - begin) / kBytes));
    const int end = begin + static_cast<int>(length) * kBytes;
    const int blocks = (end + 15) / 16;
    const uint8_t* window = reinterpret_cast<const uint8_t*>(address - begin);

    uint32_t data[kQ][4];
#pragma unroll
    for (int q = 0; q < kQ; ++q) {
      const int b = lane + 32 * q;
      if (b < blocks) {
        bool staged = false;
        if constexpr (kStreamed) staged = prefetched && start == 0 && FullBlock(b, begin, end);
        if (staged) {
          LoadPrefetchedBlock(room + 16 * b, data[q]);
        } else {
          LoadBlock<T>(window, b, begin, end, data[q]);
        }
      } else {
#pragma unroll
        for (int w = 0; w < 4; ++w) data[q][w] = T::kInvalidWord;
      }
      *AsVectors(m.staging + 16 * b) =
          make_uint4(data[q][0], data[q][1], data[q][2], data[q][3]);
    }
    if constexpr (kStreamed) {
      // The room's blocks are in registers (the staging stores above used them): the next
      // factor's first chunk may overwrite them.
      if (start == 0 && room != nullptr && next != nullptr) {
        int next_begin;
        int next_end;
        const uint8_t* next_window = FirstChunk<T>(next, next_width, next_begin, next_end);
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
          const int b = lane + 32 * q;
          if (FullBlock(b, next_begin, next_end)) {
            CopyToSharedAsync(room + 16 * b, next_window + 16 * b);
          }
        }
      }
    }

    // A threshold from the group maxima of the first chunk, when it is worth one.
    if (count == 0 && threshold == -INFINITY && static_cast<int>(length) > 2 * kf) {
      int per_block = 1;
      while (per_block < T::kMaxGroupsPerBlock && blocks * per_block < 2 * kf) per_block *= 2;
      const int groups = blocks * per_block;
      if (groups >= kf) {
        uint32_t kth = 0;
        bool bisected = false;
        if constexpr (T::kElementBytes == 2) {
          // By default where a sort would cost more: more than 128 maxima, or a full chunk (every
          // lane's blocks hold elements).
          if (p.bisect_maxima == 2 ||
              (p.bisect_maxima == 1 && (groups > 128 || blocks == 32 * T::kBlocksPerLane))) {
            const uint32_t kth16 =
                per_block == 1   ? KthGroupMaximum16<T, 1, kStreamed || kLatency>(
                                       data, lane, blocks, kf,
                                       kStreamed || kLatency ? p.narrow_maxima : 0)
                : per_block == 2 ? KthGroupMaximum16<T, 2, kNarrowPairs>(
                                       data, lane, blocks, kf, kNarrowPairs ? p.narrow_maxima : 0)
                                 : KthGroupMaximum16<T, T::kMaxGroupsPerBlock>(data, lane, blocks, kf);
            // The float key of that bfloat16 value: low half 0 when positive, all ones when not.
            kth = (kth16 << 16) | ((kth16 & 0x8000u) ? 0u : 0xffffu);
            bisected = true;
          }
        }
        if (!bisected) {
          if (per_block == 1) {
            GroupMaxima<T, 1>(data, lane, blocks, m.maxima);
          } else if (per_block == 2) {
            GroupMaxima<T, 2>(data, lane, blocks, m.maxima);
          } else {
            GroupMaxima<T, T::kMaxGroupsPerBlock>(data, lane, blocks, m.maxima);
          }
          __syncwarp();
          if (groups <= 128) {
            SelectTopSorted<uint32_t>(m.maxima, groups, kf, nullptr, nullptr);
            kth = m.maxima[kf - 1];
            __syncwarp();
          } else {
            kth = WarpKthLargest(m.maxima, groups, kf, m.histogram);
          }
        }
        if (kth > OrderedKey(-INFINITY)) threshold = KeyToFloat(kth);
      }
    }

    uint32_t mask = 0;
    auto mark = [&]() {
      mask = 0;
      if (threshold > -INFINITY) {
#pragma unroll
        for (int q = 0; q < kQ; ++q) {
#pragma unroll
          for (int h = 0; h < kE; ++h) {
            if (T::Element(data[q], h) >= threshold) mask |= 1u << (q * kE + h);
          }
        }
      } else {
#pragma unroll
        for (int q = 0; q < kQ; ++q) mask |= ValidBits<T>(lane + 32 * q, begin, end) << (q * kE);
      }
    };
    mark();
    int mine = __popc(mask);
    int inclusive = WarpInclusiveSum(mine);
    int total = __shfl_sync(kFullMask, inclusive, 31);
    if (count + total > p.buffer_capacity) {
      // Cut the buffer to its kf best; the kf-th becomes the threshold. Leaves room for a chunk.
      TopSorted<T>(m, count, kf);
      count = kf;
      threshold = T::KeyValue(m.buffer[kf - 1]);
      mark();
      mine = __popc(mask);
      inclusive = WarpInclusiveSum(mine);
      total = __shfl_sync(kFullMask, inclusive, 31);
    }
    int position = count + inclusive - mine;
    while (mask != 0) {
      const int bit = __ffs(static_cast<int>(mask)) - 1;
      mask &= mask - 1;
      const int at = (lane + 32 * (bit / kE)) * 16 + (bit % kE) * kBytes;
      const uint32_t column = start + static_cast<uint32_t>((at - begin) / kBytes);
      m.buffer[position++] = T::Composite(m.staging + at, column);
    }
    count += total;
    __syncwarp();
    start += length;
  }
  TopSorted<T>(m, count, kf);
#pragma unroll 1
  for (int r = lane; r < kf; r += 32) {
    const Key key = m.buffer[r];
    list_value[r] = T::KeyValue(key);
    list_column[r] = T::KeyColumn(key);
  }
  __syncwarp();
}

// Ranks factors first, first + step, ... of one row into m's lists (kNarrowPairs, kLatency:
// SelectFactor's).
template <class T, bool kNarrowPairs = false, bool kLatency = false>
__device__ void RankFactors(const KernelParams& p, const WarpMemory<T>& m, const uint8_t* scores,
                            int first, int step) {
  const int cap = p.list_capacity;
  for (int f = first; f < p.factors; f += step) {
    SelectFactor<T, false, kNarrowPairs, kLatency>(
        scores + size_t{p.offset[f]} * T::kElementBytes, p.width[f], p.list_size[f], p, m,
        m.list_value + f * cap, m.list_column + f * cap);
  }
}

// RankFactors in the streamed kernel (a warp per row): each factor's call prefetches the first
// chunk of the next factor, the last factor's that of factor 0 of the warp's next row (row +
// row_step), so every factor but a warp's first one's is prefetched (SelectFactor, kStreamed).
template <class T>
__device__ __forceinline__ void RankFactorsStreamed(const KernelParams& p, const WarpMemory<T>& m,
                                                    const uint8_t* scores, unsigned long long row,
                                                    unsigned long long row_step) {
  constexpr int kBytes = T::kElementBytes;
  const int cap = p.list_capacity;
  for (int f = 0; f < p.factors; ++f) {
    const uint8_t* next = nullptr;
    uint32_t next_width = p.width[0];
    if (f + 1 < p.factors) {
      next = scores + size_t{p.offset[f + 1]} * kBytes;
      next_width = p.width[f + 1];
    } else if (row + row_step < p.rows) {
      next = scores + row_step * p.row_elements * kBytes;
    }
    SelectFactor<T, true>(scores + size_t{p.offset[f]} * kBytes, p.width[f], p.list_size[f], p, m,
                          m.list_value + f * cap, m.list_column + f * cap, next, next_width,
                          f > 0 || row >= row_step);
  }
}

}  // namespace
}  // namespace pk::cuda
