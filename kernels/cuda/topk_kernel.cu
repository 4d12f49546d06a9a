// The CUDA product-key top-k (../../shared/SPEC.md), bit for bit the CPU implementation's result.
//
// One warp computes one row; a block's warps take rows in a grid-stride loop, and all scratch
// lives in the warp's slice of shared memory. Small batches instead get a block of F warps per row,
// each ranking one factor, for latency. Per factor, the warp streams the factor through a shared
// staging buffer in chunks of 1 024 elements (16-byte loads, any element alignment). On the first
// chunk it takes the maximum of each small group of elements (2 to 8 elements of one 16-byte
// block, enough groups to have about 2 kf of them) and finds the kf-th largest maximum (a register
// sort, or a radix count for large sets): kf groups reach it, so the factor's kf best elements do
// too, and on random data only about 1.2 kf elements pass. Each lane marks its passing elements in
// a bit mask (one float compare each), a warp scan places them, and only those become distinct
// composite keys (ordered value << 16 | column for bfloat16, << 32 for float32) in a survivor
// buffer; a later chunk that would overflow it first cuts it to its kf best, raising the threshold.
// The survivors' kf best, sorted, are the factor's ranked list. Each pairing stage walks a
// per-block table of the staircase (i+1)(j+1) <= n, keeps the candidates whose score key reaches
// the best corner of an exact n-pair rectangle (at least n candidates do), finds the n-th best
// 32-bit score key, takes every candidate above it and ranks the few tied at it by (i+j, i); keys
// (score key << 32 | (i+j) << 8 | i) give the order where a later stage needs it. Running entries
// carry their factor ranks, so the last stage's slots are sorted ascending with their ranks and the
// values recomputed from the lists (from the raw row only behind a -inf, which may be a NaN).
// Sorts are register bitonic networks whose cross-lane steps exchange through shared memory, each
// compiled once out of line: the kernel is instruction-bound, and unrolled copies at every call
// site made it instruction-fetch-bound. Sets beyond 512 keys (ties) go through a warp radix
// select, so every valid shape and input works, the heavy ones slower. NOTES.md has the numbers.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/warp_ops.cuh"
#include "kernels/numeric.h"

namespace pk::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxCorners = 32;
constexpr int kChunkElements = 1024;  // per staging chunk, either type
constexpr int kMaxStageKeys = 512;    // register sorts handle up to this many keys

// Element type traits: how a chunk is held (four 32-bit words per 16-byte block), what an element
// is worth, and the factor sort key.
struct Bf16Type {
  using Key = uint32_t;  // OrderedKeyBf16(x) << 16 | column
  static constexpr int kElementBytes = 2;
  static constexpr int kPerBlock = 8;          // elements in a 16-byte block
  static constexpr int kBlocksPerLane = 4;     // 32 lanes * 4 blocks * 8 = 1 024 elements
  static constexpr int kStagingBytes = 32 * kBlocksPerLane * 16;
  static constexpr int kMaxGroupsPerBlock = 4;
  static constexpr int kMinBlocks = 4;  // blocks of 4 warps per SM: caps registers at 128
  static constexpr uint32_t kInvalidWord = 0x7fc07fc0u;  // two NaNs: never pass, never a maximum

  // Element h of a block held as four words. Pre: 0 <= h < 8.
  __device__ __forceinline__ static float Element(const uint32_t (&block)[4], int h) {
    const uint32_t word = block[h >> 1];
    return __uint_as_float((h & 1) ? (word & 0xffff0000u) : (word << 16));
  }
  __device__ __forceinline__ static Key Composite(const uint8_t* element, uint32_t column) {
    const uint16_t bits = *reinterpret_cast<const uint16_t*>(element);
    return (uint32_t{OrderedKeyBf16(bits)} << 16) | column;
  }
  // The value a key ranks by (NaN already -inf). Post: exact inverse of the key's value part.
  __device__ __forceinline__ static float KeyValue(Key key) {
    const uint32_t ordered = key >> 16;
    const uint32_t bits = (ordered & 0x8000u) ? (ordered & 0x7fffu) : (~ordered & 0xffffu);
    return Bf16ToFloat(static_cast<uint16_t>(bits));
  }
  __device__ __forceinline__ static uint32_t KeyColumn(Key key) { return key & 0xffffu; }
  __device__ __forceinline__ static float Load(const uint8_t* element) {
    return Bf16ToFloat(*reinterpret_cast<const uint16_t*>(element));
  }
  __device__ __forceinline__ static float Round(float x) { return RoundToBf16(x); }
  __device__ __forceinline__ static void Store(uint8_t* element, float x) {
    *reinterpret_cast<uint16_t*>(element) = FloatToBf16(x);
  }
};

struct Float32Type {
  using Key = uint64_t;  // OrderedKey(x) << 32 | column
  static constexpr int kElementBytes = 4;
  static constexpr int kPerBlock = 4;
  static constexpr int kBlocksPerLane = 8;  // 32 lanes * 8 blocks * 4 = 1 024 elements
  static constexpr int kStagingBytes = 32 * kBlocksPerLane * 16;
  static constexpr int kMaxGroupsPerBlock = 2;
  static constexpr int kMinBlocks = 3;  // 168 registers: no spills (a cap of 128 spills, slower)
  static constexpr uint32_t kInvalidWord = 0x7fc00000u;

  __device__ __forceinline__ static float Element(const uint32_t (&block)[4], int h) {
    return __uint_as_float(block[h]);
  }
  __device__ __forceinline__ static Key Composite(const uint8_t* element, uint32_t column) {
    const float x = *reinterpret_cast<const float*>(element);
    return (uint64_t{OrderedKey(x)} << 32) | column;
  }
  __device__ __forceinline__ static float KeyValue(Key key) {
    return KeyToFloat(static_cast<uint32_t>(key >> 32));
  }
  __device__ __forceinline__ static uint32_t KeyColumn(Key key) {
    return static_cast<uint32_t>(key) & 0xffffu;
  }
  __device__ __forceinline__ static float Load(const uint8_t* element) {
    return *reinterpret_cast<const float*>(element);
  }
  __device__ __forceinline__ static float Round(float x) { return x; }
  __device__ __forceinline__ static void Store(uint8_t* element, float x) {
    *reinterpret_cast<float*>(element) = x;
  }
};


// Everything a launch needs to know about the shape; computed on the host (MakeParams).
struct KernelParams {
  const uint8_t* scores;
  uint8_t* values;
  uint32_t* slots;
  unsigned long long rows;
  uint32_t row_elements;
  int factors;
  uint32_t width[kMaxFactors];
  uint32_t offset[kMaxFactors];
  uint32_t kk;
  int list_size[kMaxFactors];  // kf[f] = min(k, w[f])
  int kept[kMaxFactors];       // n[f]: kept[0] = kf[0], kept[f] = min(k, kept[f-1] * kf[f])
  int candidates[kMaxFactors];      // staircase pairs of stage f (f >= 1)
  uint32_t table_offset[kMaxFactors];  // first entry of stage f in the block's pair table
  int corner_count[kMaxFactors];
  uint16_t corners[kMaxFactors][kMaxCorners];  // (a-1) << 8 | (b-1), a * b == kept[f]
  // Shared memory: the pair table, then one slice per warp.
  uint32_t table_bytes;
  uint32_t warp_bytes;
  int list_capacity;       // entries per factor list and per running list
  uint32_t lists_offset;   // factor lists: F * cap floats, then F * cap columns
  uint32_t running_offset; // running lists: 2 * cap floats, 2 * cap slots, 2 * cap rank tuples
  uint32_t histogram_offset;
  uint32_t union_offset;   // factor phase: staging, buffer, chosen; stages: candidates, chosen
  int warps_per_row;       // 1, or F (a block per row)
  int buffer_capacity;     // factor survivor keys
  int candidate_capacity;  // stage survivor keys (>= 512)
};

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
  uint32_t* scores;        // stage phase: survivors' score keys

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
  }
};

// Warp 0 writes each stage's staircase pairs (i << 8 | j), row by row, into the block's table.
__device__ void BuildPairTables(const KernelParams& p, uint16_t* table) {
  if (threadIdx.x >= 32) return;
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
  }
}

// Loads block `b` of a chunk (bytes [b*16, b*16+16) of the aligned window that starts 16-byte
// aligned at `window`), marking bytes outside [begin, end) invalid. Pre: begin, end and 16 * b are
// offsets in the window; elements are aligned to their size.
template <class T>
__device__ __noinline__ uint4 LoadPartialBlock(const uint8_t* window, int first, int begin, int end);

template <class T>
__device__ __forceinline__ void LoadBlock(const uint8_t* window, int b, int begin, int end,
                                          uint32_t (&block)[4]) {
  const int first = b * 16;
  const uint4 v = first >= begin && first + 16 <= end
                      ? __ldg(reinterpret_cast<const uint4*>(window + first))
                      : LoadPartialBlock<T>(window, first, begin, end);
  block[0] = v.x;
  block[1] = v.y;
  block[2] = v.z;
  block[3] = v.w;
}

// The block at byte `first` of the window with the elements outside [begin, end) invalid (rare:
// the first and last block of a chunk that does not start or end on 16 bytes).
template <class T>
__device__ __noinline__ uint4 LoadPartialBlock(const uint8_t* window, int first, int begin, int end) {
  uint32_t block[4];
#pragma unroll
  for (int w = 0; w < 4; ++w) block[w] = T::kInvalidWord;
  if constexpr (T::kElementBytes == 4) {
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const int at = first + 4 * h;
      if (at >= begin && at < end) block[h] = __ldg(reinterpret_cast<const uint32_t*>(window + at));
    }
  } else {
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      const int at = first + 2 * h;
      if (at >= begin && at < end) {
        const uint32_t bits = __ldg(reinterpret_cast<const unsigned short*>(window + at));
        const int shift = (h & 1) * 16;
        block[h >> 1] = (block[h >> 1] & ~(0xffffu << shift)) | (bits << shift);
      }
    }
  }
  return make_uint4(block[0], block[1], block[2], block[3]);
}

// The valid elements of block `b` as bits [0, kPerBlock): elements whose bytes lie in
// [begin, end).
template <class T>
__device__ __forceinline__ uint32_t ValidBits(int b, int begin, int end) {
  const int first = b * 16;
  const int low = min(max((begin - first) / T::kElementBytes, 0), T::kPerBlock);
  const int high = min(max((end - first) / T::kElementBytes, 0), T::kPerBlock);
  if (high <= low) return 0;
  return ((1u << high) - 1u) & ~((1u << low) - 1u);
}

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
template <class T>
__device__ void SelectFactor(const uint8_t* factor, uint32_t width, int kf, const KernelParams& p,
                             const WarpMemory<T>& m, float* list_value, uint32_t* list_column) {
  using Key = typename T::Key;
  constexpr int kQ = T::kBlocksPerLane;
  constexpr int kE = T::kPerBlock;
  constexpr int kBytes = T::kElementBytes;
  const int lane = LaneId();
  int count = 0;                     // keys in m.buffer
  float threshold = -INFINITY;       // survivors: value >= threshold; -inf: every element
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
        LoadBlock<T>(window, b, begin, end, data[q]);
      } else {
#pragma unroll
        for (int w = 0; w < 4; ++w) data[q][w] = T::kInvalidWord;
      }
      *reinterpret_cast<uint4*>(m.staging + 16 * b) =
          make_uint4(data[q][0], data[q][1], data[q][2], data[q][3]);
    }

    // A threshold from the group maxima of the first chunk, when it is worth one.
    if (count == 0 && threshold == -INFINITY && static_cast<int>(length) > 2 * kf) {
      int per_block = 1;
      while (per_block < T::kMaxGroupsPerBlock && blocks * per_block < 2 * kf) per_block *= 2;
      const int groups = blocks * per_block;
      if (groups >= kf) {
        if (per_block == 1) {
          GroupMaxima<T, 1>(data, lane, blocks, m.maxima);
        } else if (per_block == 2) {
          GroupMaxima<T, 2>(data, lane, blocks, m.maxima);
        } else {
          GroupMaxima<T, T::kMaxGroupsPerBlock>(data, lane, blocks, m.maxima);
        }
        __syncwarp();
        uint32_t kth;
        if (groups <= 128) {
          SelectTopSorted<uint32_t>(m.maxima, groups, kf, nullptr, nullptr);
          kth = m.maxima[kf - 1];
          __syncwarp();
        } else {
          kth = WarpKthLargest(m.maxima, groups, kf, m.histogram);
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
  for (int r = lane; r < kf; r += 32) {
    const Key key = m.buffer[r];
    list_value[r] = T::KeyValue(key);
    list_column[r] = T::KeyColumn(key);
  }
  __syncwarp();
}

// A stage candidate's distinct sort key: score key, then i + j, then i (all descending).
__device__ __forceinline__ uint64_t CandidateKey(uint32_t score_key, int i, int j) {
  return (uint64_t{score_key} << 32) | (static_cast<uint64_t>(i + j) << 8) | static_cast<uint64_t>(i);
}

// Sorts keys[0..count) descending in registers and keeps the first `keep`. Pre: count <= 512.
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

// Stage f: pairs the running list (run_value, kept[f-1] entries) with factor f's list and returns
// the kept[f] best candidate keys (sorted descending when `ordered`, else in any order).
// Fast path: find the kept-th best 32-bit score key (a sort of up to 256 score keys, else a radix
// count, whose clustered shared-memory atomics make it pay only for large sets); the candidates above it all belong, and of those exactly at it the first by (i+j, i)
// are ranked by counting when no more than 32 tie. Otherwise the full 64-bit keys are selected.
template <class T>
__device__ const uint64_t* SelectStage(const KernelParams& p, const WarpMemory<T>& m,
                                       const uint16_t* table, int f, const float* run_value,
                                       bool ordered) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  const float* factor_value = m.list_value + f * p.list_capacity;
  uint32_t bound = 0;
  for (int c = lane; c < p.corner_count[f]; c += 32) {
    const int code = p.corners[f][c];
    bound = max(bound, OrderedKey(run_value[code >> 8] + factor_value[code & 255]));
  }
  bound = WarpMax(bound);
  const uint16_t* pairs = table + p.table_offset[f];
  const int total = p.candidates[f];
  int count = 0;
  for (int base = 0; base < total; base += 32) {
    const int c = base + lane;
    bool pass = false;
    uint64_t key = 0;
    uint32_t score_key = 0;
    if (c < total) {
      const int code = pairs[c];
      const int i = code >> 8;
      const int j = code & 255;
      score_key = OrderedKey(run_value[i] + factor_value[j]);
      pass = score_key >= bound;
      key = CandidateKey(score_key, i, j);
    }
    const unsigned passing = __ballot_sync(kFullMask, pass);
    if (pass) {
      const int at = count + __popc(passing & lanes_below);
      m.candidates[at] = key;
      m.scores[at] = score_key;
    }
    count += __popc(passing);
  }
  __syncwarp();
  const int kept = p.kept[f];
  {
    uint32_t cut;
    if (count <= 256) {
      SortUpTo512(m.scores, count, kept);
      cut = m.scores[kept - 1];
    } else {
      cut = WarpKthLargest(m.scores, count, kept, m.histogram);
    }
    int above = 0;
    int at_cut = 0;
    for (int base = 0; base < count; base += 32) {
      const int c = base + lane;
      const uint32_t score_key = c < count ? static_cast<uint32_t>(m.candidates[c] >> 32) : 0u;
      above += __popc(__ballot_sync(kFullMask, c < count && score_key > cut));
      at_cut += __popc(__ballot_sync(kFullMask, c < count && score_key == cut));
    }
    // `need` of the `at_cut` candidates scoring exactly `cut` belong: all of them when no tie
    // straddles the cut, else those first by (i + j, i), ranked by counting when they are few.
    const int need = kept - above;
    if (need == at_cut || at_cut <= 32) {
      uint64_t* selected = m.candidates_chosen;
      // The score keys are read (cut); their room holds the ties.
      uint64_t* tied = reinterpret_cast<uint64_t*>(m.scores);
      int taken = 0;
      int ties = 0;
      for (int base = 0; base < count; base += 32) {
        const int c = base + lane;
        const uint64_t key = c < count ? m.candidates[c] : 0u;
        const uint32_t score_key = static_cast<uint32_t>(key >> 32);
        const bool in = c < count && (score_key > cut || (need == at_cut && score_key == cut));
        const bool tie = c < count && need != at_cut && score_key == cut;
        const unsigned chosen = __ballot_sync(kFullMask, in);
        const unsigned tie_mask = __ballot_sync(kFullMask, tie);
        if (in) selected[taken + __popc(chosen & lanes_below)] = key;
        if (tie) tied[ties + __popc(tie_mask & lanes_below)] = key;
        taken += __popc(chosen);
        ties += __popc(tie_mask);
      }
      __syncwarp();
      if (need != at_cut) {
        // Lane l ranks tie l among the ties (keys distinct); the first `need` join.
        bool join = false;
        uint64_t mine = 0;
        if (lane < ties) {
          mine = tied[lane];
          int rank = 0;
          for (int t = 0; t < ties; ++t) rank += tied[t] > mine ? 1 : 0;
          join = rank < need;
        }
        const unsigned joining = __ballot_sync(kFullMask, join);
        if (join) selected[taken + __popc(joining & lanes_below)] = mine;
        __syncwarp();
      }
      if (ordered) SortUpTo512(selected, kept, kept);
      return selected;
    }
  }
  SelectTopSorted<uint64_t>(m.candidates, count, kept, m.candidates_chosen, m.histogram);
  return m.candidates;
}

__device__ __forceinline__ int PairRow(uint64_t key) { return static_cast<int>(key & 0xffu); }
__device__ __forceinline__ int PairColumn(uint64_t key) {
  return static_cast<int>((key >> 8) & 0x1ffu) - PairRow(key);
}

// Ranks factors first, first + step, ... of one row into m's lists.
template <class T>
__device__ void RankFactors(const KernelParams& p, const WarpMemory<T>& m, const uint8_t* scores,
                            int first, int step) {
  const int cap = p.list_capacity;
  for (int f = first; f < p.factors; f += step) {
    SelectFactor<T>(scores + size_t{p.offset[f]} * T::kElementBytes, p.width[f], p.list_size[f], p,
                    m, m.list_value + f * cap, m.list_column + f * cap);
  }
}

// The pairing stages and the output of one row, from the ranked factor lists in m. Running-list
// entries carry their slot so far and their factor ranks (8 bits each), so that the output needs
// neither a division nor a reload of the row: a value is recomputed from the lists' values, and
// only a -inf there (a NaN or -inf score) sends it back to the raw element.
template <class T>
__device__ void PairAndWrite(const KernelParams& p, const WarpMemory<T>& m, const uint16_t* table,
                             const uint8_t* scores, unsigned long long row) {
  constexpr int kBytes = T::kElementBytes;
  const int lane = LaneId();
  const int cap = p.list_capacity;
  for (int r = lane; r < p.list_size[0]; r += 32) m.running_ranks[r] = static_cast<uint32_t>(r);
  __syncwarp();
  const float* run_value = m.list_value;
  const uint32_t* run_slot = m.list_column;
  const uint32_t* run_ranks = m.running_ranks;
  int next = 1;
  const int last = p.factors - 1;
  uint64_t* order = nullptr;
  for (int f = 1; f <= last; ++f) {
    const uint64_t* selected = SelectStage<T>(p, m, table, f, run_value, f < last);
    const float* factor_value = m.list_value + f * cap;
    const uint32_t* factor_column = m.list_column + f * cap;
    const int kept = p.kept[f];
    const uint32_t width = p.width[f];
    if (f < last) {
      float* next_value = m.running_value + next * cap;
      uint32_t* next_slot = m.running_slot + next * cap;
      uint32_t* next_ranks = m.running_ranks + next * cap;
      for (int r = lane; r < kept; r += 32) {
        const uint64_t key = selected[r];
        const int i = PairRow(key);
        const int j = PairColumn(key);
        next_value[r] = T::Round(run_value[i] + factor_value[j]);
        next_slot[r] = run_slot[i] * width + factor_column[j];
        next_ranks[r] = run_ranks[i] | (static_cast<uint32_t>(j) << (8 * f));
      }
      __syncwarp();
      run_value = next_value;
      run_slot = next_slot;
      run_ranks = next_ranks;
      next ^= 1;
    } else {
      // Final slots, ascending: sort (~slot << 32 | ranks) descending, in place (each lane
      // rewrites only the entries it read).
      order = const_cast<uint64_t*>(selected);
      for (int r = lane; r < kept; r += 32) {
        const uint64_t key = selected[r];
        const int i = PairRow(key);
        const int j = PairColumn(key);
        const uint32_t slot = run_slot[i] * width + factor_column[j];
        const uint32_t ranks = run_ranks[i] | (static_cast<uint32_t>(j) << (8 * f));
        order[r] = (static_cast<uint64_t>(~slot) << 32) | ranks;
      }
      __syncwarp();
    }
  }
  const int kk = static_cast<int>(p.kk);
  SortUpTo512(order, kk, kk);
  uint8_t* values = p.values + row * p.kk * kBytes;
  uint32_t* slots = p.slots + row * p.kk;
  for (int r = lane; r < kk; r += 32) {
    const uint64_t key = order[r];
    const uint32_t ranks = static_cast<uint32_t>(key);
    float x[kMaxFactors];
    bool exact = true;  // every list value is the raw element (no -inf, hence no NaN behind it)
#pragma unroll
    for (int f = 0; f < kMaxFactors; ++f) {
      if (f < p.factors) {
        x[f] = m.list_value[f * cap + ((ranks >> (8 * f)) & 255u)];
        exact = exact && x[f] != -INFINITY;
      }
    }
    if (!exact) {
#pragma unroll
      for (int f = 0; f < kMaxFactors; ++f) {
        if (f < p.factors) {
          const uint32_t column = m.list_column[f * cap + ((ranks >> (8 * f)) & 255u)];
          x[f] = T::Load(scores + size_t{p.offset[f] + column} * kBytes);
        }
      }
    }
    float v = x[0] + x[1];
#pragma unroll
    for (int f = 2; f < kMaxFactors; ++f) {
      if (f < p.factors) v = T::Round(v) + x[f];
    }
    T::Store(values + size_t(r) * kBytes, T::Round(v));
    slots[r] = ~static_cast<uint32_t>(key >> 32);
  }
  __syncwarp();
}

// p.warps_per_row == 1: each warp computes whole rows in a grid-stride loop.
// p.warps_per_row == F: a block of F warps computes one row at a time: warp f ranks factor f into
// warp 0's lists, then warp 0 pairs and writes (lower latency for small batches).
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, T::kMinBlocks)
    TopKKernel(const __grid_constant__ KernelParams p) {
  extern __shared__ __align__(16) uint8_t shared[];
  uint16_t* table = reinterpret_cast<uint16_t*>(shared);
  BuildPairTables(p, table);
  __syncthreads();
  const unsigned warp = threadIdx.x >> 5;
  const unsigned warps = blockDim.x >> 5;
  constexpr int kBytes = T::kElementBytes;
  WarpMemory<T> m(p, shared + p.table_bytes + warp * p.warp_bytes);
  // One code path for both modes (the kernel is sensitive to its code size).
  const bool block_per_row = p.warps_per_row > 1;
  unsigned long long row = block_per_row ? blockIdx.x : static_cast<unsigned long long>(blockIdx.x) * warps + warp;
  const unsigned long long row_step = block_per_row ? gridDim.x : static_cast<unsigned long long>(gridDim.x) * warps;
  const int first_factor = block_per_row ? static_cast<int>(warp) : 0;
  const int factor_step = block_per_row ? static_cast<int>(warps) : 1;
  if (block_per_row) {
    const WarpMemory<T> first(p, shared + p.table_bytes);
    m.list_value = first.list_value;
    m.list_column = first.list_column;
  }
  for (; row < p.rows; row += row_step) {
    const uint8_t* scores = p.scores + row * p.row_elements * kBytes;
    RankFactors<T>(p, m, scores, first_factor, factor_step);
    if (block_per_row) __syncthreads();
    if (!block_per_row || warp == 0) PairAndWrite<T>(p, m, table, scores, row);
    if (block_per_row) __syncthreads();
  }
}

uint32_t RoundUp16(uint64_t bytes) { return static_cast<uint32_t>((bytes + 15) / 16 * 16); }

// The launch's parameters and shared-memory layout for a validated problem.
KernelParams MakeParams(const Problem& problem) {
  KernelParams p{};
  p.factors = problem.factors;
  p.row_elements = problem.row_width();
  p.kk = problem.kk();
  const int k = static_cast<int>(problem.k);
  for (int f = 0; f < problem.factors; ++f) {
    p.width[f] = problem.widths[f];
    p.offset[f] = problem.offset(f);
    const uint64_t w = problem.widths[f];
    p.list_size[f] = static_cast<int>(std::min<uint64_t>(k, w));
  }
  p.kept[0] = p.list_size[0];
  uint32_t table_entries = 0;
  int max_candidates = 0;
  for (int f = 1; f < problem.factors; ++f) {
    const int previous = p.kept[f - 1];
    const int factor = p.list_size[f];
    const int kept = static_cast<int>(std::min<uint64_t>(k, uint64_t(previous) * factor));
    p.kept[f] = kept;
    const int rows = std::min(previous, kept);
    int candidates = 0;
    for (int i = 0; i < rows; ++i) candidates += std::min(factor, kept / (i + 1));
    p.candidates[f] = candidates;
    p.table_offset[f] = table_entries;
    table_entries += static_cast<uint32_t>((candidates + 7) / 8 * 8);
    max_candidates = std::max(max_candidates, candidates);
    int corners = 0;
    for (int a = 1; a <= previous && corners < kMaxCorners; ++a) {
      if (kept % a != 0) continue;
      const int b = kept / a;
      if (b <= factor) p.corners[f][corners++] = static_cast<uint16_t>(((a - 1) << 8) | (b - 1));
    }
    p.corner_count[f] = corners;
  }
  const int cap = std::max(32, (k + 31) / 32 * 32);
  // Sorts read whole power-of-two groups of 32 * E keys: keep every sorted array that long.
  int sort_span = 32;
  while (sort_span < k) sort_span *= 2;
  p.list_capacity = std::max(cap, sort_span);
  p.table_bytes = RoundUp16(uint64_t{table_entries} * 2);
  const bool f32 = problem.dtype == DType::kFloat32;
  const uint32_t key_bytes = f32 ? 8 : 4;
  const uint32_t staging = f32 ? 32 * 8 * 16 : 32 * 4 * 16;
  p.buffer_capacity = kChunkElements + p.list_capacity;
  p.candidate_capacity = (std::max(kMaxStageKeys, max_candidates) + 7) / 8 * 8;
  const int list_cap = p.list_capacity;
  uint32_t offset = 0;
  p.lists_offset = offset;
  offset += RoundUp16(uint64_t(problem.factors) * list_cap * 8);
  p.running_offset = offset;
  offset += RoundUp16(uint64_t(2) * list_cap * 12);
  p.histogram_offset = offset;
  offset += 256 * 4;
  p.union_offset = offset;
  const uint64_t factor_phase =
      staging + uint64_t(p.buffer_capacity + list_cap) * key_bytes;
  const uint64_t stage_phase =
      uint64_t(p.candidate_capacity + list_cap) * 8 + uint64_t(p.candidate_capacity) * 4;
  offset += RoundUp16(std::max(factor_phase, stage_phase));
  p.warp_bytes = offset;
  return p;
}

template <class T>
const void* KernelOf() {
  return reinterpret_cast<const void*>(&TopKKernel<T>);
}

const void* KernelFor(DType dtype) {
  return dtype == DType::kFloat32 ? KernelOf<Float32Type>() : KernelOf<Bf16Type>();
}

std::string CudaMessage(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
         ")";
}

}  // namespace

Result<TopKLauncher> TopKLauncher::Create(int device) {
  const std::string where = "cuda device " + std::to_string(device);
  cudaError_t error = cudaSetDevice(device);
  if (error != cudaSuccess) return Error{"device", CudaMessage(where.c_str(), error)};
  cudaDeviceProp properties{};
  error = cudaGetDeviceProperties(&properties, device);
  if (error != cudaSuccess) return Error{"device", CudaMessage(where.c_str(), error)};
  TopKLauncher launcher;
  launcher.device_ = device;
  launcher.multiprocessors_ = properties.multiProcessorCount;
  launcher.shared_per_multiprocessor_ = properties.sharedMemPerMultiprocessor;
  launcher.shared_per_block_ = properties.sharedMemPerBlockOptin;
  launcher.registers_per_multiprocessor_ = properties.regsPerMultiprocessor;
  for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    const void* kernel = KernelFor(dtype);
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(properties.sharedMemPerBlockOptin));
    if (error != cudaSuccess) {
      return Error{"device", CudaMessage((where + ": preparing the top-k kernel").c_str(), error)};
    }
    cudaFuncAttributes attributes{};
    error = cudaFuncGetAttributes(&attributes, kernel);
    if (error != cudaSuccess) {
      return Error{"device", CudaMessage((where + ": reading the top-k kernel").c_str(), error)};
    }
    launcher.kernel_registers_[static_cast<int>(dtype)] = attributes.numRegs;
  }
  return launcher;
}

cudaError_t TopKLauncher::Launch(const Problem& problem, const void* scores, size_t rows,
                                 void* values, uint32_t* slots, cudaStream_t stream) const {
  if (rows == 0) return cudaSuccess;
  KernelParams p = MakeParams(problem);
  p.scores = static_cast<const uint8_t*>(scores);
  p.values = static_cast<uint8_t*>(values);
  p.slots = slots;
  p.rows = rows;
  // Few rows: a block of F warps per row, one factor per warp, spread over the multiprocessors
  // (latency). Many: four warps a block, a row per warp, in a grid-stride loop sized to what fits
  // on the device at once (throughput).
  const bool block_per_row = rows <= static_cast<size_t>(multiprocessors_) * 2;
  const int warps = block_per_row ? problem.factors : kWarpsPerBlock;
  p.warps_per_row = block_per_row ? problem.factors : 1;
  const size_t shared = size_t{p.table_bytes} + static_cast<size_t>(warps) * p.warp_bytes;
  if (shared > shared_per_block_) return cudaErrorInvalidConfiguration;
  const void* kernel = KernelFor(problem.dtype);
  // Blocks resident per multiprocessor, from the limits that bind (computed here rather than by
  // the occupancy API, which costs microseconds per call).
  const int registers = kernel_registers_[static_cast<int>(problem.dtype)];
  const int warp_registers = (registers * 32 + 255) / 256 * 256;
  const int by_registers = registers_per_multiprocessor_ / std::max(1, warp_registers * warps);
  const int by_shared = static_cast<int>(shared_per_multiprocessor_ / (shared + 1024));
  const int by_threads = 2048 / (32 * warps);
  const int resident = std::max(1, std::min({by_registers, by_shared, by_threads, 32}));
  const size_t wanted = block_per_row ? rows : (rows + warps - 1) / warps;
  const size_t fit = size_t{static_cast<size_t>(resident)} * multiprocessors_;
  const unsigned blocks = static_cast<unsigned>(std::min(wanted, fit));
  void* arguments[] = {&p};
  return cudaLaunchKernel(kernel, dim3(blocks), dim3(32 * warps), arguments, shared, stream);
}

}  // namespace pk::cuda
