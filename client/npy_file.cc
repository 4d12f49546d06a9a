#include "client/npy_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pkserve::client {
namespace {

// Closes a descriptor on every way out of Open.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

absl::Status InvalidFile(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

}  // namespace

absl::Status FileError(absl::string_view action, const std::string& path, int error) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(action, " ", path, ": ", std::strerror(error)));
}

absl::StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError("cannot read", path, errno);
  FdCloser closer(fd);
  struct stat info;
  if (::fstat(fd, &info) != 0) return FileError("cannot read", path, errno);
  if (S_ISDIR(info.st_mode)) return FileError("cannot read", path, EISDIR);
  if (!S_ISREG(info.st_mode)) return InvalidFile(path, "not a regular file");
  auto mapped = std::unique_ptr<MappedNpy>(new MappedNpy());
  mapped->file_bytes_ = static_cast<uint64_t>(info.st_size);
  mapped->mtime_ns_ = int64_t{info.st_mtim.tv_sec} * 1'000'000'000 + info.st_mtim.tv_nsec;
  if (info.st_size == 0) return InvalidFile(path, "empty file, not a .npy file");
  mapped->mapping_bytes_ = static_cast<size_t>(info.st_size);
  void* mapping = ::mmap(nullptr, mapped->mapping_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) return FileError("cannot map", path, errno);
  mapped->mapping_ = mapping;
  ::madvise(mapping, mapped->mapping_bytes_, MADV_SEQUENTIAL);
  const absl::string_view bytes(static_cast<const char*>(mapping), mapped->mapping_bytes_);
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(bytes);
  if (!header.ok()) return InvalidFile(path, header.status().message());
  const uint64_t data_bytes = *header->data_bytes();
  const uint64_t held = mapped->file_bytes_ - header->data_offset;
  if (held != data_bytes) {
    return InvalidFile(
        path, absl::StrCat(held < data_bytes ? "truncated: " : "", "the data holds ", held,
                           " bytes, but shape (", absl::StrJoin(header->shape, ", "), ") of '",
                           header->descr, "' needs ", data_bytes));
  }
  mapped->header_ = *std::move(header);
  mapped->data_ = std::span<const std::byte>(
      static_cast<const std::byte*>(mapping) + mapped->header_.data_offset, data_bytes);
  return mapped;
}

void MappedNpy::DoneReading(std::span<const std::byte> range) const {
  const uint64_t end = static_cast<uint64_t>(range.data() + range.size() -
                                             static_cast<const std::byte*>(mapping_));
  if (end <= kReleaseLagBytes) return;
  const uint64_t wanted = (end - kReleaseLagBytes) / kReleaseBlockBytes;
  uint64_t released = released_blocks_.load();
  // One thread wins each advance and drops the blocks in between.
  while (released < wanted && !released_blocks_.compare_exchange_weak(released, wanted)) {
  }
  if (released >= wanted) return;
  ::madvise(static_cast<std::byte*>(mapping_) + released * kReleaseBlockBytes,
            (wanted - released) * kReleaseBlockBytes, MADV_DONTNEED);
}

MappedNpy::~MappedNpy() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

absl::StatusOr<std::unique_ptr<NpyOutput>> NpyOutput::Create(const std::string& path,
                                                             const std::string& descr,
                                                             const std::vector<uint64_t>& shape,
                                                             bool reuse) {
  const std::string header = SerializeNpyHeader(descr, shape);
  NpyHeader parsed = *ParseNpyHeader(header);
  absl::StatusOr<uint64_t> data_bytes = parsed.data_bytes();
  if (!data_bytes.ok()) return data_bytes.status();
  const uint64_t total = header.size() + *data_bytes;
  const std::string partial = path + ".partial";
  if (struct stat info; ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return FileError("cannot write", path, EISDIR);
  }
  if (reuse) {
    const int fd = ::open(partial.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return FileError("cannot resume: cannot open", partial, errno);
    FdCloser closer(fd);
    struct stat info;
    std::string start(header.size(), '\0');
    if (::fstat(fd, &info) != 0 || static_cast<uint64_t>(info.st_size) != total ||
        ::pread(fd, start.data(), start.size(), 0) != static_cast<ssize_t>(start.size()) ||
        start != header) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot resume: ", partial, " is not the partial output of this run (its size or "
          "header differ); start again without --resume"));
    }
    return std::unique_ptr<NpyOutput>(new NpyOutput(path, closer.release(), header.size()));
  }
  const int fd = ::open(partial.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileError("cannot write", path, errno);
  FdCloser closer(fd);
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) return FileError("cannot write", path, errno);
  if (::pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    return FileError("cannot write", path, errno);
  }
  return std::unique_ptr<NpyOutput>(new NpyOutput(path, closer.release(), header.size()));
}

NpyOutput::NpyOutput(std::string path, int fd, size_t data_offset)
    : path_(std::move(path)), partial_path_(path_ + ".partial"), fd_(fd),
      data_offset_(data_offset) {}

NpyOutput::~NpyOutput() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status NpyOutput::Write(uint64_t offset, std::span<const std::byte> bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t count = ::pwrite(fd_, bytes.data() + written, bytes.size() - written,
                                   static_cast<off_t>(data_offset_ + offset + written));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return FileError("cannot write", partial_path_, count < 0 ? errno : EIO);
    written += static_cast<size_t>(count);
  }
  return absl::OkStatus();
}

absl::Status NpyOutput::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " was already committed"));
  const int fd = std::exchange(fd_, -1);
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    return FileError("cannot write", partial_path_, error);
  }
  if (::close(fd) != 0) return FileError("cannot write", partial_path_, errno);
  if (::rename(partial_path_.c_str(), path_.c_str()) != 0) {
    return FileError(absl::StrCat("cannot rename ", partial_path_, " to"), path_, errno);
  }
  return absl::OkStatus();
}

void NpyOutput::Discard() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  ::unlink(partial_path_.c_str());
}

}  // namespace pkserve::client
