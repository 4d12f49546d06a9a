#include "server/memory_file.h"

#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace pkserve {
namespace {

constexpr absl::string_view kNpyMagic = "\x93NUMPY";

uint64_t LittleEndian(std::span<const std::byte> bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    value |= uint64_t{std::to_integer<uint8_t>(bytes[i])} << (8 * i);
  return value;
}

absl::string_view AsText(std::span<const std::byte> bytes) {
  return absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Checks the widths against the top-k's limits and the table's rows; fills layout->slots' check.
absl::Status CheckWidths(std::span<const uint32_t> widths, uint64_t slots, absl::string_view path,
                         absl::string_view source) {
  const pk::Result<pk::Problem> problem = pk::ValidateProblem(widths, 1, pk::DType::kFloat32);
  if (!problem.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the factor widths ", source, " (", absl::StrJoin(widths, "x"),
                     ") are not a valid product-key layout: ", problem.error().message));
  }
  uint64_t product = 1;
  for (uint32_t width : widths) product *= width;  // at most 2^32: no overflow
  if (product != slots) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the table has ", slots, " rows but the factor widths ", source, " (",
                     absl::StrJoin(widths, "x"), ") make ", product, " slots; they must be equal"));
  }
  return absl::OkStatus();
}

// slots x dim x element bytes, or nullopt past 2^64.
std::optional<uint64_t> TableBytes(uint64_t slots, uint32_t dim, pk::DType dtype) {
  const uint64_t row = uint64_t{dim} * pk::ElementBytes(dtype);
  if (slots > std::numeric_limits<uint64_t>::max() / row) return std::nullopt;
  return slots * row;
}

absl::Status CheckShape(uint64_t slots, uint64_t dim, absl::string_view path) {
  if (slots == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": the table has no rows"));
  if (dim == 0 || dim > kMaxMemoryDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": dim (the table's second extent) must be in [1, ", kMaxMemoryDim, "], got ", dim));
  }
  return absl::OkStatus();
}

absl::StatusOr<MemoryLayout> ParseSafetensors(std::span<const std::byte> file,
                                              std::span<const uint32_t> widths,
                                              absl::string_view path) {
  const auto invalid = [path](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  if (file.size() < 8) {
    return invalid("not a safetensors file: ", file.size(),
                   " bytes, fewer than the 8 of its header length");
  }
  const uint64_t header_bytes = LittleEndian(file.first(8));
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return invalid("the safetensors header length is ", header_bytes, " bytes, over the limit of ",
                   kMaxSafetensorsHeaderBytes, " (not a safetensors file?)");
  }
  if (header_bytes > file.size() - 8) {
    return invalid("the safetensors header length is ", header_bytes, " bytes but only ",
                   file.size() - 8, " follow it (a truncated file?)");
  }
  const absl::string_view header_text = AsText(file.subspan(8, header_bytes));
  const nlohmann::json header = nlohmann::json::parse(header_text.begin(), header_text.end(),
                                                      nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return invalid("the safetensors header (", header_bytes, " bytes) is not a JSON object");
  }
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_size = file.size() - data_start;

  // The table: "values", or the one tensor there is.
  const nlohmann::json* tensor = nullptr;
  std::string name;
  std::vector<std::string> names;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") continue;
    names.push_back(key);
    if (key == "values") {
      tensor = &value;
      name = key;
    }
  }
  if (tensor == nullptr) {
    if (names.size() != 1) {
      return invalid("no tensor named 'values', and ", names.size(), " tensors to choose from (",
                     absl::StrJoin(names, ", "), "): name the table 'values'");
    }
    name = names[0];
    tensor = &header[name];
  }
  if (!tensor->is_object()) return invalid("tensor '", name, "' is not a JSON object");

  const auto dtype_it = tensor->find("dtype");
  if (dtype_it == tensor->end() || !dtype_it->is_string()) {
    return invalid("tensor '", name, "' has no dtype string");
  }
  const std::string dtype_text = dtype_it->get<std::string>();
  pk::DType dtype;
  if (dtype_text == "BF16") {
    dtype = pk::DType::kBFloat16;
  } else if (dtype_text == "F32") {
    dtype = pk::DType::kFloat32;
  } else {
    return invalid("tensor '", name, "' has dtype ", dtype_text, "; a memory is BF16 or F32");
  }

  const auto shape_it = tensor->find("shape");
  if (shape_it == tensor->end() || !shape_it->is_array() || shape_it->size() != 2 ||
      !(*shape_it)[0].is_number_unsigned() || !(*shape_it)[1].is_number_unsigned()) {
    return invalid("tensor '", name,
                   "' must have a shape of two non-negative integers [slots, dim], got ",
                   shape_it == tensor->end() ? std::string("none") : shape_it->dump());
  }
  const uint64_t slots = (*shape_it)[0].get<uint64_t>();
  const uint64_t dim = (*shape_it)[1].get<uint64_t>();
  if (absl::Status shape = CheckShape(slots, dim, path); !shape.ok()) return shape;
  const std::optional<uint64_t> table_bytes = TableBytes(slots, static_cast<uint32_t>(dim), dtype);
  if (!table_bytes.has_value()) return invalid("tensor '", name, "' is too large to address");

  const auto offsets_it = tensor->find("data_offsets");
  if (offsets_it == tensor->end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return invalid("tensor '", name, "' must have data_offsets of two non-negative integers, got ",
                   offsets_it == tensor->end() ? std::string("none") : offsets_it->dump());
  }
  const uint64_t begin = (*offsets_it)[0].get<uint64_t>();
  const uint64_t end = (*offsets_it)[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    return invalid("tensor '", name, "' has data_offsets [", begin, ", ", end, "] outside the ",
                   data_size, " data bytes after the header (a truncated file?)");
  }
  if (end - begin != *table_bytes) {
    return invalid("tensor '", name, "' has data_offsets [", begin, ", ", end, "] (", end - begin,
                   " bytes) but its shape [", slots, ", ", dim, "] of ", dtype_text, " needs ",
                   *table_bytes);
  }

  MemoryLayout layout;
  layout.format = MemoryFileFormat::kSafetensors;
  layout.slots = slots;
  layout.dim = static_cast<uint32_t>(dim);
  layout.dtype = dtype;
  layout.data_offset = data_start + begin;
  layout.data_bytes = *table_bytes;
  if (!widths.empty()) {
    layout.factor_widths.assign(widths.begin(), widths.end());
    if (absl::Status valid = CheckWidths(widths, slots, path, "given with widths="); !valid.ok()) {
      return valid;
    }
    return layout;
  }
  const auto metadata = header.find("__metadata__");
  if (metadata == header.end() || !metadata->is_object() || !metadata->contains("factor_widths") ||
      !(*metadata)["factor_widths"].is_string()) {
    return invalid(
        "no factor widths: give them in __metadata__ as \"factor_widths\": \"1024,1024\", "
        "or with --memory=NAME=PATH,widths=1024x1024");
  }
  absl::StatusOr<std::vector<uint32_t>> parsed =
      ParseFactorWidths((*metadata)["factor_widths"].get<std::string>(),
                        absl::StrCat(path, ": __metadata__.factor_widths"));
  if (!parsed.ok()) return parsed.status();
  layout.factor_widths = *std::move(parsed);
  if (absl::Status valid =
          CheckWidths(layout.factor_widths, slots, path, "in __metadata__.factor_widths");
      !valid.ok()) {
    return valid;
  }
  return layout;
}

// The value of `key` in a .npy header (a Python dict literal): the text after "'key':" up to the
// next top-level comma or the closing brace.
std::optional<absl::string_view> NpyDictValue(absl::string_view header, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return std::nullopt;
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) return std::nullopt;
  ++at;
  int depth = 0;
  size_t end = at;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' && depth == 0) || c == '}') break;
  }
  return absl::StripAsciiWhitespace(header.substr(at, end - at));
}

absl::StatusOr<MemoryLayout> ParseNpy(std::span<const std::byte> file,
                                      std::span<const uint32_t> widths, absl::string_view path) {
  const auto invalid = [path](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parts...));
  };
  if (file.size() < 10) return invalid("a truncated .npy header (", file.size(), " bytes)");
  const int major = std::to_integer<int>(file[6]);
  uint64_t header_bytes = 0;
  uint64_t header_start = 0;
  if (major == 1) {
    header_bytes = LittleEndian(file.subspan(8, 2));
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return invalid("a truncated .npy header");
    header_bytes = LittleEndian(file.subspan(8, 4));
    header_start = 12;
  } else {
    return invalid(".npy format version ", major, " is not supported (1 to 3 are)");
  }
  if (header_bytes > file.size() - header_start) {
    return invalid("the .npy header says it is ", header_bytes, " bytes but only ",
                   file.size() - header_start, " follow (a truncated file?)");
  }
  const absl::string_view header = AsText(file.subspan(header_start, header_bytes));
  const std::optional<absl::string_view> descr = NpyDictValue(header, "descr");
  const std::optional<absl::string_view> fortran = NpyDictValue(header, "fortran_order");
  const std::optional<absl::string_view> shape = NpyDictValue(header, "shape");
  if (!descr || !fortran || !shape) {
    return invalid("the .npy header lacks descr, fortran_order or shape: ", header);
  }
  pk::DType dtype;
  if (*descr == "'<f4'") {
    dtype = pk::DType::kFloat32;
  } else if (*descr == "'<u2'") {
    dtype = pk::DType::kBFloat16;  // bfloat16 bit patterns, as PyTorch's .view(torch.uint16) gives
  } else {
    return invalid("the .npy dtype is ", *descr,
                   "; a memory is '<f4' (float32) or '<u2' (bfloat16 bit patterns)");
  }
  if (*fortran != "False") {
    return invalid("the .npy array is in Fortran order; save it in C order (np.ascontiguousarray)");
  }
  absl::string_view inner = *shape;
  if (inner.size() < 2 || inner.front() != '(' || inner.back() != ')') {
    return invalid("the .npy shape ", *shape, " is not a tuple");
  }
  inner = inner.substr(1, inner.size() - 2);
  std::vector<uint64_t> extents;
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    uint64_t extent = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &extent)) {
      return invalid("the .npy shape ", *shape, " is not a tuple of integers");
    }
    extents.push_back(extent);
  }
  if (extents.size() != 2) {
    return invalid("the .npy array has shape ", *shape, "; a memory is 2-D: (slots, dim)");
  }
  if (absl::Status valid = CheckShape(extents[0], extents[1], path); !valid.ok()) return valid;
  const std::optional<uint64_t> table_bytes =
      TableBytes(extents[0], static_cast<uint32_t>(extents[1]), dtype);
  const uint64_t data_start = header_start + header_bytes;
  if (!table_bytes.has_value() || *table_bytes != file.size() - data_start) {
    return invalid("the .npy shape ", *shape, " needs ",
                   table_bytes.has_value() ? absl::StrCat(*table_bytes) : std::string("more"),
                   " data bytes but the file holds ", file.size() - data_start);
  }
  if (widths.empty()) {
    return invalid(
        "a .npy file has no factor widths: give them with --memory=NAME=PATH,widths=WxW");
  }
  MemoryLayout layout;
  layout.format = MemoryFileFormat::kNpy;
  layout.factor_widths.assign(widths.begin(), widths.end());
  layout.slots = extents[0];
  layout.dim = static_cast<uint32_t>(extents[1]);
  layout.dtype = dtype;
  layout.data_offset = data_start;
  layout.data_bytes = *table_bytes;
  if (absl::Status valid = CheckWidths(widths, layout.slots, path, "given with widths=");
      !valid.ok()) {
    return valid;
  }
  return layout;
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> ParseFactorWidths(absl::string_view text,
                                                        absl::string_view what) {
  const char separator = absl::StrContains(text, 'x') ? 'x' : ',';
  std::vector<uint32_t> widths;
  for (absl::string_view part : absl::StrSplit(text, separator)) {
    uint32_t width = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &width)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " must be factor widths such as 1024x1024 or 1024,1024, got '", text, "'"));
    }
    widths.push_back(width);
  }
  return widths;
}

absl::StatusOr<MemoryLayout> ParseMemoryFile(std::span<const std::byte> file,
                                             std::span<const uint32_t> widths,
                                             absl::string_view path) {
  if (file.size() >= kNpyMagic.size() && AsText(file.first(kNpyMagic.size())) == kNpyMagic) {
    return ParseNpy(file, widths, path);
  }
  return ParseSafetensors(file, widths, path);
}

std::string SafetensorsHeader(std::span<const uint32_t> factor_widths, uint64_t slots, uint32_t dim,
                              pk::DType dtype) {
  const uint64_t bytes = slots * dim * pk::ElementBytes(dtype);
  nlohmann::json header;
  header["__metadata__"] = {{"factor_widths", absl::StrJoin(factor_widths, ",")}};
  header["values"] = {{"dtype", dtype == pk::DType::kBFloat16 ? "BF16" : "F32"},
                      {"shape", {slots, dim}},
                      {"data_offsets", {0, bytes}}};
  std::string json = header.dump();
  // Pad with spaces so that the data starts 64-byte aligned (the format allows trailing spaces).
  json.append((64 - (8 + json.size()) % 64) % 64, ' ');
  std::string out(8, '\0');
  const uint64_t length = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out += json;
  return out;
}

}  // namespace pkserve
