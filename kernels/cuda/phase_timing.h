// Phase timing of the CUDA top-k, in profiling builds only (pk_kernels_cuda_phases, built with
// PK_PHASE_TIMING=1; device/phase_clock.cuh counts): the clock cycles each phase of the kernel
// took, summed over every warp of the launches since the last reset. Other builds declare nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pk::cuda {

#if defined(PK_PHASE_TIMING)
// Copies the counters into `cycles` (factors, stages 1-3, running lists, slot sort, output, block
// waits), and zeroes them when `reset`. Returns the CUDA error of the copies.
cudaError_t ReadPhaseCycles(uint64_t (&cycles)[8], bool reset);
#endif

}  // namespace pk::cuda
