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

// What a .npy header says: the type, the shape, and where the data starts.
struct NpyHeader {
  std::string descr;            // NumPy type string: "<f4", "<u2", "<u4"
  std::vector<uint64_t> shape;  // e.g. {rows, width}; {} for a scalar
  size_t data_offset = 0;       // bytes before the data (magic, version, length, header)

  size_t element_bytes() const;
  uint64_t elements() const;
  // elements() x element_bytes(); an error when that overflows 64 bits (a header that lies).
  absl::StatusOr<uint64_t> data_bytes() const;
};

struct NpyArray {
  std::string descr;            // NumPy type string: "<f4", "<u2", "<u4"
  std::vector<uint64_t> shape;  // e.g. {rows, width}; {} for a scalar
  std::vector<std::byte> data;  // product(shape) elements, C order

  size_t element_bytes() const;
  uint64_t elements() const;
};

// Parses the header at the start of `bytes`, which need not hold the data: errors say what is
// unsupported or malformed (not .npy, big-endian, Fortran order, a truncated header).
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes);

// Reads a .npy file whole (client/npy_file.h maps large ones); errors name the file and what is
// wrong with it: errno's text when it cannot be read (missing, a directory, unreadable), what is
// unsupported or malformed, a data size that does not match the shape.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);

// The version 1.0 header of an array of `descr` and `shape`, padded so the data that follows
// starts on a 64-byte boundary.
std::string SerializeNpyHeader(const std::string& descr, const std::vector<uint64_t>& shape);

// Writes `array` as a version 1.0 .npy file; errors name the file and give errno's text.
absl::Status WriteNpy(const std::string& path, const NpyArray& array);
std::string SerializeNpy(const NpyArray& array);

}  // namespace pkserve::client
