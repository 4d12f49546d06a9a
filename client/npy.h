// NumPy .npy files (format versions 1.0 to 3.0), C order, little-endian: enough to move score rows
// in and slots and values out. bfloat16 has no NumPy type; it travels as uint16 ('<u2') bit
// patterns, as it does in PyTorch and JAX exports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pkserve::client {

struct NpyArray {
  std::string descr;            // NumPy type string: "<f4", "<u2", "<u4"
  std::vector<uint64_t> shape;  // e.g. {rows, width}; {} for a scalar
  std::vector<std::byte> data;  // product(shape) elements, C order

  size_t element_bytes() const;
  uint64_t elements() const;
};

// Reads a .npy file; errors name the file and what is unsupported or malformed (big-endian,
// Fortran order, a data size that does not match the shape).
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);

// Writes `array` as a version 1.0 .npy file.
absl::Status WriteNpy(const std::string& path, const NpyArray& array);
std::string SerializeNpy(const NpyArray& array);

}  // namespace pkserve::client
