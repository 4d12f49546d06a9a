// The hosted memories: each a values table opened from a file (--memory=NAME=PATH[,widths=...]),
// memory-mapped read-only, validated whole before anything is served, and immutable while served.
// The store owns them for the server's lifetime; everything else borrows a `const HostedMemory*`.
// The CPU backend reads the table from the mapping; the CUDA backend copies it to each device
// (Executor::AddMemory) and reads its copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/lookup/lookup.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/memory_file.h"

namespace pkserve {

// One --memory flag: NAME=PATH[,widths=W0xW1[xW2[xW3]]].
struct MemorySpec {
  std::string name;
  std::string path;
  std::vector<uint32_t> widths;  // empty: from the file's metadata
};

// Parses one --memory value; INVALID_ARGUMENT naming --memory and the expected form otherwise.
// A name is 1 to 64 characters of [A-Za-z0-9_.-].
absl::StatusOr<MemorySpec> ParseMemorySpec(absl::string_view text);

class HostedMemory {
 public:
  // Maps `spec.path` and validates it (memory_file.h); the errors name the memory and the file.
  static absl::StatusOr<std::unique_ptr<HostedMemory>> Open(const MemorySpec& spec);
  ~HostedMemory();
  HostedMemory(const HostedMemory&) = delete;
  HostedMemory& operator=(const HostedMemory&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const MemoryLayout& layout() const { return layout_; }
  // The table in host memory (the file's mapping, or an aligned copy of it where the file's data
  // is not aligned to its element size).
  pk::ValuesView values() const;
  uint64_t version() const { return 1; }
  v1::MemoryInfo info() const;

  // Reads every page of the table once, so that lookups do not fault them in one by one.
  void TouchPages() const;
  // How long loading took (mapping, checks, and the executor's copies), set by the store.
  absl::Duration load_time() const { return load_time_; }
  void set_load_time(absl::Duration time) { load_time_ = time; }

 private:
  HostedMemory() = default;

  std::string name_;
  std::string path_;
  MemoryLayout layout_;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  std::vector<uint32_t> aligned_copy_;  // used only when the file's data is misaligned
  const std::byte* table_ = nullptr;
  absl::Duration load_time_;
};

// The memories of one server, by name.
class MemoryStore {
 public:
  MemoryStore() = default;
  // Opens every spec; the first failure is returned. Names must be unique.
  static absl::StatusOr<std::unique_ptr<MemoryStore>> Open(std::span<const MemorySpec> specs);

  // The memory called `name`, or null.
  const HostedMemory* Find(absl::string_view name) const;
  std::span<const std::unique_ptr<HostedMemory>> memories() const { return memories_; }
  // "a, b" (for messages), or "none".
  std::string NamesText() const;

 private:
  std::vector<std::unique_ptr<HostedMemory>> memories_;
};

}  // namespace pkserve
