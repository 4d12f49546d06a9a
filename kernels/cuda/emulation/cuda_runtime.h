// A CPU stand-in for the part of the CUDA runtime and device language that the top-k kernel
// uses, so that the kernel's own source runs on a machine without a GPU (pk-cuda-emu-diff).
//
// Each thread of a block is a fiber; blocks run one after another. Warp collectives (shuffles,
// ballots, reductions, __syncwarp) and __syncthreads are barriers among the fibers of the warp or
// block, so code that is convergent on the GPU behaves the same here. Memory is ordinary host
// memory: there are no races to see, and none to be hidden beyond what the GPU would also order.
// Shared memory is filled with a garbage pattern before each block, so a read of a word the block
// never wrote shows up as a difference. Not a performance model: only results are meaningful.
//
// What the GPU runs concurrently runs here in one order per launch, so a kernel that lets one warp
// write another's scratch may still pass by luck of timing. The kernel can therefore declare its
// memory rules (DeclarePrivate, DeclareReadOnly, Poison below), and the scheduler checks them at
// every switch between warps: any breach aborts with the offsets involved, whether or not it
// changed a result. Bytes written past the launch's shared-memory size abort too (checked at the
// block's end). With PK_EMU_SCHEDULE_SEED=n in the environment, the next fiber to run is drawn at
// random (seed n) instead of taken in thread order, so that lanes and warps interleave differently
// from run to run of different seeds.
#pragma once

// Every standard header the kernel sources use, before the macros below can touch them.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#define PK_CUDA_EMULATION 1
#define __device__
#define __host__
#define __global__
#define __shared__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) alignas(n)

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;
inline constexpr unsigned cudaStreamNonBlocking = 1;
inline constexpr unsigned cudaEventDefault = 0;
inline constexpr unsigned cudaEventBlockingSync = 1;
inline constexpr unsigned cudaHostAllocDefault = 0;

struct cudaDeviceProp {
  char name[256];
  int multiProcessorCount;
  size_t sharedMemPerMultiprocessor;
  size_t sharedMemPerBlockOptin;
  int regsPerMultiprocessor;
  int l2CacheSize;
};
struct cudaFuncAttributes {
  int numRegs;
};

namespace pk::emu {

// The calling fiber's coordinates (set by the scheduler at every switch).
extern uint3 thread_index;
extern uint3 block_index;
extern dim3 block_dim;
extern dim3 grid_dim;

// Barrier among the 32 lanes of the calling thread's warp, with a value exchange: every lane
// deposits `mine`, and after the call `lanes[l]` holds lane l's deposit (valid until the next
// collective of this warp).
const uint64_t* WarpExchange(uint64_t mine);
void WarpBarrier();
void BlockBarrier();
uint8_t* DynamicShared();
// Memory rules a kernel declares (emulation builds only; the GPU checks none of them):
// DeclarePrivate: `bytes` of shared memory at `begin` belong to the calling thread's warp (each
// warp has at most one such region; a later call replaces it). Whenever the warp is switched back
// in, they must hold what it left there.
void DeclarePrivate(const void* begin, size_t bytes);
// DeclareReadOnly: bytes that must not change from now until the block ends.
void DeclareReadOnly(const void* begin, size_t bytes);
// Poison: fills bytes with garbage (scratch whose old contents must not be read again).
void Poison(void* begin, size_t bytes);
// With PK_EMU_STAGE_STATS set (to anything but 0): tallies one stage's survivors (the candidates
// that reach its bound) by factor count, stage, kept pairs and path, and prints their distribution
// to stderr when the process exits; without it, nothing. Shapes that agree on all four share a
// line, so one shape a run (pk-cuda-diff --shape) shows which sort sizes that shape's stages take.
void CountSurvivors(int factors, int stage, int kept, int survivors, bool lean);
// Runs `body` once per thread of every block of the grid.
void RunGrid(dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body);
cudaError_t& LastError();

}  // namespace pk::emu

#define threadIdx (::pk::emu::thread_index)
#define blockIdx (::pk::emu::block_index)
#define blockDim (::pk::emu::block_dim)
#define gridDim (::pk::emu::grid_dim)

template <class A, class B>
constexpr std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
template <class A, class B>
constexpr std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) > static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}

inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int b = 0; b < 32; ++b) r |= ((x >> b) & 1u) << (31 - b);
  return r;
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline long long clock64() {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = v + old;
  return old;
}
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = v + old;
  return old;
}

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  if (mask != 0xffffffffu) std::abort();  // the kernel only syncs whole warps
  pk::emu::WarpBarrier();
}
inline void __syncthreads() { pk::emu::BlockBarrier(); }
inline unsigned __activemask() { return 0xffffffffu; }

namespace pk::emu {
template <class T>
inline uint64_t ToBits(T v) {
  static_assert(sizeof(T) <= 8);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
inline T FromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
inline int Lane() { return static_cast<int>(thread_index.x & 31u); }
inline void CheckFull(unsigned mask) {
  if (mask != 0xffffffffu) std::abort();
}
}  // namespace pk::emu

template <class T>
inline T __shfl_sync(unsigned mask, T v, int source, int width = 32) {
  pk::emu::CheckFull(mask);
  const uint64_t* lanes = pk::emu::WarpExchange(pk::emu::ToBits(v));
  const int lane = pk::emu::Lane();
  const int from = (lane & ~(width - 1)) + (source & (width - 1));
  const T result = pk::emu::FromBits<T>(lanes[from]);
  pk::emu::WarpBarrier();
  return result;
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  pk::emu::CheckFull(mask);
  const uint64_t* lanes = pk::emu::WarpExchange(pk::emu::ToBits(v));
  const int lane = pk::emu::Lane();
  const int in_segment = lane & (width - 1);
  const T result = in_segment >= static_cast<int>(delta) ? pk::emu::FromBits<T>(lanes[lane - delta]) : v;
  pk::emu::WarpBarrier();
  return result;
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  pk::emu::CheckFull(mask);
  const uint64_t* lanes = pk::emu::WarpExchange(pk::emu::ToBits(v));
  const int lane = pk::emu::Lane();
  const int in_segment = lane & (width - 1);
  const T result =
      in_segment + static_cast<int>(delta) < width ? pk::emu::FromBits<T>(lanes[lane + delta]) : v;
  pk::emu::WarpBarrier();
  return result;
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  pk::emu::CheckFull(mask);
  const uint64_t* lanes = pk::emu::WarpExchange(pk::emu::ToBits(v));
  const int lane = pk::emu::Lane();
  const int from = lane ^ lane_mask;
  const T result = (from & ~(width - 1)) == (lane & ~(width - 1)) ? pk::emu::FromBits<T>(lanes[from]) : v;
  pk::emu::WarpBarrier();
  return result;
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  pk::emu::CheckFull(mask);
  const uint64_t* lanes = pk::emu::WarpExchange(predicate != 0 ? 1u : 0u);
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) bits |= static_cast<unsigned>(lanes[l] & 1u) << l;
  pk::emu::WarpBarrier();
  return bits;
}
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == mask; }
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
template <class Op>
inline unsigned EmuReduce(unsigned mask, unsigned v, Op op) {
  pk::emu::CheckFull(mask);
  const uint64_t* lanes = pk::emu::WarpExchange(v);
  unsigned acc = static_cast<unsigned>(lanes[0]);
  for (int l = 1; l < 32; ++l) acc = op(acc, static_cast<unsigned>(lanes[l]));
  pk::emu::WarpBarrier();
  return acc;
}
inline unsigned __reduce_add_sync(unsigned mask, unsigned v) {
  return EmuReduce(mask, v, [](unsigned a, unsigned b) { return a + b; });
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
  return EmuReduce(mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; });
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) {
  return EmuReduce(mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; });
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) {
  return EmuReduce(mask, v, [](unsigned a, unsigned b) { return a | b; });
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned v) {
  return EmuReduce(mask, v, [](unsigned a, unsigned b) { return a & b; });
}

// ---- host runtime ----
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device);
cudaError_t cudaMalloc(void** pointer, size_t bytes);
cudaError_t cudaMallocHost(void** pointer, size_t bytes);
cudaError_t cudaFree(void* pointer);
cudaError_t cudaFreeHost(void* pointer);
cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned flags);
// Streams and events: the emulator runs every call to completion, so they are tokens that order
// nothing (a distinct non-null handle each; destroying frees it).
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* to, int value, size_t bytes);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

template <class F>
cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) {
  return cudaSuccess;
}
template <class F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, F*) {
  attributes->numRegs = 128;
  return cudaSuccess;
}

template <class... P>
cudaError_t cudaLaunchKernel(void (*kernel)(P...), dim3 grid, dim3 block, void** args,
                             size_t shared_bytes = 0, cudaStream_t = nullptr) {
  if (block.x == 0 || block.x % 32 != 0 || block.x > 1024 || grid.x == 0 ||
      shared_bytes > 227 * 1024) {
    return cudaErrorInvalidConfiguration;
  }
  auto call = [&]<size_t... I>(std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cvref_t<P>*>(args[I])...);
  };
  pk::emu::RunGrid(grid, block, shared_bytes, [&] { call(std::index_sequence_for<P...>{}); });
  return cudaSuccess;
}
