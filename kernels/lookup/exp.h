// Exp: the float32 exponential of the memory lookup contract (../shared/SPEC.md, "The memory
// lookup contract"), one function that gives the same bits on the host and on a CUDA device.
//
// It is made of float32 additions, multiplications and fused multiply-adds only, each written
// out (Fma, Add, Sub, Div below), so that neither compiler may contract or reorder them: no library
// exp/expf/exp2f and no fast-math intrinsic, whose results differ between the C library and CUDA.
//
// Domain and accuracy (the lookup only calls it on x = s - max <= 0):
// - x in [kExpLowest, 0]: relative error at most 2^-21 against the exact e^x (measured by
//   tests/kernels/exp_test.cc against long double expl); the result is a normal float32.
// - x < kExpLowest (= -87.33f, just above ln(2^-126) = -87.33654), -inf and NaN: exactly +0.
//   (Below -87.3365 e^x is subnormal; the cut is kept above that so that no result is.)
// - Exp(+0) = Exp(-0) = 1 exactly.
// Method: n = nearest integer to x / ln 2 (by the 1.5 * 2^23 rounding trick), r = x - n ln 2 in
// two fma steps (|r| <= 0.347), e^r by its degree-7 Taylor polynomial in Horner form with fma
// (truncation error below 5.2e-9 relative), then 2^n applied to its exponent bits (exact, since
// the result stays normal).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/numeric.h"

namespace pk {

// One IEEE float32 fused multiply-add, a * b + c rounded once, on both sides.
PK_HOST_DEVICE float Fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// One IEEE float32 addition / subtraction / division, round to nearest even, never contracted.
PK_HOST_DEVICE float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
PK_HOST_DEVICE float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
PK_HOST_DEVICE float Div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// The smallest x for which Exp computes e^x; below it (and for NaN) Exp returns +0.
inline constexpr float kExpLowest = -87.33f;

PK_HOST_DEVICE float Exp(float x) {
  if (!(x >= kExpLowest)) return 0.0f;  // also NaN and -inf
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundMagic = 12582912.0f;      // 1.5 * 2^23: t's unit in the last place is 1
  constexpr float kLn2Hi = 0.693145751953125f;     // ln 2 to 16 bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;  // ln 2 - kLn2Hi
  const float t = Fma(x, kLog2e, kRoundMagic);
  const float n = Sub(t, kRoundMagic);  // exact: an integer in [-126, 0]
  const int32_t exponent = static_cast<int32_t>(FloatBits(t) - FloatBits(kRoundMagic));
  float r = Fma(n, -kLn2Hi, x);
  r = Fma(n, -kLn2Lo, r);
  // e^r = sum over j of r^j / j!, j = 0..7 (the coefficients 1/j! rounded to float32).
  float p = 0x1.a01a02p-13f;
  p = Fma(p, r, 0x1.6c16c2p-10f);
  p = Fma(p, r, 0x1.111112p-7f);
  p = Fma(p, r, 0x1.555556p-5f);
  p = Fma(p, r, 0x1.555556p-3f);
  p = Fma(p, r, 0.5f);
  p = Fma(p, r, 1.0f);
  p = Fma(p, r, 1.0f);
  // p * 2^n by adding n to p's exponent field: exact, as p * 2^n is normal (n >= -126 and
  // p > 1 where n = -126), and not a multiplication that a compiler could fuse into a caller's
  // addition (host compilers contract a * b + c by default).
  return BitsToFloat(FloatBits(p) + (static_cast<uint32_t>(exponent) << 23));
}

}  // namespace pk
