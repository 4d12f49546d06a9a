// Random score rows for tests, differential checks and benchmarks: the distributions that stress
// the contract's tie-breaks and special values, not just well-separated normals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "kernels/problem.h"

namespace pk::testing {

enum class Distribution {
  kNormal,     // standard normal: float32 rows have no ties in practice
  kTies,       // small integers in [-4, 4]: ties everywhere
  kGrid,       // multiples of 0.25 in [-2, 2]: equal sums from different pairs
  kAllEqual,   // one value repeated over the row
  kSorted,     // ascending normals: the best columns are the last
  kSpecials,   // NaN, +-inf, -0, +0, +-3e38 (sums overflow) mixed into normals
  kWideRange,  // magnitudes from 1e-30 to 1e30, both signs
};
inline constexpr Distribution kAllDistributions[] = {
    Distribution::kNormal, Distribution::kTies,     Distribution::kGrid,     Distribution::kAllEqual,
    Distribution::kSorted, Distribution::kSpecials, Distribution::kWideRange};

std::string_view DistributionName(Distribution distribution);

// `rows` rows of `problem` drawn from `distribution`, as little-endian bytes of its dtype.
std::vector<std::byte> RandomRows(const Problem& problem, size_t rows, Distribution distribution,
                                  std::mt19937_64& engine);

}  // namespace pk::testing
