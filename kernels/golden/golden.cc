#include "kernels/golden/golden.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "kernels/numeric.h"

namespace pk::golden {
namespace {

// A little-endian cursor over the file's bytes that reports running past the end.
class Reader {
 public:
  explicit Reader(const std::vector<std::byte>& bytes) : bytes_(bytes) {}

  bool Take(void* out, size_t count) {
    if (bytes_.size() - position_ < count) return false;
    std::memcpy(out, bytes_.data() + position_, count);
    position_ += count;
    return true;
  }
  template <typename T>
  bool Take(T& out) {
    return Take(&out, sizeof out);
  }
  bool TakeBytes(std::vector<std::byte>& out, uint64_t count) {
    if (bytes_.size() - position_ < count) return false;
    out.assign(bytes_.begin() + static_cast<std::ptrdiff_t>(position_),
               bytes_.begin() + static_cast<std::ptrdiff_t>(position_ + count));
    position_ += count;
    return true;
  }
  size_t position() const { return position_; }
  bool AtEnd() const { return position_ == bytes_.size(); }

 private:
  const std::vector<std::byte>& bytes_;
  size_t position_ = 0;
};

bool IsNan(DType dtype, const std::byte* element) {
  if (dtype == DType::kFloat32) {
    uint32_t bits;
    std::memcpy(&bits, element, 4);
    return (bits & 0x7fffffffu) > 0x7f800000u;
  }
  uint16_t bits;
  std::memcpy(&bits, element, 2);
  return (bits & 0x7fffu) > 0x7f80u;
}

}  // namespace

Result<std::vector<Case>> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{"file", path + ": cannot open"};
  std::vector<std::byte> bytes;
  {
    std::vector<char> raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    bytes.resize(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
  }
  Reader reader(bytes);
  char magic[4];
  uint32_t version = 0;
  uint32_t count = 0;
  if (!reader.Take(magic, 4) || std::memcmp(magic, "PKTK", 4) != 0) {
    return Error{"file", path + ": not a golden file (magic \"PKTK\" missing)"};
  }
  if (!reader.Take(version) || version != 1) {
    return Error{"file", path + ": unsupported version " + std::to_string(version) + ", expected 1"};
  }
  if (!reader.Take(count)) return Error{"file", path + ": truncated header"};
  std::vector<Case> cases;
  for (uint32_t index = 0; index < count; ++index) {
    const std::string where = path + ": case " + std::to_string(index);
    uint8_t dtype_code = 0;
    uint8_t factors = 0;
    uint16_t zero = 0;
    uint32_t k = 0;
    uint32_t rows = 0;
    uint32_t widths[4];
    uint32_t kk = 0;
    uint32_t name_length = 0;
    if (!reader.Take(dtype_code) || !reader.Take(factors) || !reader.Take(zero) ||
        !reader.Take(k) || !reader.Take(rows) || !reader.Take(widths, sizeof widths) ||
        !reader.Take(kk) || !reader.Take(name_length)) {
      return Error{"file", where + ": truncated case header"};
    }
    Case c;
    std::vector<std::byte> name_bytes;
    if (!reader.TakeBytes(name_bytes, name_length)) return Error{"file", where + ": truncated name"};
    c.name.assign(reinterpret_cast<const char*>(name_bytes.data()), name_bytes.size());
    if (dtype_code > 1) {
      return Error{"file", where + " (" + c.name + "): dtype code " + std::to_string(dtype_code) +
                               " is neither 0 (float32) nor 1 (bfloat16)"};
    }
    if (factors < kMinFactors || factors > kMaxFactors) {
      return Error{"file", where + " (" + c.name + "): F = " + std::to_string(factors) +
                               " out of [2, 4]"};
    }
    auto problem = ValidateProblem(std::span<const uint32_t>(widths, factors), k,
                                   static_cast<DType>(dtype_code));
    if (!problem.ok()) return Error{"file", where + " (" + c.name + "): " + problem.error().message};
    c.problem = problem.value();
    if (kk != c.problem.kk()) {
      return Error{"file", where + " (" + c.name + "): kk " + std::to_string(kk) +
                               " differs from min(k, product of widths) = " +
                               std::to_string(c.problem.kk())};
    }
    c.rows = rows;
    const uint64_t element = ElementBytes(c.problem.dtype);
    std::vector<std::byte> slot_bytes;
    if (!reader.TakeBytes(c.scores, uint64_t{rows} * c.problem.row_width() * element) ||
        !reader.TakeBytes(c.values, uint64_t{rows} * kk * element) ||
        !reader.TakeBytes(slot_bytes, uint64_t{rows} * kk * 8)) {
      return Error{"file", where + " (" + c.name + "): truncated data"};
    }
    c.slots.resize(uint64_t{rows} * kk);
    for (size_t s = 0; s < c.slots.size(); ++s) {
      int64_t slot;
      std::memcpy(&slot, slot_bytes.data() + 8 * s, 8);
      if (slot < 0 || slot > int64_t{UINT32_MAX}) {
        return Error{"file", where + " (" + c.name + "): slot " + std::to_string(slot) +
                                 " outside [0, 2^32)"};
      }
      c.slots[s] = static_cast<uint32_t>(slot);
    }
    cases.push_back(std::move(c));
  }
  if (!reader.AtEnd()) {
    return Error{"file", path + ": " + std::to_string(bytes.size() - reader.position()) +
                             " unexpected bytes after the last case"};
  }
  return cases;
}

std::string FormatValue(DType dtype, const std::byte* element) {
  char text[64];
  if (dtype == DType::kFloat32) {
    uint32_t bits;
    std::memcpy(&bits, element, 4);
    std::snprintf(text, sizeof text, "%.9g (0x%08" PRIx32 ")", double{BitsToFloat(bits)}, bits);
  } else {
    uint16_t bits;
    std::memcpy(&bits, element, 2);
    std::snprintf(text, sizeof text, "%.4g (0x%04x)", double{Bf16ToFloat(bits)}, unsigned{bits});
  }
  return text;
}

std::optional<std::string> Compare(const Case& expected, std::span<const std::byte> values,
                                   std::span<const uint32_t> slots) {
  const uint32_t kk = expected.problem.kk();
  const size_t element = ElementBytes(expected.problem.dtype);
  if (slots.size() != expected.slots.size() || values.size() != expected.values.size()) {
    return "output size differs: expected " + std::to_string(expected.slots.size()) +
           " slots, got " + std::to_string(slots.size());
  }
  for (uint32_t row = 0; row < expected.rows; ++row) {
    for (uint32_t p = 0; p < kk; ++p) {
      const size_t at = size_t{row} * kk + p;
      const std::byte* want = expected.values.data() + at * element;
      const std::byte* got = values.data() + at * element;
      const bool values_equal =
          std::memcmp(want, got, element) == 0 ||
          (IsNan(expected.problem.dtype, want) && IsNan(expected.problem.dtype, got));
      if (slots[at] != expected.slots[at] || !values_equal) {
        return "row " + std::to_string(row) + ", position " + std::to_string(p) +
               ": expected slot " + std::to_string(expected.slots[at]) + " value " +
               FormatValue(expected.problem.dtype, want) + ", got slot " +
               std::to_string(slots[at]) + " value " + FormatValue(expected.problem.dtype, got);
      }
    }
  }
  return std::nullopt;
}

}  // namespace pk::golden
