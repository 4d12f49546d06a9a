// The CUDA top-k's launch plan: for a validated problem, a number of rows and a device's limits,
// which kernel instance runs, its grid and block, its shared memory and its KernelParams. A pure
// function of its inputs (no CUDA call, no state), plain C++, so that the choice of instance is
// unit-tested on the CPU (tests/kernels/launch_plan_test.cc) without nvcc or a GPU. The launcher
// (launch.h) reads the limits from the device once and enqueues what PlanLaunch returns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/testing/kernel_paths.h"
#include "kernels/problem.h"

namespace pk::cuda {

// The kernel instances of an element type (each compiled once per type; topk_kernel.cu):
//   kDefaultKernel        a warp per row, the default register budget (T::kMinBlocks);
//   kHighOccupancyKernel  the same code built for more resident warps (T::kMoreBlocks);
//   kLatencyKernel        a block of F warps per row and a spare warp for the pair table, no
//                         register cap (one or two blocks of at most 4 warps a multiprocessor);
//   kPairedKernel         two bfloat16 factors of width <= 256 ranked together by thresholds
//                         (bfloat16 only);
//   kSmallKernel          every width <= 64, one register sort (T::kSmallBlocks);
//   kStreamKernel         bfloat16 factors that prefetch the next factor's first chunk;
//   kUnrolledOutputKernel the default bfloat16 kernel with its output loops unrolled (long
//                         outputs: 8 or more pairs a lane);
//   kPairedSortKernel     the paired rows that rank by one sort of all elements (paired_sort),
//                         in an instance without the thresholds path's code;
//   kSmallHighOccupancyKernel the small-factor kernel built for more resident blocks
//                         (T::kSmallMoreBlocks; float32 only);
//   kPairedSortSlantedKernel the paired-sort kernel with the stage bounds' slanted staircases,
//                         for stages that keep more than 64 pairs (bfloat16 only).
// Float32 has no paired, paired-sort (slanted or not), streamed or unrolled-output instance: those
// variants name its default kernel. Bfloat16's small high-occupancy variant names its small-factor
// kernel.
enum KernelVariant : int {
  kDefaultKernel,
  kHighOccupancyKernel,
  kLatencyKernel,
  kPairedKernel,
  kSmallKernel,
  kStreamKernel,
  kUnrolledOutputKernel,
  kPairedSortKernel,
  kSmallHighOccupancyKernel,
  kPairedSortSlantedKernel,
  kKernelVariants
};

// The variant's name as tools print it ("default", "high-occupancy", "latency", ...).
const char* KernelVariantName(KernelVariant variant);

// What the plan needs to know of a device (cudaDeviceProp, and the registers each compiled
// instance uses: cudaFuncGetAttributes' numRegs).
struct DeviceLimits {
  int multiprocessors = 0;
  size_t shared_per_multiprocessor = 0;  // bytes usable by blocks on one multiprocessor
  size_t shared_per_block = 0;           // opt-in maximum for one block
  int registers_per_multiprocessor = 0;
  int kernel_registers[2][kKernelVariants] = {};  // per thread, by DType and KernelVariant
};

// One launch: `params` is complete but for the three pointers (scores, values, slots), which the
// launcher fills in.
struct LaunchPlan {
  KernelParams params{};
  DType dtype = DType::kFloat32;  // with variant, names the kernel instance
  KernelVariant variant = kDefaultKernel;
  unsigned blocks = 0;         // grid size
  unsigned threads = 0;        // block size: 32 * warps
  size_t shared_bytes = 0;     // dynamic shared memory a block
};

// The parameters and shared-memory layout of one warp's slice for `problem`, independent of the
// device and of the number of rows (the block-per-row and instance-specific fields are left 0:
// PlanLaunch sets them).
KernelParams MakeParams(const Problem& problem, const KernelPaths& paths);

// The launch of `rows` rows of `problem` on a device with `limits`. Pre: rows >= 1. Few rows
// (at most two a multiprocessor) take a block of F warps per row in the latency kernel; more take
// four warps a block, a row per warp, in a grid-stride loop of as many blocks as fit on the device
// at once, in the first instance that applies of: paired (paired-sort, its slanted instance where
// the stage keeps more than 64 pairs, or thresholds), small-factor (where shared memory lets
// T::kSmallBlocks blocks in; for float32 its ten-block instance where ten fit), streamed
// (bfloat16, where its prefetch room costs no resident block, and for k <= 32 only where every
// factor is one chunk wide), high-occupancy (k <= 32), unrolled-output (bfloat16, kk > 128),
// default. Returns an error (field "shape") when the
// block's shared memory exceeds limits.shared_per_block.
Result<LaunchPlan> PlanLaunch(const Problem& problem, size_t rows, const DeviceLimits& limits,
                              const KernelPaths& paths = {});

}  // namespace pk::cuda
