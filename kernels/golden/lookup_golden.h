// Golden memory lookup cases (format: tests/data/README.md, "lookup_cases.bin"): reading and
// writing them, the values table each case regenerates from its seed, the bit-exact comparison
// every backend is held to, and the float64 evaluation of the contract's formula that the
// generator checks each case against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/lookup/lookup.h"
#include "kernels/problem.h"

namespace pk::golden {

// One case: a lookup shape, its score rows, the seed of its values table, and the reference
// (the CPU implementation) outputs for them.
struct LookupCase {
  std::string name;
  LookupProblem problem;
  uint32_t rows = 0;                // a multiple of problem.heads
  uint64_t table_seed = 0;          // TableFromSeed(table_seed, ...) is the values table
  std::vector<std::byte> scores;    // rows * row_width elements of problem.topk.dtype
  std::vector<uint32_t> slots;      // rows * kk, ascending within each row
  std::vector<float> weights;       // rows * kk
  std::vector<uint8_t> row_valid;   // rows: 1, or 0 when the row has no finite maximum
  std::vector<std::byte> outputs;   // (rows / heads) * dim elements of problem.output_dtype

  uint64_t table_slots() const;     // the product of the factor widths
  uint32_t outputs_count() const { return rows / problem.heads; }
};

// The values table of a case: element e (row-major) is a float in (-2, 2), never 0, from the
// splitmix64 hash of seed + e (24 bits u: (u - 2^23 + 0.5) / 2^22), rounded to `dtype`.
std::vector<std::byte> TableFromSeed(uint64_t seed, uint64_t slots, uint32_t dim, DType dtype);

Result<std::vector<LookupCase>> ReadLookupFile(const std::string& path);
// Writes `cases` to `path`; returns "" or what failed.
std::string WriteLookupFile(const std::string& path, const std::vector<LookupCase>& cases);

// A backend's result against a case, bit for bit: nothing when equal, else the first difference
// ("row R, position P: expected slot S weight W, got ...", "output O, column D: ...").
std::optional<std::string> CompareLookup(const LookupCase& expected,
                                         std::span<const uint32_t> slots,
                                         std::span<const float> weights,
                                         std::span<const uint8_t> row_valid,
                                         std::span<const std::byte> outputs);

// Checks a case's weights and outputs against a float64 evaluation of the contract's formula
// from the same slots and float32 scores: each weight within its float32 error (Exp's 2^-21,
// fl32(s - m) through the exponential, Z's in-order sum, the division), each output within the
// output type's rounding plus, per pair, |w v| times that weight error and pairs * 2^-24 (the
// fma chain).
// Nothing when within, else the first excess.
std::optional<std::string> CheckAgainstFloat64(const LookupCase& c,
                                               std::span<const std::byte> table);

}  // namespace pk::golden
