#include "kernels/bench/naive_topk.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/numeric.h"

namespace pk::bench {
namespace {

float LoadElement(DType dtype, const std::byte* row, uint32_t index) {
  if (dtype == DType::kFloat32) {
    float x;
    std::memcpy(&x, row + 4 * size_t{index}, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, row + 2 * size_t{index}, 2);
  return Bf16ToFloat(bits);
}

float RoundTo(DType dtype, float x) { return dtype == DType::kFloat32 ? x : RoundToBf16(x); }

}  // namespace

void NaiveTopK::Run(const Problem& problem, const std::byte* scores, size_t rows,
                    std::byte* values, uint32_t* slots) {
  const auto better = [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key > b.key : a.tiebreak > b.tiebreak;
  };
  const uint32_t kk = problem.kk();
  const size_t element = ElementBytes(problem.dtype);
  for (size_t r = 0; r < rows; ++r) {
    const std::byte* row = scores + r * problem.row_bytes();
    uint32_t offset = 0;
    for (int f = 0; f < problem.factors; ++f) {
      const uint32_t width = problem.widths[f];
      factor_.clear();
      for (uint32_t c = 0; c < width; ++c) {
        float v = LoadElement(problem.dtype, row, offset + c);
        if (v != v) v = -std::numeric_limits<float>::infinity();
        factor_.push_back({OrderedKey(v), c, v, c, uint64_t{c} << (16 * f)});
      }
      const size_t kept = std::min<size_t>(problem.k, width);
      std::partial_sort(factor_.begin(), factor_.begin() + kept, factor_.end(), better);
      factor_.resize(kept);
      if (f == 0) {
        running_ = factor_;
      } else {
        pairs_.clear();
        for (size_t i = 0; i < running_.size(); ++i) {
          for (size_t j = 0; j < factor_.size(); ++j) {
            const float s = running_[i].value + factor_[j].value;
            pairs_.push_back({OrderedKey(s), static_cast<uint32_t>(((i + j) << 8) | i),
                              RoundTo(problem.dtype, s), running_[i].slot * width + factor_[j].slot,
                              running_[i].columns | factor_[j].columns});
          }
        }
        const size_t n = std::min<size_t>(problem.k, pairs_.size());
        std::partial_sort(pairs_.begin(), pairs_.begin() + n, pairs_.end(), better);
        pairs_.resize(n);
        running_.swap(pairs_);
      }
      offset += width;
    }
    std::sort(running_.begin(), running_.end(),
              [](const Entry& a, const Entry& b) { return a.slot < b.slot; });
    for (uint32_t p = 0; p < kk; ++p) {
      const Entry& e = running_[p];
      slots[r * kk + p] = e.slot;
      uint32_t factor_offset = 0;
      float v = 0.0f;
      for (int f = 0; f < problem.factors; ++f) {
        const float x =
            LoadElement(problem.dtype, row, factor_offset + ((e.columns >> (16 * f)) & 0xffff));
        v = f == 0 ? x : (f == 1 ? v + x : RoundTo(problem.dtype, v) + x);
        factor_offset += problem.widths[f];
      }
      std::byte* out = values + (r * kk + p) * element;
      if (problem.dtype == DType::kFloat32) {
        std::memcpy(out, &v, 4);
      } else {
        const uint16_t bits = FloatToBf16(v);
        std::memcpy(out, &bits, 2);
      }
    }
  }
}

}  // namespace pk::bench
