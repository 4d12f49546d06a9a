// The files a hosted memory is loaded from, read and checked before anything is served: where the
// values table lies in the file, of which shape and type, and the product-key layout of its slots.
//
// Two formats:
//   - safetensors: an 8-byte little-endian header length N, N bytes of JSON, then the raw data.
//     The table is the tensor "values" (or the file's single tensor), of shape [slots, dim] and
//     dtype BF16 or F32; the factor widths are "factor_widths": "W0,W1[,...]" in "__metadata__".
//   - .npy (format 1.0 to 3.0): '<f4' (float32) or '<u2' (bfloat16 bit patterns), C order, shape
//     [slots, dim]; the widths come from --memory's widths= (a .npy has nowhere to keep them).
// Widths given with --memory override the file's. Every check names the file and what is wrong:
// header length and JSON, dtype, shape, data offsets against the file's size, slots against the
// product of the widths, the widths against the top-k's limits (SPEC: 2..4 factors, at most 32 slot
// bits). Parsing reads only the bytes it is given; nothing is trusted before it is checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/problem.h"

namespace pkserve {

enum class MemoryFileFormat { kSafetensors, kNpy };

// Where the values table of a memory file lies, and its shape.
struct MemoryLayout {
  MemoryFileFormat format = MemoryFileFormat::kSafetensors;
  std::vector<uint32_t> factor_widths;  // 2..4 entries, product == slots
  uint64_t slots = 0;
  uint32_t dim = 0;
  pk::DType dtype = pk::DType::kFloat32;
  uint64_t data_offset = 0;  // of the table's first byte, from the file's start
  uint64_t data_bytes = 0;   // slots x dim x element bytes

  size_t row_bytes() const { return size_t{dim} * pk::ElementBytes(dtype); }
};

// The widest value row a memory may have (values per slot).
inline constexpr uint32_t kMaxMemoryDim = 65536;
// The largest safetensors JSON header read (safetensors' own readers refuse over 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100u << 20;

// "1024x1024" or "1024,1024" -> {1024, 1024}; INVALID_ARGUMENT naming `what` otherwise.
absl::StatusOr<std::vector<uint32_t>> ParseFactorWidths(absl::string_view text,
                                                        absl::string_view what);

// The layout of `file` (the whole file's bytes; its format told by its first bytes). `widths`:
// from --memory's widths=, empty when not given. Errors are INVALID_ARGUMENT and start with
// `path`.
absl::StatusOr<MemoryLayout> ParseMemoryFile(std::span<const std::byte> file,
                                             std::span<const uint32_t> widths,
                                             absl::string_view path);

// The bytes of a safetensors file holding `table` (slots x dim elements of dtype) as the tensor
// "values" with `factor_widths` in its metadata: what pkserve-make-memory writes, and what tests
// load.
std::string SafetensorsHeader(std::span<const uint32_t> factor_widths, uint64_t slots, uint32_t dim,
                              pk::DType dtype);

}  // namespace pkserve
