// The CPU implementation against SPEC.md on random shapes: a literal transcription of the
// selection rule (full sorts, no shortcuts), a brute force over the whole product space where no
// ties decide, the output invariants, and independence from threads and row grouping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/parallel_topk.h"
#include "kernels/cpu/scan.h"
#include "kernels/cpu/sort.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/numeric.h"
#include "kernels/problem.h"
#include "kernels/testing/random_rows.h"

namespace pk {
namespace {

using testing::Distribution;

float Load(const Problem& p, const std::byte* row, uint32_t index) {
  if (p.dtype == DType::kFloat32) {
    float x;
    std::memcpy(&x, row + 4 * size_t{index}, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, row + 2 * size_t{index}, 2);
  return Bf16ToFloat(bits);
}

float RoundT(const Problem& p, float x) { return p.dtype == DType::kFloat32 ? x : RoundToBf16(x); }

uint64_t Product(const Problem& p) {
  uint64_t product = 1;
  for (int f = 0; f < p.factors; ++f) product *= p.widths[f];
  return product;
}

std::vector<uint32_t> Columns(const Problem& p, uint32_t slot) {
  std::vector<uint32_t> columns(p.factors);
  for (int f = p.factors - 1; f >= 0; --f) {
    columns[f] = slot % p.widths[f];
    slot /= p.widths[f];
  }
  return columns;
}

// SPEC.md's Output: the value of a slot, recomputed from the raw row.
float SlotValue(const Problem& p, const std::byte* row, uint32_t slot) {
  const std::vector<uint32_t> columns = Columns(p, slot);
  float v = Load(p, row, columns[0]);
  for (int f = 1; f < p.factors; ++f) {
    v = (f == 1 ? v : RoundT(p, v)) + Load(p, row, p.offset(f) + columns[f]);
  }
  return RoundT(p, v);
}

// SPEC.md's selection rule, transcribed step by step. Returns the slots, ascending.
std::vector<uint32_t> SpecSlots(const Problem& p, const std::byte* row) {
  struct Entry {
    float value;
    uint32_t slot;
  };
  std::vector<std::vector<Entry>> lists(p.factors);
  for (int f = 0; f < p.factors; ++f) {
    for (uint32_t c = 0; c < p.widths[f]; ++c) {
      float v = Load(p, row, p.offset(f) + c);
      if (std::isnan(v)) v = -std::numeric_limits<float>::infinity();
      lists[f].push_back({v, c});
    }
    std::sort(lists[f].begin(), lists[f].end(), [](const Entry& a, const Entry& b) {
      const uint32_t ka = OrderedKey(a.value), kb = OrderedKey(b.value);
      return ka != kb ? ka > kb : a.slot > b.slot;
    });
    lists[f].resize(std::min<size_t>(p.k, p.widths[f]));
  }
  std::vector<Entry> running = lists[0];
  for (int f = 1; f < p.factors; ++f) {
    const std::vector<Entry>& factor = lists[f];
    const size_t n = std::min<size_t>(p.k, running.size() * factor.size());
    struct Candidate {
      float score;
      size_t i, j;
    };
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < running.size(); ++i) {
      for (size_t j = 0; j < factor.size(); ++j) {
        if ((i + 1) * (j + 1) <= n) candidates.push_back({running[i].value + factor[j].value, i, j});
      }
    }
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      const uint32_t ka = OrderedKey(a.score), kb = OrderedKey(b.score);
      if (ka != kb) return ka > kb;
      if (a.i + a.j != b.i + b.j) return a.i + a.j > b.i + b.j;
      return a.i > b.i;
    });
    std::vector<Entry> next;
    for (size_t r = 0; r < n; ++r) {
      const Candidate& c = candidates[r];
      next.push_back({RoundT(p, c.score), running[c.i].slot * p.widths[f] + factor[c.j].slot});
    }
    running = std::move(next);
  }
  std::vector<uint32_t> slots;
  for (const Entry& e : running) slots.push_back(e.slot);
  std::sort(slots.begin(), slots.end());
  return slots;
}

// The kk largest slot values over the whole product space, for rows with no ties.
std::vector<uint32_t> BruteForceSlots(const Problem& p, const std::byte* row) {
  std::vector<std::pair<float, uint32_t>> all;
  for (uint64_t slot = 0; slot < Product(p); ++slot) {
    all.push_back({SlotValue(p, row, static_cast<uint32_t>(slot)), static_cast<uint32_t>(slot)});
  }
  std::partial_sort(all.begin(), all.begin() + p.kk(), all.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<uint32_t> slots;
  for (uint32_t r = 0; r < p.kk(); ++r) slots.push_back(all[r].second);
  std::sort(slots.begin(), slots.end());
  return slots;
}

struct Output {
  std::vector<std::byte> values;
  std::vector<uint32_t> slots;
};

Output RunCpu(const Problem& p, const std::vector<std::byte>& scores, size_t rows, int threads) {
  Output out{std::vector<std::byte>(rows * p.out_value_bytes(), std::byte{0x5a}),
             std::vector<uint32_t>(rows * p.kk(), 0xdeadbeefu)};
  cpu::ParallelTopK runner(threads, 1);
  runner.Run(p, scores.data(), rows, out.values.data(), out.slots.data());
  return out;
}

// Two runs of the same rows gave the same bits.
void ExpectSameOutput(const Output& expected, const Output& actual, const std::string& what) {
  EXPECT_EQ(expected.slots, actual.slots) << what;
  EXPECT_EQ(expected.values, actual.values) << what;
}

bool SameValue(const Problem& p, const std::byte* a, float b) {
  if (p.dtype == DType::kFloat32) {
    float x;
    std::memcpy(&x, a, 4);
    return (std::isnan(x) && std::isnan(b)) || FloatBits(x) == FloatBits(b);
  }
  uint16_t bits;
  std::memcpy(&bits, a, 2);
  const uint16_t want = FloatToBf16(b);
  const auto is_nan = [](uint16_t v) { return (v & 0x7fff) > 0x7f80; };
  return (is_nan(bits) && is_nan(want)) || bits == want;
}

// A random valid shape: F in [2, 4], widths in [1, max_width], k in [1, 256].
Problem RandomProblem(std::mt19937_64& engine, uint32_t max_width, uint64_t max_product) {
  std::uniform_int_distribution<int> factors(2, 4);
  std::uniform_int_distribution<uint32_t> k(1, 256);
  std::uniform_int_distribution<int> dtype(0, 1);
  while (true) {
    const int f = factors(engine);
    std::vector<uint32_t> widths(f);
    // Log-uniform widths, so that small and large ones both come up.
    std::uniform_real_distribution<double> log_width(0.0, std::log(double(max_width) + 1));
    uint64_t product = 1;
    for (auto& w : widths) {
      w = std::clamp<uint32_t>(static_cast<uint32_t>(std::exp(log_width(engine))), 1, max_width);
      product *= w;
    }
    if (product > max_product) continue;
    auto problem = ValidateProblem(widths, k(engine), static_cast<DType>(dtype(engine)));
    if (problem.ok()) return problem.value();
  }
}

std::string Describe(const Problem& p, Distribution d) {
  std::string text;
  for (int f = 0; f < p.factors; ++f) {
    if (f > 0) text += 'x';
    text += std::to_string(p.widths[f]);
  }
  text += " k=";
  text += std::to_string(p.k);
  text += ' ';
  text += DTypeName(p.dtype);
  text += ' ';
  text += testing::DistributionName(d);
  return text;
}

// Checks every row's output: kk ascending unique slots below the product, SPEC's slots (from the
// transcription), and values equal to the recomputed sums.
void ExpectMatchesSpec(const Problem& p, const std::vector<std::byte>& scores, size_t rows,
                       const Output& out, const std::string& what) {
  const uint32_t kk = p.kk();
  const uint64_t product = Product(p);
  for (size_t r = 0; r < rows; ++r) {
    const std::byte* row = scores.data() + r * p.row_bytes();
    const uint32_t* slots = out.slots.data() + r * kk;
    for (uint32_t q = 0; q < kk; ++q) {
      ASSERT_LT(slots[q], product) << what << " row " << r << " position " << q;
      if (q > 0) {
        ASSERT_LT(slots[q - 1], slots[q]) << what << " row " << r << ": not ascending";
      }
      ASSERT_TRUE(SameValue(p, out.values.data() + (r * kk + q) * ElementBytes(p.dtype),
                            SlotValue(p, row, slots[q])))
          << what << " row " << r << " position " << q << ": value is not the slot's sum";
    }
    const std::vector<uint32_t> expected = SpecSlots(p, row);
    ASSERT_EQ(std::vector<uint32_t>(slots, slots + kk), expected) << what << " row " << r;
  }
}

// The bfloat16 scans that work from the row (no key array) against the key scans, on every
// special pattern (NaN of both signs, infinities, zeros of both signs, denormals), at every byte
// offset parity and for counts that end anywhere in a vector.
TEST(ScanKernels, Bf16ScansFromTheRowMatchTheKeyScans) {
  std::mt19937_64 engine(17);
  const uint16_t special[] = {0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7f80, 0xff80, 0x0000,
                              0x8000, 0x0001, 0x8001, 0x3f80, 0xbf80, 0x7f7f, 0xff7f};
  for (int trial = 0; trial < 400; ++trial) {
    const uint32_t count = 1 + static_cast<uint32_t>(engine() % 1500);
    const size_t offset = engine() % 2;  // the row at an odd byte address half the time
    std::vector<std::byte> storage(2 * count + 2);
    std::byte* x = storage.data() + offset;
    for (uint32_t c = 0; c < count; ++c) {
      const uint16_t bits = engine() % 4 == 0 ? special[engine() % std::size(special)]
                                              : static_cast<uint16_t>(engine());
      std::memcpy(x + 2 * size_t{c}, &bits, 2);
    }
    std::vector<uint32_t> keys(count + cpu::kCompressSlack);
    cpu::Bf16ColumnKeys(x, count, keys.data());

    const uint32_t groups =
        1 + static_cast<uint32_t>(engine() % std::min<uint32_t>(count, cpu::kMaxGroups));
    std::vector<uint32_t> maxima(groups);
    std::vector<uint16_t> from_row(groups);
    cpu::StridedGroupMaxima(keys.data(), count, groups, maxima.data());
    cpu::Bf16StridedGroupMaxima(x, count, groups, from_row.data());
    for (uint32_t g = 0; g < groups; ++g) {
      ASSERT_EQ(from_row[g], maxima[g] >> 16) << "trial " << trial << " group " << g;
    }

    // Thresholds at a key's value (low half 0, as the factor bound makes them) and anywhere.
    for (const uint32_t threshold : {keys[engine() % count] & 0xffff0000u,
                                     static_cast<uint32_t>(engine()), 0u, 0xffffffffu}) {
      std::vector<uint32_t> expected(count + cpu::kCompressSlack);
      std::vector<uint32_t> got(count + cpu::kCompressSlack);
      const uint32_t n = cpu::CompressAtLeast(keys.data(), count, threshold, expected.data());
      ASSERT_EQ(cpu::CompressBf16KeysAtLeast(x, count, threshold, got.data()), n)
          << "trial " << trial << " threshold " << threshold;
      expected.resize(n);
      got.resize(n);
      ASSERT_EQ(got, expected) << "trial " << trial << " threshold " << threshold;
    }
  }
}

// A stage's pair scoring against the scalar definition, for every table size the vector paths
// distinguish (1..256 entries: one, two, four and eight register pairs, and the scalar loop
// past 128), with special values in the tables (NaN, +-inf, -0, sums that overflow) and
// thresholds that pass none, some and all of the pairs.
TEST(ScanKernels, ScorePairsMatchesTheScalarDefinition) {
  std::mt19937_64 engine(23);
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           -0.0f,
                           0.0f,
                           3.0e38f,
                           -3.0e38f,
                           1.0f};
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 300; ++trial) {
    const uint32_t entries = 1 + static_cast<uint32_t>(engine() % cpu::kMaxPairTable);
    std::vector<float> a(cpu::kMaxPairTable), b(cpu::kMaxPairTable);
    for (uint32_t e = 0; e < cpu::kMaxPairTable; ++e) {
      a[e] = engine() % 8 == 0 ? special[engine() % std::size(special)] : normal(engine);
      b[e] = engine() % 8 == 0 ? special[engine() % std::size(special)] : normal(engine);
    }
    const uint32_t count = 1 + static_cast<uint32_t>(engine() % 600);
    std::vector<uint32_t> ia(count), ib(count);
    for (uint32_t e = 0; e < count; ++e) {
      ia[e] = static_cast<uint32_t>(engine() % entries);
      ib[e] = static_cast<uint32_t>(engine() % entries);
    }
    std::vector<uint32_t> expected_keys(count);
    for (uint32_t e = 0; e < count; ++e) expected_keys[e] = OrderedKey(a[ia[e]] + b[ib[e]]);
    for (const uint32_t threshold :
         {expected_keys[engine() % count], static_cast<uint32_t>(engine()), 0u, 0xffffffffu}) {
      std::vector<uint32_t> keys(count), positions(count + cpu::kCompressSlack),
          passing_keys(count + cpu::kCompressSlack);
      const uint32_t passing =
          cpu::ScorePairsAtLeast(a.data(), ia.data(), b.data(), ib.data(), entries, count,
                                 threshold, keys.data(), positions.data(), passing_keys.data());
      ASSERT_EQ(keys, expected_keys) << "trial " << trial << " entries " << entries;
      std::vector<uint32_t> expected_positions;
      for (uint32_t e = 0; e < count; ++e) {
        if (expected_keys[e] >= threshold) expected_positions.push_back(e);
      }
      ASSERT_EQ(passing, expected_positions.size()) << "trial " << trial;
      positions.resize(passing);
      passing_keys.resize(passing);
      ASSERT_EQ(positions, expected_positions) << "trial " << trial;
      for (uint32_t s = 0; s < passing; ++s) {
        ASSERT_EQ(passing_keys[s], expected_keys[positions[s]]) << "trial " << trial;
      }
    }
  }
}

// The sorting network against std::sort for every size it takes, at every vector width this host
// runs (the one it picks and the others), and the 16-bit network where the host has it, on keys
// drawn from ranges wide and narrow (many equal keys), with zeros among them: the whole order,
// and the best `need` keys for needs that trim none and one of the network's merges.
template <typename Key, typename Sort>
void CheckSortNetwork(std::mt19937_64& engine, int most, Sort sort) {
  const auto padded = [](int n) {
    return sizeof(Key) == 4 ? cpu::PaddedCount(n) : cpu::PaddedCount16(n);
  };
  for (int n = 1; n <= most; ++n) {
    for (const uint32_t range : {0xffffffffu, 7u, 1u}) {
      std::vector<Key> keys(padded(n), static_cast<Key>(0xdeadbeefu));
      for (int e = 0; e < n; ++e) keys[e] = static_cast<Key>(engine() % (uint64_t{range} + 1));
      std::fill(keys.begin() + n, keys.end(), Key{0});
      std::vector<Key> expected(keys.begin(), keys.begin() + n);
      std::sort(expected.begin(), expected.end(), std::greater<>());
      const int random_need = 1 + static_cast<int>(engine() % static_cast<uint64_t>(n));
      for (const int need : {n, 1, n / 2, n / 2 + 1, n / 4 + 1, random_need}) {
        if (need < 1 || need > n) continue;
        std::vector<Key> out(padded(n), static_cast<Key>(0xdeadbeefu));
        sort(keys.data(), n, need, out.data());
        ASSERT_EQ(std::vector<Key>(out.begin(), out.begin() + need),
                  std::vector<Key>(expected.begin(), expected.begin() + need))
            << "bits=" << 8 * sizeof(Key) << " n=" << n << " need=" << need
            << " range=" << range;
      }
    }
  }
}

TEST(SortNetwork, SortsEverySizeDescendingAtEveryWidth) {
  std::mt19937_64 engine(5);
  int widths_run = 0;
  for (const int vector_bytes : {16, 32, 64}) {
    uint32_t probe[16] = {1};
    uint32_t probe_out[16];
    if (!cpu::SortTopDescendingAtWidth(vector_bytes, probe, 1, 1, probe_out)) continue;
    ++widths_run;
    SCOPED_TRACE(::testing::Message() << "vector_bytes=" << vector_bytes);
    CheckSortNetwork<uint32_t>(engine, cpu::kMaxNetworkSort,
                               [vector_bytes](const uint32_t* keys, int n, int need,
                                              uint32_t* out) {
                                 cpu::SortTopDescendingAtWidth(vector_bytes, keys, n, need, out);
                               });
  }
  EXPECT_GE(widths_run, 1);  // the 16-byte network at least
  CheckSortNetwork<uint32_t>(engine, cpu::kMaxNetworkSort, [](const uint32_t* keys, int n,
                                                             int need, uint32_t* out) {
    cpu::SortTopDescending(keys, n, need, out);
  });
  uint16_t probe16[32] = {1};
  uint16_t probe16_out[32];
  if (cpu::SortTopDescending16(probe16, 1, 1, probe16_out)) {
    CheckSortNetwork<uint16_t>(engine, cpu::kMaxNetworkSort16,
                               [](const uint16_t* keys, int n, int need, uint16_t* out) {
                                 ASSERT_TRUE(cpu::SortTopDescending16(keys, n, need, out));
                               });
  }
}

TEST(CpuTopK, MatchesSpecTranscriptionOnRandomShapesAndDistributions) {
  std::mt19937_64 engine(20261201);
  int problems = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const Problem p = RandomProblem(engine, 300, uint64_t{1} << 32);
    for (Distribution d : testing::kAllDistributions) {
      const size_t rows = 3;
      const auto scores = testing::RandomRows(p, rows, d, engine);
      ExpectMatchesSpec(p, scores, rows, RunCpu(p, scores, rows, 1), Describe(p, d));
      ++problems;
    }
  }
  EXPECT_EQ(problems, 200 * 7);
}

TEST(CpuTopK, WideFactors) {
  std::mt19937_64 engine(7);
  for (const auto& widths : std::vector<std::vector<uint32_t>>{
           {65535, 65535}, {4096, 4096}, {65535, 3}, {1, 65535}, {300, 20, 20, 20}}) {
    for (uint32_t k : {1u, 64u, 256u}) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        const Problem p = ValidateProblem(widths, k, dtype).value();
        for (Distribution d : {Distribution::kNormal, Distribution::kTies, Distribution::kSpecials}) {
          const auto scores = testing::RandomRows(p, 2, d, engine);
          ExpectMatchesSpec(p, scores, 2, RunCpu(p, scores, 2, 1), Describe(p, d));
        }
      }
    }
  }
}

// Factors wide enough for the tight factor bound (the k-th largest of about 2k strided group
// maxima) and stages past the staircase bound, on every distribution: ties, all-equal rows, NaN
// and infinities are where a bound that some of the k best fail to reach would show.
TEST(CpuTopK, TightBoundsOnEveryDistribution) {
  std::mt19937_64 engine(31);
  for (const auto& widths : std::vector<std::vector<uint32_t>>{{1024, 1024}, {2048, 40, 600}}) {
    for (uint32_t k : {8u, 33u, 64u}) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        const Problem p = ValidateProblem(widths, k, dtype).value();
        for (Distribution d : testing::kAllDistributions) {
          const auto scores = testing::RandomRows(p, 2, d, engine);
          ExpectMatchesSpec(p, scores, 2, RunCpu(p, scores, 2, 1), Describe(p, d));
        }
      }
    }
  }
}

TEST(CpuTopK, EqualsBruteForceOnFloat32Normals) {
  std::mt19937_64 engine(99);
  for (int trial = 0; trial < 80; ++trial) {
    Problem p = RandomProblem(engine, 300, 60000);
    p.dtype = DType::kFloat32;
    const auto scores = testing::RandomRows(p, 2, Distribution::kNormal, engine);
    const Output out = RunCpu(p, scores, 2, 1);
    for (size_t r = 0; r < 2; ++r) {
      const uint32_t* slots = out.slots.data() + r * p.kk();
      EXPECT_EQ(std::vector<uint32_t>(slots, slots + p.kk()),
                BruteForceSlots(p, scores.data() + r * p.row_bytes()))
          << Describe(p, Distribution::kNormal) << " row " << r;
    }
  }
}

TEST(CpuTopK, SpecWorkedExample) {
  const Problem p = ValidateProblem(std::vector<uint32_t>{4, 4}, 4, DType::kFloat32).value();
  std::vector<std::byte> scores(8 * 4);
  const float x = 1.5f;
  for (int c = 0; c < 8; ++c) std::memcpy(scores.data() + 4 * c, &x, 4);
  const Output out = RunCpu(p, scores, 1, 1);
  EXPECT_EQ(out.slots, (std::vector<uint32_t>{3, 7, 10, 12}));
  for (int q = 0; q < 4; ++q) {
    float v;
    std::memcpy(&v, out.values.data() + 4 * q, 4);
    EXPECT_EQ(v, 3.0f);
  }
}

TEST(CpuTopK, ResultsIndependentOfThreadsAndRowGrouping) {
  std::mt19937_64 engine(5);
  for (int trial = 0; trial < 12; ++trial) {
    const Problem p = RandomProblem(engine, 1024, uint64_t{1} << 32);
    const size_t rows = 37;
    const auto scores = testing::RandomRows(p, rows, Distribution::kGrid, engine);
    const Output one = RunCpu(p, scores, rows, 1);
    for (int threads : {2, 3, 8}) {
      const Output many = RunCpu(p, scores, rows, threads);
      ExpectSameOutput(one, many, Describe(p, Distribution::kGrid) + " threads " +
                                      std::to_string(threads));
    }
    // Row by row, each from a fresh unaligned copy: the same bits.
    cpu::Workspace workspace;
    for (size_t r = 0; r < rows; ++r) {
      std::vector<std::byte> shifted(p.row_bytes() + 1);
      std::memcpy(shifted.data() + 1, scores.data() + r * p.row_bytes(), p.row_bytes());
      std::vector<std::byte> values(p.out_value_bytes() + 1);
      std::vector<uint32_t> slots(p.kk());
      cpu::TopKRows(p, shifted.data() + 1, 1, values.data() + 1, slots.data(), workspace);
      EXPECT_TRUE(std::equal(slots.begin(), slots.end(), one.slots.begin() + r * p.kk()));
      EXPECT_EQ(0, std::memcmp(values.data() + 1, one.values.data() + r * p.out_value_bytes(),
                               p.out_value_bytes()));
    }
  }
}

// Rows read where they lie, from several separately allocated inputs (as the server's CPU
// executor reads requests' rows): the same bits as one contiguous batch, whether a thread's part
// straddles input boundaries or an input is a single row.
TEST(CpuTopK, RowsInSeveralInputsEqualOneContiguousBatch) {
  std::mt19937_64 engine(17);
  for (int trial = 0; trial < 8; ++trial) {
    const Problem p = RandomProblem(engine, 1024, uint64_t{1} << 32);
    const size_t rows = 23;
    const auto scores = testing::RandomRows(p, rows, Distribution::kTies, engine);
    const Output one = RunCpu(p, scores, rows, 1);
    // Inputs of 1, 7, 2, 9 and 4 rows, each in memory of its own, one byte off alignment.
    std::vector<std::vector<std::byte>> owned;
    std::vector<std::span<const std::byte>> inputs;
    size_t first = 0;
    for (const size_t count : {1, 7, 2, 9, 4}) {
      owned.emplace_back(count * p.row_bytes() + 1);
      std::memcpy(owned.back().data() + 1, scores.data() + first * p.row_bytes(),
                  count * p.row_bytes());
      inputs.emplace_back(owned.back().data() + 1, count * p.row_bytes());
      first += count;
    }
    ASSERT_EQ(first, rows);
    for (int threads : {1, 2, 3}) {
      cpu::ParallelTopK engine_of(threads, 1);
      Output many{std::vector<std::byte>(rows * p.out_value_bytes(), std::byte{0x5a}),
                  std::vector<uint32_t>(rows * p.kk(), 0xdeadbeefu)};
      engine_of.Run(p, inputs, many.values.data(), many.slots.data());
      ExpectSameOutput(one, many, Describe(p, Distribution::kTies) + " threads " +
                                      std::to_string(threads));
    }
  }
}

TEST(CpuTopK, WorkspaceReusedAcrossShapes) {
  std::mt19937_64 engine(11);
  cpu::Workspace workspace;
  for (int trial = 0; trial < 40; ++trial) {
    const Problem p = RandomProblem(engine, 200, uint64_t{1} << 32);
    const auto scores = testing::RandomRows(p, 2, Distribution::kTies, engine);
    Output out{std::vector<std::byte>(2 * p.out_value_bytes()), std::vector<uint32_t>(2 * p.kk())};
    cpu::TopKRows(p, scores.data(), 2, out.values.data(), out.slots.data(), workspace);
    ExpectMatchesSpec(p, scores, 2, out, Describe(p, Distribution::kTies));
  }
}

}  // namespace
}  // namespace pk
