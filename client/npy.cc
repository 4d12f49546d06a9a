#include "client/npy.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <span>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/npy_file.h"

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

size_t ElementBytes(const std::string& descr) {
  if (descr.size() < 3) return 0;
  size_t bytes = 0;
  return absl::SimpleAtoi(descr.substr(2), &bytes) ? bytes : 0;
}

uint64_t Elements(const std::vector<uint64_t>& shape) {
  uint64_t count = 1;
  for (uint64_t extent : shape) count *= extent;
  return count;
}

}  // namespace

size_t NpyHeader::element_bytes() const { return ElementBytes(descr); }
uint64_t NpyHeader::elements() const { return Elements(shape); }

absl::StatusOr<uint64_t> NpyHeader::data_bytes() const {
  uint64_t bytes = element_bytes();
  for (uint64_t extent : shape) {
    if (extent != 0 && bytes > std::numeric_limits<uint64_t>::max() / extent) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the .npy shape (", absl::StrJoin(shape, ", "), ") needs more than 2^64 bytes"));
    }
    bytes *= extent;
  }
  return bytes;
}

size_t NpyArray::element_bytes() const { return ElementBytes(descr); }
uint64_t NpyArray::elements() const { return Elements(shape); }

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes) {
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
    return absl::InvalidArgumentError(
        absl::StrCat("truncated .npy header (it says ", header_length, " bytes, the file has ",
                     bytes.size() - header_start, " after the length)"));
  }
  const absl::string_view header = bytes.substr(header_start, header_length);

  NpyHeader parsed;
  parsed.data_offset = header_start + header_length;
  absl::StatusOr<std::string> descr = DictValue(header, "descr");
  if (!descr.ok()) return descr.status();
  absl::string_view descr_text = *descr;
  if (!absl::ConsumePrefix(&descr_text, "'") || !absl::ConsumeSuffix(&descr_text, "'")) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported .npy descr ", *descr));
  }
  parsed.descr = std::string(descr_text);
  if (parsed.descr.size() >= 1 && (parsed.descr[0] == '|' || parsed.descr[0] == '=')) {
    parsed.descr[0] = '<';  // one-byte types and native order on a little-endian host
  }
  if (parsed.descr.size() < 3 || parsed.descr[0] != '<' || parsed.element_bytes() == 0) {
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
    parsed.shape.push_back(extent);
  }
  if (absl::StatusOr<uint64_t> data_bytes = parsed.data_bytes(); !data_bytes.ok()) {
    return data_bytes.status();
  }
  return parsed;
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes) {
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(bytes);
  if (!header.ok()) return header.status();
  const absl::string_view data = bytes.substr(header->data_offset);
  const uint64_t expected = *header->data_bytes();
  if (data.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(".npy data holds ", data.size(),
                                                   " bytes; its shape and dtype need ", expected));
  }
  NpyArray array{header->descr, header->shape, {}};
  array.data.resize(data.size());
  std::memcpy(array.data.data(), data.data(), data.size());
  return array;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedNpy>> mapped = MappedNpy::Open(path);
  if (!mapped.ok()) return mapped.status();
  const std::span<const std::byte> data = (*mapped)->data();
  NpyArray array{(*mapped)->header().descr, (*mapped)->header().shape,
                 std::vector<std::byte>(data.begin(), data.end())};
  return array;
}

std::string SerializeNpyHeader(const std::string& descr, const std::vector<uint64_t>& shape) {
  std::string shape_text = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) shape_text += ",";
  std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (",
                                    shape_text, "), }");
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
  return bytes;
}

std::string SerializeNpy(const NpyArray& array) {
  std::string bytes = SerializeNpyHeader(array.descr, array.shape);
  bytes.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return bytes;
}

absl::Status WriteNpy(const std::string& path, const NpyArray& array) {
  const std::string bytes = SerializeNpy(array);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileError("cannot write", path, errno);
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t count = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      const int error = count < 0 ? errno : EIO;
      ::close(fd);
      return FileError("cannot write", path, error);
    }
    written += static_cast<size_t>(count);
  }
  if (::close(fd) != 0) return FileError("cannot write", path, errno);
  return absl::OkStatus();
}

}  // namespace pkserve::client
