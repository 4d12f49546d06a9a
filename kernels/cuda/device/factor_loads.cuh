// Loads of a factor's elements in 16-byte blocks: a chunk's window, its blocks with the elements
// outside the factor marked invalid (T::kInvalidWord, a NaN that never passes a threshold), the
// valid bits of a block, and blocks read back from a prefetch room in shared memory. Pre for all:
// elements are aligned to their size; windows start 16-byte aligned.
#pragma once

#include <cstdint>

#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {


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

// A block copied into shared memory (CopyToSharedAsync, then WaitCopiesToShared), as four words.
__device__ __forceinline__ void LoadPrefetchedBlock(const uint8_t* at, uint32_t (&data)[4]) {
  const uint4 v = *AsVectors(at);
  data[0] = v.x;
  data[1] = v.y;
  data[2] = v.z;
  data[3] = v.w;
}

}  // namespace
}  // namespace pk::cuda
