// The CUDA product-key top-k (../../shared/SPEC.md), bit for bit the CPU implementation's result.
//
// One warp computes one row; a block's warps take rows in a grid-stride loop, and all scratch
// lives in the warp's slice of shared memory. Small batches instead get a block of F warps per row
// (warp f ranks factor f, then warp 0 pairs and writes), for latency, from a kernel instance of
// its own in which a spare warp builds the pair table (and copies the stage bounds' corners beside
// it, having touched the parameters for the others) while the others load the row; that instance
// has no register cap and keeps its rare stage form out of line, off the lone pairing warp's code
// path. Factors: when every width is at most 64, one segmented register sort ranks all of them at
// once (factor f's columns are segment f of the warp's keys); a warp per row, such rows run in a
// kernel instance of their own, which holds no other factor path, needs fewer registers and so
// keeps more warps resident. Two bfloat16 factors of width at most 256 (a warp per row): a kernel
// instance of its own holds both factors in registers, a block of each a lane, and runs
// SelectFactor's two sorts (group maxima, survivors) for both factors at once, as the two segments
// of one register sort; where k >= 64 and a factor is wider than 128 it instead sorts all elements
// of both factors as two segments of 256 keys (no threshold, no survivors), and copies the warp's
// next row into shared memory (cp.async) while it ranks this one.
// Bfloat16 rows with k > 32 that take the staging path below (a warp per row), where a room of
// one chunk a warp costs no resident block, run in another instance of their own, the streamed
// kernel: it copies the first chunk of the next factor (or of the warp's next row) into the room
// (cp.async) while it ranks this one, so that a row's loads wait on shared memory, not DRAM, and
// its maxima bisection (below) starts between the lanes' j-th largest maxima and stops at the
// first key that kf to kf + kf / 8 maxima reach.
// Otherwise the warp streams each factor through a shared staging buffer in chunks of 1 024
// elements (16-byte loads, any element alignment). On the first chunk it takes the maximum of each
// small group of elements (2 to 8 elements of one 16-byte block, about 2 kf groups) and the kf-th
// largest maximum (bfloat16: a bisection on the 16-bit key, one warp count a step; float32: a
// register sort, or a radix count for large sets): kf groups reach it, so the factor's kf best
// elements do too, and only about 1.2 kf elements pass. Each lane marks its passing elements in a
// bit mask, a warp scan places them, and they become distinct composite keys (ordered value << 16 |
// column for bfloat16, << 32 for float32) in a survivor buffer; the survivors' kf best, sorted, are
// the factor's ranked list. Stage f bounds its n-th best score from below by the worst corner of
// the hyperbolic staircase {(i+1)(j+1) <= m} that holds at least n candidates (or the best far
// corner of a full rectangle of n pairs): the staircase follows the level lines of a sum of two
// sorted lists, so only about 1.3 n candidates reach the bound. For bfloat16 and n <= 128 one sort
// of those by (score key, i + j, i) gives the n best in order; the key is 32 bits when the
// survivors' distances above the bound, stripped of the trailing zero bits they share, fit beside
// the tie bits (bfloat16 sums nearly always do), else 64. Other stages find the n-th best 32-bit
// score key (a sort, or a radix count), take every candidate above it and rank the few tied on it
// by (i + j, i). A row whose survivors overflow their room first raises the bound by 8-way
// searches of the score key (a count over all candidates each); only rows of ties still too many
// are selected by counting over all candidates. Kept pairs travel as codes i << 8 | j; running
// entries carry their slot and factor ranks, so the last stage's slots are sorted (32-bit keys
// slot << bits(kk - 1) | index where slots allow) and the values recomputed from the lists (from
// the raw row only behind a -inf). Where only a k-th largest key is wanted (a cut stage's cut, the
// paired factors' thresholds) and k is half a power-of-two block, the block's halves are sorted
// and one merge step moves the k largest into one half, whose smallest key is the answer: the
// full sort's last merge is skipped. Sorts are bitonic networks whose comparators all put the larger
// key first (no direction inside a lane); lanes exchange keys by shuffles up to 8 bytes a lane,
// else through bank-conflict-free shared vectors; each sort size is compiled once out of line,
// since the kernel is instruction-bound and its code size shows up as instruction-fetch stalls.
// NOTES.md has the numbers.
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
constexpr int kStageCapacity = 512;   // stage survivors held in shared memory (sorts go this far)
constexpr int kMaxRankedTies = 32;    // ties straddling a stage's cut ranked by counting, a lane each

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
  static constexpr int kMoreBlocks = 6;  // the high-occupancy variant: 80 registers
  static constexpr int kSmallBlocks = 5;  // the small-factor kernel: 96 registers
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
  static constexpr int kMoreBlocks = 4;  // the high-occupancy variant: 128 registers
  static constexpr int kSmallBlocks = 8;  // the small-factor kernel: 64 registers
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


// Where a warp's cycles go, for profiling builds (PK_PHASE_TIMING): each phase's clock cycles,
// summed over the warps of a launch into kPhaseCycles. A no-op otherwise.
enum Phase : int {
  kPhaseFactors,   // ranking the factors (including the row's loads)
  kPhaseStage1,    // stage selections, one per stage
  kPhaseStage2,
  kPhaseStage3,
  kPhaseRunning,   // building the running lists between stages
  kPhaseSlotSort,  // the final pairs' slot keys and their sort
  kPhaseOutput,    // values and slots written
  kPhaseWait,      // block-per-row mode: waiting at the block's barriers
  kPhaseCount
};
#if defined(PK_PHASE_TIMING)
__device__ unsigned long long kPhaseCycles[kPhaseCount];
struct PhaseClock {
  long long last;
  unsigned long long cycles[kPhaseCount];
  __device__ PhaseClock() {
#if defined(__CUDA_ARCH__)
    last = clock64();
#pragma unroll
    for (int q = 0; q < kPhaseCount; ++q) cycles[q] = 0;
#endif
  }
  __device__ __forceinline__ void Mark(int phase) {
    const long long now = clock64();
#pragma unroll
    for (int q = 0; q < kPhaseCount; ++q) {
      if (q == phase) cycles[q] += static_cast<unsigned long long>(now - last);
    }
    last = now;
  }
  __device__ __forceinline__ void Flush() {
    if (LaneId() == 0) {
      for (int q = 0; q < kPhaseCount; ++q) atomicAdd(&kPhaseCycles[q], cycles[q]);
    }
  }
};
#else
struct PhaseClock {
  __device__ __forceinline__ void Mark(int) {}
  __device__ __forceinline__ void Flush() {}
};
#endif

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
  // Lower bounds on stage f's kept-th best score: full rectangles a x b == kept (the best of
  // their far corners), and one hyperbolic staircase {(i+1)(j+1) <= m} of at least kept pairs
  // (the worst of its corners). Each corner is i << 8 | j.
  int corner_count[kMaxFactors];
  uint16_t corners[kMaxFactors][kMaxCorners];
  int stair_count[kMaxFactors];
  uint16_t stair[kMaxFactors][kMaxCorners];
  // Stage f's order key below the score: (i + j) << row_bits | i, tie_bits wide in all.
  int row_bits[kMaxFactors];
  int tie_bits[kMaxFactors];
  int lean[kMaxFactors];       // stage f ranks its bounded candidates with one sort
  int slot_index_bits;         // bits(kk - 1)
  int slot_key32;              // slot << slot_index_bits | index fits 31 bits
  int small_segment;           // > 0: all factors ranked by one register sort, segments this long
  int small_segment_bits;      // log2(small_segment)
  int small_per_lane;          // keys a lane holds in that sort
  int bisect_maxima;           // bfloat16 threshold from the group maxima by bisection: 0 never,
                               // 1 where cheaper than a sort, 2 always
  // Shared memory: the pair table, then one slice per warp.
  uint32_t table_bytes;
  uint32_t warp_bytes;
  int list_capacity;       // entries per factor list and per running list
  uint32_t lists_offset;   // factor lists: F * cap floats, then F * cap columns
  uint32_t running_offset; // running lists (F >= 3): 2 * cap floats, slots and rank tuples
  uint32_t histogram_offset;
  uint32_t union_offset;   // factor phase: staging, buffer, chosen; stages: candidates, chosen,
                           // scores (then pair codes), survivor codes
  int warps_per_row;       // 1, or F (a block per row)
  int buffer_capacity;     // factor survivor keys
  int candidate_capacity;  // stage survivors kept in shared memory (kStageCapacity)
  int table_warp;          // the latency kernel's pair-table builder (block-per-row: a spare warp)
  int paired_factors;      // two bfloat16 factors of width <= 256 ranked together, a warp per
                           // row (RankPairedFactors)
  // Selections by two sorted halves (WarpTopHalf) instead of a full sort. Last, so that adding
  // them moved no other field (NOTES.md, v12: a field in the middle moved the float32 kernels'
  // registers). half_select[f]: CutStage's cut (the kept-th score key) where at most 2 kept
  // candidates reach the bound: E = kept / 16 for kept a power of two from 16 to 128, else 0.
  // half_select_maxima: RankPairedFactors' thresholds where kf is half the maxima's segment.
  int half_select[kMaxFactors];
  int half_select_maxima;
  // The latency kernel only (last, as above): where its table's warp copies the stage bounds'
  // corners (bytes into the block's shared memory, after the pair table).
  uint32_t corner_offset;
  // The paired kernel ranks both factors by one sort of all their elements (SortPairedFactors)
  // instead of thresholds and a sort of the survivors (RankPairedFactors).
  int paired_sort;
  // With paired_sort: bytes a warp for the prefetch of its next row (0: none), after the slices.
  // In the streamed kernel: bytes a warp for the prefetch of the next factor's first chunk.
  uint32_t prefetch_bytes;
  // The streamed kernel only: its maxima bisection starts from the lanes' j-th maxima and stops
  // early (KthGroupMaximum16, kNarrow).
  int narrow_maxima;
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

// Emulation builds: the pair table is read-only once its warp has built it (see
// EmulatorDeclareRules). No code on the GPU.
__device__ __forceinline__ void EmulatorDeclareTable(const KernelParams& p, const uint8_t* table) {
#if defined(PK_CUDA_EMULATION)
  __syncwarp();
  if (LaneId() == 0) pk::emu::DeclareReadOnly(table, p.table_bytes);
#else
  (void)p, (void)table;
#endif
}

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
// the H200 this took about 0.25 us off the latency kernel's 1-64-row launches, NOTES.md v14-c).
// Returns the words' XOR, for the caller to consume (an unused load is removed).
__device__ __forceinline__ uint32_t TouchParameters(const KernelParams& p) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(&p);
  constexpr int kWords = static_cast<int>(sizeof(KernelParams) / 4);
  uint32_t touched = 0;
  for (int w = LaneId() * 16; w < kWords; w += 32 * 16) touched ^= words[w];
  return touched;
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
                      ? __ldg(AsVectors(window + first))
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

// The 16-bit key (SPEC.md's key of a bfloat16 value, high half) of the kf-th largest maximum of
// the groups of kPerBlock / kGroups elements of the lane's blocks b < blocks: a bisection on the
// key, each step one warp-wide count (no sort, no shared memory). A group of invalid (NaN) elements
// has the key of -inf. Pre: at least kf groups. Post: at least kf groups reach the result.
// kNarrow (the streamed kernel, a lane's four maxima, narrow != 0): the search starts between the
// smallest and the largest over the lanes of each lane's j-th largest maximum, j = (kf - 1) / 32
// (at least 32 (j + 1) >= kf maxima reach the smallest, at most 32 j < kf exceed the largest),
// and stops at the first key that at least kf and at most kf + kf / 8 maxima reach: any key that
// at least kf maxima reach is a valid threshold, and a few more survivors cost nothing while they
// fit the survivor sort.
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

// The first chunk of a factor (SelectFactor's) that starts at `factor`: its bytes [begin, end) in
// the aligned window, returned.
template <class T>
__device__ __forceinline__ const uint8_t* FirstChunk(const uint8_t* factor, uint32_t width,
                                                     int& begin, int& end) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(factor);
  begin = static_cast<int>(address & 15u);
  const uint32_t length =
      min(width, static_cast<uint32_t>((T::kStagingBytes - begin) / T::kElementBytes));
  end = begin + static_cast<int>(length) * T::kElementBytes;
  return reinterpret_cast<const uint8_t*>(address - static_cast<uintptr_t>(begin));
}

// Whether block b of a window lies wholly inside [begin, end).
__device__ __forceinline__ bool FullBlock(int b, int begin, int end) {
  return b * 16 >= begin && b * 16 + 16 <= end;
}

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

// A block copied into shared memory (CopyToSharedAsync, then WaitCopiesToShared), as four words.
__device__ __forceinline__ void LoadPrefetchedBlock(const uint8_t* at, uint32_t (&data)[4]) {
  const uint4 v = *AsVectors(at);
  data[0] = v.x;
  data[1] = v.y;
  data[2] = v.z;
  data[3] = v.w;
}

// Ranks factor f: its `kf` best columns by (key desc, column desc), written as values (NaN ->
// -inf) and columns to list_value / list_column. factor: the factor's first element (global).
// kStreamed (the streamed kernel; p.prefetch_bytes > 0: a room of one chunk a warp, after all the
// slices): once the first chunk is in registers, the full blocks of the first chunk of `next`
// (width `next_width`; nullptr: none) are copied into the room asynchronously, each lane the blocks
// it loads itself, so that the next factor (of this row, or of the warp's next row) waits on
// shared memory, not DRAM; `prefetched` says that the previous call did so for this factor.
template <class T, bool kStreamed = false>
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
                per_block == 1   ? KthGroupMaximum16<T, 1, kStreamed>(
                                       data, lane, blocks, kf, kStreamed ? p.narrow_maxima : 0)
                : per_block == 2 ? KthGroupMaximum16<T, 2>(data, lane, blocks, kf)
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
  for (int r = lane; r < kf; r += 32) {
    const Key key = m.buffer[r];
    list_value[r] = T::KeyValue(key);
    list_column[r] = T::KeyColumn(key);
  }
  __syncwarp();
}

// Ranks every factor of one row with one segmented register sort (all widths <= 64): factor f's
// columns are the keys f * S .. f * S + w[f] - 1 of the warp's 32 * E (S = p.small_segment, a power
// of two >= every width), padded with key 0, so that sorting the segments of S ranks all factors
// at once, in registers. Pre: F * S <= 32 * E; exchange holds 32 * E keys (warp-private). The
// memory comes as pointers: a reference to the kernel's WarpMemory would put it in local memory.
template <class T, int E>
__device__ __noinline__ void RankSmallFactors(const KernelParams& p, float* list_value,
                                              uint32_t* list_column, uint8_t* exchange,
                                              const uint8_t* scores) {
  using Key = typename T::Key;
  const int lane = LaneId();
  const int shift = p.small_segment_bits;
  const int segment_mask = p.small_segment - 1;
  // Factor f's fields by selects, not by indexing the parameters with a lane-dependent f (which
  // would copy them to local memory).
  auto pick = [&](const auto& field, int f) {
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
    keys[e] = f < p.factors && c < static_cast<int>(pick(p.width, f))
                  ? T::Composite(scores + size_t{pick(p.offset, f) + static_cast<uint32_t>(c)} * T::kElementBytes,
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
    if (f < p.factors && r < pick(p.list_size, f)) {
      list_value[f * cap + r] = T::KeyValue(keys[e]);
      list_column[f * cap + r] = T::KeyColumn(keys[e]);
    }
  }
  __syncwarp();
}

template <class T>
__device__ __forceinline__ void RankSmallFactorsOf(const KernelParams& p, const WarpMemory<T>& m,
                                                   const uint8_t* scores) {
  switch (p.small_per_lane) {
    case 1: return RankSmallFactors<T, 1>(p, m.list_value, m.list_column, m.staging, scores);
    case 2: return RankSmallFactors<T, 2>(p, m.list_value, m.list_column, m.staging, scores);
    case 4: return RankSmallFactors<T, 4>(p, m.list_value, m.list_column, m.staging, scores);
    default: return RankSmallFactors<T, 8>(p, m.list_value, m.list_column, m.staging, scores);
  }
}

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
__device__ __noinline__ bool RankPairedFactors(const KernelParams& p, float* list_value,
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
    for (int r = lane; r < p.list_size[f]; r += 32) {
      const uint32_t key = region[r];
      list_value[f * cap + r] = T::KeyValue(key);
      list_column[f * cap + r] = T::KeyColumn(key);
    }
  }
  __syncwarp();
  return true;
}

// Ranks both factors of a two-factor bfloat16 row whose widths are at most 256 (p.paired_factors)
// by one register sort of all their elements: lanes 0-15 hold factor 0's blocks, lanes 16-31 factor
// 1's, two blocks a lane, each element as its distinct composite key (ordered value << 16 |
// column; 0, below every real key, outside the factor), and the two segments of 256 keys are
// sorted at once, 16 keys a lane: 10 exchange steps, where RankPairedFactors takes 17 in its two
// sorts besides the maxima, the threshold, the marking and the survivors' compaction. The sorted
// segments are SelectFactor's lists (the same keys ranked the same way), for every kf up to 256.
// exchange: 512 keys, warp-private, 16-byte aligned.
// Prefetch (p.prefetch_bytes > 0: 1 KB a warp, after all the slices): the full blocks of the
// warp's next row (`next`, or nullptr for none) are copied there asynchronously once this row's are
// read, so that the next row's loads wait on shared memory, not DRAM; `prefetched` says that the
// previous call did so for this row (every row but the warp's first). Returns false, having
// written no list, when a factor spans more than 32 blocks (a misaligned width above 248):
// SelectFactor ranks that row.
__device__ __noinline__ bool SortPairedFactors(const KernelParams& p, float* list_value,
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
  WarpSortSegments<E>(keys, exchange, 16 * E);
  prefetch_next();  // this row's blocks are read: the sort used them all
  // Lane l holds ranks (l & 15) * 16 + e of factor l >> 4.
  const int kf = f == 0 ? p.list_size[0] : p.list_size[1];
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

// A stage candidate's pair code i << 8 | j (i, j < 256).
__device__ __forceinline__ int CodeRow(uint32_t code) { return static_cast<int>(code >> 8); }
__device__ __forceinline__ int CodeColumn(uint32_t code) { return static_cast<int>(code & 255u); }

// The score key of stage candidate `code`.
__device__ __forceinline__ uint32_t CandidateScore(uint32_t code, const float* run_value,
                                                   const float* factor_value) {
  return OrderedKey(run_value[CodeRow(code)] + factor_value[CodeColumn(code)]);
}

// A score key that at least kept[f] candidates of stage f reach: the best far corner of the full
// rectangles of kept pairs, or the worst corner of the hyperbolic staircase of at least kept pairs,
// whichever is higher (every member of such a set scores at least that corner's score). The
// staircase follows the level lines of the sum of two sorted lists, so it is much the tighter.
// kLatency: the corners come from the copy in shared memory that the table's warp wrote
// (BuildPairTables), not from the parameters: a lane-indexed parameter read costs a constant-cache
// access per distinct address, on the lone pairing warp's path (NOTES.md, v14-c).
template <bool kLatency = false>
__device__ __forceinline__ uint32_t StageBound(const KernelParams& p, int f, const float* run_value,
                                               const float* factor_value, const uint16_t* table) {
  const int lane = LaneId();
  uint32_t rectangle = 0;
  uint32_t staircase = 0xffffffffu;
  if constexpr (kLatency) {
    const uint16_t* corners = reinterpret_cast<const uint16_t*>(
        reinterpret_cast<const uint8_t*>(table) + p.corner_offset) + (f - 1) * 2 * kMaxCorners;
    if (lane < p.corner_count[f]) rectangle = CandidateScore(corners[lane], run_value, factor_value);
    if (lane < p.stair_count[f]) staircase = CandidateScore(corners[kMaxCorners + lane], run_value, factor_value);
  } else {
    if (lane < p.corner_count[f]) rectangle = CandidateScore(p.corners[f][lane], run_value, factor_value);
    if (lane < p.stair_count[f]) staircase = CandidateScore(p.stair[f][lane], run_value, factor_value);
  }
  (void)table;
  rectangle = __reduce_max_sync(kFullMask, rectangle);
  staircase = __reduce_min_sync(kFullMask, staircase);
  return p.stair_count[f] > 0 ? max(rectangle, staircase) : rectangle;
}

// Stage f with one sort: the candidates that reach the bound, keyed by (score key, i + j, i) and
// sorted descending, give the kept best in order. The key is 32 bits when the survivors' distances
// above the bound, stripped of the trailing zero bits they all share, fit beside the tie bits
// (bfloat16 sums nearly always do), else 64. Writes the kept pair codes, best first, to m.scores.
// Returns false, having written nothing, when more than kStageCapacity candidates reach the bound.
template <class T, bool kLatency = false>
__device__ bool LeanStage(const KernelParams& p, const WarpMemory<T>& m, const uint16_t* table,
                          int f, const float* run_value) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  const float* factor_value = m.list_value + f * p.list_capacity;
  const uint32_t bound = StageBound<kLatency>(p, f, run_value, factor_value, table);
  const uint16_t* pairs = table + p.table_offset[f];
  const int total = p.candidates[f];
  int count = 0;
  uint32_t spread = 0;  // OR of the survivors' distances above the bound
  uint32_t widest = 0;  // the largest distance
  for (int base = 0; base < total; base += 32) {
    const int c = base + lane;
    uint32_t code = 0;
    uint32_t score = 0;
    bool pass = false;
    if (c < total) {
      code = pairs[c];
      score = CandidateScore(code, run_value, factor_value);
      pass = score >= bound;
    }
    const unsigned passing = __ballot_sync(kFullMask, pass);
    if (pass) {
      const int at = count + __popc(passing & lanes_below);
      if (at < kStageCapacity) {
        m.scores[at] = score;
        m.survivor_codes[at] = code;
      }
      spread |= score - bound;
      widest = max(widest, score - bound);
    }
    count += __popc(passing);
  }
  if (count > kStageCapacity) return false;
  __syncwarp();
  spread = __reduce_or_sync(kFullMask, spread);
  widest = __reduce_max_sync(kFullMask, widest);
  const int zeros = spread == 0 ? 0 : __ffs(static_cast<int>(spread)) - 1;
  const int tie_bits = p.tie_bits[f];
  const int row_bits = p.row_bits[f];
  const uint32_t row_mask = (1u << row_bits) - 1u;
  const uint32_t sum_mask = (1u << (tie_bits - row_bits)) - 1u;
  const int kept = p.kept[f];
  uint32_t* codes = m.scores;  // read (score keys), then the result
  if ((widest >> zeros) < (1u << (31 - tie_bits)) * 2u) {
    uint32_t* keys = reinterpret_cast<uint32_t*>(m.candidates);
    for (int r = lane; r < count; r += 32) {
      const uint32_t code = m.survivor_codes[r];
      const uint32_t i = code >> 8;
      const uint32_t j = code & 255u;
      keys[r] = (((m.scores[r] - bound) >> zeros) << tie_bits) | ((i + j) << row_bits) | i;
    }
    __syncwarp();
    SortUpTo512(keys, count, kept);
    for (int r = lane; r < kept; r += 32) {
      const uint32_t key = keys[r];
      const uint32_t i = key & row_mask;
      const uint32_t sum = (key >> row_bits) & sum_mask;
      codes[r] = (i << 8) | (sum - i);
    }
  } else {
    uint64_t* keys = m.candidates;
    for (int r = lane; r < count; r += 32) {
      const uint32_t code = m.survivor_codes[r];
      const uint32_t i = code >> 8;
      const uint32_t j = code & 255u;
      keys[r] = (uint64_t{m.scores[r]} << 32) | ((i + j) << row_bits) | i;
    }
    __syncwarp();
    SortUpTo512(keys, count, kept);
    for (int r = lane; r < kept; r += 32) {
      const uint32_t key = static_cast<uint32_t>(keys[r]);
      const uint32_t i = key & row_mask;
      const uint32_t sum = (key >> row_bits) & sum_mask;
      codes[r] = (i << 8) | (sum - i);
    }
  }
  __syncwarp();
  return true;
}

// A stage candidate's distinct 64-bit order key: score key, then i + j, then i (all descending).
__device__ __forceinline__ uint64_t CandidateKey(uint32_t score_key, uint32_t code) {
  const uint32_t i = code >> 8;
  const uint32_t j = code & 255u;
  return (uint64_t{score_key} << 32) | ((i + j) << 8) | i;
}
__device__ __forceinline__ uint32_t KeyCode(uint64_t key) {
  const uint32_t i = static_cast<uint32_t>(key) & 255u;
  const uint32_t sum = (static_cast<uint32_t>(key) >> 8) & 511u;
  return (i << 8) | (sum - i);
}

// The number of stage f's candidates for which keep(score key, code) holds, over all of them
// (recomputed, nothing stored): the slow path's counting step.
template <class Keep>
__device__ __forceinline__ int CountCandidates(const KernelParams& p, const uint16_t* pairs, int f,
                                               const float* run_value, const float* factor_value,
                                               Keep keep) {
  uint32_t mine = 0;
  for (int c = LaneId(); c < p.candidates[f]; c += 32) {
    const uint32_t code = pairs[c];
    mine += keep(CandidateScore(code, run_value, factor_value), code) ? 1u : 0u;
  }
  return static_cast<int>(__reduce_add_sync(kFullMask, mine));
}

// Stage f when more than kStageCapacity candidates reach the bound (rows full of ties): the cut
// score by bisection over all candidates, then the tie-break key (i + j) << 8 | i among those on
// it, the same way; only the kept pairs are stored. Slow, nothing beyond the pair table needed.
// Writes the kept keys to m.candidates (best first when `ordered`).
template <class T>
__device__ void StageByCounting(const KernelParams& p, const WarpMemory<T>& m, const uint16_t* pairs,
                                int f, const float* run_value, uint32_t bound, bool ordered) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  const float* factor_value = m.list_value + f * p.list_capacity;
  const int kept = p.kept[f];
  // The largest score key that `kept` candidates reach: at least `bound`, at most the score of
  // (0, 0), which no candidate exceeds.
  uint32_t low = bound;
  uint32_t high = CandidateScore(0, run_value, factor_value);
  while (low < high) {
    const uint32_t mid = low + (high - low + 1) / 2;
    const int reaching = CountCandidates(p, pairs, f, run_value, factor_value,
                                         [mid](uint32_t score, uint32_t) { return score >= mid; });
    if (reaching >= kept) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  const uint32_t cut = low;
  const int above = CountCandidates(p, pairs, f, run_value, factor_value,
                                    [cut](uint32_t score, uint32_t) { return score > cut; });
  const int need = kept - above;
  // Of the candidates on the cut, the `need` best by (i + j, i): the tie key at or above which
  // exactly `need` of them lie (tie keys are distinct).
  auto tie_key = [](uint32_t code) { return (((code >> 8) + (code & 255u)) << 8) | (code >> 8); };
  uint32_t tie_low = 0;
  uint32_t tie_high = (1u << 17) - 1u;
  while (tie_low < tie_high) {
    const uint32_t mid = tie_low + (tie_high - tie_low + 1) / 2;
    const int reaching = CountCandidates(
        p, pairs, f, run_value, factor_value,
        [cut, mid, tie_key](uint32_t score, uint32_t code) { return score == cut && tie_key(code) >= mid; });
    if (reaching >= need) {
      tie_low = mid;
    } else {
      tie_high = mid - 1;
    }
  }
  const uint32_t tie_cut = tie_low;
  int taken = 0;
  for (int base = 0; base < p.candidates[f]; base += 32) {
    const int c = base + lane;
    bool in = false;
    uint64_t key = 0;
    if (c < p.candidates[f]) {
      const uint32_t code = pairs[c];
      const uint32_t score = CandidateScore(code, run_value, factor_value);
      in = score > cut || (score == cut && tie_key(code) >= tie_cut);
      key = CandidateKey(score, code);
    }
    const unsigned chosen = __ballot_sync(kFullMask, in);
    if (in) m.candidates[taken + __popc(chosen & lanes_below)] = key;
    taken += __popc(chosen);
  }
  __syncwarp();
  if (ordered) SortUpTo512(m.candidates, kept, kept);
}

// Stores stage candidates that reach `bound` as keys and score keys in m.candidates / m.scores,
// as many as there is room for; returns how many reach it.
template <class T>
__device__ __forceinline__ int StoreSurvivors(const WarpMemory<T>& m, const uint16_t* pairs, int total,
                                              const float* run_value, const float* factor_value,
                                              uint32_t bound) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  int count = 0;
  for (int base = 0; base < total; base += 32) {
    const int c = base + lane;
    bool pass = false;
    uint32_t code = 0;
    uint32_t score = 0;
    if (c < total) {
      code = pairs[c];
      score = CandidateScore(code, run_value, factor_value);
      pass = score >= bound;
    }
    const unsigned passing = __ballot_sync(kFullMask, pass);
    if (pass) {
      const int at = count + __popc(passing & lanes_below);
      if (at < kStageCapacity) {
        m.candidates[at] = CandidateKey(score, code);
        m.scores[at] = score;
      }
    }
    count += __popc(passing);
  }
  __syncwarp();
  return count;
}

// Stage f with a score-key cut: the candidates that reach the bound are stored, the kept-th best
// 32-bit score key found (a sort of up to 256 score keys, else a radix count), the candidates above
// it all taken and the few tied on it ranked by (i + j, i); 64-bit keys order the kept pairs where
// a later stage needs them (`ordered`). Writes the kept pair codes (best first when ordered) to
// m.scores.
template <class T, bool kLatency = false>
__device__ void CutStage(const KernelParams& p, const WarpMemory<T>& m, const uint16_t* table, int f,
                         const float* run_value, bool ordered) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  const float* factor_value = m.list_value + f * p.list_capacity;
  uint32_t bound = StageBound<kLatency>(p, f, run_value, factor_value, table);
  const uint16_t* pairs = table + p.table_offset[f];
  const int total = p.candidates[f];
  const int kept = p.kept[f];
  int count = StoreSurvivors<T>(m, pairs, total, run_value, factor_value, bound);
  // More survivors than room (a loose bound): raise the bound by 8-way searches of the score keys
  // between it and the best candidate, counting over all candidates, until the survivors fit;
  // rows of ties too many for any bound end in StageByCounting.
  uint32_t top = CandidateScore(0, run_value, factor_value);
  for (int round = 0; round < 4 && count > kStageCapacity && bound < top; ++round) {
    // Thresholds q = 1..7 of eight equal steps from the bound to the best score key.
    const uint32_t from = bound;
    const uint64_t range = top - from;
    auto threshold = [from, range](int q) { return from + static_cast<uint32_t>((range * q + 7) / 8); };
    uint32_t reaching[7] = {};
    for (int c = lane; c < total; c += 32) {
      const uint32_t score = CandidateScore(pairs[c], run_value, factor_value);
#pragma unroll
      for (int q = 0; q < 7; ++q) reaching[q] += score >= threshold(q + 1) ? 1u : 0u;
    }
    int best = 0;  // the highest threshold that `kept` candidates reach (0: the bound itself)
    uint32_t best_count = static_cast<uint32_t>(count);
#pragma unroll
    for (int q = 0; q < 7; ++q) {
      reaching[q] = __reduce_add_sync(kFullMask, reaching[q]);
      if (reaching[q] >= static_cast<uint32_t>(kept)) {
        best = q + 1;
        best_count = reaching[q];
      }
    }
    // The cut lies below the next threshold, which fewer than `kept` reach.
    if (best < 7) top = threshold(best + 1) - 1;
    if (best > 0) {
      bound = threshold(best);
      count = static_cast<int>(best_count);
      if (count <= kStageCapacity) count = StoreSurvivors<T>(m, pairs, total, run_value, factor_value, bound);
    }
  }
  const uint64_t* selected = nullptr;
  if (count > kStageCapacity) {
    StageByCounting(p, m, pairs, f, run_value, bound, ordered);
    selected = m.candidates;
  } else {
    uint32_t cut;
    if (p.half_select[f] > 0 && count <= 32 * p.half_select[f]) {
      // kept = 16 E: the smallest of the top half (chosen's room is free until the ties).
      cut = KthLargestByHalvesOf(m.scores, count, p.half_select[f],
                                 reinterpret_cast<uint32_t*>(m.candidates_chosen));
    } else if (count <= 256) {
      SortUpTo512(m.scores, count, kept);
      cut = m.scores[kept - 1];
    } else {
      cut = WarpKthLargest(m.scores, count, kept, m.histogram);
    }
    int above = 0;
    int at_cut = 0;
    for (int base = 0; base < count; base += 32) {
      const int c = base + lane;
      const uint32_t score = c < count ? static_cast<uint32_t>(m.candidates[c] >> 32) : 0u;
      above += __popc(__ballot_sync(kFullMask, c < count && score > cut));
      at_cut += __popc(__ballot_sync(kFullMask, c < count && score == cut));
    }
    // `need` of the `at_cut` candidates scoring exactly `cut` belong: all of them when no tie
    // straddles the cut, else those first by (i + j, i), ranked by counting when they are few.
    const int need = kept - above;
    if (need == at_cut || at_cut <= kMaxRankedTies) {
      uint64_t* chosen = m.candidates_chosen;
      // The score keys are read (cut); their room holds the ties (MakeParams sizes it for
      // kMaxRankedTies 64-bit keys).
      uint64_t* tied = reinterpret_cast<uint64_t*>(m.scores);
      int taken = 0;
      int ties = 0;
      for (int base = 0; base < count; base += 32) {
        const int c = base + lane;
        const uint64_t key = c < count ? m.candidates[c] : 0u;
        const uint32_t score = static_cast<uint32_t>(key >> 32);
        const bool in = c < count && (score > cut || (need == at_cut && score == cut));
        const bool tie = c < count && need != at_cut && score == cut;
        const unsigned chosen_mask = __ballot_sync(kFullMask, in);
        const unsigned tie_mask = __ballot_sync(kFullMask, tie);
        if (in) chosen[taken + __popc(chosen_mask & lanes_below)] = key;
        if (tie) tied[ties + __popc(tie_mask & lanes_below)] = key;
        taken += __popc(chosen_mask);
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
        if (join) chosen[taken + __popc(joining & lanes_below)] = mine;
        __syncwarp();
      }
      if (ordered) SortUpTo512(chosen, kept, kept);
      selected = chosen;
    } else {
      SortUpTo512(m.candidates, count, kept);
      selected = m.candidates;
    }
  }
  for (int r = lane; r < kept; r += 32) m.scores[r] = KeyCode(selected[r]);
  __syncwarp();
}

// The latency kernel's CutStage, out of line: its rows mostly take LeanStage, and an inlined copy
// (about 2 300 instructions) would lie between the pairing warp's stage and output code; that warp
// runs alone on the row's critical path, and waiting for instruction fetch is a large part of its
// time (NOTES.md, v14-c). The warp's memory is rebuilt from its slice (a reference argument would
// go through local memory).
template <class T>
__device__ __noinline__ void CutStageApart(const KernelParams& p, uint8_t* slice,
                                           const uint16_t* table, int f, const float* run_value,
                                           bool ordered) {
  const WarpMemory<T> m(p, slice);
  CutStage<T, true>(p, m, table, f, run_value, ordered);
}

// RankPairedFactors where the launch takes that path (bfloat16 only; a warp per row). Returns
// whether it ranked the row.
// With the sort (p.paired_sort): `next` is the warp's next row (or nullptr), and `prefetched`
// says whether this row is not the warp's first (SortPairedFactors).
template <class T>
__device__ __forceinline__ bool RankPairedFactorsOf(const KernelParams& p, const WarpMemory<T>& m,
                                                    const uint8_t* scores, bool block_per_row,
                                                    const uint8_t* next, bool prefetched) {
  if constexpr (T::kElementBytes == 2) {
    if (p.paired_factors && !block_per_row) {
      if (p.paired_sort) {
        return SortPairedFactors(p, m.list_value, m.list_column, m.buffer, scores, next, prefetched);
      }
      return RankPairedFactors(p, m.list_value, m.list_column, m.buffer, scores);
    }
  }
  (void)p, (void)m, (void)scores, (void)block_per_row, (void)next, (void)prefetched;
  return false;
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

// The pairing stages and the output of one row, from the ranked factor lists in m. Running-list
// entries carry their slot so far and their factor ranks (8 bits each), so that the output needs
// neither a division nor a reload of the row: a value is recomputed from the lists' values, and
// only a -inf there (a NaN or -inf score) sends it back to the raw element.
template <class T, bool kLatency = false>
__device__ void PairAndWrite(const KernelParams& p, const WarpMemory<T>& m, const uint16_t* table,
                             const uint8_t* scores, unsigned long long row, PhaseClock& clock) {
  constexpr int kBytes = T::kElementBytes;
  const int lane = LaneId();
  const int cap = p.list_capacity;
  const float* run_value = m.list_value;
  const uint32_t* run_slot = m.list_column;
  const uint32_t* run_ranks = nullptr;  // stage 1: the rank is the row of the pair
  int next = 0;
  const int last = p.factors - 1;
  const int kk = static_cast<int>(p.kk);
  const int index_bits = p.slot_index_bits;
  uint32_t* order32 = reinterpret_cast<uint32_t*>(m.candidates);
  uint32_t* ranks_at = reinterpret_cast<uint32_t*>(m.candidates_chosen);
  uint64_t* order64 = m.candidates;
  for (int f = 1; f <= last; ++f) {
    if (!(p.lean[f] && LeanStage<T, kLatency>(p, m, table, f, run_value))) {
      if constexpr (kLatency) {
        // m is warp 0's own slice in block-per-row mode, the warp's own otherwise.
        uint8_t* slice = reinterpret_cast<uint8_t*>(m.list_value) - p.lists_offset;
        CutStageApart<T>(p, slice, table, f, run_value, f < last);
      } else {
        CutStage<T>(p, m, table, f, run_value, f < last);
      }
    }
    clock.Mark(kPhaseStage1 + f - 1);
    const uint32_t* codes = m.scores;
    const float* factor_value = m.list_value + f * cap;
    const uint32_t* factor_column = m.list_column + f * cap;
    const int kept = p.kept[f];
    const uint32_t width = p.width[f];
    if (f < last) {
      float* next_value = m.running_value + next * cap;
      uint32_t* next_slot = m.running_slot + next * cap;
      uint32_t* next_ranks = m.running_ranks + next * cap;
      for (int r = lane; r < kept; r += 32) {
        const uint32_t code = codes[r];
        const int i = CodeRow(code);
        const int j = CodeColumn(code);
        next_value[r] = T::Round(run_value[i] + factor_value[j]);
        next_slot[r] = run_slot[i] * width + factor_column[j];
        next_ranks[r] = (f == 1 ? static_cast<uint32_t>(i) : run_ranks[i]) | (static_cast<uint32_t>(j) << (8 * f));
      }
      __syncwarp();
      clock.Mark(kPhaseRunning);
      run_value = next_value;
      run_slot = next_slot;
      run_ranks = next_ranks;
      next ^= 1;
    } else {
      // Final slots, ascending: sort ~(slot << index_bits | r) descending (32 bits) with the ranks
      // aside, or (~slot << 32 | ranks) where slots are too wide for that.
      for (int r = lane; r < kept; r += 32) {
        const uint32_t code = codes[r];
        const int i = CodeRow(code);
        const int j = CodeColumn(code);
        const uint32_t slot = run_slot[i] * width + factor_column[j];
        const uint32_t ranks = (f == 1 ? static_cast<uint32_t>(i) : run_ranks[i]) | (static_cast<uint32_t>(j) << (8 * f));
        if (p.slot_key32) {
          order32[r] = ~((slot << index_bits) | static_cast<uint32_t>(r));
          ranks_at[r] = ranks;
        } else {
          order64[r] = (static_cast<uint64_t>(~slot) << 32) | ranks;
        }
      }
      __syncwarp();
    }
  }
  if (p.slot_key32) {
    SortUpTo512(order32, kk, kk);
  } else {
    SortUpTo512(order64, kk, kk);
  }
  clock.Mark(kPhaseSlotSort);
  uint8_t* values = p.values + row * p.kk * kBytes;
  uint32_t* slots = p.slots + row * p.kk;
  const uint32_t index_mask = (1u << index_bits) - 1u;
  for (int r = lane; r < kk; r += 32) {
    uint32_t slot;
    uint32_t ranks;
    if (p.slot_key32) {
      const uint32_t key = ~order32[r];
      slot = key >> index_bits;
      ranks = ranks_at[key & index_mask];
    } else {
      const uint64_t key = order64[r];
      slot = ~static_cast<uint32_t>(key >> 32);
      ranks = static_cast<uint32_t>(key);
    }
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
    slots[r] = slot;
  }
  __syncwarp();
  clock.Mark(kPhaseOutput);
}

// Emulation builds (emulation/cuda_runtime.h) check memory rules that the GPU does not: a warp's
// scratch (its slice, less the factor lists in block-per-row mode, where every warp of the block
// writes warp 0's) is written by that warp alone, the pair table by no one once built
// (EmulatorDeclareTable), and each row starts from poisoned scratch, so that nothing left by the
// previous row can be read back. The latency kernel's spare warp has no slice. No code on the GPU.
__device__ __forceinline__ void EmulatorDeclareRules(const KernelParams& p, const uint8_t* slice,
                                                     bool block_per_row) {
#if defined(PK_CUDA_EMULATION)
  if (block_per_row && static_cast<int>(threadIdx.x >> 5) >= p.factors) return;
  const uint32_t first = block_per_row ? p.running_offset : 0u;
  pk::emu::DeclarePrivate(slice + first, p.warp_bytes - first);
#else
  (void)p, (void)slice, (void)block_per_row;
#endif
}
__device__ __forceinline__ void EmulatorPoisonScratch(const KernelParams& p, uint8_t* slice,
                                                      bool block_per_row) {
#if defined(PK_CUDA_EMULATION)
  if (block_per_row && static_cast<int>(threadIdx.x >> 5) >= p.factors) return;
  __syncwarp();
  const uint32_t first = block_per_row ? p.running_offset : 0u;
  if (LaneId() == 0) pk::emu::Poison(slice + first, p.warp_bytes - first);
  __syncwarp();
#else
  (void)p, (void)slice, (void)block_per_row;
#endif
}

// p.warps_per_row == 1: each warp computes whole rows in a grid-stride loop; warp 0 builds the
// pair table first, behind a barrier.
// p.warps_per_row == F: a block of F warps computes one row at a time: warp f ranks factor f into
// warp 0's lists, then warp 0 pairs and writes (lower latency for small batches). Only warp 0
// reads the pair table, after the row's first barrier, so the latency kernel (kLatency) holds no
// warp at a barrier before its loads: p.table_warp builds the table, a spare warp F where the block
// has room (F < 4; it has no slice, ranks nothing and only keeps the barriers), else warp 0 ahead
// of its factor. The other kernels keep v10's prologue, written so that their machine code stays
// byte for byte v10's: every other form tried moved their register allocation (spills at the
// 128-register cap) and cost up to 1.3 % of throughput (NOTES.md, v11). The paired kernel
// (kPaired, bfloat16) is the default kernel with RankPairedFactors added, an instance of its own
// for the same reason: the other kernels' machine code stays v11's.
// The streamed kernel (kStreamed, bfloat16, a warp per row) is the default kernel whose factors
// prefetch the next factor's first chunk (RankFactorsStreamed), an instance of its own for the
// same reason.
template <class T, int kMinBlocks, bool kLatency, bool kPaired = false, bool kStreamed = false>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kMinBlocks)
    TopKKernel(const __grid_constant__ KernelParams p) {
  uint8_t* shared = DynamicShared();
  uint16_t* table = reinterpret_cast<uint16_t*>(shared);
  if constexpr (kLatency) {
    if (static_cast<int>(threadIdx.x >> 5) == p.table_warp) {
      const uint32_t touched = TouchParameters(p);
      BuildPairTables<true>(p, table);
      // Never true (rows > 0 in every launch); keeps the touching loads.
      if (touched == 0x9e3779b9u && p.rows == 0) table[0] = 0;
    }
    if (p.warps_per_row == 1) __syncthreads();
  } else {
    BuildPairTables<false>(p, table);
    __syncthreads();
  }
  const unsigned warp = threadIdx.x >> 5;
  const unsigned warps = blockDim.x >> 5;
  constexpr int kBytes = T::kElementBytes;
  uint8_t* slice = WarpSlice(p, warp);
  WarpMemory<T> m(p, slice);
  // One code path for both modes (the kernel is sensitive to its code size).
  const bool block_per_row = !kStreamed && p.warps_per_row > 1;
  EmulatorDeclareRules(p, slice, block_per_row);
  unsigned long long row = block_per_row ? blockIdx.x : static_cast<unsigned long long>(blockIdx.x) * warps + warp;
  const unsigned long long row_step = block_per_row ? gridDim.x : static_cast<unsigned long long>(gridDim.x) * warps;
  const int first_factor = block_per_row ? static_cast<int>(warp) : 0;
  const int factor_step = block_per_row ? static_cast<int>(warps) : 1;
  if (block_per_row) {
    const WarpMemory<T> first(p, WarpSlice(p, 0));
    m.list_value = first.list_value;
    m.list_column = first.list_column;
  }
  PhaseClock clock;
  for (; row < p.rows; row += row_step) {
    EmulatorPoisonScratch(p, slice, block_per_row);
    const uint8_t* scores = p.scores + row * p.row_elements * kBytes;
    bool paired = false;
    if constexpr (kPaired) {
      if (p.small_segment == 0) {
        const uint8_t* next = row + row_step < p.rows ? scores + row_step * p.row_elements * kBytes : nullptr;
        // A warp's first row is below row_step; each later one was prefetched by the row before.
        paired = RankPairedFactorsOf<T>(p, m, scores, block_per_row, next, row >= row_step);
      }
    }
    if (!kStreamed && p.small_segment > 0) {
      if (!block_per_row || warp == 0) RankSmallFactorsOf<T>(p, m, scores);
    } else if (!paired) {
      if constexpr (kStreamed) {
        RankFactorsStreamed<T>(p, m, scores, row, row_step);
      } else {
        RankFactors<T>(p, m, scores, first_factor, factor_step);
      }
    }
    clock.Mark(kPhaseFactors);
    if (block_per_row) {
      __syncthreads();
      clock.Mark(kPhaseWait);
    }
    if (!block_per_row || warp == 0) PairAndWrite<T, kLatency>(p, m, table, scores, row, clock);
    if (block_per_row) {
      __syncthreads();
      clock.Mark(kPhaseWait);
    }
  }
  clock.Flush();
}

// The small-factor kernel (p.small_segment > 0, a warp per row): the default kernel's row without
// SelectFactor and the paired path, so that ptxas allocates registers for the small path alone and
// more warps fit on a multiprocessor (kMinBlocks blocks of 4 warps; T::kSmallBlocks).
template <class T, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kMinBlocks)
    TopKSmallKernel(const __grid_constant__ KernelParams p) {
  uint8_t* shared = DynamicShared();
  uint16_t* table = reinterpret_cast<uint16_t*>(shared);
  BuildPairTables<false>(p, table);
  __syncthreads();
  const unsigned warp = threadIdx.x >> 5;
  const unsigned warps = blockDim.x >> 5;
  constexpr int kBytes = T::kElementBytes;
  uint8_t* slice = WarpSlice(p, warp);
  const WarpMemory<T> m(p, slice);
  EmulatorDeclareRules(p, slice, false);
  PhaseClock clock;
  for (unsigned long long row = static_cast<unsigned long long>(blockIdx.x) * warps + warp;
       row < p.rows; row += static_cast<unsigned long long>(gridDim.x) * warps) {
    EmulatorPoisonScratch(p, slice, false);
    const uint8_t* scores = p.scores + row * p.row_elements * kBytes;
    RankSmallFactorsOf<T>(p, m, scores);
    clock.Mark(kPhaseFactors);
    PairAndWrite<T>(p, m, table, scores, row, clock);
  }
  clock.Flush();
}

// Shared memory the runtime keeps for itself in every resident block (sm_90), besides the
// kernel's own: part of what limits the blocks a multiprocessor holds.
constexpr size_t kSharedReservedPerBlock = 1024;

uint32_t RoundUp16(uint64_t bytes) { return static_cast<uint32_t>((bytes + 15) / 16 * 16); }

bool Use(KernelPaths::Choice choice, bool by_default) {
  return choice == KernelPaths::Choice::kAuto ? by_default : choice == KernelPaths::Choice::kOn;
}

int PowerOfTwoAtLeast(int x) {
  int power = 1;
  while (power < x) power *= 2;
  return power;
}

// Corners of the smallest hyperbolic staircase {(i, j): (i+1)(j+1) <= m, i < rows, j < columns}
// that holds at least `kept` pairs: in each run of rows of one length, the last row's last pair.
// Every pair of the staircase is a candidate (m <= kept) and scores at least one corner. Returns
// the number of corners, 0 when they do not fit (then only the rectangles bound the stage).
int StaircaseCorners(int rows, int columns, int kept, uint16_t (&corners)[kMaxCorners]) {
  auto length = [&](int m, int i) { return std::min(columns, m / (i + 1)); };
  int m = 1;
  for (;; ++m) {
    int pairs = 0;
    for (int i = 0; i < std::min(rows, m); ++i) pairs += length(m, i);
    if (pairs >= kept || m >= kept) break;
  }
  int count = 0;
  const int last = std::min(rows, m) - 1;
  for (int i = 0; i <= last; ++i) {
    if (i < last && length(m, i + 1) == length(m, i)) continue;
    if (count == kMaxCorners) return 0;
    corners[count++] = static_cast<uint16_t>((i << 8) | (length(m, i) - 1));
  }
  return count;
}

// The launch's parameters and shared-memory layout for a validated problem.
KernelParams MakeParams(const Problem& problem, const KernelPaths& paths) {
  KernelParams p{};
  p.factors = problem.factors;
  p.row_elements = problem.row_width();
  p.kk = problem.kk();
  const int k = static_cast<int>(problem.k);
  uint32_t widest = 0;
  int slot_bits = 0;
  for (int f = 0; f < problem.factors; ++f) {
    p.width[f] = problem.widths[f];
    p.offset[f] = problem.offset(f);
    const uint64_t w = problem.widths[f];
    p.list_size[f] = static_cast<int>(std::min<uint64_t>(k, w));
    widest = std::max(widest, problem.widths[f]);
    slot_bits += BitLength(problem.widths[f] - 1);
  }
  p.kept[0] = p.list_size[0];
  uint32_t table_entries = 0;
  int max_candidates = 0;
  bool any_lean = false;
  for (int f = 1; f < problem.factors; ++f) {
    const int previous = p.kept[f - 1];
    const int factor = p.list_size[f];
    const int kept = static_cast<int>(std::min<uint64_t>(k, uint64_t(previous) * factor));
    p.kept[f] = kept;
    const int rows = std::min(previous, kept);
    int candidates = 0;
    for (int i = 0; i < rows; ++i) candidates += std::min(factor, kept / (i + 1));
    p.candidates[f] = candidates;
    max_candidates = std::max(max_candidates, candidates);
    p.table_offset[f] = table_entries;
    table_entries += static_cast<uint32_t>((candidates + 7) / 8 * 8);
    int corners = 0;
    for (int a = 1; a <= previous && corners < kMaxCorners; ++a) {
      if (kept % a != 0) continue;
      const int b = kept / a;
      if (b <= factor) p.corners[f][corners++] = static_cast<uint16_t>(((a - 1) << 8) | (b - 1));
    }
    p.corner_count[f] = corners;
    p.stair_count[f] = StaircaseCorners(previous, factor, kept, p.stair[f]);
    p.row_bits[f] = (BitLength(static_cast<uint32_t>(previous - 1)));
    p.tie_bits[f] = (BitLength(static_cast<uint32_t>(previous + factor - 2)) + p.row_bits[f]);
    // One sort pays where its keys are 32 bits: bfloat16 sums (float32 ones seldom fit).
    p.lean[f] = Use(paths.lean_stages, kept <= 128 && problem.dtype == DType::kBFloat16) ? 1 : 0;
    p.half_select[f] =
        Use(paths.half_selection, true) && kept >= 16 && kept <= 128 && (kept & (kept - 1)) == 0
            ? kept / 16
            : 0;
    any_lean = any_lean || p.lean[f];
  }
  p.slot_index_bits = BitLength(p.kk - 1);
  p.slot_key32 = Use(paths.slot_key32, true) && slot_bits + p.slot_index_bits <= 31 ? 1 : 0;
  const int segment = std::max(2, PowerOfTwoAtLeast(static_cast<int>(widest)));
  const int per_lane = PowerOfTwoAtLeast((problem.factors * segment + 31) / 32);
  if (Use(paths.small_factors, true) && widest <= 64 && per_lane <= 8) {
    p.small_segment = segment;
    p.small_segment_bits = BitLength(static_cast<uint32_t>(segment - 1));
    p.small_per_lane = per_lane;
  }
  // Measured on the H200 (pk-bench-cuda --extra): 256x256 k=32 +39 % (against the high-occupancy
  // kernel), k=64 +19 %, k=128 +4 %, but k=256 -1.5 % (no threshold: 2 kf exceeds the width).
  p.paired_factors = Use(paths.paired_factors, k <= 128) && problem.factors == 2 &&
                             problem.dtype == DType::kBFloat16 && widest <= 256 &&
                             p.small_segment == 0
                         ? 1
                         : 0;
  p.half_select_maxima = Use(paths.half_selection, true) ? 1 : 0;
  // Measured on the H200 (pk-bench-cuda --extra --variants): the sort against the thresholds
  // 256x256 k=64 +4.6 %, k=128 +7.8 %, 200x100 k=64 +1.7 %, but 256x256 k=32 -17 % and 128x128
  // k=64 -16 % (the sort's 256-key segments against ~40-80 survivors), hence k >= 64 and a
  // factor wider than 128.
  p.paired_sort = Use(paths.paired_sort, k >= 64 && widest > 128) ? 1 : 0;
  p.bisect_maxima = paths.bisect_maxima == KernelPaths::Choice::kAuto ? 1
                    : paths.bisect_maxima == KernelPaths::Choice::kOn ? 2
                                                                     : 0;
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
  // Room for every candidate when they are few (no stage can overflow then), else kStageCapacity;
  // at least 2 * kMaxRankedTies, since CutStage keeps up to kMaxRankedTies 64-bit ties in the room
  // of the 32-bit score keys. (v10 allowed 32 there: 17 or more ties then ran past the slice into
  // the next warp's factor lists.)
  p.candidate_capacity = std::min(
      kStageCapacity, std::max(2 * kMaxRankedTies, PowerOfTwoAtLeast(max_candidates)));
  const int list_cap = p.list_capacity;
  uint32_t offset = 0;
  p.lists_offset = offset;
  offset += RoundUp16(uint64_t(problem.factors) * list_cap * 8);
  p.running_offset = offset;
  if (problem.factors >= 3) offset += RoundUp16(uint64_t(2) * list_cap * 12);
  p.histogram_offset = offset;
  offset += 256 * 4;
  p.union_offset = offset;
  // The factor phase: staging and survivor buffers, or only the exchange of the register sort.
  const uint64_t factor_phase =
      p.small_segment > 0 ? uint64_t{32} * p.small_per_lane * key_bytes
                          : staging + uint64_t(p.buffer_capacity + list_cap) * key_bytes;
  const uint64_t stage_phase = uint64_t(p.candidate_capacity + list_cap) * 8 +
                               uint64_t(p.candidate_capacity) * (any_lean ? 8 : 4);
  offset += RoundUp16(std::max(factor_phase, stage_phase));
  p.warp_bytes = offset;
  return p;
}

using KernelFunction = void (*)(KernelParams);

// The kernels of a type: the default register budget, the high-occupancy one (fewer registers,
// more resident warps), the latency kernel (no register cap: its launches put one or two blocks of
// at most 4 warps on a multiprocessor, and the default cap spilled on its lone pairing warp's
// path; see TopKKernel and Launch), the paired kernel and the streamed kernel (default budget;
// bfloat16 only: float32 gets its default kernel) and the small-factor kernel (T::kSmallBlocks).
enum KernelVariant : int {
  kDefaultKernel,
  kHighOccupancyKernel,
  kLatencyKernel,
  kPairedKernel,
  kSmallKernel,
  kStreamKernel,
  kKernelVariants
};
template <class T>
KernelFunction KernelOf(KernelVariant variant) {
  if constexpr (T::kElementBytes == 2) {
    if (variant == kPairedKernel) return &TopKKernel<T, T::kMinBlocks, false, true>;
    if (variant == kStreamKernel) return &TopKKernel<T, T::kMinBlocks, false, false, true>;
  }
  if (variant == kSmallKernel) return &TopKSmallKernel<T, T::kSmallBlocks>;
  return variant == kHighOccupancyKernel ? &TopKKernel<T, T::kMoreBlocks, false>
         : variant == kLatencyKernel     ? &TopKKernel<T, 1, true>
                                         : &TopKKernel<T, T::kMinBlocks, false>;
}

KernelFunction KernelFor(DType dtype, KernelVariant variant) {
  return dtype == DType::kFloat32 ? KernelOf<Float32Type>(variant) : KernelOf<Bf16Type>(variant);
}

std::string CudaMessage(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
         ")";
}

}  // namespace

#if defined(PK_PHASE_TIMING)
cudaError_t ReadPhaseCycles(uint64_t (&cycles)[8], bool reset) {
  static_assert(kPhaseCount == 8);
  unsigned long long values[kPhaseCount];
  cudaError_t error = cudaMemcpyFromSymbol(values, kPhaseCycles, sizeof values);
  for (int q = 0; q < kPhaseCount; ++q) cycles[q] = values[q];
  if (error == cudaSuccess && reset) {
    const unsigned long long zeros[kPhaseCount] = {};
    error = cudaMemcpyToSymbol(kPhaseCycles, zeros, sizeof zeros);
  }
  return error;
}
#endif

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
  for (int index = 0; index < 2 * kKernelVariants; ++index) {
    const DType dtype = index & 1 ? DType::kFloat32 : DType::kBFloat16;
    const KernelVariant variant = static_cast<KernelVariant>(index >> 1);
    const KernelFunction kernel = KernelFor(dtype, variant);
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
    launcher.kernel_registers_[static_cast<int>(dtype)][variant] = attributes.numRegs;
  }
  return launcher;
}

cudaError_t TopKLauncher::Launch(const Problem& problem, const void* scores, size_t rows,
                                 void* values, uint32_t* slots, cudaStream_t stream,
                                 const KernelPaths& paths) const {
  if (rows == 0) return cudaSuccess;
  KernelParams p = MakeParams(problem, paths);
  p.scores = static_cast<const uint8_t*>(scores);
  p.values = static_cast<uint8_t*>(values);
  p.slots = slots;
  p.rows = rows;
  // Few rows: a block of F warps per row, one factor per warp, spread over the multiprocessors
  // (latency). Many: four warps a block, a row per warp, in a grid-stride loop sized to what fits
  // on the device at once (throughput).
  const bool block_per_row =
      Use(paths.block_per_row, rows <= static_cast<size_t>(multiprocessors_) * 2);
  // Blocks of `bytes` of shared memory that fit on a multiprocessor.
  const auto blocks_by_shared = [this](size_t bytes) {
    return static_cast<int>(shared_per_multiprocessor_ / (bytes + kSharedReservedPerBlock));
  };
  // The latency kernel for a block per row (its spare warp builds the pair table while the factor
  // warps load the row: -0.6 to -0.8 us for 1-256 rows on the H200). Otherwise more resident
  // warps where the lists are short (k <= 32: 1024x1024 bf16 +8.5 %, 16^4 f32 +14.6 % on the
  // H200; the larger k measured lost up to 23 %, or gained nothing).
  // Two bfloat16 factors of width <= 256, a warp per row: the paired kernel, before the
  // high-occupancy one (256x256 k=32: 236.5 M rows/s against 170.5 on the H200).
  // Every width <= 64 (one register sort ranks the factors), a warp per row: the small-factor
  // kernel, built for more resident blocks than the default, where shared memory lets that many
  // in (on the H200: 32^4 bf16 k=64 +7.1 %, 16^4 f32 k=32 +13.3 %, other such shapes +2 to +24 %;
  // 64^3 bf16 k=64, room for four blocks only, ran 3-21 % slower in small-factor kernels of five
  // to eight blocks, whose tighter register caps then cost spills and bought no warps).
  const size_t row_per_warp_shared = size_t{p.table_bytes} + kWarpsPerBlock * size_t{p.warp_bytes};
  const int small_blocks =
      problem.dtype == DType::kFloat32 ? Float32Type::kSmallBlocks : Bf16Type::kSmallBlocks;
  const bool small_fits = blocks_by_shared(row_per_warp_shared) >= small_blocks;
  const bool small = p.small_segment > 0 && !block_per_row && Use(paths.small_kernel, small_fits);
  // The streamed kernel: bfloat16 factors through SelectFactor, a warp per row, where its room of
  // one chunk a warp (prefetch on) leaves as many blocks resident as the default kernel has.
  const size_t stream_shared =
      row_per_warp_shared + kWarpsPerBlock * size_t{Bf16Type::kStagingBytes};
  const bool stream_fits = blocks_by_shared(stream_shared) >= Bf16Type::kMinBlocks;
  const bool streamed = problem.dtype == DType::kBFloat16 && !block_per_row &&
                      p.small_segment == 0 && !p.paired_factors &&
                      Use(paths.stream_kernel, problem.k > 32 && stream_fits);
  const KernelVariant variant = Use(paths.latency_kernel, block_per_row)     ? kLatencyKernel
                                : p.paired_factors && !block_per_row         ? kPairedKernel
                                : small                                      ? kSmallKernel
                                : streamed                                   ? kStreamKernel
                                : Use(paths.high_occupancy, problem.k <= 32) ? kHighOccupancyKernel
                                                                             : kDefaultKernel;
  const bool spare_warp =
      variant == kLatencyKernel && block_per_row && problem.factors < kWarpsPerBlock;
  const int warps = block_per_row ? problem.factors + (spare_warp ? 1 : 0) : kWarpsPerBlock;
  p.warps_per_row = block_per_row ? problem.factors : 1;
  p.table_warp = spare_warp ? problem.factors : 0;
  if (variant == kLatencyKernel) {
    // The latency kernel's copy of the stage bounds' corners follows the pair table.
    p.corner_offset = p.table_bytes;
    p.table_bytes += RoundUp16(uint64_t{kMaxFactors - 1} * 2 * kMaxCorners * 2);
  }
  const size_t slices = block_per_row ? static_cast<size_t>(problem.factors) : kWarpsPerBlock;
  // A prefetch room a warp: the paired kernel's (with its sort) for the next row, the streamed
  // kernel's for the next factor's first chunk.
  if (variant == kPairedKernel && p.paired_sort && Use(paths.prefetch_rows, true)) {
    p.prefetch_bytes = 1024;
  } else if (variant == kStreamKernel && Use(paths.prefetch_rows, true)) {
    p.prefetch_bytes = Bf16Type::kStagingBytes;
  }
  if (variant == kStreamKernel) p.narrow_maxima = Use(paths.narrow_maxima, true) ? 1 : 0;
  const size_t shared = size_t{p.table_bytes} + slices * (p.warp_bytes + p.prefetch_bytes);
  if (shared > shared_per_block_) return cudaErrorInvalidConfiguration;
  const KernelFunction kernel = KernelFor(problem.dtype, variant);
  // Blocks resident per multiprocessor, from the limits that bind (computed here rather than by
  // the occupancy API, which costs microseconds per call).
  const int registers = kernel_registers_[static_cast<int>(problem.dtype)][variant];
  const int warp_registers = (registers * 32 + 255) / 256 * 256;
  const int by_registers = registers_per_multiprocessor_ / std::max(1, warp_registers * warps);
  const int by_shared = blocks_by_shared(shared);
  const int by_threads = 2048 / (32 * warps);
  const int resident = std::max(1, std::min({by_registers, by_shared, by_threads, 32}));
  const size_t wanted = block_per_row ? rows : (rows + warps - 1) / warps;
  const size_t fit = size_t{static_cast<size_t>(resident)} * multiprocessors_;
  const unsigned blocks = static_cast<unsigned>(std::min(wanted, fit));
  void* arguments[] = {&p};
  return cudaLaunchKernel(kernel, dim3(blocks), dim3(32 * warps), arguments, shared, stream);
}

}  // namespace pk::cuda
