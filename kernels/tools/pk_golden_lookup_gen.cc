// pk-golden-lookup-gen OUT
//
// Writes the golden memory lookup cases (format: tests/data/README.md) to OUT: fixed shapes and
// seeds, the CPU implementation as the reference, every case checked against a float64
// evaluation of the contract's formula before it is written (lookup_golden.h). Deterministic:
// the same program writes the same file.
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/topk_cpu.h"
#include "kernels/golden/lookup_golden.h"
#include "kernels/lookup/lookup_cpu.h"
#include "kernels/numeric.h"
#include "kernels/testing/random_rows.h"

namespace {

using pk::DType;
using pk::testing::Distribution;

struct Shape {
  std::vector<uint32_t> widths;
  uint32_t k;
  uint32_t heads;
  uint32_t dim;
  DType scores, values, outputs;
  Distribution distribution;
  uint32_t outputs_count;
  bool non_finite_rows;  // no +inf but in three rows: all -inf, all NaN, a +inf
};

constexpr DType kF = DType::kFloat32;
constexpr DType kB = DType::kBFloat16;

const Shape kShapes[] = {
    {{16, 16}, 8, 1, 64, kF, kF, kF, Distribution::kNormal, 4, false},
    {{16, 16}, 8, 1, 64, kB, kB, kB, Distribution::kNormal, 4, false},
    {{32, 32}, 32, 4, 1000, kB, kB, kB, Distribution::kTies, 2, false},
    {{32, 32}, 32, 4, 1000, kF, kF, kB, Distribution::kGrid, 2, false},
    {{8, 8}, 1, 2, 3, kF, kF, kF, Distribution::kNormal, 4, false},
    {{8, 8}, 1, 2, 3, kB, kB, kF, Distribution::kAllEqual, 4, false},
    {{64, 64}, 256, 1, 1, kF, kF, kF, Distribution::kSpecials, 6, true},
    {{64, 64}, 256, 2, 17, kB, kF, kB, Distribution::kTies, 2, false},
    {{8, 8, 8}, 64, 2, 1000, kB, kB, kB, Distribution::kGrid, 2, false},
    {{8, 8, 8}, 100, 1, 3, kF, kB, kF, Distribution::kSpecials, 8, true},
    {{5, 6, 7, 8}, 16, 4, 128, kF, kF, kF, Distribution::kWideRange, 2, false},
    {{6, 6, 6, 6}, 256, 1, 1, kB, kB, kB, Distribution::kSpecials, 6, true},
    {{4, 4, 4, 4}, 4, 64, 16, kB, kB, kF, Distribution::kTies, 2, true},
    {{16, 16}, 2, 64, 1, kF, kF, kF, Distribution::kSorted, 1, false},
    {{100, 30}, 7, 2, 1000, kF, kF, kF, Distribution::kNormal, 2, false},
    {{3, 2}, 256, 1, 5, kB, kF, kF, Distribution::kAllEqual, 3, false},  // kk = 6 < k
    {{1024, 1024}, 32, 4, 8, kB, kB, kB, Distribution::kNormal, 1, false},
};

const char* Name(DType dtype) { return dtype == kF ? "f32" : "bf16"; }

// Row r of a case's batch set to `value` everywhere (a row with no finite maximum).
void Fill(const pk::Problem& p, std::vector<std::byte>& scores, size_t r, float value) {
  for (uint32_t c = 0; c < p.row_width(); ++c) {
    std::byte* element = scores.data() + r * p.row_bytes() + size_t{c} * pk::ElementBytes(p.dtype);
    if (p.dtype == kF) {
      std::memcpy(element, &value, 4);
    } else {
      const uint16_t bits = pk::FloatToBf16(value);
      std::memcpy(element, &bits, 2);
    }
  }
}

// Replaces every +inf and huge value (whose sums overflow to +inf) by -inf or NaN, alternately:
// the rows keep their NaN and -inf scores but get a finite maximum.
void TameInfinities(const pk::Problem& p, std::vector<std::byte>& scores) {
  const size_t count = scores.size() / pk::ElementBytes(p.dtype);
  bool to_nan = false;
  for (size_t e = 0; e < count; ++e) {
    float x;
    if (p.dtype == kF) {
      std::memcpy(&x, scores.data() + e * 4, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, scores.data() + e * 2, 2);
      x = pk::Bf16ToFloat(bits);
    }
    if (!(x > 1e30f)) continue;
    const float replacement = to_nan ? std::numeric_limits<float>::quiet_NaN()
                                     : -std::numeric_limits<float>::infinity();
    to_nan = !to_nan;
    if (p.dtype == kF) {
      std::memcpy(scores.data() + e * 4, &replacement, 4);
    } else {
      const uint16_t bits = pk::FloatToBf16(replacement);
      std::memcpy(scores.data() + e * 2, &bits, 2);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pk-golden-lookup-gen OUT\n");
    return 2;
  }
  std::mt19937_64 engine(16);
  std::vector<pk::golden::LookupCase> cases;
  for (size_t index = 0; index < std::size(kShapes); ++index) {
    const Shape& s = kShapes[index];
    auto topk = pk::ValidateProblem(s.widths, s.k, s.scores);
    auto problem = topk.ok() ? pk::ValidateLookup(topk.value(), s.heads, s.dim, s.values, s.outputs)
                             : pk::Result<pk::LookupProblem>(topk.error());
    if (!problem.ok()) {
      std::fprintf(stderr, "shape %zu: %s\n", index, problem.error().message.c_str());
      return 1;
    }
    pk::golden::LookupCase c;
    c.problem = problem.value();
    const pk::LookupProblem& p = c.problem;
    c.rows = s.outputs_count * s.heads;
    c.table_seed = 0x9e3779b97f4a7c15ull * (index + 1);
    c.scores = pk::testing::RandomRows(p.topk, c.rows, s.distribution, engine);
    if (s.non_finite_rows) {
      TameInfinities(p.topk, c.scores);
      const float inf = std::numeric_limits<float>::infinity();
      Fill(p.topk, c.scores, 0, -inf);
      Fill(p.topk, c.scores, c.rows / 2, std::numeric_limits<float>::quiet_NaN());
      Fill(p.topk, c.scores, c.rows - 1, 1.0f);
      // One +inf in the last row: it is selected, so the maximum is +inf.
      const size_t last = size_t{c.rows - 1} * p.topk.row_bytes();
      if (p.topk.dtype == kF) {
        std::memcpy(c.scores.data() + last, &inf, 4);
      } else {
        const uint16_t bits = pk::FloatToBf16(inf);
        std::memcpy(c.scores.data() + last, &bits, 2);
      }
    }
    c.name = "lookup" + std::to_string(index) + "_F" + std::to_string(p.topk.factors) + "_k" +
             std::to_string(s.k) + "_h" + std::to_string(s.heads) + "_d" + std::to_string(s.dim) +
             "_" + Name(s.scores) + "_" + Name(s.values) + "_" + Name(s.outputs) + "_" +
             std::string(pk::testing::DistributionName(s.distribution));
    const uint32_t kk = p.topk.kk();
    c.slots.resize(size_t{c.rows} * kk);
    c.weights.resize(size_t{c.rows} * kk);
    c.row_valid.resize(c.rows);
    c.outputs.resize(size_t{c.outputs_count()} * p.output_row_bytes());
    const auto table = pk::golden::TableFromSeed(c.table_seed, c.table_slots(), p.dim, p.value_dtype);
    pk::cpu::Workspace ws;
    pk::cpu::LookupWeightsRows(p.topk, c.scores.data(), c.rows, c.slots.data(), c.weights.data(),
                               c.row_valid.data(), ws);
    const pk::ValuesView view{table.data(), c.table_slots(), p.dim, p.value_dtype};
    pk::cpu::WeightedSumRows(p, view, c.slots.data(), c.weights.data(), c.outputs_count(),
                             c.outputs.data());
    if (auto excess = pk::golden::CheckAgainstFloat64(c, table)) {
      std::fprintf(stderr, "%s: against float64: %s\n", c.name.c_str(), excess->c_str());
      return 1;
    }
    size_t invalid = 0;
    for (uint8_t v : c.row_valid) invalid += v == 0;
    std::printf("%s: %u rows (%zu without a finite maximum), checked against float64\n",
                c.name.c_str(), c.rows, invalid);
    cases.push_back(std::move(c));
  }
  const std::string error = pk::golden::WriteLookupFile(argv[1], cases);
  if (!error.empty()) {
    std::fprintf(stderr, "pk-golden-lookup-gen: %s\n", error.c_str());
    return 1;
  }
  std::printf("%zu cases written to %s\n", cases.size(), argv[1]);
  return 0;
}
