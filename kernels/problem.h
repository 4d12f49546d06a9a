// The product-key top-k problem: its shape (factor widths, k, element type), the limits of
// ../shared/SPEC.md, and the one function that checks a shape against them.
//
// Everything in kernels/ takes a validated `Problem`; nothing downstream re-checks the limits.
// This header depends on the C++ standard library only, so it builds on GPU hosts that have
// nothing but a compiler and the CUDA toolkit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <variant>

namespace pk {

enum class DType : uint8_t { kFloat32 = 0, kBFloat16 = 1 };

inline constexpr int kMinFactors = 2;
inline constexpr int kMaxFactors = 4;
inline constexpr uint32_t kMaxK = 256;
inline constexpr uint32_t kMaxWidth = 65535;
inline constexpr int kMaxSlotBits = 32;

// Bytes of one element of `dtype`.
constexpr size_t ElementBytes(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }
const char* DTypeName(DType dtype);

// What was wrong with an input: the field it concerns and a message that names the value and
// the allowed range, e.g. field "k", message "k must be in [1, 256], got 300".
struct Error {
  std::string field;
  std::string message;
};

// A value or the error that prevented it (std::expected is C++23; this is the part we need).
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}      // NOLINT: implicit by design
  bool ok() const { return state_.index() == 0; }
  const T& value() const { return std::get<0>(state_); }
  T& value() { return std::get<0>(state_); }
  const Error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

// A validated problem shape. Construct it only through ValidateProblem(); its fields are then
// within every limit of SPEC.md.
struct Problem {
  int factors = 0;                        // F, 2..4
  std::array<uint32_t, kMaxFactors> widths{};  // w[0..F-1]; unused entries 0
  uint32_t k = 0;                         // slots wanted, 1..256
  DType dtype = DType::kFloat32;

  // W = w[0] + ... + w[F-1]: elements in one input row.
  uint32_t row_width() const;
  // Offset of factor f's first column in a row.
  uint32_t offset(int f) const;
  // kk = min(k, w[0] * ... * w[F-1]): (slot, value) pairs per output row.
  uint32_t kk() const;
  size_t row_bytes() const { return size_t{row_width()} * ElementBytes(dtype); }
  size_t out_value_bytes() const { return size_t{kk()} * ElementBytes(dtype); }
};

// bits(x): the number of binary digits of x (bits(0) = 0, bits(1) = 1, bits(1023) = 10).
int BitLength(uint32_t x);

// Checks a shape against SPEC.md's limits: 2 <= F <= 4, 1 <= w[f] <= 65535,
// sum of bits(w[f] - 1) <= 32, 1 <= k <= 256. The first violated limit is reported.
Result<Problem> ValidateProblem(std::span<const uint32_t> factor_widths, uint32_t k, DType dtype);

// Checks that `payload_bytes` holds exactly `rows` rows of `problem` (rows >= 1).
// Returns an error naming `rows` or `scores` otherwise.
Result<std::monostate> ValidatePayload(const Problem& problem, uint64_t rows, uint64_t payload_bytes);

}  // namespace pk
