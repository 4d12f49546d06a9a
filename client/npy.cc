#include "client/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pkserve::client {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";

// The value of `key` in the header dict: the text after "'key':" up to the next top-level comma
// (a tuple's commas are inside parentheses).
absl::StatusOr<std::string> DictValue(absl::string_view header, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("the .npy header has no '", key, "'"));
  }
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("the .npy header's '", key, "' has no value"));
  }
  ++at;
  int depth = 0;
  size_t end = at;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' && depth == 0) || c == '}') break;
  }
  return std::string(absl::StripAsciiWhitespace(header.substr(at, end - at)));
}

}  // namespace

size_t NpyArray::element_bytes() const {
  if (descr.size() < 3) return 0;
  size_t bytes = 0;
  return absl::SimpleAtoi(descr.substr(2), &bytes) ? bytes : 0;
}

uint64_t NpyArray::elements() const {
  uint64_t count = 1;
  for (uint64_t extent : shape) count *= extent;
  return count;
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    return absl::InvalidArgumentError("not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_length = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_length =
        static_cast<unsigned char>(bytes[8]) | (size_t{static_cast<unsigned char>(bytes[9])} << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError("truncated .npy header");
    for (int i = 0; i < 4; ++i) {
      header_length |= size_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
    }
    header_start = 12;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(".npy format version ", major, " is not supported (1 to 3 are)"));
  }
  if (bytes.size() < header_start + header_length) {
    return absl::InvalidArgumentError("truncated .npy header");
  }
  const absl::string_view header = bytes.substr(header_start, header_length);

  NpyArray array;
  absl::StatusOr<std::string> descr = DictValue(header, "descr");
  if (!descr.ok()) return descr.status();
  absl::string_view descr_text = *descr;
  if (!absl::ConsumePrefix(&descr_text, "'") || !absl::ConsumeSuffix(&descr_text, "'")) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported .npy descr ", *descr));
  }
  array.descr = std::string(descr_text);
  if (array.descr.size() >= 1 && (array.descr[0] == '|' || array.descr[0] == '=')) {
    array.descr[0] = '<';  // one-byte types and native order on a little-endian host
  }
  if (array.descr.size() < 3 || array.descr[0] != '<' || array.element_bytes() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported .npy dtype '", descr_text,
                                                   "': only little-endian numbers ('<f4', '<u2')"));
  }
  absl::StatusOr<std::string> fortran = DictValue(header, "fortran_order");
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False") {
    return absl::InvalidArgumentError(
        "Fortran-order .npy arrays are not supported; save with "
        "numpy.ascontiguousarray first");
  }
  absl::StatusOr<std::string> shape = DictValue(header, "shape");
  if (!shape.ok()) return shape.status();
  absl::string_view shape_text = *shape;
  if (!absl::ConsumePrefix(&shape_text, "(") || !absl::ConsumeSuffix(&shape_text, ")")) {
    return absl::InvalidArgumentError(absl::StrCat("malformed .npy shape ", *shape));
  }
  for (absl::string_view part : absl::StrSplit(shape_text, ',', absl::SkipWhitespace())) {
    uint64_t extent = 0;
    if (!absl::SimpleAtoi(part, &extent)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed .npy shape ", *shape));
    }
    array.shape.push_back(extent);
  }

  const absl::string_view data = bytes.substr(header_start + header_length);
  const uint64_t expected = array.elements() * array.element_bytes();
  if (data.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(".npy data holds ", data.size(),
                                                   " bytes; its shape and dtype need ", expected));
  }
  array.data.resize(data.size());
  std::memcpy(array.data.data(), data.data(), data.size());
  return array;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  absl::StatusOr<NpyArray> array = ParseNpy(bytes);
  if (!array.ok()) {
    return absl::Status(array.status().code(), absl::StrCat(path, ": ", array.status().message()));
  }
  return array;
}

std::string SerializeNpy(const NpyArray& array) {
  std::string shape = absl::StrJoin(array.shape, ", ");
  if (array.shape.size() == 1) shape += ",";
  std::string header = absl::StrCat("{'descr': '", array.descr,
                                    "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Pad with spaces so that the data starts on a 64-byte boundary; the header ends in '\n'.
  const size_t unpadded = kMagic.size() + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes(kMagic.data(), kMagic.size());
  bytes.push_back('\x01');
  bytes.push_back('\x00');
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return bytes;
}

absl::Status WriteNpy(const std::string& path, const NpyArray& array) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  const std::string bytes = SerializeNpy(array);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace pkserve::client
