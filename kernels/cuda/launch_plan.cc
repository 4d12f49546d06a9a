#include "kernels/cuda/launch_plan.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace pk::cuda {
namespace {

// Shared memory the runtime keeps for itself in every resident block (sm_90), besides the
// kernel's own: part of what limits the blocks a multiprocessor holds.
constexpr size_t kSharedReservedPerBlock = 1024;

uint32_t RoundUp16(uint64_t bytes) { return static_cast<uint32_t>((bytes + 15) / 16 * 16); }

bool Use(KernelPaths::Choice choice, bool by_default) {
  return choice == KernelPaths::Choice::kAuto ? by_default : choice == KernelPaths::Choice::kOn;
}

int PowerOfTwoAtLeast(int x) {
  int power = 1;
  while (power < x) power *= 2;
  return power;
}

// Corners of the smallest hyperbolic staircase {(i, j): (i+1)(j+1) <= m, i < rows, j < columns}
// that holds at least `kept` pairs: in each run of rows of one length, the last row's last pair.
// Every pair of the staircase is a candidate (m <= kept) and scores at least one corner. Returns
// the number of corners, 0 when they do not fit (then only the rectangles bound the stage).
int StaircaseCorners(int rows, int columns, int kept, uint16_t (&corners)[kMaxCorners]) {
  auto length = [&](int m, int i) { return std::min(columns, m / (i + 1)); };
  int m = 1;
  for (;; ++m) {
    int pairs = 0;
    for (int i = 0; i < std::min(rows, m); ++i) pairs += length(m, i);
    if (pairs >= kept || m >= kept) break;
  }
  int count = 0;
  const int last = std::min(rows, m) - 1;
  for (int i = 0; i <= last; ++i) {
    if (i < last && length(m, i + 1) == length(m, i)) continue;
    if (count == kMaxCorners) return 0;
    corners[count++] = static_cast<uint16_t>((i << 8) | (length(m, i) - 1));
  }
  return count;
}

// The smallest T for which the slanted staircase {(i, j): a i + b j <= T, i < min(rows, 32),
// j < columns} holds at least `kept` pairs (lane i holds row i on the GPU), or -1 where none does.
int SlantLimit(int rows, int columns, int kept, int a, int b) {
  rows = std::min(rows, 32);
  if (rows * columns < kept) return -1;
  for (int t = 0;; ++t) {
    int pairs = 0;
    for (int i = 0; i < rows && a * i <= t; ++i) pairs += std::min(columns, (t - a * i) / b + 1);
    if (pairs >= kept) return t;
  }
}

}  // namespace

KernelParams MakeParams(const Problem& problem, const KernelPaths& paths) {
  KernelParams p{};
  p.factors = problem.factors;
  p.row_elements = problem.row_width();
  p.kk = problem.kk();
  const int k = static_cast<int>(problem.k);
  uint32_t widest = 0;
  int slot_bits = 0;
  for (int f = 0; f < problem.factors; ++f) {
    p.width[f] = problem.widths[f];
    p.offset[f] = problem.offset(f);
    const uint64_t w = problem.widths[f];
    p.list_size[f] = static_cast<int>(std::min<uint64_t>(k, w));
    widest = std::max(widest, problem.widths[f]);
    slot_bits += BitLength(problem.widths[f] - 1);
  }
  p.kept[0] = p.list_size[0];
  uint32_t table_entries = 0;
  int max_candidates = 0;
  bool any_lean = false;
  // Measured on an H100 (pk-bench-cuda --variants --part halves, three runs each): float32 stages
  // over factors at most 16 wide cut faster by the full sort (16^4 k=32 +2.0 %, 8^4 k=16 +6.0 %;
  // 32^4 k=32 -0.9 %; the bfloat16 small shapes within 0.2 %).
  const bool half_selection = !(problem.dtype == DType::kFloat32 && widest <= 16);
  for (int f = 1; f < problem.factors; ++f) {
    const int previous = p.kept[f - 1];
    const int factor = p.list_size[f];
    const int kept = static_cast<int>(std::min<uint64_t>(k, uint64_t(previous) * factor));
    p.kept[f] = kept;
    const int rows = std::min(previous, kept);
    int candidates = 0;
    for (int i = 0; i < rows; ++i) candidates += std::min(factor, kept / (i + 1));
    p.candidates[f] = candidates;
    max_candidates = std::max(max_candidates, candidates);
    p.table_offset[f] = table_entries;
    table_entries += static_cast<uint32_t>((candidates + 7) / 8 * 8);
    int corners = 0;
    for (int a = 1; a <= previous && corners < kMaxCorners; ++a) {
      if (kept % a != 0) continue;
      const int b = kept / a;
      if (b <= factor) p.corners[f][corners++] = static_cast<uint16_t>(((a - 1) << 8) | (b - 1));
    }
    p.corner_count[f] = corners;
    p.stair_count[f] = StaircaseCorners(previous, factor, kept, p.stair[f]);
    // The slants pay where a stage keeps more than 32 pairs (on an H100, kernel v25's
    // --variants --part slant: 32^3 k=64 +7.5 %, 32^4 k=64 +5.7 %, 64x64 k=64 +5.3 %, 64^3 k=64
    // +3.2 %, 1024x1024 k=128 +0.8 %). A stage of 32 sorts its survivors as 64 keys whichever bound
    // it starts from, so there the three more reads and reductions only cost: 16^4 k=32 -4.0 %,
    // 64^3 k=32 -2.0 %.
    const int slopes[3][2] = {{1, 1}, {1, 2}, {2, 1}};
    p.slanted[f] = 0;
    for (int s = 0; s < 3; ++s) {
      const int limit = Use(paths.slant_bounds, kept > 32)
                            ? SlantLimit(previous, factor, kept, slopes[s][0], slopes[s][1])
                            : -1;
      p.slant[f][s] = static_cast<int16_t>(limit);
      if (limit >= 0) p.slanted[f] = 1;
    }
    p.row_bits[f] = (BitLength(static_cast<uint32_t>(previous - 1)));
    p.tie_bits[f] = (BitLength(static_cast<uint32_t>(previous + factor - 2)) + p.row_bits[f]);
    // One sort pays where its keys are 32 bits: bfloat16 sums (float32 ones seldom fit).
    p.lean[f] = Use(paths.lean_stages, kept <= 128 && problem.dtype == DType::kBFloat16) ? 1 : 0;
    const bool halves = Use(paths.half_selection, half_selection) && kept >= 16 && kept <= 128 &&
                        (kept & (kept - 1)) == 0;
    p.half_select[f] = halves ? kept / 16 : 0;
    any_lean = any_lean || p.lean[f];
  }
  p.slot_index_bits = BitLength(p.kk - 1);
  p.slot_key32 = Use(paths.slot_key32, true) && slot_bits + p.slot_index_bits <= 31 ? 1 : 0;
  const int segment = std::max(2, PowerOfTwoAtLeast(static_cast<int>(widest)));
  const int per_lane = PowerOfTwoAtLeast((problem.factors * segment + 31) / 32);
  if (Use(paths.small_factors, true) && widest <= 64 && per_lane <= 8) {
    p.small_segment = segment;
    p.small_segment_bits = BitLength(static_cast<uint32_t>(segment - 1));
    p.small_per_lane = per_lane;
  }
  // Measured on the H200 (pk-bench-cuda --extra): 256x256 k=32 +39 % (against the high-occupancy
  // kernel), k=64 +19 %, k=128 +4 %, but k=256 -1.5 % (no threshold: 2 kf exceeds the width).
  p.paired_factors = Use(paths.paired_factors, k <= 128) && problem.factors == 2 &&
                             problem.dtype == DType::kBFloat16 && widest <= 256 &&
                             p.small_segment == 0
                         ? 1
                         : 0;
  p.half_select_maxima = Use(paths.half_selection, true) ? 1 : 0;
  // Measured on the H200 (pk-bench-cuda --extra --variants): the sort against the thresholds
  // 256x256 k=64 +4.6 %, k=128 +7.8 %, 200x100 k=64 +1.7 %, but 256x256 k=32 -17 % and 128x128
  // k=64 -16 % (the sort's 256-key segments against ~40-80 survivors), hence k >= 64 and a
  // factor wider than 128.
  p.paired_sort = Use(paths.paired_sort, k >= 64 && widest > 128) ? 1 : 0;
  p.bisect_maxima = paths.bisect_maxima == KernelPaths::Choice::kAuto ? 1
                    : paths.bisect_maxima == KernelPaths::Choice::kOn ? 2
                                                                     : 0;
  const int cap = std::max(32, (k + 31) / 32 * 32);
  // Sorts read whole power-of-two groups of 32 * E keys: keep every sorted array that long.
  int sort_span = 32;
  while (sort_span < k) sort_span *= 2;
  p.list_capacity = std::max(cap, sort_span);
  p.table_bytes = RoundUp16(uint64_t{table_entries} * 2);
  const bool f32 = problem.dtype == DType::kFloat32;
  const uint32_t key_bytes = f32 ? 8 : 4;
  const uint32_t staging = f32 ? Float32Layout::kStagingBytes : Bf16Layout::kStagingBytes;
  p.buffer_capacity = kChunkElements + p.list_capacity;
  // Room for every candidate when they are few (no stage can overflow then), else kStageCapacity;
  // at least 2 * kMaxRankedTies, since CutStage keeps up to kMaxRankedTies 64-bit ties in the room
  // of the 32-bit score keys.
  p.candidate_capacity = std::min(
      kStageCapacity, std::max(2 * kMaxRankedTies, PowerOfTwoAtLeast(max_candidates)));
  const int list_cap = p.list_capacity;
  uint32_t offset = 0;
  p.lists_offset = offset;
  offset += RoundUp16(uint64_t(problem.factors) * list_cap * 8);
  p.running_offset = offset;
  if (problem.factors >= 3) offset += RoundUp16(uint64_t(2) * list_cap * 12);
  // The radix counts' histogram: a stage takes one only for more than kLargestSortedCut survivors,
  // which no stage has where all its candidates fit that (candidate_capacity), and small factors
  // are ranked by a register sort or by selections of at most 64 keys. So such slices go without
  // it (the pointer is never read through). On the H100: 16^4 f32 k=32 +1.4 %, 32^4 f32 k=32 +0.8 %, the
  // other shapes within noise (by their shared memory alone: the driver's carveout then leaves
  // more L1, where the small kernels' spills live; their blocks resident are unchanged).
  p.histogram_offset = offset;
  if (p.small_segment == 0 || p.candidate_capacity > kLargestSortedCut) offset += 256 * 4;
  p.union_offset = offset;
  // The factor phase: staging and survivor buffers, or only the exchange of the register sort.
  const uint64_t factor_phase =
      p.small_segment > 0 ? uint64_t{32} * p.small_per_lane * key_bytes
                          : staging + uint64_t(p.buffer_capacity + list_cap) * key_bytes;
  const uint64_t stage_phase = uint64_t(p.candidate_capacity + list_cap) * 8 +
                               uint64_t(p.candidate_capacity) * (any_lean ? 8 : 4);
  offset += RoundUp16(std::max(factor_phase, stage_phase));
  p.warp_bytes = offset;
  return p;
}

const char* KernelVariantName(KernelVariant variant) {
  switch (variant) {
    case kDefaultKernel: return "default";
    case kHighOccupancyKernel: return "high-occupancy";
    case kLatencyKernel: return "latency";
    case kPairedKernel: return "paired";
    case kPairedSortKernel: return "paired-sort";
    case kSmallKernel: return "small";
    case kSmallHighOccupancyKernel: return "small-high-occupancy";
    case kPairedSortSlantedKernel: return "paired-sort-slanted";
    case kStreamKernel: return "streamed";
    case kUnrolledOutputKernel: return "unrolled-output";
    case kKernelVariants: break;
  }
  return "unknown";
}

Result<LaunchPlan> PlanLaunch(const Problem& problem, size_t rows, const DeviceLimits& limits,
                              const KernelPaths& paths) {
  LaunchPlan plan;
  KernelParams& p = plan.params;
  p = MakeParams(problem, paths);
  p.rows = rows;
  // Few rows: a block of F warps per row, one factor per warp, spread over the multiprocessors
  // (latency). Many: four warps a block, a row per warp, in a grid-stride loop sized to what fits
  // on the device at once (throughput).
  const bool block_per_row =
      Use(paths.block_per_row, rows <= static_cast<size_t>(limits.multiprocessors) * 2);
  // Blocks of `bytes` of shared memory that fit on a multiprocessor.
  const auto blocks_by_shared = [&limits](size_t bytes) {
    return static_cast<int>(limits.shared_per_multiprocessor / (bytes + kSharedReservedPerBlock));
  };
  // The latency kernel for a block per row (its spare warp builds the pair table while the factor
  // warps load the row: -0.6 to -0.8 us for 1-256 rows on the H200). Otherwise more resident
  // warps where the lists are short (k <= 32: 1024x1024 bf16 +8.5 %, 16^4 f32 +14.6 % on the
  // H200; the larger k measured lost up to 23 %, or gained nothing).
  // Two bfloat16 factors of width <= 256, a warp per row: the paired kernel, before the
  // high-occupancy one (256x256 k=32: 236.5 M rows/s against 170.5 on the H200).
  // Every width <= 64 (one register sort ranks the factors), a warp per row: the small-factor
  // kernel, built for more resident blocks than the default, where shared memory lets that many
  // in (on the H200: 32^4 bf16 k=64 +7.1 %, 16^4 f32 k=32 +13.3 %, other such shapes +2 to +24 %;
  // 64^3 bf16 k=64, room for four blocks only, ran 3-21 % slower in small-factor kernels of five
  // to eight blocks, whose tighter register caps then cost spills and bought no warps).
  const size_t row_per_warp_shared = size_t{p.table_bytes} + kWarpsPerBlock * size_t{p.warp_bytes};
  const bool f32 = problem.dtype == DType::kFloat32;
  const int small_blocks = f32 ? Float32Layout::kSmallBlocks : Bf16Layout::kSmallBlocks;
  const int small_more_blocks =
      f32 ? Float32Layout::kSmallMoreBlocks : Bf16Layout::kSmallMoreBlocks;
  const int small_room = blocks_by_shared(row_per_warp_shared);
  const bool small_fits = small_room >= small_blocks;
  const bool small = p.small_segment > 0 && !block_per_row && Use(paths.small_kernel, small_fits);
  // Small-factor rows where the more-blocks instance's blocks fit, for the element types that have
  // one (float32: ten blocks, 48 registers against 64; on an H100: 16^4 k=32 +1.9 %, 32^4 k=32
  // +4.3 %, 8^4 k=16 within 0.1 %; at 6 blocks -8.0 %, -4.4 %, -5.9 %, at 12 blocks 16^4 k=32
  // -5.3 %). Shapes with room for eight or nine keep the eight-block instance.
  const bool small_more = small && small_more_blocks > small_blocks &&
                          small_room >= small_more_blocks && Use(paths.high_occupancy, true);
  // The streamed kernel: bfloat16 factors through SelectFactor, a warp per row, where its room of
  // one chunk a warp (prefetch on) leaves as many blocks resident as the default kernel has
  // (1024x1024 k=64 +15.5 % on the H200; k=128 and k=256 would lose their fourth block, and ran
  // 5.5 % and 9.9 % slower with three). For k <= 32 it also beats the high-occupancy kernel's six
  // blocks with its four where every factor is one chunk wide (1024x1024 k=32 +20 %, k=16 +24 %,
  // k=4 +26 %, 512x512 k=32 +13.5 %, 128x128x128 k=32 +11 %), not on wider factors, whose later
  // chunks it does not prefetch (4096x4096 k=32 -2.9 %).
  const bool one_chunk = std::all_of(p.width, p.width + problem.factors,
                                     [](uint32_t w) { return w <= uint32_t{kChunkElements}; });
  const size_t stream_shared =
      row_per_warp_shared + kWarpsPerBlock * size_t{Bf16Layout::kStagingBytes};
  const bool stream_fits = blocks_by_shared(stream_shared) >= Bf16Layout::kMinBlocks;
  const bool streamed = problem.dtype == DType::kBFloat16 && !block_per_row &&
                      p.small_segment == 0 && !p.paired_factors &&
                      Use(paths.stream_kernel, stream_fits && (problem.k > 32 || one_chunk));
  // Long bfloat16 outputs (kk > 128: 8 or more pairs a lane in the last stage's and the output's
  // loops) where the default kernel would run: those two loops unrolled, in an instance of their
  // own, since unrolling them in the default kernel cost its other shapes (on the H200, kernel
  // v18: 1024x1024 k=256 +8.5 %, but 64^3 k=64 -5.5 %).
  const bool unrolled_output = problem.dtype == DType::kBFloat16 && !block_per_row &&
                               Use(paths.unrolled_output, p.kk > 128);
  // The paired rows that rank by one sort (paired_sort) take an instance of their own, and the
  // thresholds rows the paired kernel, each without the other path's code and with its own in
  // line (kernel v23: 256x256 k=64 +1.9 %; v24: 256x256 k=32 +4.5 %, 128x128 k=64 +3.4 %).
  const bool paired = p.paired_factors && !block_per_row;
  // The sort rows whose stage keeps more than 64 pairs, where the slants are on: the paired-sort
  // kernel built with them (256x256 k=128 +5.2 % on an H100; in the one paired-sort instance they
  // cost 256x256 k=64 1.7 %, whose stage they barely tighten).
  const bool paired_sort = paired && p.paired_sort;
  const bool paired_sort_slanted = paired_sort && p.kept[1] > 64 && p.slanted[1] != 0;
  const bool occupancy = Use(paths.high_occupancy, problem.k <= 32);
  const KernelVariant variant = Use(paths.latency_kernel, block_per_row) ? kLatencyKernel
                                : paired_sort_slanted     ? kPairedSortSlantedKernel
                                : paired_sort             ? kPairedSortKernel
                                : paired                  ? kPairedKernel
                                : small_more              ? kSmallHighOccupancyKernel
                                : small                   ? kSmallKernel
                                : streamed                ? kStreamKernel
                                : occupancy               ? kHighOccupancyKernel
                                : unrolled_output         ? kUnrolledOutputKernel
                                                          : kDefaultKernel;
  const bool spare_warp =
      variant == kLatencyKernel && block_per_row && problem.factors < kWarpsPerBlock;
  const int warps = block_per_row ? problem.factors + (spare_warp ? 1 : 0) : kWarpsPerBlock;
  p.warps_per_row = block_per_row ? problem.factors : 1;
  p.table_warp = spare_warp ? problem.factors : 0;
  if (variant == kLatencyKernel) {
    // The latency kernel's copy of the stage bounds' corners follows the pair table.
    p.corner_offset = p.table_bytes;
    p.table_bytes += RoundUp16(uint64_t{kMaxFactors - 1} * 2 * kMaxCorners * 2);
  }
  const size_t slices = block_per_row ? static_cast<size_t>(problem.factors) : kWarpsPerBlock;
  // A prefetch room a warp: the paired-sort kernel's for the next row, the streamed kernel's for
  // the next factor's first chunk.
  if ((variant == kPairedSortKernel || variant == kPairedSortSlantedKernel) &&
      Use(paths.prefetch_rows, true)) {
    p.prefetch_bytes = 1024;
  } else if (variant == kStreamKernel && Use(paths.prefetch_rows, true)) {
    p.prefetch_bytes = Bf16Layout::kStagingBytes;
  }
  const bool bf16_narrowed =
      problem.dtype == DType::kBFloat16 && (variant == kDefaultKernel || variant == kLatencyKernel);
  if (variant == kStreamKernel || bf16_narrowed) {
    p.narrow_maxima = Use(paths.narrow_maxima, true) ? 1 : 0;
  }
  const size_t shared = size_t{p.table_bytes} + slices * (p.warp_bytes + p.prefetch_bytes);
  if (shared > limits.shared_per_block) {
    return Error{"shape", std::string("the ") + KernelVariantName(variant) + " kernel needs " +
                              std::to_string(shared) + " bytes of shared memory a block; the " +
                              "device allows " + std::to_string(limits.shared_per_block)};
  }
  // Blocks resident per multiprocessor, from the limits that bind (computed here rather than by
  // the occupancy API, which costs microseconds per call).
  const int registers = limits.kernel_registers[static_cast<int>(problem.dtype)][variant];
  const int warp_registers = (registers * 32 + 255) / 256 * 256;
  const int by_registers =
      limits.registers_per_multiprocessor / std::max(1, warp_registers * warps);
  const int by_shared = blocks_by_shared(shared);
  const int by_threads = 2048 / (32 * warps);
  const int resident = std::max(1, std::min({by_registers, by_shared, by_threads, 32}));
  const size_t wanted = block_per_row ? rows : (rows + warps - 1) / warps;
  const size_t fit = size_t{static_cast<size_t>(resident)} * limits.multiprocessors;
  plan.dtype = problem.dtype;
  plan.variant = variant;
  plan.blocks = static_cast<unsigned>(std::min(wanted, fit));
  plan.threads = static_cast<unsigned>(32 * warps);
  plan.shared_bytes = shared;
  return plan;
}

}  // namespace pk::cuda
