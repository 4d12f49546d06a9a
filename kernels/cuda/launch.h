// The launcher of the CUDA top-k over device memory and a stream: what an executor calls.
//
// One TopKLauncher per device, made once (it reads the device's properties and prepares the
// kernels); Launch() then only enqueues work: it allocates nothing, copies nothing and never
// synchronizes, so it may be called from any thread for any stream of that device. The kernel
// keeps all its scratch in shared memory; no workspace buffer is needed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/problem.h"

namespace pk::cuda {

// Which implementation of each part of the kernel a launch uses. kAuto (the default, what an
// executor wants) picks by shape; tools force the others to compare and test the alternatives.
// Every combination computes the same result.
struct KernelPaths {
  enum class Choice : uint8_t { kAuto, kOn, kOff };
  Choice small_factors = Choice::kAuto;   // all factors in one register sort (every width <= 64)
  Choice lean_stages = Choice::kAuto;     // a stage as one sort of its bounded candidates (n <= 128)
  Choice bisect_maxima = Choice::kAuto;   // bfloat16 factor threshold by bisection, not a sort
  Choice slot_key32 = Choice::kAuto;      // output order by 32-bit slot keys where slots allow
  Choice block_per_row = Choice::kAuto;   // a block of F warps per row (small batches)
  Choice high_occupancy = Choice::kAuto;  // the kernel built for more resident warps
  Choice latency_kernel = Choice::kAuto;  // the block-per-row kernel, with a spare warp for the
                                          // pair table (with block_per_row by default; takes
                                          // precedence over high_occupancy)
  Choice paired_factors = Choice::kAuto;  // two bfloat16 factors of width <= 256 ranked together
                                          // by one warp, in a kernel of its own (warp-per-row
                                          // launches; by default where k <= 128)
  Choice half_selection = Choice::kAuto;  // a k-th largest key (CutStage's cut, the paired
                                          // factors' thresholds) from two sorted halves and one
                                          // merge step instead of a full sort
  Choice small_kernel = Choice::kAuto;    // rows whose widths are all <= 64 (small_factors), a
                                          // warp per row: a kernel of their own, with more warps
                                          // resident (before high_occupancy)
  Choice paired_sort = Choice::kAuto;     // the paired kernel ranks both factors by one sort of
                                          // all their elements, not thresholds and survivors (by
                                          // default where k >= 64 and a factor is wider than 128)
  Choice prefetch_rows = Choice::kAuto;   // with paired_sort: a warp's next row copied to shared
                                          // memory (cp.async) while it ranks the current one; in
                                          // the streamed kernel: the next factor's first chunk
  Choice stream_kernel = Choice::kAuto;   // bfloat16 factors through staging chunks, a warp per
                                          // row: a kernel of its own that prefetches (by default
                                          // where k > 32 and its room costs no resident block)
  Choice narrow_maxima = Choice::kAuto;   // in the streamed kernel: the maxima bisection starts
                                          // from the lanes' j-th maxima and stops early
};

class TopKLauncher {
 public:
  // Prepares the kernels for `device` and makes it current for the calling thread.
  // Errors name the device and the CUDA error.
  static Result<TopKLauncher> Create(int device);

  // Enqueues SPEC.md's top-k for `rows` consecutive rows on `stream` (of this launcher's device,
  // which must be current).
  //   scores: rows * problem.row_width() elements of problem.dtype in device memory, aligned to
  //           the element size (any row of a larger batch may be the first);
  //   values: room for rows * problem.kk() elements of problem.dtype (element-aligned);
  //   slots:  room for rows * problem.kk() uint32 (4-byte aligned).
  // Each output row is in slot order. rows == 0 enqueues nothing. Returns cudaSuccess or the
  // error of the launch itself (errors of the running kernel surface at the stream's next sync).
  cudaError_t Launch(const Problem& problem, const void* scores, size_t rows, void* values,
                     uint32_t* slots, cudaStream_t stream, const KernelPaths& paths = {}) const;

  int device() const { return device_; }
  int multiprocessors() const { return multiprocessors_; }

 private:
  int device_ = 0;
  int multiprocessors_ = 0;
  size_t shared_per_multiprocessor_ = 0;  // bytes usable by blocks on one multiprocessor
  size_t shared_per_block_ = 0;           // opt-in maximum for one block
  int registers_per_multiprocessor_ = 0;
  int kernel_registers_[2][6] = {};       // per thread, by DType and kernel variant
};

#if defined(PK_PHASE_TIMING)
// Profiling builds only: clock cycles spent in each phase of the kernel (factors, stages 1-3,
// running lists, slot sort, output, block waits), summed over every warp of the launches since
// the last reset.
cudaError_t ReadPhaseCycles(uint64_t (&cycles)[8], bool reset);
#endif

}  // namespace pk::cuda
