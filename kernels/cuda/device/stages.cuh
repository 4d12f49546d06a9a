// The pairing stages: stage f combines the running list of factors 0..f-1 with factor f's list and
// keeps the kept[f] best pairs (score key, then i + j, then i). Candidates come from the pair
// table's staircase; a lower bound from its corners admits about 1.3 kept of them; LeanStage ranks
// those by one sort, CutStage by a score-key cut and a ranking of the ties, and StageByCounting
// handles rows of ties too many for the shared-memory room. Post: the kept pair codes in m.scores.
// Loops over survivors, kept pairs or list entries (`for (r = lane; r < n; r += 32)`, mostly one
// or two passes) carry `#pragma unroll 1`, here and in the factor and output phases: unrolled by
// four, each had a trip-count prologue and remainder branches, and every kernel more registers
// (NOTES.md, v18).
#pragma once

#include <cstdint>

#include "kernels/cuda/device/emulator_hooks.cuh"
#include "kernels/cuda/device/warp_memory.cuh"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// A stage candidate's pair code i << 8 | j (i, j < 256).
__device__ __forceinline__ int CodeRow(uint32_t code) { return static_cast<int>(code >> 8); }
__device__ __forceinline__ int CodeColumn(uint32_t code) { return static_cast<int>(code & 255u); }

// OrderedKey(s) of a stage score s, in three instructions where OrderedKey takes six. A score is
// the sum of two list values, which are never NaN but may be NaN's stand-in -inf, and a running
// value may be a rounded NaN sum; so a NaN score is the quiet NaN of an addition, and fmaxf maps
// it to -inf, whose key OrderedKey gives NaN.
__device__ __forceinline__ uint32_t ScoreKey(float s) {
  const uint32_t bits = __float_as_uint(fmaxf(s, -INFINITY));
  return bits ^ (static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u);
}

// The score key of stage candidate `code`.
__device__ __forceinline__ uint32_t CandidateScore(uint32_t code, const float* run_value,
                                                   const float* factor_value) {
  return ScoreKey(run_value[CodeRow(code)] + factor_value[CodeColumn(code)]);
}

// A score key that at least kept[f] candidates of stage f reach: the best far corner of the full
// rectangles of kept pairs, or the worst corner of a staircase of at least kept pairs (hyperbolic,
// and the three slanted ones of KernelParams::slant), whichever is highest (every member of such a
// set scores at least that corner's score). The staircases follow the level lines of the sum of
// two sorted lists, so they are much the tighter; which one is tightest depends on how the lists
// fall off.
// kLatency: the corners come from the copy in shared memory that the table's warp wrote
// (BuildPairTables), not from the parameters: a lane-indexed parameter read costs a constant-cache
// access per distinct address, on the lone pairing warp's path (NOTES.md).
// kSlant: the slanted staircases are compiled in (the default and bfloat16 small-factor kernels;
// elsewhere their code cost more than their tighter bound saved: NOTES.md, "sb").
template <bool kLatency = false, bool kSlant = false>
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
  uint32_t slanted = 0;
  if (kSlant && p.slanted[f]) {
    // Lane i: row i's last pair in each slanted staircase (T < 0: that one is off).
    const int rows = p.kept[f - 1];
    const int last_column = p.list_size[f] - 1;
    const float run = run_value[min(lane, rows - 1)];
    auto last_pair = [&](int limit, int j) {
      const float score = run + factor_value[max(0, min(j, last_column))];
      return limit >= 0 && lane < rows && j >= 0 ? ScoreKey(score) : 0xffffffffu;
    };
    const int t0 = p.slant[f][0];
    const int t1 = p.slant[f][1];
    const int t2 = p.slant[f][2];
    const uint32_t even = __reduce_min_sync(kFullMask, last_pair(t0, t0 - lane));
    const uint32_t tall = __reduce_min_sync(kFullMask, last_pair(t1, (t1 - lane) >> 1));
    const uint32_t wide = __reduce_min_sync(kFullMask, last_pair(t2, t2 - 2 * lane));
    slanted = max(t0 >= 0 ? even : 0u, max(t1 >= 0 ? tall : 0u, t2 >= 0 ? wide : 0u));
  }
  const uint32_t best = max(__reduce_max_sync(kFullMask, rectangle), slanted);
  staircase = __reduce_min_sync(kFullMask, staircase);
  return p.stair_count[f] > 0 ? max(best, staircase) : best;
}

// Stage f with one sort: the candidates that reach the bound, keyed by (score key, i + j, i) and
// sorted descending, give the kept best in order. The key is 32 bits when the survivors' distances
// above the bound, stripped of the trailing zero bits they all share, fit beside the tie bits
// (bfloat16 sums nearly always do), else 64. Writes the kept pair codes, best first, to m.scores.
// Returns false, having written nothing, when more than kStageCapacity candidates reach the bound.
// The candidates are scored two a lane at a time, four in the latency kernel (kLatency, its lone
// pairing warp), or one a step, software-pipelined (kPipelined: the paired-sort kernel); each
// instance takes the form it measured fastest with (NOTES.md, kernel v28). kTopRuns (the paired
// kernel): the kept best of 32-bit keys by sorted runs and a bitonic top-k (SortTopUpTo512) where
// they are at most half the sort's keys. kSlant: StageBound's.
template <class T, bool kLatency = false, bool kTopRuns = false, bool kSlant = false,
          bool kPipelined = false>
__device__ bool LeanStage(const KernelParams& p, const WarpMemory<T>& m, const uint16_t* table,
                          int f, const float* run_value) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  const float* factor_value = m.list_value + f * p.list_capacity;
  const uint32_t bound = StageBound<kLatency, kSlant>(p, f, run_value, factor_value, table);
  const uint16_t* pairs = table + p.table_offset[f];
  const int total = p.candidates[f];
  int count = 0;
  uint32_t spread = 0;  // OR of the survivors' distances above the bound
  uint32_t widest = 0;  // the largest distance
  // Candidate c (lanes past the end score the last candidate again and pass none: no branch
  // around the loads): stored, and counted, when it reaches the bound.
  auto take = [&](int c, uint32_t code, uint32_t score) {
    const bool pass = c < total && score >= bound;
    const unsigned passing = __ballot_sync(kFullMask, pass);
    const int at = count + __popc(passing & lanes_below);
    if (pass && at < kStageCapacity) {
      m.scores[at] = score;
      m.survivor_codes[at] = code;
    }
    const uint32_t distance = pass ? score - bound : 0u;
    spread |= distance;
    widest = max(widest, distance);
    count += __popc(passing);
  };
  if constexpr (kPipelined) {
    // Software-pipelined: the next step's code and score are loaded before this step's stores
    // (which could alias them for all the compiler knows), so that their chain of shared-memory
    // reads overlaps this step's ballot and stores. The last step loads one step past the end.
    uint32_t code = pairs[min(lane, total - 1)];
    uint32_t score = CandidateScore(code, run_value, factor_value);
    for (int base = 0; base < total; base += 32) {
      const uint32_t next_code = pairs[min(base + 32 + lane, total - 1)];
      const uint32_t next_score = CandidateScore(next_code, run_value, factor_value);
      take(base + lane, code, score);
      code = next_code;
      score = next_score;
    }
  } else {
    // Several candidates a lane loaded and scored before any is taken, so that their reads
    // overlap (the stores of `take` keep each group's reads behind the previous group's stores):
    // four on the latency kernel's lone pairing warp, two elsewhere.
    constexpr int kGroup = kLatency ? 4 : 2;
    for (int base = 0; base < total; base += 32 * kGroup) {
      uint32_t code[kGroup];
      uint32_t score[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) code[g] = pairs[min(base + 32 * g + lane, total - 1)];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) score[g] = CandidateScore(code[g], run_value, factor_value);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) take(base + 32 * g + lane, code[g], score[g]);
    }
  }
  EmulatorCountSurvivors(p, f, count, true);
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
#pragma unroll 1
    for (int r = lane; r < count; r += 32) {
      const uint32_t code = m.survivor_codes[r];
      const uint32_t i = code >> 8;
      const uint32_t j = code & 255u;
      keys[r] = (((m.scores[r] - bound) >> zeros) << tie_bits) | ((i + j) << row_bits) | i;
    }
    __syncwarp();
    if constexpr (kTopRuns) {
      SortTopUpTo512(keys, count, kept);
    } else {
      SortUpTo512(keys, count, kept);
    }
#pragma unroll 1
    for (int r = lane; r < kept; r += 32) {
      const uint32_t key = keys[r];
      const uint32_t i = key & row_mask;
      const uint32_t sum = (key >> row_bits) & sum_mask;
      codes[r] = (i << 8) | (sum - i);
    }
  } else {
    uint64_t* keys = m.candidates;
#pragma unroll 1
    for (int r = lane; r < count; r += 32) {
      const uint32_t code = m.survivor_codes[r];
      const uint32_t i = code >> 8;
      const uint32_t j = code & 255u;
      keys[r] = (uint64_t{m.scores[r]} << 32) | ((i + j) << row_bits) | i;
    }
    __syncwarp();
    SortUpTo512(keys, count, kept);  // 64-bit keys: no top-k path (SortTopUpTo512)
#pragma unroll 1
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
    // As in LeanStage: lanes past the end score the last candidate again and pass none.
    const int c = base + lane;
    const uint32_t code = pairs[min(c, total - 1)];
    const uint32_t score = CandidateScore(code, run_value, factor_value);
    const bool pass = c < total && score >= bound;
    const unsigned passing = __ballot_sync(kFullMask, pass);
    const int at = count + __popc(passing & lanes_below);
    if (pass && at < kStageCapacity) {
      m.candidates[at] = CandidateKey(score, code);
      m.scores[at] = score;
    }
    count += __popc(passing);
  }
  __syncwarp();
  return count;
}

// Stage f with a score-key cut: the candidates that reach the bound are stored, the kept-th best
// 32-bit score key found (a sort of up to kLargestSortedCut score keys, else a radix count), the
// candidates above it all taken and the few tied on it ranked by (i + j, i); 64-bit keys order the
// kept pairs where a later stage needs them (`ordered`). Writes the kept pair codes (best first
// when ordered) to m.scores.
template <class T, bool kLatency = false, bool kDirectCut = false, bool kSlant = false>
__device__ void CutStage(const KernelParams& p, const WarpMemory<T>& m, const uint16_t* table, int f,
                         const float* run_value, bool ordered) {
  const int lane = LaneId();
  const unsigned lanes_below = (1u << lane) - 1u;
  const float* factor_value = m.list_value + f * p.list_capacity;
  uint32_t bound = StageBound<kLatency, kSlant>(p, f, run_value, factor_value, table);
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
  EmulatorCountSurvivors(p, f, count, false);
  const uint64_t* selected = nullptr;
  if (count > kStageCapacity) {
    StageByCounting(p, m, pairs, f, run_value, bound, ordered);
    selected = m.candidates;
  } else if (kDirectCut && count <= 64) {
    // Few survivors: one sort of their distinct 64-bit keys (two a
    // lane) instead of the cut's sort, the gathering and the kept pairs' sort.
    SortUpTo512(m.candidates, count, kept);
    selected = m.candidates;
  } else {
    uint32_t cut;
    if (p.half_select[f] > 0 && count <= 32 * p.half_select[f]) {
      // kept = 16 E: the smallest of the top half (chosen's room is free until the ties).
      cut = KthLargestByHalvesOf(m.scores, count, p.half_select[f],
                                 reinterpret_cast<uint32_t*>(m.candidates_chosen));
    } else if (count <= kLargestSortedCut) {
      SortUpTo512(m.scores, count, kept);
      cut = m.scores[kept - 1];
    } else {
      cut = WarpKthLargest(m.scores, count, kept, m.histogram);
    }
    int above = 0;
    int at_cut = 0;
#pragma unroll 1
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
#pragma unroll 1
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
#pragma unroll 1
  for (int r = lane; r < kept; r += 32) m.scores[r] = KeyCode(selected[r]);
  __syncwarp();
}

// The latency kernel's CutStage, out of line: its rows mostly take LeanStage, and an inlined copy
// (about 2 300 instructions) would lie between the pairing warp's stage and output code; that warp
// runs alone on the row's critical path, and waiting for instruction fetch is a large part of its
// time (NOTES.md). The warp's memory is rebuilt from its slice (a reference argument would
// go through local memory).
template <class T>
__device__ __noinline__ void CutStageApart(const KernelParams& p, uint8_t* slice,
                                           const uint16_t* table, int f, const float* run_value,
                                           bool ordered) {
  const WarpMemory<T> m(p, slice);
  CutStage<T, true>(p, m, table, f, run_value, ordered);
}

}  // namespace
}  // namespace pk::cuda
