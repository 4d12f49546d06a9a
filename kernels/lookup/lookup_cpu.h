// The CPU implementation of the memory lookup contract (../shared/SPEC.md), one thread, in two
// phases that the parallel runner (kernels/cpu/parallel_topk.h) splits differently: phase 1 per
// score row (top-k, then weights), phase 2 per output (the weighted sum of value rows).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/topk_cpu.h"
#include "kernels/lookup/lookup.h"
#include "kernels/problem.h"

namespace pk::cpu {

// Phase 1, per score row (rows independent, any split gives the same bits): the top-k's kk
// slots (ascending, as TopKRows gives them) and their weights (weights.h); row_valid[r] = 1, or
// 0 when the row's selected scores have no finite maximum (its weights then 0).
// scores: rows * topk.row_width() elements of topk.dtype, any alignment.
// slots, weights: room for rows * topk.kk() each; row_valid: room for rows.
void LookupWeightsRows(const Problem& topk, const std::byte* scores, size_t rows,
                       uint32_t* slots, float* weights, uint8_t* row_valid, Workspace& ws);

// Phase 2: `outputs` outputs; output o reads rows o*heads .. o*heads+heads-1 of slots/weights
// (rows x kk each) and writes dim elements of output_dtype to out + o * output_row_bytes():
// per column d, acc = 0, then acc = fma(w, V[slot][d], acc) over the rows in order and their
// pairs in order, round_U(acc) at the end. Vectorized across d (AVX-512 / AVX2 chosen at run
// time, and a plain C++ path); each lane is one column's exact fma chain, so every path gives
// the same bits. Slots are trusted (< values.slots); values.dim == problem.dim and
// values.dtype == problem.value_dtype. out: any alignment.
void WeightedSumRows(const LookupProblem& problem, const ValuesView& values,
                     const uint32_t* slots, const float* weights, size_t outputs,
                     std::byte* out);

// The vector paths of WeightedSumRows, for tests that force one: kAuto is the host's best.
enum class SumPath { kAuto, kGeneric, kAvx2, kAvx512 };
// Whether this build and host can run `path`.
bool SumPathAvailable(SumPath path);
// WeightedSumRows on `path` (which must be available).
void WeightedSumRowsOn(SumPath path, const LookupProblem& problem, const ValuesView& values,
                       const uint32_t* slots, const float* weights, size_t outputs,
                       std::byte* out);
// "avx512", "avx2" or "generic": the path WeightedSumRows takes on this host.
const char* SumPathName();

}  // namespace pk::cpu
