// A launch of the CUDA top-k with forced KernelPaths, for tools and tests (pk-cuda-diff draws
// paths at random, pk-bench-cuda turns each off in turn): PlanLaunch with `paths` on the
// launcher's device limits, then TopKLauncher::Launch of that plan. TopKLauncher::Launch for a
// problem is this with the default paths.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/testing/kernel_paths.h"
#include "kernels/problem.h"

namespace pk::cuda {

// As TopKLauncher::Launch(problem, ...): rows == 0 enqueues nothing, and a plan that does not fit
// the device returns cudaErrorInvalidConfiguration.
inline cudaError_t LaunchWithPaths(const TopKLauncher& launcher, const Problem& problem,
                                   const void* scores, size_t rows, void* values, uint32_t* slots,
                                   cudaStream_t stream, const KernelPaths& paths) {
  if (rows == 0) return cudaSuccess;
  const Result<LaunchPlan> plan = PlanLaunch(problem, rows, launcher.limits(), paths);
  if (!plan.ok()) return cudaErrorInvalidConfiguration;
  return launcher.Launch(plan.value(), scores, values, slots, stream);
}

}  // namespace pk::cuda
