// Reader of golden case files (format: tests/data/README.md, from ../shared/golden/README.md) and
// the bit-exact comparison every backend is held to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/problem.h"

namespace pk::golden {

// One case: an input batch and the reference kernel's output for it.
struct Case {
  std::string name;
  Problem problem;
  uint32_t rows = 0;
  std::vector<std::byte> scores;  // rows * row_width elements of problem.dtype
  std::vector<std::byte> values;  // rows * kk elements of problem.dtype, each row in slot order
  std::vector<uint32_t> slots;    // rows * kk, ascending within each row
};

// Reads every case of a golden file. Errors name the file, the case and what was malformed.
Result<std::vector<Case>> ReadFile(const std::string& path);

// Compares a backend's output with a case's expected output: slots exactly, values by bit
// pattern except that any NaN equals any NaN. Returns nothing when equal, else a description of
// the first difference: "row R, position P: expected slot S value V, got slot S' value V'".
std::optional<std::string> Compare(const Case& expected, std::span<const std::byte> values,
                                   std::span<const uint32_t> slots);

// A value element as text: the number and its bit pattern, e.g. "1.5 (0x3fc00000)".
std::string FormatValue(DType dtype, const std::byte* element);

}  // namespace pk::golden
