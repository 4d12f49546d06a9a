// How the CUDA tools (pk-cuda-diff, pk-bench-cuda) handle a CUDA failure: they have nothing to
// recover, so a failed call or resource prints "<program>: <step> failed: <CUDA error>" (the step
// as written, the error as cuda_resources.h's CudaMessage) to stderr and exits with status 2.
#pragma once

#include <cuda_runtime.h>
#include <errno.h>  // program_invocation_short_name (glibc)

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_resources.h"
#include "kernels/problem.h"

namespace pk::cuda {

[[noreturn]] inline void ExitWith(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, message.c_str());
  std::exit(2);
}

inline void ExitUnless(cudaError_t error, const char* step) {
  if (error != cudaSuccess) ExitWith(CudaMessage(std::string(step) + " failed", error));
}

// The value made, or the tool ends with its error.
template <class T>
T ValueOrExit(Result<T> made) {
  if (!made.ok()) ExitWith(made.error().message);
  return std::move(made.value());
}

}  // namespace pk::cuda

// CUDA_OK(call): the call, or the tool ends naming it.
#define CUDA_OK(call) ::pk::cuda::ExitUnless((call), #call)
