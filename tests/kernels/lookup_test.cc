// The CPU memory lookup (kernels/lookup/) against SPEC.md's lookup contract: the validation
// messages, the weights' special cases (ties, NaN, -inf, no finite maximum), agreement with a
// float64 evaluation of the same formula, every vector path bit-identical to the plain one, and
// the parallel runner bit-identical to one thread.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <span>
#include <vector>

#include "kernels/cpu/parallel_topk.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/golden/lookup_golden.h"
#include "kernels/lookup/lookup.h"
#include "kernels/lookup/lookup_cpu.h"
#include "kernels/lookup/weights.h"
#include "kernels/numeric.h"
#include "kernels/problem.h"
#include "kernels/testing/random_rows.h"

namespace pk {
namespace {

using testing::Distribution;

Problem TopK(std::vector<uint32_t> widths, uint32_t k, DType dtype = DType::kFloat32) {
  auto result = ValidateProblem(widths, k, dtype);
  EXPECT_TRUE(result.ok());
  return result.value();
}

LookupProblem Lookup(const Problem& topk, uint32_t heads, uint32_t dim, DType values,
                     DType outputs) {
  auto result = ValidateLookup(topk, heads, dim, values, outputs);
  EXPECT_TRUE(result.ok()) << result.error().message;
  return result.value();
}

// A values table of random normals (never zeros), as bytes of `dtype`.
std::vector<std::byte> RandomTable(uint64_t slots, uint32_t dim, DType dtype,
                                   std::mt19937_64& engine) {
  std::normal_distribution<float> normal;
  std::vector<std::byte> table(slots * dim * ElementBytes(dtype));
  for (uint64_t e = 0; e < slots * dim; ++e) {
    const float x = normal(engine);
    if (dtype == DType::kFloat32) {
      std::memcpy(table.data() + e * 4, &x, 4);
    } else {
      const uint16_t bits = FloatToBf16(x);
      std::memcpy(table.data() + e * 2, &bits, 2);
    }
  }
  return table;
}

uint64_t Slots(const Problem& p) {
  uint64_t product = 1;
  for (int f = 0; f < p.factors; ++f) product *= p.widths[f];
  return product;
}

TEST(LookupValidation, NamesFieldValueAndLimit) {
  const Problem topk = TopK({16, 16}, 8);
  auto heads = ValidateLookup(topk, 65, 8, DType::kFloat32, DType::kFloat32);
  ASSERT_FALSE(heads.ok());
  EXPECT_EQ(heads.error().field, "heads");
  EXPECT_EQ(heads.error().message, "heads must be in [1, 64], got 65");
  EXPECT_EQ(ValidateLookup(topk, 0, 8, DType::kFloat32, DType::kFloat32).error().message,
            "heads must be in [1, 64], got 0");
  auto dim = ValidateLookup(topk, 1, 0, DType::kFloat32, DType::kFloat32);
  ASSERT_FALSE(dim.ok());
  EXPECT_EQ(dim.error().field, "dim");
  EXPECT_EQ(dim.error().message, "dim must be at least 1, got 0");
  auto values = ValidateLookup(topk, 1, 4, static_cast<DType>(7), DType::kFloat32);
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.error().field, "value_dtype");
  EXPECT_EQ(values.error().message, "value_dtype must be float32 or bfloat16, got code 7");
  auto outputs = ValidateLookup(topk, 1, 4, DType::kFloat32, static_cast<DType>(2));
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.error().field, "output_dtype");
  EXPECT_EQ(outputs.error().message, "output_dtype must be float32 or bfloat16, got code 2");
  auto fine = ValidateLookup(topk, 64, 3, DType::kBFloat16, DType::kFloat32);
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine.value().output_row_bytes(), 12u);
  EXPECT_EQ(fine.value().value_row_bytes(), 6u);
  EXPECT_EQ(fine.value().pairs_per_output(), 64u * 8u);
}

TEST(LookupValidation, PayloadRowsAreAMultipleOfHeadsAndFillTheScores) {
  const LookupProblem p = Lookup(TopK({16, 16}, 8), 4, 8, DType::kFloat32, DType::kFloat32);
  const uint64_t row_bytes = 32 * 4;
  EXPECT_TRUE(ValidateLookupPayload(p, 8, 8 * row_bytes).ok());
  auto zero = ValidateLookupPayload(p, 0, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().field, "rows");
  EXPECT_EQ(zero.error().message, "rows must be at least 1, got 0");
  auto ragged = ValidateLookupPayload(p, 6, 6 * row_bytes);
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(ragged.error().field, "rows");
  EXPECT_EQ(ragged.error().message, "rows must be a multiple of heads = 4, got 6");
  auto short_payload = ValidateLookupPayload(p, 8, 8 * row_bytes - 4);
  ASSERT_FALSE(short_payload.ok());
  EXPECT_EQ(short_payload.error().field, "scores");
}

// One float32 row of F = 2, w = (4, 4) whose scores are given per column; slots given.
struct HandRow {
  Problem topk = TopK({4, 4}, 4);
  std::vector<float> x = std::vector<float>(8, 0.0f);
  std::vector<uint32_t> slots;
  std::vector<float> weights;
  bool valid = false;

  void Run() {
    slots.assign(4, 0);
    weights.assign(4, -1.0f);
    std::vector<uint8_t> row_valid(1, 7);
    cpu::Workspace ws;
    LookupWeightsRows(topk, reinterpret_cast<const std::byte*>(x.data()), 1, slots.data(),
                      weights.data(), row_valid.data(), ws);
    EXPECT_LE(row_valid[0], 1);
    valid = row_valid[0] == 1;
  }
};

TEST(LookupWeights, TiesShareTheWeightEqually) {
  HandRow row;
  row.x = {1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f};  // SPEC.md's worked example
  row.Run();
  ASSERT_TRUE(row.valid);
  EXPECT_EQ(row.slots, (std::vector<uint32_t>{3, 7, 10, 12}));
  for (float w : row.weights) EXPECT_EQ(w, 0.25f);
}

TEST(LookupWeights, NanAndMinusInfinityScoresWeighZero) {
  HandRow row;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Factor 0: columns 0..3, factor 1: columns 4..7. Column 3 of factor 0 is the best; factor 1
  // holds 2, NaN, -inf, 1.
  row.x = {-5.0f, -6.0f, -7.0f, 0.0f, 2.0f, nan, -inf, 1.0f};
  row.Run();
  ASSERT_TRUE(row.valid);
  // Top 4 by key: (3,0)=2, (3,3)=1, (0,0)=-3, (1,0)=-4 -> slots 12, 15, 0, 4.
  EXPECT_EQ(row.slots, (std::vector<uint32_t>{0, 4, 12, 15}));
  const double e[4] = {std::exp(-5.0), std::exp(-6.0), 1.0, std::exp(-1.0)};
  const double z = e[0] + e[1] + e[2] + e[3];
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(row.weights[i], e[i] / z, 1e-6) << i;

  // k = 16 selects all slots: those with factor 1's NaN or -inf column weigh exactly 0.
  row.topk = TopK({4, 4}, 16);
  row.slots.assign(16, 0);
  row.weights.assign(16, -1.0f);
  std::vector<uint8_t> valid(1);
  cpu::Workspace ws;
  LookupWeightsRows(row.topk, reinterpret_cast<const std::byte*>(row.x.data()), 1,
                    row.slots.data(), row.weights.data(), valid.data(), ws);
  ASSERT_EQ(valid[0], 1);
  float total = 0;
  for (int i = 0; i < 16; ++i) {
    const uint32_t c1 = row.slots[i] % 4;
    if (c1 == 1 || c1 == 2) {
      EXPECT_EQ(FloatBits(row.weights[i]), 0u) << "slot " << row.slots[i];
    } else {
      EXPECT_GT(row.weights[i], 0.0f) << "slot " << row.slots[i];
    }
    total += row.weights[i];
  }
  EXPECT_NEAR(total, 1.0f, 1e-6f);
}

TEST(LookupWeights, RowsWithoutAFiniteMaximumAreInvalidWithZeroWeights) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::vector<float>& x : std::vector<std::vector<float>>{
           {-inf, -inf, -inf, -inf, 1.0f, 2.0f, 3.0f, 4.0f},  // every sum -inf
           {nan, nan, nan, nan, nan, nan, nan, nan},          // every sum NaN
           {inf, 0.0f, 0.0f, 0.0f, 1.0f, 2.0f, 3.0f, 4.0f},   // +inf is the maximum
           {3e38f, 3e38f, 3e38f, 3e38f, 3e38f, 0.0f, 0.0f, 0.0f}}) {  // sums overflow to +inf
    HandRow row;
    row.x = x;
    row.Run();
    EXPECT_FALSE(row.valid) << x[0];
    for (float w : row.weights) EXPECT_EQ(FloatBits(w), 0u);
  }
}

TEST(LookupWeights, Bf16ScoresOfThreeFactorsUseTheUnroundedFloat32Sum) {
  // F = 3, bfloat16: s = fl32(round_bf16(fl32(x0 + x1)) + x2), not rounded at the end.
  const Problem topk = TopK({2, 2, 2}, 8, DType::kBFloat16);
  const float x[6] = {1.0f, 0.00390625f, 1.0f, 0.0f, 0.0078125f, 0.0f};
  std::vector<uint16_t> row(6);
  for (int c = 0; c < 6; ++c) row[c] = FloatToBf16(x[c]);
  const ScoreShape shape = MakeScoreShape(topk);
  const auto* bytes = reinterpret_cast<const std::byte*>(row.data());
  // slot of (0, 0, 0) = 0: 1 + 1 = 2, + 0.0078125 = 2.0078125 (not a bfloat16: 2.0 would be).
  EXPECT_EQ(SlotScore(shape, bytes, 0), 2.0078125f);
  // slot (1, 0, 0) = 4: fl32(0.00390625 + 1) = 1.00390625 -> bf16 1.0 (ties to even), + 0.0078125.
  EXPECT_EQ(SlotScore(shape, bytes, 4), 1.0078125f);
}

// The float64 evaluation of the contract's formula (lookup_golden.h) on a CPU result.
void ExpectNearFloat64(const LookupProblem& p, const std::vector<std::byte>& scores,
                       const std::vector<std::byte>& table, const std::vector<uint32_t>& slots,
                       const std::vector<float>& weights, const std::vector<uint8_t>& valid,
                       const std::vector<std::byte>& out, size_t outputs) {
  golden::LookupCase c;
  c.problem = p;
  c.rows = static_cast<uint32_t>(outputs * p.heads);
  c.scores = scores;
  c.slots = slots;
  c.weights = weights;
  c.row_valid = valid;
  c.outputs = out;
  const auto excess = golden::CheckAgainstFloat64(c, table);
  EXPECT_FALSE(excess.has_value()) << *excess;
}

struct Case {
  std::vector<uint32_t> widths;
  uint32_t k;
  uint32_t heads;
  uint32_t dim;
  DType scores, values, outputs;
  Distribution distribution;
};

TEST(CpuLookup, AgreesWithAFloat64Evaluation) {
  std::mt19937_64 engine(20261202);
  const Case cases[] = {
      {{16, 16}, 8, 1, 64, DType::kFloat32, DType::kFloat32, DType::kFloat32, Distribution::kNormal},
      {{32, 32}, 32, 4, 1000, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16,
       Distribution::kNormal},
      {{8, 8, 8}, 256, 2, 3, DType::kBFloat16, DType::kFloat32, DType::kFloat32, Distribution::kTies},
      {{5, 6, 7, 8}, 64, 1, 1, DType::kFloat32, DType::kBFloat16, DType::kFloat32,
       Distribution::kSpecials},
      {{64, 64}, 1, 64, 17, DType::kFloat32, DType::kFloat32, DType::kBFloat16, Distribution::kGrid},
      {{100, 30}, 100, 2, 1500, DType::kFloat32, DType::kFloat32, DType::kFloat32,
       Distribution::kWideRange},
  };
  for (const Case& c : cases) {
    const LookupProblem p =
        Lookup(TopK(c.widths, c.k, c.scores), c.heads, c.dim, c.values, c.outputs);
    const size_t outputs = 3, rows = outputs * c.heads, kk = p.topk.kk();
    const auto scores = testing::RandomRows(p.topk, rows, c.distribution, engine);
    const auto table = RandomTable(Slots(p.topk), c.dim, c.values, engine);
    std::vector<uint32_t> slots(rows * kk);
    std::vector<float> weights(rows * kk);
    std::vector<uint8_t> valid(rows);
    cpu::Workspace ws;
    cpu::LookupWeightsRows(p.topk, scores.data(), rows, slots.data(), weights.data(), valid.data(),
                           ws);
    std::vector<std::byte> out(outputs * p.output_row_bytes());
    const ValuesView view{table.data(), Slots(p.topk), c.dim, c.values};
    cpu::WeightedSumRows(p, view, slots.data(), weights.data(), outputs, out.data());
    SCOPED_TRACE(testing::DistributionName(c.distribution));
    ExpectNearFloat64(p, scores, table, slots, weights, valid, out, outputs);
  }
}

TEST(CpuLookup, EveryVectorPathGivesThePlainPathsBits) {
  std::mt19937_64 engine(7);
  const Problem topk = TopK({16, 16}, 16);
  int paths_run = 0;
  for (cpu::SumPath path : {cpu::SumPath::kAvx2, cpu::SumPath::kAvx512}) {
    if (!cpu::SumPathAvailable(path)) {
      std::printf("path %d not available on this host: skipped\n", static_cast<int>(path));
      continue;
    }
    ++paths_run;
    for (uint32_t dim : {1u, 3u, 7u, 8u, 15u, 16u, 17u, 31u, 1000u, 1024u, 1025u, 2100u}) {
      for (DType values : {DType::kFloat32, DType::kBFloat16}) {
        for (DType outputs : {DType::kFloat32, DType::kBFloat16}) {
          const LookupProblem p = Lookup(topk, 2, dim, values, outputs);
          const size_t count = 5, pairs = count * p.pairs_per_output();
          const auto table = RandomTable(Slots(topk), dim, values, engine);
          std::vector<uint32_t> slots(pairs);
          std::vector<float> weights(pairs);
          std::uniform_int_distribution<uint32_t> slot(0, Slots(topk) - 1);
          std::uniform_real_distribution<float> weight(-1.0f, 1.0f);
          for (size_t e = 0; e < pairs; ++e) {
            slots[e] = slot(engine);
            weights[e] = weight(engine);
          }
          // Odd offsets: the paths must take any alignment.
          std::vector<std::byte> plain(count * p.output_row_bytes() + 1),
              vector(count * p.output_row_bytes() + 1);
          const ValuesView view{table.data(), Slots(topk), dim, values};
          cpu::WeightedSumRowsOn(cpu::SumPath::kGeneric, p, view, slots.data(), weights.data(),
                                 count, plain.data() + 1);
          cpu::WeightedSumRowsOn(path, p, view, slots.data(), weights.data(), count,
                                 vector.data() + 1);
          ASSERT_EQ(plain, vector) << "path " << static_cast<int>(path) << " dim " << dim;
        }
      }
    }
  }
  std::printf("vector paths compared: %d (auto: %s)\n", paths_run, cpu::SumPathName());
}

TEST(CpuLookup, ParallelRunnerGivesTheOneThreadBits) {
  std::mt19937_64 engine(11);
  const LookupProblem p =
      Lookup(TopK({32, 32}, 32, DType::kBFloat16), 4, 200, DType::kBFloat16, DType::kFloat32);
  const size_t outputs = 37, rows = outputs * 4, kk = p.topk.kk();
  const auto scores = testing::RandomRows(p.topk, rows, Distribution::kTies, engine);
  const auto table = RandomTable(Slots(p.topk), p.dim, p.value_dtype, engine);
  const ValuesView view{table.data(), Slots(p.topk), p.dim, p.value_dtype};
  std::vector<uint32_t> slots(rows * kk);
  std::vector<float> weights(rows * kk);
  std::vector<uint8_t> valid(rows);
  std::vector<std::byte> out(outputs * p.output_row_bytes());
  cpu::Workspace ws;
  cpu::LookupWeightsRows(p.topk, scores.data(), rows, slots.data(), weights.data(), valid.data(),
                         ws);
  cpu::WeightedSumRows(p, view, slots.data(), weights.data(), outputs, out.data());
  for (int threads : {1, 2, 3}) {
    cpu::ParallelTopK runner(threads, 2);
    // The batch in three pieces, each of whole rows.
    const size_t row_bytes = p.topk.row_bytes();
    const std::span<const std::byte> all(scores);
    const std::span<const std::byte> pieces[] = {all.subspan(0, 5 * row_bytes),
                                                 all.subspan(5 * row_bytes, 90 * row_bytes),
                                                 all.subspan(95 * row_bytes)};
    std::vector<uint32_t> slots2(rows * kk);
    std::vector<float> weights2(rows * kk);
    std::vector<uint8_t> valid2(rows);
    std::vector<std::byte> out2(outputs * p.output_row_bytes());
    runner.RunLookup(p, view, pieces, slots2.data(), weights2.data(), valid2.data(), out2.data());
    EXPECT_EQ(slots, slots2) << threads;
    EXPECT_EQ(0, std::memcmp(weights.data(), weights2.data(), weights.size() * 4)) << threads;
    EXPECT_EQ(valid, valid2) << threads;
    EXPECT_EQ(out, out2) << threads;
  }
}

TEST(GoldenLookup, CpuReproducesEveryCaseBitForBit) {
  auto cases = golden::ReadLookupFile(PK_GOLDEN_LOOKUP_FILE);
  ASSERT_TRUE(cases.ok()) << cases.error().message;
  ASSERT_GE(cases.value().size(), 17u);
  std::set<uint32_t> heads, dims;
  for (const golden::LookupCase& c : cases.value()) {
    SCOPED_TRACE(c.name);
    const LookupProblem& p = c.problem;
    heads.insert(p.heads);
    dims.insert(p.dim);
    const auto table = golden::TableFromSeed(c.table_seed, c.table_slots(), p.dim, p.value_dtype);
    const size_t pairs = size_t{c.rows} * p.topk.kk();
    std::vector<uint32_t> slots(pairs);
    std::vector<float> weights(pairs);
    std::vector<uint8_t> valid(c.rows);
    std::vector<std::byte> out(c.outputs.size());
    cpu::Workspace ws;
    cpu::LookupWeightsRows(p.topk, c.scores.data(), c.rows, slots.data(), weights.data(),
                           valid.data(), ws);
    const ValuesView view{table.data(), c.table_slots(), p.dim, p.value_dtype};
    cpu::WeightedSumRows(p, view, slots.data(), weights.data(), c.outputs_count(), out.data());
    const auto difference = golden::CompareLookup(c, slots, weights, valid, out);
    EXPECT_FALSE(difference.has_value()) << *difference;
    const auto excess = golden::CheckAgainstFloat64(c, table);
    EXPECT_FALSE(excess.has_value()) << *excess;
  }
  EXPECT_EQ(heads, (std::set<uint32_t>{1, 2, 4, 64}));
  EXPECT_TRUE(dims.count(1) && dims.count(3) && dims.count(1000));
}

TEST(GoldenLookup, ComparisonAndFloat64CheckCatchAWrongOutput) {
  auto cases = golden::ReadLookupFile(PK_GOLDEN_LOOKUP_FILE);
  ASSERT_TRUE(cases.ok()) << cases.error().message;
  golden::LookupCase c = cases.value()[0];  // float32 outputs
  ASSERT_EQ(c.problem.output_dtype, DType::kFloat32);
  const auto table =
      golden::TableFromSeed(c.table_seed, c.table_slots(), c.problem.dim, c.problem.value_dtype);
  std::vector<std::byte> wrong = c.outputs;
  float x;
  std::memcpy(&x, wrong.data() + 40, 4);
  x = x * 1.0001f + 1e-4f;
  std::memcpy(wrong.data() + 40, &x, 4);
  const auto difference = golden::CompareLookup(c, c.slots, c.weights, c.row_valid, wrong);
  ASSERT_TRUE(difference.has_value());
  EXPECT_NE(difference->find("output 0, column 10"), std::string::npos) << *difference;
  c.outputs = wrong;
  const auto excess = golden::CheckAgainstFloat64(c, table);
  ASSERT_TRUE(excess.has_value());
  EXPECT_NE(excess->find("output 0, column 10"), std::string::npos) << *excess;
}

}  // namespace
}  // namespace pk
