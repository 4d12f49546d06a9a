// The launcher of the CUDA top-k over device memory and a stream: what an executor calls.
//
// One TopKLauncher per device, made once (it reads the device's limits and prepares the kernels);
// Launch() then only enqueues work: it allocates nothing, copies nothing and never synchronizes,
// so it may be called from any thread for any stream of that device. The kernel keeps all its
// scratch in shared memory; no workspace buffer is needed. Which kernel instance runs, and how, is
// launch_plan.h's PlanLaunch, a pure function of the problem, the rows and the device's limits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/launch_plan.h"
#include "kernels/problem.h"

namespace pk::cuda {

class TopKLauncher {
 public:
  // Prepares the kernels for `device` and makes it current for the calling thread.
  // Errors (field "device") name the device and the CUDA error.
  static Result<TopKLauncher> Create(int device);

  // Enqueues SPEC.md's top-k for `rows` consecutive rows on `stream` (of this launcher's device,
  // which must be current).
  //   scores: rows * problem.row_width() elements of problem.dtype in device memory, aligned to
  //           the element size (any row of a larger batch may be the first);
  //   values: room for rows * problem.kk() elements of problem.dtype (element-aligned);
  //   slots:  room for rows * problem.kk() uint32 (4-byte aligned).
  // Each output row is in slot order. rows == 0 enqueues nothing. Returns cudaSuccess or the
  // error of the launch itself (errors of the running kernel surface at the stream's next sync);
  // cudaErrorInvalidConfiguration where the plan does not fit the device.
  cudaError_t Launch(const Problem& problem, const void* scores, size_t rows, void* values,
                     uint32_t* slots, cudaStream_t stream) const;

  // Enqueues a plan made by PlanLaunch(problem, rows, limits(), ...) for the same buffers as
  // above: how tools and tests launch with forced KernelPaths.
  cudaError_t Launch(const LaunchPlan& plan, const void* scores, void* values, uint32_t* slots,
                     cudaStream_t stream) const;

  int device() const { return device_; }
  int multiprocessors() const { return limits_.multiprocessors; }
  const DeviceLimits& limits() const { return limits_; }

 private:
  int device_ = 0;
  DeviceLimits limits_;
};

}  // namespace pk::cuda
