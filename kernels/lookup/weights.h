// Step 1 of the memory lookup contract (../shared/SPEC.md), shared by every backend: from one
// raw score row and the kk slots its top-k selected (ascending), each slot's float32 score and
// the softmax weights. Header-only, host and device (CUDA) code alike, so that every backend
// evaluates the same operations in the same order and gets the same bits.
//
// The float32 score s of a slot is the top-k's recomputed value before its final round_T: the
// slot's columns by mixed radix (c[F-1] = slot mod w[F-1], ...), v = x[off0 + c0], then for
// f = 1..F-1: v = fl32(g(v) + x[off_f + c_f]), g the identity for f = 1 and round_T after.
// The weights: m = max s (NaN never wins); if m is not finite the row is invalid and its
// weights are 0; else e_i = 0 for s_i = -inf or NaN, otherwise Exp(fl32(s_i - m)); Z = the
// float32 sum of the e_i in order i = 0, 1, ...; weight_i = fl32(e_i / Z).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/lookup/exp.h"
#include "kernels/numeric.h"
#include "kernels/problem.h"

namespace pk {

// The part of a Problem the score recomputation needs, as a plain struct for device code.
struct ScoreShape {
  int factors = 0;
  uint32_t widths[kMaxFactors] = {};
  uint32_t offsets[kMaxFactors] = {};  // the first column of each factor in a row
  uint32_t kk = 0;
  uint32_t row_width = 0;  // elements in one row
  bool bf16 = false;       // the scores' dtype is bfloat16 (else float32)
};

inline ScoreShape MakeScoreShape(const Problem& problem) {
  ScoreShape shape;
  shape.factors = problem.factors;
  for (int f = 0; f < problem.factors; ++f) {
    shape.widths[f] = problem.widths[f];
    shape.offsets[f] = problem.offset(f);
  }
  shape.kk = problem.kk();
  shape.row_width = problem.row_width();
  shape.bf16 = problem.dtype == DType::kBFloat16;
  return shape;
}

// Element `column` of a raw row, widened to float32. On the host the row may have any
// alignment; on the device it must be aligned to its element size.
PK_HOST_DEVICE float ScoreElement(const std::byte* row, uint32_t column, bool bf16) {
#if defined(__CUDA_ARCH__)
  if (bf16) return Bf16ToFloat(reinterpret_cast<const uint16_t*>(row)[column]);
  return reinterpret_cast<const float*>(row)[column];
#else
  if (bf16) {
    uint16_t bits;
    std::memcpy(&bits, row + size_t{column} * 2, sizeof bits);
    return Bf16ToFloat(bits);
  }
  float x;
  std::memcpy(&x, row + size_t{column} * 4, sizeof x);
  return x;
#endif
}

// The float32 score of `slot` (< product of the widths) in `row`.
PK_HOST_DEVICE float SlotScore(const ScoreShape& shape, const std::byte* row, uint32_t slot) {
  uint32_t columns[kMaxFactors];
  for (int f = shape.factors - 1; f >= 1; --f) {
    columns[f] = slot % shape.widths[f];
    slot /= shape.widths[f];
  }
  columns[0] = slot;
  float v = ScoreElement(row, shape.offsets[0] + columns[0], shape.bf16);
  for (int f = 1; f < shape.factors; ++f) {
    const float previous = (f >= 2 && shape.bf16) ? RoundToBf16(v) : v;
    v = Add(previous, ScoreElement(row, shape.offsets[f] + columns[f], shape.bf16));
  }
  return v;
}

PK_HOST_DEVICE float NegativeInfinity() { return BitsToFloat(0xff800000u); }

// The running maximum of the scores: a NaN score never replaces it.
PK_HOST_DEVICE float MaxScore(float m, float s) { return s > m ? s : m; }

// Whether a maximum is a finite float (neither infinity nor NaN).
PK_HOST_DEVICE bool IsFiniteFloat(float x) { return (FloatBits(x) & 0x7f800000u) != 0x7f800000u; }

// e_i of the contract, for a finite maximum m.
PK_HOST_DEVICE float WeightTerm(float s, float m) {
  if (!(s > NegativeInfinity())) return 0.0f;  // -inf or NaN
  return Exp(Sub(s, m));
}

// The kk weights of one row (slots ascending, each below the product of the widths). Returns
// false, with every weight 0, when the scores' maximum is not finite.
PK_HOST_DEVICE bool RowWeights(const ScoreShape& shape, const std::byte* row, const uint32_t* slots,
                               float* weights) {
  const uint32_t kk = shape.kk;
  float m = NegativeInfinity();
  for (uint32_t i = 0; i < kk; ++i) {
    weights[i] = SlotScore(shape, row, slots[i]);
    m = MaxScore(m, weights[i]);
  }
  if (!IsFiniteFloat(m)) {
    for (uint32_t i = 0; i < kk; ++i) weights[i] = 0.0f;
    return false;
  }
  float z = 0.0f;
  for (uint32_t i = 0; i < kk; ++i) {
    weights[i] = WeightTerm(weights[i], m);
    z = Add(z, weights[i]);
  }
  for (uint32_t i = 0; i < kk; ++i) weights[i] = Div(weights[i], z);
  return true;
}

}  // namespace pk
