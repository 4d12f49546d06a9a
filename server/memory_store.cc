#include "server/memory_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/validation.h"

namespace pkserve {
namespace {

constexpr size_t kMaxNameLength = 64;

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<MemorySpec> ParseMemorySpec(absl::string_view text) {
  const auto invalid = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory must be NAME=PATH[,widths=W0xW1[xW2[xW3]]], got '", text, "': ", why));
  };
  const size_t equals = text.find('=');
  if (equals == absl::string_view::npos) return invalid("no '=' after the name");
  MemorySpec spec;
  spec.name = std::string(text.substr(0, equals));
  if (!ValidName(spec.name)) {
    return invalid(absl::StrCat("the name must be 1 to ", kMaxNameLength,
                                " characters of letters, digits, '_', '.', '-'"));
  }
  absl::string_view rest = text.substr(equals + 1);
  // Options follow the path's last ',': a path may hold commas, an option name may not.
  const size_t comma = rest.rfind(",widths=");
  absl::string_view path = rest;
  if (comma != absl::string_view::npos) {
    path = rest.substr(0, comma);
    absl::StatusOr<std::vector<uint32_t>> widths = ParseFactorWidths(
        rest.substr(comma + 8), absl::StrCat("--memory=", spec.name, "'s widths="));
    if (!widths.ok()) return widths.status();
    spec.widths = *std::move(widths);
  }
  if (path.empty()) return invalid("the path is empty");
  spec.path = std::string(path);
  return spec;
}

absl::StatusOr<std::unique_ptr<HostedMemory>> HostedMemory::Open(const MemorySpec& spec) {
  const std::string where = absl::StrCat("memory '", spec.name, "' (", spec.path, ")");
  const int fd = ::open(spec.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": cannot open: ", std::strerror(error)));
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(where, ": not a regular file"));
  }
  auto memory = std::unique_ptr<HostedMemory>(new HostedMemory());
  memory->name_ = spec.name;
  memory->path_ = spec.path;
  memory->mapping_bytes_ = static_cast<size_t>(status.st_size);
  if (memory->mapping_bytes_ > 0) {
    void* mapping = ::mmap(nullptr, memory->mapping_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": cannot map its ", memory->mapping_bytes_, " bytes: ", std::strerror(error)));
    }
    memory->mapping_ = mapping;
  }
  ::close(fd);  // the mapping keeps the file
  const std::span<const std::byte> file(static_cast<const std::byte*>(memory->mapping_),
                                        memory->mapping_bytes_);
  absl::StatusOr<MemoryLayout> layout = ParseMemoryFile(file, spec.widths, where);
  if (!layout.ok()) return layout.status();
  memory->layout_ = *std::move(layout);
  memory->table_ = file.data() + memory->layout_.data_offset;
  // Kernels read elements as what they are: a table whose data is not aligned to its element
  // (possible in a safetensors file written by hand) is copied once to memory that is.
  if (memory->layout_.data_offset % 4 != 0) {
    memory->aligned_copy_.resize((memory->layout_.data_bytes + 3) / 4);
    std::memcpy(memory->aligned_copy_.data(), memory->table_, memory->layout_.data_bytes);
    memory->table_ = reinterpret_cast<const std::byte*>(memory->aligned_copy_.data());
  }
  return memory;
}

HostedMemory::~HostedMemory() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

pk::ValuesView HostedMemory::values() const {
  pk::ValuesView view;
  view.data = table_;
  view.slots = layout_.slots;
  view.dim = layout_.dim;
  view.dtype = layout_.dtype;
  return view;
}

v1::MemoryInfo HostedMemory::info() const {
  v1::MemoryInfo info;
  info.set_name(name_);
  for (uint32_t width : layout_.factor_widths) info.add_factor_widths(width);
  info.set_slots(layout_.slots);
  info.set_dim(layout_.dim);
  info.set_dtype(DTypeToWire(layout_.dtype));
  info.set_version(version());
  return info;
}

void HostedMemory::TouchPages() const {
  if (mapping_ != nullptr && aligned_copy_.empty()) {
    ::madvise(mapping_, mapping_bytes_, MADV_WILLNEED);
  }
  constexpr size_t kPage = 4096;
  volatile std::byte sink{};
  for (size_t at = 0; at < layout_.data_bytes; at += kPage) sink = table_[at];
  (void)sink;
}

absl::StatusOr<std::unique_ptr<MemoryStore>> MemoryStore::Open(std::span<const MemorySpec> specs) {
  auto store = std::make_unique<MemoryStore>();
  absl::flat_hash_set<std::string> names;
  for (const MemorySpec& spec : specs) {
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory names '", spec.name, "' twice; each memory needs its own name"));
    }
    absl::StatusOr<std::unique_ptr<HostedMemory>> memory = HostedMemory::Open(spec);
    if (!memory.ok()) return memory.status();
    store->memories_.push_back(*std::move(memory));
  }
  return store;
}

const HostedMemory* MemoryStore::Find(absl::string_view name) const {
  for (const auto& memory : memories_) {
    if (memory->name() == name) return memory.get();
  }
  return nullptr;
}

std::string MemoryStore::NamesText() const {
  if (memories_.empty()) return "none";
  return absl::StrJoin(memories_, ", ", [](std::string* out, const auto& memory) {
    absl::StrAppend(out, "'", memory->name(), "'");
  });
}

}  // namespace pkserve
