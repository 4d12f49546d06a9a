// .npy files too large to hold in memory: an input mapped read-only (MappedNpy) and an output of
// a known shape written piece by piece, in any order, under a temporary name that becomes the
// final name only once every piece is in (NpyOutput). Every error names the file and, for a
// system call that failed, gives errno's text; none aborts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/npy.h"

namespace pkserve::client {

// "<action> <path>: <errno's text>", e.g. "cannot write /x/v.npy: No such file or directory".
absl::Status FileError(absl::string_view action, const std::string& path, int error);

// A .npy file mapped read-only: its pages are the page cache's, so a file of any size costs no
// anonymous memory. Open checks the header and that the file holds exactly the data it declares.
class MappedNpy {
 public:
  static absl::StatusOr<std::unique_ptr<MappedNpy>> Open(const std::string& path);
  ~MappedNpy();
  MappedNpy(const MappedNpy&) = delete;
  MappedNpy& operator=(const MappedNpy&) = delete;

  const NpyHeader& header() const { return header_; }
  std::span<const std::byte> data() const { return data_; }
  // Says that `range` (a part of data()) was read; the mapping's pages well behind the furthest
  // range read (more than kReleaseLagBytes) are dropped from this process's resident set, a
  // kReleaseBlockBytes block at a time (one madvise a block, not one a request). The file stays in
  // the page cache, and a later read of a dropped page (a retried request) maps it again. So a
  // run over a large file, read roughly in order, holds only the pages near where it reads.
  // Thread-safe.
  void DoneReading(std::span<const std::byte> range) const;
  static constexpr uint64_t kReleaseBlockBytes = 16 << 20;
  static constexpr uint64_t kReleaseLagBytes = 32 << 20;
  uint64_t file_bytes() const { return file_bytes_; }
  // The file's modification time (ns since the epoch), to tell a rewritten input apart.
  int64_t mtime_ns() const { return mtime_ns_; }

 private:
  MappedNpy() = default;

  void* mapping_ = nullptr;
  // Blocks [0, released_blocks_) of the mapping are dropped.
  mutable std::atomic<uint64_t> released_blocks_{0};
  size_t mapping_bytes_ = 0;
  NpyHeader header_;
  std::span<const std::byte> data_;
  uint64_t file_bytes_ = 0;
  int64_t mtime_ns_ = 0;
};

// An output .npy of `descr` and `shape`, written at `path` + ".partial" with pwrite and renamed to
// `path` by Commit. Destroyed without Commit, the partial file stays (for --resume); `path` is
// never a file that looks complete while it is not.
class NpyOutput {
 public:
  // Creates the partial file at its full size (a sparse file), or with `reuse`, opens the one an
  // earlier run left, which must have this header and size.
  static absl::StatusOr<std::unique_ptr<NpyOutput>> Create(const std::string& path,
                                                           const std::string& descr,
                                                           const std::vector<uint64_t>& shape,
                                                           bool reuse);
  ~NpyOutput();
  NpyOutput(const NpyOutput&) = delete;
  NpyOutput& operator=(const NpyOutput&) = delete;

  // Writes `bytes` at `offset` bytes into the data. Thread-safe (pwrite on one descriptor).
  absl::Status Write(uint64_t offset, std::span<const std::byte> bytes);
  // Flushes, closes and renames the partial file to the final path.
  absl::Status Commit();
  // Closes and removes the partial file (a run that wrote nothing leaves nothing behind).
  void Discard();

  const std::string& path() const { return path_; }
  const std::string& partial_path() const { return partial_path_; }

 private:
  NpyOutput(std::string path, int fd, size_t data_offset);

  const std::string path_;
  const std::string partial_path_;
  int fd_;
  const size_t data_offset_;
};

}  // namespace pkserve::client
