// The CUDA top-k's kernels and their launcher (launch.h): the kernel templates, one instance per
// element type and KernelVariant, and TopKLauncher, which reads the device's limits once and
// enqueues the launches that launch_plan.cc plans. The device code is in device/*.cuh, one phase
// a file, included only here, so that all of it is one translation unit (whole-program
// compilation, no device linking; the headers' definitions sit in an anonymous namespace, as this
// file's own do); how the kernel works and how fast it runs are in NOTES.md. The emulated build
// compiles this file as C++ for the CPU (emulation/topk_kernel_emulated.cc).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/device/element_types.cuh"
#include "kernels/cuda/device/emulator_hooks.cuh"
#include "kernels/cuda/device/factor_paired.cuh"
#include "kernels/cuda/device/factor_select.cuh"
#include "kernels/cuda/device/factor_small.cuh"
#include "kernels/cuda/device/pair_and_write.cuh"
#include "kernels/cuda/device/pair_table.cuh"
#include "kernels/cuda/device/phase_clock.cuh"
#include "kernels/cuda/device/warp_memory.cuh"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/phase_timing.h"
#include "kernels/cuda/testing/launch_with_paths.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// p.warps_per_row == 1: each warp computes whole rows in a grid-stride loop; warp 0 builds the
// pair table first, behind a barrier.
// p.warps_per_row == F: a block of F warps computes one row at a time: warp f ranks factor f into
// warp 0's lists, then warp 0 pairs and writes (lower latency for small batches). Only warp 0
// reads the pair table, after the row's first barrier, so the latency kernel (kLatency) holds no
// warp at a barrier before its loads: p.table_warp builds the table, a spare warp F where the block
// has room (F < 4; it has no slice, ranks nothing and only keeps the barriers), else warp 0 ahead
// of its factor. The other instances build the table with warp 0 behind one barrier: their
// register allocation is sensitive to this prologue's form (at the 128-register cap, the other
// forms measured spilled and cost up to 1.3 % of throughput; NOTES.md).
// The paired kernel (kPaired, bfloat16) is the default kernel with RankPairedFactors added, and the
// streamed kernel (kStreamed, bfloat16, a warp per row) the default kernel whose factors prefetch
// the next factor's first chunk (RankFactorsStreamed): instances of their own, so that neither
// path's code changes the other instances' machine code. The paired-sort kernel (kPairedSort) is
// the paired kernel for the rows that rank by one sort (SortPairedFactors, inlined), without
// RankPairedFactors, and the paired kernel has RankPairedFactors inlined and no SortPairedFactors:
// the paired rows are bound by instruction fetch, and each runs faster with only its own path's
// code, in line (NOTES.md, kernels v23 and v24).
// kLean = false: PairAndWrite without LeanStage (the float32 small-factor and high-occupancy
// instances). kUnrollOutput: PairAndWrite's output loops unrolled (the bfloat16 unrolled-output
// instance, otherwise the default kernel). The bfloat16 default kernel's factors start their maxima
// bisection narrowed where a lane holds eight maxima, the latency kernel's where it holds four or
// eight (RankFactors' kNarrowPairs, kLatency).
template <class T>
inline constexpr bool kLeanStages = T::kElementBytes == 2;  // float32 stages are never lean by default

template <class T, int kMinBlocks, bool kLatency, bool kPaired = false, bool kStreamed = false,
          bool kLean = true, bool kUnrollOutput = false, bool kPairedSort = false,
          bool kSlantPaired = false>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kMinBlocks)
    TopKKernel(const __grid_constant__ KernelParams p) {
  uint8_t* shared = DynamicShared();
  uint16_t* table = reinterpret_cast<uint16_t*>(shared);
  if constexpr (kLatency) {
    if (static_cast<int>(threadIdx.x >> 5) == p.table_warp) {
      const uint32_t touched = TouchParameters(p);
      BuildPairTables<true>(p, table);
      // Never true (rows > 0 in every launch); keeps the touching loads.
      if (touched == 0x9e3779b9u && p.rows == 0) table[0] = 0;
    }
    if (p.warps_per_row == 1) __syncthreads();
  } else {
    BuildPairTables<false>(p, table);
    __syncthreads();
  }
  const unsigned warp = threadIdx.x >> 5;
  const unsigned warps = blockDim.x >> 5;
  constexpr int kBytes = T::kElementBytes;
  uint8_t* slice = WarpSlice(p, warp);
  WarpMemory<T> m(p, slice);
  // One code path for both modes (the kernel is sensitive to its code size).
  const bool block_per_row = !kStreamed && p.warps_per_row > 1;
  // The stage bounds' slanted staircases in the default instance (of TopKKernel's; the bfloat16
  // small-factor kernel has them too) and the paired-sort kernel's slanted one only: in the
  // streamed, paired, unrolled-output and latency kernels their code cost up to 12 % and their
  // bound gained nothing (NOTES.md, "sb"). The paired-sort rows whose stage keeps more than 64
  // pairs take the instance with them (kSlantPaired: 256x256 k=128 +5.2 %; in the one paired-sort
  // instance they cost k=64 1.7 %).
  constexpr bool kSlant = kSlantPaired || (!kLatency && !kPaired && !kStreamed && !kUnrollOutput &&
                                           kMinBlocks == T::kMinBlocks);
  // LeanStage's scoring: software-pipelined in the paired-sort kernel (not its slanted instance),
  // two candidates a lane in the others (kernel v28: 256x256 k=64 +1.5 % pipelined, +0.3 % by
  // twos; by twos the other instances gain up to 2.8 %, the slanted paired-sort one 2.2 %).
  constexpr bool kPipelined = kPairedSort && !kSlantPaired;
  EmulatorDeclareRules(p, slice, block_per_row);
  unsigned long long row = block_per_row ? blockIdx.x : static_cast<unsigned long long>(blockIdx.x) * warps + warp;
  const unsigned long long row_step = block_per_row ? gridDim.x : static_cast<unsigned long long>(gridDim.x) * warps;
  const int first_factor = block_per_row ? static_cast<int>(warp) : 0;
  const int factor_step = block_per_row ? static_cast<int>(warps) : 1;
  if (block_per_row) {
    const WarpMemory<T> first(p, WarpSlice(p, 0));
    m.list_value = first.list_value;
    m.list_column = first.list_column;
  }
  PhaseClock clock;
  for (; row < p.rows; row += row_step) {
    EmulatorPoisonScratch(p, slice, block_per_row);
    const uint8_t* scores = p.scores + row * p.row_elements * kBytes;
    bool paired = false;
    if constexpr (kPaired) {
      if (p.small_segment == 0) {
        const uint8_t* next = row + row_step < p.rows ? scores + row_step * p.row_elements * kBytes : nullptr;
        // A warp's first row is below row_step; each later one was prefetched by the row before.
        paired = RankPairedFactorsOf<T, kPairedSort>(p, m, scores, block_per_row, next,
                                                     row >= row_step);
      }
    }
    if (!kStreamed && p.small_segment > 0) {
      if (!block_per_row || warp == 0) RankSmallFactorsOf<T>(p, m, scores);
    } else if (!paired) {
      if constexpr (kStreamed) {
        RankFactorsStreamed<T>(p, m, scores, row, row_step);
      } else {
        constexpr bool kNarrowPairs =
            T::kElementBytes == 2 &&
            (kLatency || (!kPaired && !kUnrollOutput && kMinBlocks == T::kMinBlocks));
        RankFactors<T, kNarrowPairs, kLatency>(p, m, scores, first_factor, factor_step);
      }
    }
    clock.Mark(kPhaseFactors);
    if (block_per_row) {
      __syncthreads();
      clock.Mark(kPhaseWait);
    }
    if (!block_per_row || warp == 0) {
      PairAndWrite<T, kLatency, kLean, kUnrollOutput, kPaired, false, kSlant, kPipelined>(
          p, m, table, scores, row, clock);
    }
    if (block_per_row) {
      __syncthreads();
      clock.Mark(kPhaseWait);
    }
  }
  clock.Flush();
}

// The small-factor kernel (p.small_segment > 0, a warp per row): the default kernel's row without
// SelectFactor and the paired path, so that ptxas allocates registers for the small path alone and
// more warps fit on a multiprocessor (kMinBlocks blocks of 4 warps; T::kSmallBlocks); for float32
// also without LeanStage (PairAndWrite's kLean) and the slanted stage bounds (kSlant), which cost
// 8x8x8x8 f32 k=16 7.9 % on the H100.
template <class T, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kMinBlocks)
    TopKSmallKernel(const __grid_constant__ KernelParams p) {
  uint8_t* shared = DynamicShared();
  uint16_t* table = reinterpret_cast<uint16_t*>(shared);
  BuildPairTables<false>(p, table);
  __syncthreads();
  const unsigned warp = threadIdx.x >> 5;
  const unsigned warps = blockDim.x >> 5;
  constexpr int kBytes = T::kElementBytes;
  uint8_t* slice = WarpSlice(p, warp);
  const WarpMemory<T> m(p, slice);
  EmulatorDeclareRules(p, slice, false);
  PhaseClock clock;
  for (unsigned long long row = static_cast<unsigned long long>(blockIdx.x) * warps + warp;
       row < p.rows; row += static_cast<unsigned long long>(gridDim.x) * warps) {
    EmulatorPoisonScratch(p, slice, false);
    const uint8_t* scores = p.scores + row * p.row_elements * kBytes;
    RankSmallFactorsOf<T, true>(p, m, scores);
    clock.Mark(kPhaseFactors);
    PairAndWrite<T, false, kLeanStages<T>, false, false, true, kLeanStages<T>>(p, m, table, scores,
                                                                               row, clock);
  }
  clock.Flush();
}
using KernelFunction = void (*)(KernelParams);

// The compiled instance of each KernelVariant (launch_plan.h) for an element type. The latency
// kernel has no register cap (kMinBlocks 1): its launches put one or two blocks of at most 4 warps
// on a multiprocessor, and the default cap spilled on its lone pairing warp's path.
template <class T>
KernelFunction KernelOf(KernelVariant variant) {
  if constexpr (T::kElementBytes == 2) {
    if (variant == kPairedKernel) return &TopKKernel<T, T::kMinBlocks, false, true>;
    if (variant == kPairedSortKernel) {
      return &TopKKernel<T, T::kMinBlocks, false, true, false, true, false, true>;
    }
    if (variant == kPairedSortSlantedKernel) {
      return &TopKKernel<T, T::kMinBlocks, false, true, false, true, false, true, true>;
    }
    if (variant == kStreamKernel) return &TopKKernel<T, T::kMinBlocks, false, false, true>;
    if (variant == kUnrolledOutputKernel) {
      return &TopKKernel<T, T::kMinBlocks, false, false, false, true, true>;
    }
  }
  if (variant == kSmallKernel) return &TopKSmallKernel<T, T::kSmallBlocks>;
  if (variant == kSmallHighOccupancyKernel) return &TopKSmallKernel<T, T::kSmallMoreBlocks>;
  return variant == kHighOccupancyKernel ? &TopKKernel<T, T::kMoreBlocks, false, false, false, kLeanStages<T>>
         : variant == kLatencyKernel     ? &TopKKernel<T, 1, true>
                                         : &TopKKernel<T, T::kMinBlocks, false>;
}

KernelFunction KernelFor(DType dtype, KernelVariant variant) {
  return dtype == DType::kFloat32 ? KernelOf<Float32Type>(variant) : KernelOf<Bf16Type>(variant);
}
}  // namespace

#if defined(PK_PHASE_TIMING)
cudaError_t ReadPhaseCycles(uint64_t (&cycles)[8], bool reset) {
  static_assert(kPhaseCount == 8);
  unsigned long long values[kPhaseCount];
  cudaError_t error = cudaMemcpyFromSymbol(values, kPhaseCycles, sizeof values);
  for (int q = 0; q < kPhaseCount; ++q) cycles[q] = values[q];
  if (error == cudaSuccess && reset) {
    const unsigned long long zeros[kPhaseCount] = {};
    error = cudaMemcpyToSymbol(kPhaseCycles, zeros, sizeof zeros);
  }
  return error;
}
#endif

Result<TopKLauncher> TopKLauncher::Create(int device) {
  const std::string where = "cuda device " + std::to_string(device);
  cudaError_t error = cudaSetDevice(device);
  if (error != cudaSuccess) return CudaError(where, error);
  cudaDeviceProp properties{};
  error = cudaGetDeviceProperties(&properties, device);
  if (error != cudaSuccess) return CudaError(where, error);
  TopKLauncher launcher;
  launcher.device_ = device;
  DeviceLimits& limits = launcher.limits_;
  limits.multiprocessors = properties.multiProcessorCount;
  limits.shared_per_multiprocessor = properties.sharedMemPerMultiprocessor;
  limits.shared_per_block = properties.sharedMemPerBlockOptin;
  limits.registers_per_multiprocessor = properties.regsPerMultiprocessor;
  for (int index = 0; index < 2 * kKernelVariants; ++index) {
    const DType dtype = index & 1 ? DType::kFloat32 : DType::kBFloat16;
    const KernelVariant variant = static_cast<KernelVariant>(index >> 1);
    const KernelFunction kernel = KernelFor(dtype, variant);
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(properties.sharedMemPerBlockOptin));
    if (error != cudaSuccess) return CudaError(where + ": preparing the top-k kernel", error);
    cudaFuncAttributes attributes{};
    error = cudaFuncGetAttributes(&attributes, kernel);
    if (error != cudaSuccess) return CudaError(where + ": reading the top-k kernel", error);
    limits.kernel_registers[static_cast<int>(dtype)][variant] = attributes.numRegs;
  }
  return launcher;
}

cudaError_t TopKLauncher::Launch(const Problem& problem, const void* scores, size_t rows,
                                 void* values, uint32_t* slots, cudaStream_t stream) const {
  return LaunchWithPaths(*this, problem, scores, rows, values, slots, stream, KernelPaths{});
}

cudaError_t TopKLauncher::Launch(const LaunchPlan& plan, const void* scores, void* values,
                                 uint32_t* slots, cudaStream_t stream) const {
  KernelParams p = plan.params;
  p.scores = static_cast<const uint8_t*>(scores);
  p.values = static_cast<uint8_t*>(values);
  p.slots = slots;
  void* arguments[] = {&p};
  return cudaLaunchKernel(KernelFor(plan.dtype, plan.variant), dim3(plan.blocks),
                          dim3(plan.threads), arguments, plan.shared_bytes, stream);
}

}  // namespace pk::cuda
