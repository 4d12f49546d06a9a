// The arithmetic of SPEC.md, shared by every backend: bfloat16 <-> float32, the ranking key, and
// the per-stage rounding. Header-only and usable from CUDA device code.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PK_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define PK_HOST_DEVICE inline
#endif

namespace pk {

PK_HOST_DEVICE uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

PK_HOST_DEVICE float BitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// bfloat16 pattern -> float32: exact.
PK_HOST_DEVICE float Bf16ToFloat(uint16_t bits) { return BitsToFloat(uint32_t{bits} << 16); }

// float32 -> bfloat16, round to nearest even; overflow goes to infinity, NaN stays NaN (quiet).
PK_HOST_DEVICE uint16_t FloatToBf16(float x) {
  const uint32_t bits = FloatBits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// round_T of SPEC.md for T = bfloat16: the float32 value of the nearest bfloat16.
PK_HOST_DEVICE float RoundToBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

// The ranking key of SPEC.md: an unsigned integer whose order is the order of the float, with
// NaN ranked as -inf and -0 just below +0.
PK_HOST_DEVICE uint32_t OrderedKey(float x) {
  uint32_t bits = FloatBits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) bits = 0xff800000u;  // NaN -> -inf
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The same key for a bfloat16 pattern, in 16 bits (the float key's high half).
PK_HOST_DEVICE uint16_t OrderedKeyBf16(uint16_t bits) {
  if ((bits & 0x7fffu) > 0x7f80u) bits = 0xff80u;  // NaN -> -inf
  return static_cast<uint16_t>((bits & 0x8000u) ? ~bits : (bits | 0x8000u));
}

// Inverse of OrderedKey on non-NaN values.
PK_HOST_DEVICE float KeyToFloat(uint32_t key) {
  return BitsToFloat((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// Inverse of OrderedKeyBf16 on non-NaN patterns.
PK_HOST_DEVICE uint16_t KeyToBf16(uint16_t key) {
  return static_cast<uint16_t>((key & 0x8000u) ? (key & 0x7fffu) : ~key);
}

}  // namespace pk
