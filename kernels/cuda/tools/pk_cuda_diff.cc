// pk-cuda-diff [--problems N] [--max-rows R] [--max-bytes B] [--big-rows R] [--seed S]
//              [--golden FILE] [--bench-rows R] [--vary-paths 0|1] [--shape WxW[xW..]/k/f32|bf16]
//              [--max-width W] [--max-k K] [--distribution NAME]
//
// Randomized differential test of the CUDA kernel against the CPU implementation: N random
// problems (F = 2..4, widths 1..65535 within the 32-bit slot limit, k 1..256, both types), each
// with rows drawn from distributions that stress the contract (normal, heavy ties, all-equal rows,
// NaN / +-inf / -0 mixes, huge magnitudes, values on the bfloat16 grid), run as one batch that
// starts at a random row and element offset of a larger device buffer, and as single-row batches.
// Then one batch of --big-rows rows of a small shape. Outputs are poisoned before every launch;
// slots must match exactly and values bit for bit (any NaN matches any NaN). With --golden, the
// golden cases of FILE are checked first (as pk-golden --backend cuda does). --bench-rows R runs
// each shape of the kernel benchmark's issue table too (and 256x256 k=128, the one shape of the
// paired-sort kernel's slanted instance), R rows of each of three distributions. With
// --vary-paths 1 (the default) half the launches force a random choice of the kernel's
// alternative paths (testing/kernel_paths.h's KernelPaths), so that every path is checked, not only the one a
// shape picks by default. --shape draws every random problem of that one shape (e.g.
// 14x5/10/f32), to chase a difference found in a longer run; --max-width W draws every width from
// 1..W and --max-k K every k from 1..K (small W and K: only the kernel's smallest, tightest
// shared-memory layouts, which the usual draw seldom makes). --distribution draws every random
// problem's rows from that one distribution (normal, small-integers, all-equal, specials, huge,
// two-values, bf16-grid or mixed) instead of one at random: with --shape SHAPE --distribution
// normal the rows are those of the kernel benchmark, and in the emulated build PK_EMU_STAGE_STATS=1
// then prints the distribution of that shape's stage survivors (kernels/cuda/NOTES.md).
//
// Exit status: 0 when every row matched, 1 on any difference (the first few are printed), 77
// when no CUDA device is usable (CTest's skip code), 2 for a usage or CUDA error.
#include <cuda_runtime.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/parallel_topk.h"
#include "kernels/golden/golden.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/testing/kernel_paths.h"
#include "kernels/cuda/testing/launch_with_paths.h"
#include "kernels/cuda/tools/exit_on_error.h"
#include "kernels/cuda/topk_cuda.h"
#include "kernels/numeric.h"
#include "kernels/problem.h"

namespace {

constexpr int kSkip = 77;

// splitmix64: fast, and good enough to draw test inputs.
struct Random {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>((Next() >> 32) * n >> 32); }
  uint32_t Between(uint32_t lo, uint32_t hi) { return lo + Below(hi - lo + 1); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  float Normal() {  // sum of four uniforms, rescaled: cheap, symmetric, dense near 0
    const double s = Uniform() + Uniform() + Uniform() + Uniform() - 2.0;
    return static_cast<float>(s * 1.7320508);
  }
};

enum class Distribution : int { kNormal, kSmallIntegers, kAllEqual, kSpecials, kHuge, kTwoValues,
                                kBf16Grid, kMixed, kCount };
const char* DistributionName(Distribution d) {
  static const char* names[] = {"normal", "small-integers", "all-equal", "specials", "huge",
                                "two-values", "bf16-grid", "mixed"};
  return names[static_cast<int>(d)];
}

std::optional<Distribution> ParseDistribution(const std::string& name) {
  for (int d = 0; d < static_cast<int>(Distribution::kCount); ++d) {
    if (name == DistributionName(static_cast<Distribution>(d))) return static_cast<Distribution>(d);
  }
  return std::nullopt;
}

float SpecialValue(Random& random) {
  switch (random.Below(8)) {
    case 0: return std::numeric_limits<float>::quiet_NaN();
    case 1: return -std::numeric_limits<float>::quiet_NaN();
    case 2: return std::numeric_limits<float>::infinity();
    case 3: return -std::numeric_limits<float>::infinity();
    case 4: return -0.0f;
    case 5: return 0.0f;
    default: return random.Normal();
  }
}

// One row of `width` values drawn from `d`, written as float (converted to the type later).
void DrawRow(Distribution d, Random& random, const pk::Problem& problem, float* row) {
  const uint32_t width = problem.row_width();
  if (d == Distribution::kMixed) d = static_cast<Distribution>(random.Below(7));
  switch (d) {
    case Distribution::kNormal:
      for (uint32_t c = 0; c < width; ++c) row[c] = random.Normal();
      break;
    case Distribution::kSmallIntegers:
      for (uint32_t c = 0; c < width; ++c) row[c] = static_cast<float>(random.Between(0, 6)) - 3.0f;
      break;
    case Distribution::kAllEqual: {
      const float v = random.Below(4) == 0 ? SpecialValue(random) : random.Normal();
      for (uint32_t c = 0; c < width; ++c) row[c] = v;
      break;
    }
    case Distribution::kSpecials:
      for (uint32_t c = 0; c < width; ++c) {
        row[c] = random.Below(2) == 0 ? SpecialValue(random) : random.Normal();
      }
      break;
    case Distribution::kHuge:
      for (uint32_t c = 0; c < width; ++c) {
        const float magnitude = static_cast<float>(std::ldexp(1.0 + random.Uniform(), 100 + static_cast<int>(random.Below(28))));
        row[c] = random.Below(2) ? magnitude : -magnitude;
        if (random.Below(16) == 0) row[c] = 3.3895314e38f;  // bfloat16's largest finite
      }
      break;
    case Distribution::kTwoValues: {
      const float a = random.Normal();
      const float b = random.Below(3) == 0 ? a : random.Normal();
      for (uint32_t c = 0; c < width; ++c) row[c] = random.Below(2) ? a : b;
      break;
    }
    default:  // kBf16Grid: coarse values, many ties in float32 sums too
      for (uint32_t c = 0; c < width; ++c) {
        row[c] = static_cast<float>(random.Between(0, 64)) * 0.125f - 4.0f;
      }
      break;
  }
}

void StoreElement(pk::DType dtype, float x, std::byte* out) {
  if (dtype == pk::DType::kFloat32) {
    std::memcpy(out, &x, 4);
  } else {
    const uint16_t bits = pk::FloatToBf16(x);
    std::memcpy(out, &bits, 2);
  }
}

bool SameValue(pk::DType dtype, const std::byte* a, const std::byte* b) {
  if (dtype == pk::DType::kFloat32) {
    uint32_t x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    const bool nan_x = (x & 0x7fffffffu) > 0x7f800000u;
    const bool nan_y = (y & 0x7fffffffu) > 0x7f800000u;
    return nan_x || nan_y ? nan_x == nan_y : x == y;
  }
  uint16_t x, y;
  std::memcpy(&x, a, 2);
  std::memcpy(&y, b, 2);
  const bool nan_x = (x & 0x7fffu) > 0x7f80u;
  const bool nan_y = (y & 0x7fffu) > 0x7f80u;
  return nan_x || nan_y ? nan_x == nan_y : x == y;
}

std::string ValueText(pk::DType dtype, const std::byte* element) {
  char text[64];
  if (dtype == pk::DType::kFloat32) {
    uint32_t bits;
    std::memcpy(&bits, element, 4);
    std::snprintf(text, sizeof text, "%g (0x%08x)", pk::BitsToFloat(bits), bits);
  } else {
    uint16_t bits;
    std::memcpy(&bits, element, 2);
    std::snprintf(text, sizeof text, "%g (0x%04x)", pk::Bf16ToFloat(bits), bits);
  }
  return text;
}

std::string ShapeText(const pk::Problem& problem) {
  std::string text;
  for (int f = 0; f < problem.factors; ++f) {
    if (f) text += "x";
    text += std::to_string(problem.widths[f]);
  }
  return text + " k=" + std::to_string(problem.k) + " " + pk::DTypeName(problem.dtype);
}

// Half the time the default paths, else each part forced on, off or left to the shape at random.
pk::cuda::KernelPaths DrawPaths(bool vary, Random& random) {
  pk::cuda::KernelPaths paths;
  if (!vary || random.Below(2) == 0) return paths;
  auto draw = [&] { return static_cast<pk::cuda::KernelPaths::Choice>(random.Below(3)); };
  paths.small_factors = draw();
  paths.lean_stages = draw();
  paths.bisect_maxima = draw();
  paths.slot_key32 = draw();
  paths.block_per_row = draw();
  paths.high_occupancy = draw();
  paths.latency_kernel = draw();
  paths.paired_factors = draw();
  paths.half_selection = draw();
  paths.small_kernel = draw();
  paths.paired_sort = draw();
  paths.prefetch_rows = draw();
  paths.stream_kernel = draw();
  paths.narrow_maxima = draw();
  paths.unrolled_output = draw();
  paths.slant_bounds = draw();
  return paths;
}

struct Totals {
  uint64_t problems = 0;
  uint64_t rows = 0;
  uint64_t single_rows = 0;
  uint64_t failed_rows = 0;
  int printed = 0;
};

// Compares `rows` output rows (GPU vs CPU); prints the first few differences.
void CompareRows(const pk::Problem& problem, const char* what, size_t first_row, size_t rows,
                 const std::byte* gpu_values, const uint32_t* gpu_slots,
                 const std::byte* cpu_values, const uint32_t* cpu_slots, Totals& totals) {
  const size_t kk = problem.kk();
  const size_t eb = pk::ElementBytes(problem.dtype);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t p = 0; p < kk; ++p) {
      const size_t at = r * kk + p;
      if (gpu_slots[at] == cpu_slots[at] &&
          SameValue(problem.dtype, gpu_values + at * eb, cpu_values + at * eb)) {
        continue;
      }
      ++totals.failed_rows;
      if (totals.printed < 8) {
        ++totals.printed;
        std::printf("DIFF %s %s row %zu position %zu: expected slot %u value %s, got slot %u value %s\n",
                    ShapeText(problem).c_str(), what, first_row + r, p, cpu_slots[at],
                    ValueText(problem.dtype, cpu_values + at * eb).c_str(), gpu_slots[at],
                    ValueText(problem.dtype, gpu_values + at * eb).c_str());
      }
      break;
    }
  }
}

// Runs one problem: a batch from a random row and element offset, then single rows.
void RunProblem(const pk::cuda::TopKLauncher& launcher, pk::cpu::ParallelTopK& cpu,
                const pk::Problem& problem, size_t rows, Distribution distribution, Random& random,
                int single_rows, bool vary_paths, Totals& totals) {
  const size_t eb = pk::ElementBytes(problem.dtype);
  const size_t width = problem.row_width();
  const size_t kk = problem.kk();
  const size_t lead_rows = random.Below(3);
  // Extra elements before the batch: every alignment, and 16-byte aligned rows half the time, since
  // the paths for aligned factors (the paired kernel's sort and top-64, whole prefetched blocks)
  // run only there; with one shift in eight they went unchecked for whole runs.
  const size_t shift = random.Below(2) == 0 ? 0 : random.Below(8);
  const size_t total_rows = lead_rows + rows;
  std::vector<float> row_values(width);
  std::vector<std::byte> host(total_rows * width * eb + shift * eb);
  std::byte* batch = host.data() + shift * eb;
  for (size_t r = 0; r < total_rows; ++r) {
    DrawRow(distribution, random, problem, row_values.data());
    for (size_t c = 0; c < width; ++c) {
      StoreElement(problem.dtype, row_values[c], batch + (r * width + c) * eb);
    }
  }
  const std::byte* scores = batch + lead_rows * width * eb;
  std::vector<std::byte> cpu_values(rows * kk * eb);
  std::vector<uint32_t> cpu_slots(rows * kk);
  cpu.Run(problem, scores, rows, cpu_values.data(), cpu_slots.data());

  const pk::cuda::DeviceBuffer device_host =
      pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(host.size()));
  const pk::cuda::DeviceBuffer device_values_buffer =
      pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(rows * kk * eb));
  const pk::cuda::DeviceBuffer device_slots_buffer =
      pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(rows * kk * 4));
  std::byte* const device_values = device_values_buffer.data();
  std::byte* const device_slots = device_slots_buffer.data();
  CUDA_OK(cudaMemcpy(device_host.data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  const std::byte* device_scores = device_host.data() + (shift + lead_rows * width) * eb;
  std::vector<std::byte> gpu_values(rows * kk * eb);
  std::vector<uint32_t> gpu_slots(rows * kk);

  CUDA_OK(cudaMemset(device_values, 0xa5, rows * kk * eb));
  CUDA_OK(cudaMemset(device_slots, 0xa5, rows * kk * 4));
  CUDA_OK(pk::cuda::LaunchWithPaths(launcher, problem, device_scores, rows, device_values,
                                    reinterpret_cast<uint32_t*>(device_slots), nullptr,
                                    DrawPaths(vary_paths, random)));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(gpu_values.data(), device_values, rows * kk * eb, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(gpu_slots.data(), device_slots, rows * kk * 4, cudaMemcpyDeviceToHost));
  CompareRows(problem, DistributionName(distribution), 0, rows, gpu_values.data(),
              gpu_slots.data(), cpu_values.data(), cpu_slots.data(), totals);
  totals.rows += rows;

  for (int s = 0; s < single_rows; ++s) {
    const size_t r = random.Below(static_cast<uint32_t>(rows));
    CUDA_OK(cudaMemset(device_values, 0xa5, kk * eb));
    CUDA_OK(cudaMemset(device_slots, 0xa5, kk * 4));
    CUDA_OK(pk::cuda::LaunchWithPaths(launcher, problem, device_scores + r * width * eb, 1,
                                      device_values, reinterpret_cast<uint32_t*>(device_slots), nullptr,
                                      DrawPaths(vary_paths, random)));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(gpu_values.data(), device_values, kk * eb, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(gpu_slots.data(), device_slots, kk * 4, cudaMemcpyDeviceToHost));
    const std::string what = std::string(DistributionName(distribution)) + " single-row";
    CompareRows(problem, what.c_str(), r, 1, gpu_values.data(), gpu_slots.data(),
                cpu_values.data() + r * kk * eb, cpu_slots.data() + r * kk, totals);
    ++totals.single_rows;
  }
  ++totals.problems;
}

uint32_t DrawWidth(Random& random) {
  switch (random.Below(5)) {
    case 0: return random.Between(1, 16);
    case 1: return random.Between(17, 300);
    case 2: return random.Between(301, 2100);
    case 3: return random.Between(2101, 65535);
    default: {
      static const uint32_t named[] = {16, 32, 64, 256, 1024, 4096, 65535, 1000, 1023, 1025};
      return named[random.Below(10)];
    }
  }
}

uint32_t DrawK(Random& random) {
  if (random.Below(2) == 0) return random.Between(1, 256);
  static const uint32_t named[] = {1, 2, 32, 64, 128, 255, 256};
  return named[random.Below(7)];
}

// max_width > 0: every width drawn from 1..max_width instead; max_k > 0: k from 1..max_k.
pk::Problem DrawProblem(Random& random, uint32_t max_width, uint32_t max_k) {
  for (;;) {
    const int factors = static_cast<int>(random.Between(2, 4));
    std::vector<uint32_t> widths(factors);
    for (auto& w : widths) w = max_width > 0 ? random.Between(1, max_width) : DrawWidth(random);
    const pk::DType dtype = random.Below(2) ? pk::DType::kFloat32 : pk::DType::kBFloat16;
    const uint32_t k = max_k > 0 ? random.Between(1, max_k) : DrawK(random);
    auto problem = pk::ValidateProblem(widths, k, dtype);
    if (problem.ok()) return problem.value();
  }
}

// "14x5/10/f32" -> that problem; nullopt when the text is not such a shape or not valid.
std::optional<pk::Problem> ParseShape(const std::string& text) {
  const size_t first_slash = text.find('/');
  const size_t second_slash = text.find('/', first_slash + 1);
  if (first_slash == std::string::npos || second_slash == std::string::npos) return std::nullopt;
  std::vector<uint32_t> widths;
  size_t at = 0;
  while (at < first_slash) {
    size_t end = text.find('x', at);
    if (end == std::string::npos || end > first_slash) end = first_slash;
    const std::string width = text.substr(at, end - at);
    widths.push_back(static_cast<uint32_t>(std::strtoul(width.c_str(), nullptr, 10)));
    at = end + 1;
  }
  const std::string k = text.substr(first_slash + 1, second_slash - first_slash - 1);
  const std::string type = text.substr(second_slash + 1);
  if (type != "f32" && type != "bf16") return std::nullopt;
  auto problem =
      pk::ValidateProblem(widths, static_cast<uint32_t>(std::strtoul(k.c_str(), nullptr, 10)),
                          type == "f32" ? pk::DType::kFloat32 : pk::DType::kBFloat16);
  if (!problem.ok()) return std::nullopt;
  return problem.value();
}

int Usage(const char* message) {
  std::fprintf(stderr,
               "%s\nusage: pk-cuda-diff [--problems N] [--max-rows R] [--max-bytes B] "
               "[--big-rows R] [--seed S] [--golden FILE] [--bench-rows R] [--vary-paths 0|1] "
               "[--shape WxW[xW..]/k/f32|bf16] [--max-width W] [--max-k K] "
               "[--distribution NAME]\n",
               message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t problems = 1000;
  uint64_t max_rows = 4096;
  uint64_t max_bytes = 8u << 20;
  uint64_t big_rows = 1u << 20;
  uint64_t seed = 1;
  uint64_t bench_rows = 0;
  bool vary_paths = true;
  std::string golden_path;
  std::optional<pk::Problem> only_shape;
  uint32_t max_width = 0;
  uint32_t max_k = 0;
  std::optional<Distribution> only_distribution;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (a + 1 >= argc) return Usage(("missing value for " + arg).c_str());
    if (arg == "--golden") {
      golden_path = argv[++a];
      continue;
    }
    if (arg == "--shape") {
      only_shape = ParseShape(argv[++a]);
      if (!only_shape) return Usage(("not a valid shape: " + std::string(argv[a])).c_str());
      continue;
    }
    if (arg == "--distribution") {
      only_distribution = ParseDistribution(argv[++a]);
      if (!only_distribution) return Usage(("not a distribution: " + std::string(argv[a])).c_str());
      continue;
    }
    const uint64_t value = std::strtoull(argv[++a], nullptr, 10);
    if (arg == "--problems") problems = value;
    else if (arg == "--max-rows") max_rows = std::max<uint64_t>(1, value);
    else if (arg == "--max-bytes") max_bytes = value;
    else if (arg == "--big-rows") big_rows = value;
    else if (arg == "--seed") seed = value;
    else if (arg == "--bench-rows") bench_rows = value;
    else if (arg == "--vary-paths") vary_paths = value != 0;
    else if (arg == "--max-width") max_width = static_cast<uint32_t>(std::min<uint64_t>(value, 65535));
    else if (arg == "--max-k") max_k = static_cast<uint32_t>(std::min<uint64_t>(value, 256));
    else return Usage(("unknown option " + arg).c_str());
  }
  std::string why;
  if (!pk::cuda::DeviceAvailable(&why)) {
    std::printf("pk-cuda-diff: skipped: %s\n", why.c_str());
    return kSkip;
  }
  auto launcher = pk::cuda::TopKLauncher::Create(0);
  if (!launcher.ok()) {
    std::fprintf(stderr, "pk-cuda-diff: %s\n", launcher.error().message.c_str());
    return 2;
  }
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pk::cpu::ParallelTopK cpu(threads, 16);
  Random random{seed * 0x2545f4914f6cdd1dull + 7};
  Totals totals;
  if (!golden_path.empty()) {
    auto cases = pk::golden::ReadFile(golden_path);
    if (!cases.ok()) {
      std::fprintf(stderr, "pk-cuda-diff: %s\n", cases.error().message.c_str());
      return 2;
    }
    int golden_failed = 0;
    for (const pk::golden::Case& c : cases.value()) {
      const size_t outputs = size_t{c.rows} * c.problem.kk();
      std::vector<std::byte> values(outputs * pk::ElementBytes(c.problem.dtype), std::byte{0xa5});
      std::vector<uint32_t> slots(outputs, 0xdeadbeefu);
      const auto done =
          pk::cuda::TopKHost(c.problem, c.scores.data(), c.rows, values.data(), slots.data());
      std::string error = done.ok() ? std::string() : done.error().message;
      if (error.empty()) {
        if (auto difference = pk::golden::Compare(c, values, slots)) error = *difference;
      }
      if (!error.empty()) {
        ++golden_failed;
        std::printf("GOLDEN FAIL %s: %s\n", c.name.c_str(), error.c_str());
      }
    }
    std::printf("pk-cuda-diff: golden: %zu cases, %d failed\n", cases.value().size(), golden_failed);
    totals.failed_rows += golden_failed;
  }
  for (uint64_t n = 0; n < problems; ++n) {
    const pk::Problem problem = only_shape ? *only_shape : DrawProblem(random, max_width, max_k);
    // Drawn even when --distribution fixes it, so that a seed gives the same problems either way.
    const auto drawn = static_cast<Distribution>(random.Below(static_cast<uint32_t>(Distribution::kCount)));
    const Distribution distribution = only_distribution.value_or(drawn);
    const uint64_t budget = std::max<uint64_t>(1, (max_bytes >> random.Below(6)) / problem.row_bytes());
    const size_t rows = random.Between(1, static_cast<uint32_t>(std::min<uint64_t>({budget, max_rows, 1u << 30})));
    const uint64_t failed_before = totals.failed_rows;
    RunProblem(launcher.value(), cpu, problem, rows, distribution, random, 2, vary_paths, totals);
    if (totals.failed_rows != failed_before && totals.printed >= 8 && totals.failed_rows > 64) break;
  }
  if (bench_rows > 0) {
    struct Shape {
      std::vector<uint32_t> widths;
      uint32_t k;
      pk::DType dtype;
    };
    const pk::DType bf16 = pk::DType::kBFloat16;
    const pk::DType f32 = pk::DType::kFloat32;
    const std::vector<Shape> shapes = {
        {{1024, 1024}, 32, bf16}, {{1024, 1024}, 64, bf16},     {{1024, 1024}, 128, bf16},
        {{1024, 1024}, 256, bf16}, {{1024, 1024}, 64, f32},     {{256, 256}, 64, bf16},
        {{4096, 4096}, 64, bf16},  {{64, 64, 64}, 64, bf16},    {{32, 32, 32, 32}, 64, bf16},
        {{16, 16, 16, 16}, 32, f32}, {{256, 256}, 128, bf16}};
    for (const Shape& shape : shapes) {
      const pk::Problem problem = pk::ValidateProblem(shape.widths, shape.k, shape.dtype).value();
      for (Distribution d : {Distribution::kNormal, Distribution::kBf16Grid, Distribution::kMixed}) {
        RunProblem(launcher.value(), cpu, problem, bench_rows, d, random, 2, vary_paths, totals);
      }
    }
  }
  if (big_rows > 0) {
    const uint32_t widths[] = {16, 16};
    const pk::Problem problem = pk::ValidateProblem(widths, 8, pk::DType::kBFloat16).value();
    RunProblem(launcher.value(), cpu, problem, big_rows, Distribution::kMixed, random, 4, vary_paths,
               totals);
    const uint32_t wide[] = {8, 8, 8};
    const pk::Problem f32 = pk::ValidateProblem(wide, 16, pk::DType::kFloat32).value();
    RunProblem(launcher.value(), cpu, f32, big_rows / 2, Distribution::kMixed, random, 4, vary_paths,
               totals);
  }
  std::printf("pk-cuda-diff: %" PRIu64 " problems, %" PRIu64 " batch rows, %" PRIu64
              " single-row launches, %" PRIu64 " rows differ\n",
              totals.problems, totals.rows, totals.single_rows, totals.failed_rows);
  const uint64_t checked = totals.rows + totals.single_rows;
  std::printf("%" PRIu64 " passed, %" PRIu64 " failed\n", checked - totals.failed_rows,
              totals.failed_rows);
  return totals.failed_rows == 0 ? 0 : 1;
}
