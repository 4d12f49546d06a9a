// The kernel's element types, Bf16Type and Float32Type, the T of every device template: how an
// element of a chunk's 16-byte block is read, its value, its rounding and store, and the factor
// sort key (a distinct composite of the element's ordered key and its column; SPEC.md's order).
// Their chunk layout and occupancy budgets are the plain constants of kernel_params.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"
#include "kernels/numeric.h"

namespace pk::cuda {
namespace {

struct Bf16Type : Bf16Layout {
  using Key = uint32_t;  // OrderedKeyBf16(x) << 16 | column
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

struct Float32Type : Float32Layout {
  using Key = uint64_t;  // OrderedKey(x) << 32 | column
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

}  // namespace
}  // namespace pk::cuda
