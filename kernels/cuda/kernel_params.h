// The contract between the host's launch plan (launch_plan.cc) and the kernel's device code
// (device/*.cuh): the kernel's compile-time sizes, each element type's chunk layout and occupancy
// budget, and KernelParams, the one parameter every kernel instance takes. Plain C++ (no CUDA
// types), so that launch_plan.cc and its tests build without nvcc. The field order of KernelParams
// is part of the kernels' machine code (the parameters live in the constant bank): new fields go
// last, so that no existing field moves.
#pragma once

#include <cstdint>

#include "kernels/problem.h"

namespace pk::cuda {

inline constexpr int kWarpsPerBlock = 4;     // warps of a block in a warp-per-row launch
inline constexpr int kMaxCorners = 32;       // stage-bound corners per stage (KernelParams)
inline constexpr int kChunkElements = 1024;  // per staging chunk, either type
// Stage survivors held in shared memory (sorts go this far).
inline constexpr int kStageCapacity = 512;
// Ties straddling a stage's cut ranked by counting, a lane each.
inline constexpr int kMaxRankedTies = 32;
// CutStage sorts up to this many survivors to find its cut; more take a radix count, the only
// stage use of a warp's histogram (so slices whose stages never exceed it go without one).
inline constexpr int kLargestSortedCut = 256;

// Chunk layout and occupancy budget of each element type; the device traits (device/
// element_types.cuh) derive from these. A chunk is held as 16-byte blocks of four 32-bit words,
// kBlocksPerLane blocks a lane. k*Blocks: blocks of kWarpsPerBlock warps per multiprocessor that a
// kernel instance is built for (__launch_bounds__), which caps its registers.
struct Bf16Layout {
  static constexpr int kElementBytes = 2;
  static constexpr int kPerBlock = 8;          // elements in a 16-byte block
  static constexpr int kBlocksPerLane = 4;     // 32 lanes * 4 blocks * 8 = 1 024 elements
  static constexpr int kStagingBytes = 32 * kBlocksPerLane * 16;
  static constexpr int kMaxGroupsPerBlock = 4;
  static constexpr int kMinBlocks = 4;  // blocks of 4 warps per SM: caps registers at 128
  static constexpr int kMoreBlocks = 6;  // the high-occupancy variant: 80 registers
  static constexpr int kSmallBlocks = 5;  // the small-factor kernel: 96 registers
  static constexpr int kSmallMoreBlocks = kSmallBlocks;  // no more-blocks small instance
};

struct Float32Layout {
  static constexpr int kElementBytes = 4;
  static constexpr int kPerBlock = 4;
  static constexpr int kBlocksPerLane = 8;  // 32 lanes * 8 blocks * 4 = 1 024 elements
  static constexpr int kStagingBytes = 32 * kBlocksPerLane * 16;
  static constexpr int kMaxGroupsPerBlock = 2;
  static constexpr int kMinBlocks = 3;  // 168 registers: no spills (a cap of 128 spills, slower)
  static constexpr int kMoreBlocks = 4;  // the high-occupancy variant: 128 registers
  static constexpr int kSmallBlocks = 8;  // the small-factor kernel: 64 registers
  static constexpr int kSmallMoreBlocks = 10;  // its more-blocks instance: 48 registers
};

// Everything a launch needs to know about the shape, computed on the host (launch_plan.cc's
// MakeParams) and passed to the kernel by value as a __grid_constant__ parameter.
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
  // Three slanted staircases {a i + b j <= T, i < min(kept[f - 1], 32)} of at least kept pairs,
  // (a, b) = (1, 1), (1, 2), (2, 1): T, or -1 where none fits 32 rows or the slants are off (by
  // default in stages that keep at most 32 pairs).
  // Lane i scores row i's last pair of each; the worst of a staircase's bounds the stage too.
  // They follow the level lines of lists that fall off evenly, where the hyperbolic staircase
  // follows those of lists whose first entries stand out. Read only by the instances built with
  // them (StageBound's kSlant: the default and bfloat16 small-factor kernels, and the paired-sort
  // kernel's slanted instance).
  int slanted[kMaxFactors];  // any slant limit >= 0
  int16_t slant[kMaxFactors][3];
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
  // Selections by two sorted halves (WarpTopHalf) instead of a full sort. half_select[f]:
  // CutStage's cut (the kept-th score key) where at most 2 kept candidates reach the bound:
  // E = kept / 16 for kept a power of two from 16 to 128, else 0.
  // half_select_maxima: RankPairedFactors' thresholds where kf is half the maxima's segment.
  int half_select[kMaxFactors];
  int half_select_maxima;
  // The latency kernel only: where its table's warp copies the stage bounds'
  // corners (bytes into the block's shared memory, after the pair table).
  uint32_t corner_offset;
  // The paired kernel ranks both factors by one sort of all their elements (SortPairedFactors)
  // instead of thresholds and a sort of the survivors (RankPairedFactors).
  int paired_sort;
  // With paired_sort: bytes a warp for the prefetch of its next row (0: none), after the slices.
  // In the streamed kernel: bytes a warp for the prefetch of the next factor's first chunk.
  uint32_t prefetch_bytes;
  // The streamed kernel and the bfloat16 default and latency kernels only: their maxima bisection
  // starts from the lanes' j-th maxima and stops early (KthGroupMaximum16, kNarrow).
  int narrow_maxima;
};

}  // namespace pk::cuda
