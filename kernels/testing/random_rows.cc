#include "kernels/testing/random_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/numeric.h"

namespace pk::testing {

std::string_view DistributionName(Distribution distribution) {
  switch (distribution) {
    case Distribution::kNormal: return "normal";
    case Distribution::kTies: return "ties";
    case Distribution::kGrid: return "grid";
    case Distribution::kAllEqual: return "all_equal";
    case Distribution::kSorted: return "sorted";
    case Distribution::kSpecials: return "specials";
    case Distribution::kWideRange: return "wide_range";
  }
  return "unknown";
}

std::vector<std::byte> RandomRows(const Problem& problem, size_t rows, Distribution distribution,
                                  std::mt19937_64& engine) {
  const uint32_t width = problem.row_width();
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small_integer(-4, 4);
  std::uniform_int_distribution<int> grid_step(-8, 8);
  std::uniform_int_distribution<int> pick(0, 15);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, -0.0f, 0.0f,
                            3e38f, -3e38f};
  std::vector<float> row(width);
  std::vector<std::byte> bytes(rows * problem.row_bytes());
  for (size_t r = 0; r < rows; ++r) {
    const float constant = normal(engine);
    for (uint32_t c = 0; c < width; ++c) {
      float x = 0;
      switch (distribution) {
        case Distribution::kNormal:
        case Distribution::kSorted: x = normal(engine); break;
        case Distribution::kTies: x = static_cast<float>(small_integer(engine)); break;
        case Distribution::kGrid: x = 0.25f * static_cast<float>(grid_step(engine)); break;
        case Distribution::kAllEqual: x = constant; break;
        case Distribution::kSpecials: {
          const int choice = pick(engine);
          x = choice < 7 ? specials[choice] : normal(engine);
          break;
        }
        case Distribution::kWideRange:
          x = (pick(engine) < 8 ? 1.0f : -1.0f) * std::pow(10.0f, exponent(engine));
          break;
      }
      row[c] = x;
    }
    if (distribution == Distribution::kSorted) {
      for (int f = 0; f < problem.factors; ++f) {
        auto begin = row.begin() + problem.offset(f);
        std::sort(begin, begin + problem.widths[f]);
      }
    }
    std::byte* out = bytes.data() + r * problem.row_bytes();
    for (uint32_t c = 0; c < width; ++c) {
      if (problem.dtype == DType::kFloat32) {
        std::memcpy(out + 4 * size_t{c}, &row[c], 4);
      } else {
        const uint16_t bits = FloatToBf16(row[c]);
        std::memcpy(out + 2 * size_t{c}, &bits, 2);
      }
    }
  }
  return bytes;
}

}  // namespace pk::testing
