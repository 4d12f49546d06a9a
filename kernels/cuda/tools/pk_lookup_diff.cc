// pk-lookup-diff [--problems N] [--seed S] [--max-elements E]
//
// Randomized differential check of the CUDA memory lookup against the CPU one, bit for bit:
// random shapes (F = 2..4, k 1..256, heads 1..64, dims from 1 to 6000 with odd ones, every dtype
// combination, score distributions with ties and special values) and random values tables; the
// CUDA side is pk::cuda::LookupHost (top-k and lookup on the device), the CPU side
// ParallelTopK::RunLookup. Built twice: for a GPU (pk-lookup-diff) and on the CPU emulator of the
// CUDA runtime (pk-lookup-emu-diff, kernels/cuda/emulation/). Prints the first difference of each
// failing problem, then "N passed, N failed". Exit status: 0 all equal, 1 a difference, 2 usage
// error or backend failure, 77 no usable device.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/parallel_topk.h"
#include "kernels/cuda/lookup_cuda.h"
#include "kernels/cuda/topk_cuda.h"
#include "kernels/golden/lookup_golden.h"
#include "kernels/testing/random_rows.h"

int main(int argc, char** argv) {
  int problems = 60;
  uint64_t seed = 1;
  uint64_t max_elements = uint64_t{1} << 22;  // table elements per problem
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--problems" && a + 1 < argc) {
      problems = std::atoi(argv[++a]);
    } else if (arg == "--seed" && a + 1 < argc) {
      seed = std::strtoull(argv[++a], nullptr, 10);
    } else if (arg == "--max-elements" && a + 1 < argc) {
      max_elements = std::strtoull(argv[++a], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: pk-lookup-diff [--problems N] [--seed S] [--max-elements E]\n");
      return 2;
    }
  }
  std::string why;
  if (!pk::cuda::DeviceAvailable(&why)) {
    std::printf("pk-lookup-diff: skipped: %s\n", why.c_str());
    return 77;
  }
  std::mt19937_64 engine(seed);
  auto uniform = [&](uint32_t low, uint32_t high) {
    return std::uniform_int_distribution<uint32_t>(low, high)(engine);
  };
  const uint32_t dims[] = {1, 2, 3, 4, 5, 7, 8, 16, 17, 64, 100, 127, 128, 1000, 1024, 4096, 4100,
                           6000};
  pk::cpu::ParallelTopK cpu(2, 1);
  int passed = 0, failed = 0;
  for (int index = 0; index < problems; ++index) {
    const int factors = static_cast<int>(uniform(2, 4));
    std::vector<uint32_t> widths(factors);
    for (uint32_t& w : widths) w = uniform(1, factors == 2 ? 64 : 12);
    const uint32_t k = uniform(0, 3) == 0 ? uniform(1, 8) : uniform(1, 256);
    const uint32_t heads = uniform(0, 3) == 0 ? 64 : uniform(1, 8);
    const uint32_t dim = dims[uniform(0, std::size(dims) - 1)];
    const auto dtype = [&] { return uniform(0, 1) ? pk::DType::kBFloat16 : pk::DType::kFloat32; };
    auto topk = pk::ValidateProblem(widths, k, dtype());
    if (!topk.ok()) continue;
    auto lookup = pk::ValidateLookup(topk.value(), heads, dim, dtype(), dtype());
    if (!lookup.ok()) continue;
    const pk::LookupProblem& p = lookup.value();
    uint64_t slots = 1;
    for (uint32_t w : widths) slots *= w;
    if (slots * dim > max_elements) continue;
    const uint32_t outputs = uniform(1, heads >= 32 ? 3 : 24);
    const size_t rows = size_t{outputs} * heads, kk = p.topk.kk();
    const auto distribution = pk::testing::kAllDistributions[uniform(
        0, std::size(pk::testing::kAllDistributions) - 1)];
    const auto scores = pk::testing::RandomRows(p.topk, rows, distribution, engine);
    const auto table = pk::golden::TableFromSeed(engine(), slots, dim, p.value_dtype);
    pk::golden::LookupCase expected;
    expected.problem = p;
    expected.rows = static_cast<uint32_t>(rows);
    expected.slots.resize(rows * kk);
    expected.weights.resize(rows * kk);
    expected.row_valid.resize(rows);
    expected.outputs.resize(size_t{outputs} * p.output_row_bytes());
    const std::span<const std::byte> input(scores);
    const pk::ValuesView view{table.data(), slots, dim, p.value_dtype};
    cpu.RunLookup(p, view, std::span(&input, 1), expected.slots.data(), expected.weights.data(),
                  expected.row_valid.data(), expected.outputs.data());
    std::vector<uint32_t> got_slots(rows * kk);
    std::vector<float> got_weights(rows * kk);
    std::vector<uint8_t> got_valid(rows);
    std::vector<std::byte> got_outputs(expected.outputs.size());
    const std::string error = pk::cuda::LookupHost(p, table.data(), slots, scores.data(), rows,
                                                   got_slots.data(), got_weights.data(),
                                                   got_valid.data(), got_outputs.data());
    char shape[160];
    std::snprintf(shape, sizeof shape, "problem %d: F=%d w0=%u k=%u heads=%u dim=%u %s/%s/%s %s",
                  index, factors, widths[0], k, heads, dim, pk::DTypeName(p.topk.dtype),
                  pk::DTypeName(p.value_dtype), pk::DTypeName(p.output_dtype),
                  std::string(pk::testing::DistributionName(distribution)).c_str());
    if (!error.empty()) {
      std::printf("FAIL %s: cuda backend error: %s\n", shape, error.c_str());
      return 2;
    }
    if (auto difference = pk::golden::CompareLookup(expected, got_slots, got_weights, got_valid,
                                                    got_outputs)) {
      std::printf("FAIL %s: %s\n", shape, difference->c_str());
      ++failed;
    } else {
      ++passed;
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
