// One row's pairing and output: the stages in turn from the ranked factor lists, the running lists
// between them, then the final pairs sorted by slot and written as values and slots (SPEC.md's
// output: kk pairs in slot order). Values are recomputed from the lists' values, and only a -inf
// there (a NaN or -inf score) sends one back to the raw element.
// Its loops over kept pairs are not unrolled (stages.cuh says why), but in the unrolled-output
// instance the last stage's and the output's (kUnrollOutput).
#pragma once

#include <cstdint>

#include "kernels/cuda/device/phase_clock.cuh"
#include "kernels/cuda/device/stages.cuh"
#include "kernels/cuda/device/warp_memory.cuh"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// The pairing stages and the output of one row, from the ranked factor lists in m. Running-list
// entries carry their slot so far and their factor ranks (8 bits each), so that the output needs
// neither a division nor a reload of the row: a value is recomputed from the lists' values, and
// only a -inf there (a NaN or -inf score) sends it back to the raw element. kLean = false builds
// it without LeanStage (every stage a CutStage, whatever p.lean says): the float32 small-factor
// and high-occupancy kernels, whose stages are never lean by default (launch_plan.cc) and whose
// tight register budgets spill less without that code (on the H200: 16x16x16x16 f32 k=32 +5.8 %,
// 1024x1024 f32 k=32 +2.9 %, 128x128x128 f32 k=32 +7.6 %; the default float32 kernel lost 1.2 %
// without it, so it keeps it). kUnrollOutput unrolls the loops over the last stage's pairs and the
// output by four (long outputs, kk > 128; launch_plan.cc): elsewhere one pass or two a lane do not
// pay for the unrolled loops' code. kTopRuns: LeanStage's (the paired kernel). kSlant: the stage
// bounds' slanted staircases (StageBound). kPipelined: LeanStage's scoring loop (the paired-sort
// kernel).
template <class T, bool kLatency = false, bool kLean = true, bool kUnrollOutput = false,
          bool kTopRuns = false, bool kDirectCut = false, bool kSlant = false,
          bool kPipelined = false>
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
    bool lean = false;
    if constexpr (kLean) {
      lean = p.lean[f] &&
             LeanStage<T, kLatency, kTopRuns, kSlant, kPipelined>(p, m, table, f, run_value);
    }
    if (!lean) {
      if constexpr (kLatency) {
        // m is warp 0's own slice in block-per-row mode, the warp's own otherwise.
        uint8_t* slice = reinterpret_cast<uint8_t*>(m.list_value) - p.lists_offset;
        CutStageApart<T>(p, slice, table, f, run_value, f < last);
      } else {
        CutStage<T, false, kDirectCut, kSlant>(p, m, table, f, run_value, f < last);
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
#pragma unroll 1
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
#pragma unroll(kUnrollOutput ? 4 : 1)
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
#pragma unroll(kUnrollOutput ? 4 : 1)
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

}  // namespace
}  // namespace pk::cuda
