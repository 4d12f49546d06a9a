// The CUDA top-k's launch plan (kernels/cuda/launch_plan.h) on the CPU: which kernel instance a
// shape and a row count get on an H200-like device, the block shape and grid of each, what the
// tuning switches force, and the refusal of a plan whose shared memory does not fit.
#include "kernels/cuda/launch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/problem.h"

namespace pk::cuda {
namespace {

using Choice = KernelPaths::Choice;

// An H200's limits (cudaDeviceProp), with register counts of the order ptxas gives each instance.
DeviceLimits H200() {
  DeviceLimits limits;
  limits.multiprocessors = 132;
  limits.shared_per_multiprocessor = 233472;
  limits.shared_per_block = 232448;
  limits.registers_per_multiprocessor = 65536;
  const int bf16[kKernelVariants] = {128, 80, 168, 128, 96, 128, 128, 128, 96, 128};
  const int f32[kKernelVariants] = {168, 128, 168, 168, 64, 168, 168, 168, 48, 168};
  for (int v = 0; v < kKernelVariants; ++v) {
    limits.kernel_registers[static_cast<int>(DType::kBFloat16)][v] = bf16[v];
    limits.kernel_registers[static_cast<int>(DType::kFloat32)][v] = f32[v];
  }
  return limits;
}

Problem Shape(std::vector<uint32_t> widths, uint32_t k, DType dtype) {
  auto problem = ValidateProblem(widths, k, dtype);
  EXPECT_TRUE(problem.ok()) << problem.error().message;
  return problem.value();
}

LaunchPlan Plan(const Problem& problem, size_t rows, const KernelPaths& paths = {}) {
  auto plan = PlanLaunch(problem, rows, H200(), paths);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  return plan.ok() ? plan.value() : LaunchPlan{};
}

constexpr size_t kManyRows = 1 << 20;

TEST(LaunchPlan, UpToTwoRowsAMultiprocessorTakeTheLatencyKernelWithABlockPerRow) {
  const Problem problem = Shape({1024, 1024}, 64, DType::kBFloat16);
  for (const size_t rows : {size_t{1}, size_t{64}, size_t{264}}) {
    const LaunchPlan plan = Plan(problem, rows);
    EXPECT_EQ(plan.variant, kLatencyKernel) << rows << " rows";
    EXPECT_EQ(plan.blocks, rows);
    EXPECT_EQ(plan.params.warps_per_row, 2);
    EXPECT_EQ(plan.threads, 3u * 32) << "a warp per factor and a spare warp for the pair table";
    EXPECT_EQ(plan.params.table_warp, 2);
    EXPECT_EQ(plan.params.rows, rows);
  }
  EXPECT_NE(Plan(problem, 265).variant, kLatencyKernel);
}

TEST(LaunchPlan, TheLatencyKernelNarrowsItsBfloat16MaximaBisection) {
  // Four maxima a lane (k=64 on 1024-wide factors) and eight (k=128), as the streamed and the
  // default kernels do; float32 has no such bisection.
  for (const uint32_t k : {64u, 128u}) {
    const LaunchPlan plan = Plan(Shape({1024, 1024}, k, DType::kBFloat16), 1);
    EXPECT_EQ(plan.variant, kLatencyKernel) << "k=" << k;
    EXPECT_EQ(plan.params.narrow_maxima, 1) << "k=" << k;
  }
  KernelPaths wide;
  wide.narrow_maxima = Choice::kOff;
  EXPECT_EQ(Plan(Shape({1024, 1024}, 64, DType::kBFloat16), 1, wide).params.narrow_maxima, 0);
  EXPECT_EQ(Plan(Shape({1024, 1024}, 64, DType::kFloat32), 1).params.narrow_maxima, 0);
}

TEST(LaunchPlan, FourFactorsLeaveNoSpareWarpAndWarpZeroBuildsTheTable) {
  const LaunchPlan plan = Plan(Shape({16, 16, 16, 16}, 32, DType::kFloat32), 8);
  EXPECT_EQ(plan.variant, kLatencyKernel);
  EXPECT_EQ(plan.threads, 4u * 32);
  EXPECT_EQ(plan.params.warps_per_row, 4);
  EXPECT_EQ(plan.params.table_warp, 0);
}

TEST(LaunchPlan, TheLatencyKernelKeepsTheStageCornersAfterThePairTable) {
  const Problem problem = Shape({1024, 1024}, 64, DType::kBFloat16);
  const LaunchPlan latency = Plan(problem, 1);
  const KernelParams shape = MakeParams(problem, {});
  EXPECT_EQ(latency.params.corner_offset, shape.table_bytes);
  EXPECT_GT(latency.params.table_bytes, shape.table_bytes);
  EXPECT_EQ(Plan(problem, kManyRows).params.table_bytes, shape.table_bytes);
}

TEST(LaunchPlan, TwoNarrowBfloat16FactorsTakeThePairedKernel) {
  const LaunchPlan thresholds = Plan(Shape({256, 256}, 32, DType::kBFloat16), kManyRows);
  EXPECT_EQ(thresholds.variant, kPairedKernel);
  EXPECT_EQ(thresholds.params.paired_factors, 1);
  EXPECT_EQ(thresholds.params.paired_sort, 0);
  EXPECT_EQ(thresholds.params.prefetch_bytes, 0u);
  // k >= 64 and a factor wider than 128: one sort of all elements, with the next row prefetched,
  // in the paired-sort kernel.
  const Problem sorted = Shape({256, 200}, 64, DType::kBFloat16);
  const LaunchPlan sort = Plan(sorted, kManyRows);
  EXPECT_EQ(sort.variant, kPairedSortKernel);
  EXPECT_EQ(sort.params.paired_factors, 1);
  EXPECT_EQ(sort.params.paired_sort, 1);
  EXPECT_EQ(sort.params.prefetch_bytes, 1024u);
  // The switch sends a row to the kernel of the path it forces, with the prefetch room only
  // where the sort runs.
  KernelPaths thresholds_path;
  thresholds_path.paired_sort = Choice::kOff;
  const LaunchPlan sorted_by_thresholds = Plan(sorted, kManyRows, thresholds_path);
  EXPECT_EQ(sorted_by_thresholds.variant, kPairedKernel);
  EXPECT_EQ(sorted_by_thresholds.params.paired_sort, 0);
  EXPECT_EQ(sorted_by_thresholds.params.prefetch_bytes, 0u);
  KernelPaths sort_path;
  sort_path.paired_sort = Choice::kOn;
  const LaunchPlan narrow_by_sort = Plan(Shape({256, 256}, 32, DType::kBFloat16), kManyRows, sort_path);
  EXPECT_EQ(narrow_by_sort.variant, kPairedSortKernel);
  EXPECT_EQ(narrow_by_sort.params.paired_sort, 1);
  EXPECT_EQ(narrow_by_sort.params.prefetch_bytes, 1024u);
  // A few rows take the latency kernel, whatever the paired path.
  EXPECT_EQ(Plan(sorted, 1).variant, kLatencyKernel);
  // k=128 (a stage of 128 pairs, slants on): the paired-sort kernel built with the slants, with
  // the same prefetch room; switched off, the plain one.
  const Problem long_list = Shape({256, 256}, 128, DType::kBFloat16);
  const LaunchPlan slanted = Plan(long_list, kManyRows);
  EXPECT_EQ(slanted.variant, kPairedSortSlantedKernel);
  EXPECT_EQ(slanted.params.paired_sort, 1);
  EXPECT_EQ(slanted.params.prefetch_bytes, 1024u);
  KernelPaths no_slants;
  no_slants.slant_bounds = Choice::kOff;
  EXPECT_EQ(Plan(long_list, kManyRows, no_slants).variant, kPairedSortKernel);
  // k=64 keeps the plain instance, slants forced on or not.
  KernelPaths slants;
  slants.slant_bounds = Choice::kOn;
  EXPECT_EQ(Plan(sorted, kManyRows, slants).variant, kPairedSortKernel);
  // Not for k > 128, three factors, float32 or a factor wider than 256.
  for (const Problem& problem :
       {Shape({256, 256}, 256, DType::kBFloat16), Shape({256, 256, 4}, 32, DType::kBFloat16),
        Shape({256, 256}, 32, DType::kFloat32), Shape({257, 256}, 32, DType::kBFloat16)}) {
    const KernelVariant variant = Plan(problem, kManyRows).variant;
    EXPECT_NE(variant, kPairedKernel);
    EXPECT_NE(variant, kPairedSortKernel);
    EXPECT_NE(variant, kPairedSortSlantedKernel);
  }
}

TEST(LaunchPlan, WidthsUpTo64TakeTheSmallFactorKernelWhereSharedMemoryLetsItsBlocksIn) {
  const LaunchPlan bf16 = Plan(Shape({32, 32, 32, 32}, 64, DType::kBFloat16), kManyRows);
  EXPECT_EQ(bf16.variant, kSmallKernel);
  EXPECT_GT(bf16.params.small_segment, 0);
  EXPECT_EQ(Plan(Shape({16, 16, 16, 16}, 32, DType::kFloat32), kManyRows).variant,
            kSmallHighOccupancyKernel);
  // 64^3 k=64: room for four blocks only, fewer than the small-factor kernel is built for.
  const LaunchPlan crowded = Plan(Shape({64, 64, 64}, 64, DType::kBFloat16), kManyRows);
  EXPECT_GT(crowded.params.small_segment, 0) << "still one register sort for the factors";
  EXPECT_EQ(crowded.variant, kDefaultKernel);
}

TEST(LaunchPlan, Float32SmallFactorRowsTakeTheTenBlockInstanceWhereTenBlocksFit) {
  // 16^4 k=32: room for 14 blocks; 48 registers let 10 in.
  const LaunchPlan more = Plan(Shape({16, 16, 16, 16}, 32, DType::kFloat32), kManyRows);
  EXPECT_EQ(more.variant, kSmallHighOccupancyKernel);
  EXPECT_EQ(more.blocks, 132u * Float32Layout::kSmallMoreBlocks);
  // 32^3 k=64: room for 8 blocks, not 10: the eight-block instance.
  const LaunchPlan eight = Plan(Shape({32, 32, 32}, 64, DType::kFloat32), kManyRows);
  EXPECT_EQ(eight.variant, kSmallKernel);
  EXPECT_EQ(eight.blocks, 132u * Float32Layout::kSmallBlocks);
  // Switched off, and bfloat16 (no such instance).
  KernelPaths off;
  off.high_occupancy = Choice::kOff;
  EXPECT_EQ(Plan(Shape({16, 16, 16, 16}, 32, DType::kFloat32), kManyRows, off).variant, kSmallKernel);
  EXPECT_EQ(Plan(Shape({16, 16, 16, 16}, 32, DType::kBFloat16), kManyRows).variant, kSmallKernel);
}

TEST(LaunchPlan, SmallFactorSlicesGoWithoutTheHistogramWhereNoStageCanUseIt) {
  // The histogram serves radix counts over more than 256 keys: no small-factor row has any where
  // every stage's candidates fit 256.
  for (const auto& [widths, k, dtype] :
       {std::tuple{std::vector<uint32_t>{16, 16, 16, 16}, 32u, DType::kFloat32},
        std::tuple{std::vector<uint32_t>{32, 32, 32, 32}, 64u, DType::kBFloat16},
        std::tuple{std::vector<uint32_t>{8, 8, 8, 8}, 16u, DType::kFloat32}}) {
    for (const size_t rows : {size_t{1}, kManyRows}) {
      const KernelParams p = Plan(Shape(widths, k, dtype), rows).params;
      EXPECT_GT(p.small_segment, 0);
      EXPECT_LE(p.candidate_capacity, 256);
      for (int f = 1; f < p.factors; ++f) EXPECT_LE(p.candidates[f], p.candidate_capacity);
      EXPECT_EQ(p.union_offset, p.histogram_offset) << widths.size() << " factors, k " << k;
    }
  }
  // Wider factors, or more candidates than 256, keep it.
  for (const auto& [widths, k] : {std::tuple{std::vector<uint32_t>{1024, 1024}, 64u},
                                   std::tuple{std::vector<uint32_t>{64, 64, 64}, 64u},
                                   std::tuple{std::vector<uint32_t>{256, 256}, 64u}}) {
    const KernelParams p = Plan(Shape(widths, k, DType::kBFloat16), kManyRows).params;
    EXPECT_EQ(p.union_offset, p.histogram_offset + 256 * 4) << widths.front() << " wide, k " << k;
  }
  KernelPaths no_small;
  no_small.small_factors = Choice::kOff;
  const KernelParams general = Plan(Shape({16, 16, 16, 16}, 32, DType::kFloat32), kManyRows, no_small).params;
  EXPECT_EQ(general.small_segment, 0);
  EXPECT_EQ(general.union_offset, general.histogram_offset + 256 * 4);
}

TEST(LaunchPlan, WideBfloat16FactorsTakeTheStreamedKernelWhereItsRoomCostsNoBlock) {
  for (const uint32_t k : {1u, 4u, 32u, 64u}) {
    const LaunchPlan plan = Plan(Shape({1024, 1024}, k, DType::kBFloat16), kManyRows);
    EXPECT_EQ(plan.variant, kStreamKernel) << "k=" << k;
    EXPECT_EQ(plan.params.prefetch_bytes, uint32_t{Bf16Layout::kStagingBytes});
    EXPECT_EQ(plan.params.narrow_maxima, 1);
    EXPECT_EQ(plan.params.warps_per_row, 1);
    EXPECT_EQ(plan.threads, 32u * kWarpsPerBlock);
    EXPECT_EQ(plan.shared_bytes,
              plan.params.table_bytes +
                  size_t{kWarpsPerBlock} * (plan.params.warp_bytes + plan.params.prefetch_bytes));
    EXPECT_EQ(plan.blocks, size_t{Bf16Layout::kMinBlocks} * 132) << "k=" << k;
  }
  EXPECT_EQ(Plan(Shape({4096, 4096}, 64, DType::kBFloat16), kManyRows).variant, kStreamKernel);
  // k=128 and k=256: a fourth block's shared memory would not be left for the room; k=128's
  // default kernel narrows its maxima bisection too (eight maxima a lane).
  const LaunchPlan k128 = Plan(Shape({1024, 1024}, 128, DType::kBFloat16), kManyRows);
  EXPECT_EQ(k128.variant, kDefaultKernel);
  EXPECT_EQ(k128.params.narrow_maxima, 1);
  KernelPaths wide;
  wide.narrow_maxima = Choice::kOff;
  EXPECT_EQ(Plan(Shape({1024, 1024}, 128, DType::kBFloat16), kManyRows, wide).params.narrow_maxima,
            0);
  EXPECT_EQ(Plan(Shape({1024, 1024}, 256, DType::kBFloat16), kManyRows).variant,
            kUnrolledOutputKernel);
  // k <= 32 on factors wider than a chunk: the high-occupancy kernel's six blocks.
  EXPECT_EQ(Plan(Shape({4096, 4096}, 32, DType::kBFloat16), kManyRows).variant,
            kHighOccupancyKernel);
  EXPECT_EQ(Plan(Shape({1024, 1025}, 16, DType::kBFloat16), kManyRows).variant,
            kHighOccupancyKernel);
}

TEST(LaunchPlan, ShortListsTakeTheHighOccupancyKernelAndTheRestTheDefault) {
  KernelPaths no_stream;
  no_stream.stream_kernel = Choice::kOff;
  EXPECT_EQ(Plan(Shape({1024, 1024}, 32, DType::kBFloat16), kManyRows, no_stream).variant,
            kHighOccupancyKernel);
  EXPECT_EQ(Plan(Shape({1024, 1024}, 32, DType::kFloat32), kManyRows).variant,
            kHighOccupancyKernel);
  const LaunchPlan f32 = Plan(Shape({1024, 1024}, 64, DType::kFloat32), kManyRows);
  EXPECT_EQ(f32.variant, kDefaultKernel) << "float32 has no streamed instance";
  EXPECT_EQ(f32.params.prefetch_bytes, 0u);
  EXPECT_EQ(f32.params.narrow_maxima, 0);
}

TEST(LaunchPlan, LongBfloat16OutputsTakeTheUnrolledOutputKernelWhereTheDefaultWouldRun) {
  KernelPaths off;
  off.unrolled_output = Choice::kOff;
  for (const auto& widths : {std::vector<uint32_t>{1024, 1024}, std::vector<uint32_t>{256, 256},
                             std::vector<uint32_t>{64, 64, 64}}) {
    const Problem problem = Shape(widths, 256, DType::kBFloat16);
    const LaunchPlan plan = Plan(problem, kManyRows);
    EXPECT_EQ(plan.variant, kUnrolledOutputKernel) << widths.size() << " factors";
    EXPECT_EQ(plan.params.kk, 256u);
    EXPECT_EQ(plan.params.warps_per_row, 1);
    // The default kernel's parameters (but its narrowed maxima bisection), register cap and grid.
    const LaunchPlan plain = Plan(problem, kManyRows, off);
    EXPECT_EQ(plain.variant, kDefaultKernel);
    EXPECT_EQ(plan.params.narrow_maxima, 0);
    EXPECT_EQ(plain.params.narrow_maxima, 1);
    KernelParams expected = plain.params;
    expected.narrow_maxima = 0;
    EXPECT_EQ(std::memcmp(&plan.params, &expected, sizeof(KernelParams)), 0);
    EXPECT_EQ(plan.blocks, plain.blocks);
    EXPECT_EQ(plan.shared_bytes, plain.shared_bytes);
  }
  // kk <= 128 (k=128; k=256 over a 128x1 product), float32, and small batches keep their kernels.
  EXPECT_EQ(Plan(Shape({1024, 1024}, 128, DType::kBFloat16), kManyRows).variant, kDefaultKernel);
  EXPECT_EQ(Plan(Shape({128, 1}, 256, DType::kBFloat16), kManyRows).variant, kDefaultKernel);
  EXPECT_EQ(Plan(Shape({1024, 1024}, 256, DType::kFloat32), kManyRows).variant, kDefaultKernel);
  EXPECT_EQ(Plan(Shape({1024, 1024}, 256, DType::kBFloat16), 1).variant, kLatencyKernel);
  KernelPaths on;
  on.unrolled_output = Choice::kOn;
  EXPECT_EQ(Plan(Shape({1024, 1024}, 128, DType::kBFloat16), kManyRows, on).variant,
            kUnrolledOutputKernel);
}

TEST(LaunchPlan, Float32StagesOverFactorsUpTo16WideCutByTheFullSort) {
  // kept = 32 a stage: half selection is two keys a lane (kept / 16).
  for (const auto& [widths, dtype, halves] :
       {std::tuple{std::vector<uint32_t>{16, 16, 16, 16}, DType::kFloat32, 0},
        std::tuple{std::vector<uint32_t>{8, 8, 16, 16}, DType::kFloat32, 0},
        std::tuple{std::vector<uint32_t>{32, 32, 32, 32}, DType::kFloat32, 2},
        std::tuple{std::vector<uint32_t>{16, 16, 16, 17}, DType::kFloat32, 2},
        std::tuple{std::vector<uint32_t>{16, 16, 16, 16}, DType::kBFloat16, 2}}) {
    const Problem problem = Shape(widths, 32, dtype);
    const LaunchPlan plan = Plan(problem, kManyRows);
    for (int f = 1; f < 4; ++f) {
      EXPECT_EQ(plan.params.half_select[f], halves)
          << widths.front() << ".." << widths.back()
          << (dtype == DType::kFloat32 ? " f32" : " bf16") << ", stage " << f;
    }
  }
  KernelPaths on;
  on.half_selection = Choice::kOn;
  EXPECT_EQ(Plan(Shape({16, 16, 16, 16}, 32, DType::kFloat32), kManyRows, on).params.half_select[3],
            2);
}

TEST(LaunchPlan, TheGridHoldsWhatFitsOnTheDeviceAtOnce) {
  const Problem problem = Shape({1024, 1024}, 64, DType::kFloat32);
  // 168 registers * 128 threads: 3 blocks by registers; shared memory and threads allow more.
  const LaunchPlan many = Plan(problem, kManyRows);
  EXPECT_EQ(many.blocks, 3u * 132);
  // Fewer rows than that: a block for every four rows.
  EXPECT_EQ(Plan(problem, 301).blocks, 76u);
}

TEST(LaunchPlan, TheSwitchesForceTheirPath) {
  const Problem problem = Shape({1024, 1024}, 64, DType::kBFloat16);
  KernelPaths no_block_per_row;
  no_block_per_row.block_per_row = Choice::kOff;
  EXPECT_EQ(Plan(problem, 1, no_block_per_row).variant, kStreamKernel);

  KernelPaths no_latency;
  no_latency.latency_kernel = Choice::kOff;
  const LaunchPlan block_per_row = Plan(problem, 1, no_latency);
  EXPECT_EQ(block_per_row.params.warps_per_row, 2);
  EXPECT_EQ(block_per_row.threads, 2u * 32) << "no spare warp outside the latency kernel";
  EXPECT_NE(block_per_row.variant, kLatencyKernel);

  KernelPaths no_stream;
  no_stream.stream_kernel = Choice::kOff;
  EXPECT_EQ(Plan(problem, kManyRows, no_stream).variant, kDefaultKernel);

  KernelPaths no_prefetch;
  no_prefetch.prefetch_rows = Choice::kOff;
  const LaunchPlan unfetched = Plan(problem, kManyRows, no_prefetch);
  EXPECT_EQ(unfetched.variant, kStreamKernel);
  EXPECT_EQ(unfetched.params.prefetch_bytes, 0u);

  KernelPaths small_off;
  small_off.small_factors = Choice::kOff;
  EXPECT_EQ(Plan(Shape({32, 32, 32, 32}, 64, DType::kBFloat16), kManyRows, small_off)
                .params.small_segment,
            0);
}

// Pairs of stage f's slanted staircase s ({a i + b j <= T}, rows below min(kept[f - 1], 32) and
// columns below list_size[f]) at limit T.
int SlantPairs(const KernelParams& p, int f, int s, int limit) {
  const int slopes[3][2] = {{1, 1}, {1, 2}, {2, 1}};
  const int rows = std::min(p.kept[f - 1], 32);
  int pairs = 0;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < p.list_size[f]; ++j) pairs += slopes[s][0] * i + slopes[s][1] * j <= limit;
  }
  return pairs;
}

TEST(LaunchPlan, EachSlantedStaircaseIsTheSmallestOfAtLeastKeptPairs) {
  KernelPaths on;
  on.slant_bounds = Choice::kOn;
  for (const auto& [widths, k] :
       {std::tuple{std::vector<uint32_t>{32, 32, 32, 32}, 64u},
        std::tuple{std::vector<uint32_t>{1024, 1024}, 64u},
        std::tuple{std::vector<uint32_t>{1024, 1024}, 256u}, std::tuple{std::vector<uint32_t>{16, 16, 16, 16}, 32u},
        std::tuple{std::vector<uint32_t>{300, 7, 100}, 100u}, std::tuple{std::vector<uint32_t>{3, 5}, 15u}}) {
    const KernelParams p = Plan(Shape(widths, k, DType::kBFloat16), kManyRows, on).params;
    for (int f = 1; f < p.factors; ++f) {
      for (int s = 0; s < 3; ++s) {
        const int limit = p.slant[f][s];
        ASSERT_GE(limit, 0) << "stage " << f << " slant " << s;
        EXPECT_GE(SlantPairs(p, f, s, limit), p.kept[f]) << "stage " << f << " slant " << s;
        EXPECT_LT(SlantPairs(p, f, s, limit - 1), p.kept[f]) << "stage " << f << " slant " << s;
      }
      EXPECT_EQ(p.slanted[f], 1);
    }
  }
  // 32^4 k=64, stage 1 (32 x 32, kept 64): i + j <= 10 holds 66 pairs, i + 2j <= 14 holds 64,
  // 2i + j <= 14 holds 64.
  const KernelParams small = Plan(Shape({32, 32, 32, 32}, 64, DType::kBFloat16), kManyRows).params;
  EXPECT_EQ(small.slant[1][0], 10);
  EXPECT_EQ(small.slant[1][1], 14);
  EXPECT_EQ(small.slant[1][2], 14);
  // Switched off: no slanted staircase.
  KernelPaths off;
  off.slant_bounds = Choice::kOff;
  const KernelParams plain = Plan(Shape({32, 32, 32, 32}, 64, DType::kBFloat16), kManyRows, off).params;
  for (int f = 1; f < 4; ++f) {
    EXPECT_EQ(plain.slanted[f], 0);
    for (int s = 0; s < 3; ++s) EXPECT_EQ(plain.slant[f][s], -1);
  }
}

TEST(LaunchPlan, SlantedStaircasesAreOnByDefaultOnlyInStagesThatKeepMoreThan32Pairs) {
  // 16^4 k=32 and 64^3 k=32 keep 32 pairs a stage: off.
  for (const auto& widths : {std::vector<uint32_t>{16, 16, 16, 16}, std::vector<uint32_t>{64, 64, 64}}) {
    const KernelParams p = Plan(Shape(widths, 32, DType::kBFloat16), kManyRows).params;
    for (int f = 1; f < p.factors; ++f) {
      EXPECT_EQ(p.slanted[f], 0) << "stage " << f;
      for (int s = 0; s < 3; ++s) EXPECT_EQ(p.slant[f][s], -1) << "stage " << f << " slant " << s;
    }
  }
  // 8^4 k=48: stage 1 keeps 48 of 8 x 8 (on), stage 2 48 of 48 x 8 (on); 4^4 k=48: stage 1 keeps
  // 16 of 4 x 4 (off), stage 2 48 of 16 x 4 (on).
  const KernelParams eights = Plan(Shape({8, 8, 8, 8}, 48, DType::kBFloat16), kManyRows).params;
  EXPECT_EQ(eights.slanted[1], 1);
  EXPECT_EQ(eights.slanted[2], 1);
  const KernelParams fours = Plan(Shape({4, 4, 4, 4}, 48, DType::kBFloat16), kManyRows).params;
  EXPECT_EQ(fours.kept[1], 16);
  EXPECT_EQ(fours.slanted[1], 0);
  EXPECT_EQ(fours.kept[2], 48);
  EXPECT_EQ(fours.slanted[2], 1);
}

TEST(LaunchPlan, ASlantedStaircaseThatNeedsMoreThan32RowsIsOff) {
  const KernelParams p = Plan(Shape({128, 1}, 64, DType::kBFloat16), kManyRows).params;
  // Stage 1: 64 list entries of one column, kept 64; lanes hold rows below 32, 32 pairs.
  for (int s = 0; s < 3; ++s) EXPECT_EQ(p.slant[1][s], -1) << s;
  EXPECT_EQ(p.slanted[1], 0);
}

TEST(LaunchPlan, APlanWhoseSharedMemoryExceedsTheBlockLimitIsRefused) {
  DeviceLimits small = H200();
  small.shared_per_block = 4096;
  const auto plan = PlanLaunch(Shape({1024, 1024}, 64, DType::kBFloat16), kManyRows, small);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().field, "shape");
  EXPECT_NE(plan.error().message.find("allows 4096"), std::string::npos) << plan.error().message;
}

TEST(LaunchPlan, IsAPureFunctionOfItsInputs) {
  const Problem problem = Shape({300, 200, 100}, 100, DType::kFloat32);
  const LaunchPlan a = Plan(problem, 5000);
  const LaunchPlan b = Plan(problem, 5000);
  EXPECT_EQ(std::memcmp(&a.params, &b.params, sizeof(KernelParams)), 0);
  EXPECT_EQ(a.variant, b.variant);
  EXPECT_EQ(a.blocks, b.blocks);
  EXPECT_EQ(a.shared_bytes, b.shared_bytes);
  EXPECT_EQ(a.params.scores, nullptr) << "the launcher sets the pointers";
}

}  // namespace
}  // namespace pk::cuda
