// The CUDA top-k's tuning switches, for tools and tests only: KernelPaths forces each part of the
// kernel's path (a kernel instance, a selection method, a memory layout) on or off instead of the
// launch plan's choice by shape, so that pk-cuda-diff checks every path and pk-bench-cuda measures
// each one against the others. Every combination computes the same result. Executors never set
// them: TopKLauncher::Launch plans with the defaults. Plain C++, so that launch_plan.h (and its
// CPU tests) can take it.
#pragma once

#include <cstdint>

namespace pk::cuda {

// Which implementation of each part of the kernel a launch uses. kAuto (the default) leaves the
// choice to the launch plan (launch_plan.cc), which picks by shape and device.
struct KernelPaths {
  enum class Choice : uint8_t { kAuto, kOn, kOff };
  Choice small_factors = Choice::kAuto;   // all factors in one register sort (every width <= 64)
  Choice lean_stages = Choice::kAuto;     // a stage as one sort of its bounded candidates (n <= 128)
  Choice bisect_maxima = Choice::kAuto;   // bfloat16 factor threshold by bisection, not a sort
  Choice slot_key32 = Choice::kAuto;      // output order by 32-bit slot keys where slots allow
  Choice block_per_row = Choice::kAuto;   // a block of F warps per row (small batches)
  Choice high_occupancy = Choice::kAuto;  // the kernel built for more resident warps (by default
                                          // where k <= 32; of the float32 small-factor
                                          // kernel, where shared memory lets its blocks in)
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
  Choice paired_sort = Choice::kAuto;     // paired factors ranked by one sort of all their
                                          // elements, not thresholds and survivors, in the
                                          // paired-sort kernel (by default where k >= 64 and a
                                          // factor is wider than 128)
  Choice prefetch_rows = Choice::kAuto;   // with paired_sort: a warp's next row copied to shared
                                          // memory (cp.async) while it ranks the current one; in
                                          // the streamed kernel: the next factor's first chunk
  Choice stream_kernel = Choice::kAuto;   // bfloat16 factors through staging chunks, a warp per
                                          // row: a kernel of its own that prefetches (by default
                                          // where its room costs no resident block; for k <= 32
                                          // only where every factor is one chunk wide)
  Choice narrow_maxima = Choice::kAuto;   // in the streamed kernel and the bfloat16 default and
                                          // latency kernels: the maxima bisection starts from
                                          // the lanes' j-th maxima and stops early
  Choice slant_bounds = Choice::kAuto;    // in the default and bfloat16 small-factor
                                          // kernels and the paired-sort kernel's slanted
                                          // instance (where a stage keeps more than 64; the
                                          // others lack the code: kSlant): the
                                          // stage bounds also from three slanted staircases
                                          // (KernelParams::slant), besides the rectangles and
                                          // the hyperbolic staircase (by default in stages that
                                          // keep more than 32 pairs)
  Choice unrolled_output = Choice::kAuto; // bfloat16 rows that would take the default kernel:
                                          // the loops over the last stage's pairs and the
                                          // output unrolled, in a kernel of its own (by default
                                          // where kk > 128)
};

}  // namespace pk::cuda
