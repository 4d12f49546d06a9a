// Phase timing for profiling builds (PK_PHASE_TIMING): PhaseClock sums each phase's clock cycles
// over the warps of a launch into kPhaseCycles, which phase_timing.h's ReadPhaseCycles reads back.
// In every other build PhaseClock is empty and its calls compile to nothing, so the kernels'
// machine code does not depend on this file.
#pragma once

#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// Where a warp's cycles go, for profiling builds (PK_PHASE_TIMING): each phase's clock cycles,
// summed over the warps of a launch into kPhaseCycles. A no-op otherwise.
enum Phase : int {
  kPhaseFactors,   // ranking the factors (including the row's loads)
  kPhaseStage1,    // stage selections, one per stage
  kPhaseStage2,
  kPhaseStage3,
  kPhaseRunning,   // building the running lists between stages
  kPhaseSlotSort,  // the final pairs' slot keys and their sort
  kPhaseOutput,    // values and slots written
  kPhaseWait,      // block-per-row mode: waiting at the block's barriers
  kPhaseCount
};
#if defined(PK_PHASE_TIMING)
__device__ unsigned long long kPhaseCycles[kPhaseCount];
struct PhaseClock {
  long long last;
  unsigned long long cycles[kPhaseCount];
  __device__ PhaseClock() {
#if defined(__CUDA_ARCH__)
    last = clock64();
#pragma unroll
    for (int q = 0; q < kPhaseCount; ++q) cycles[q] = 0;
#endif
  }
  __device__ __forceinline__ void Mark(int phase) {
    const long long now = clock64();
#pragma unroll
    for (int q = 0; q < kPhaseCount; ++q) {
      if (q == phase) cycles[q] += static_cast<unsigned long long>(now - last);
    }
    last = now;
  }
  __device__ __forceinline__ void Flush() {
    if (LaneId() == 0) {
      for (int q = 0; q < kPhaseCount; ++q) atomicAdd(&kPhaseCycles[q], cycles[q]);
    }
  }
};
#else
struct PhaseClock {
  __device__ __forceinline__ void Mark(int) {}
  __device__ __forceinline__ void Flush() {}
};
#endif

}  // namespace
}  // namespace pk::cuda
