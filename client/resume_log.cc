#include "client/resume_log.h"

#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/npy_file.h"

namespace pkserve::client {
namespace {

constexpr char kMagicLine[] = "pkserve-cli resume 1";

}  // namespace

absl::StatusOr<std::unique_ptr<ResumeLog>> ResumeLog::Open(
    const std::string& path, const std::string& key, bool resume,
    std::vector<uint64_t>* done_first_rows) {
  done_first_rows->clear();
  if (resume) {
    FILE* existing = std::fopen(path.c_str(), "r");
    if (existing == nullptr) return FileError("cannot resume: cannot read", path, errno);
    std::string text;
    char buffer[1 << 16];
    size_t count;
    while ((count = std::fread(buffer, 1, sizeof buffer, existing)) > 0) text.append(buffer, count);
    std::fclose(existing);
    std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
    if (lines.size() < 2 || lines[0] != kMagicLine) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot resume: ", path, " is not a pkserve-cli resume file"));
    }
    if (lines[1] != key) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot resume: ", path, " was written for another run (", lines[1], "), not this one (",
          key, "); start again without --resume"));
    }
    // A last line cut short by a kill is ignored: its request is simply sent again.
    for (size_t i = 2; i < lines.size(); ++i) {
      std::vector<absl::string_view> words = absl::StrSplit(lines[i], ' ');
      uint64_t first_row = 0;
      uint64_t rows = 0;
      if (words.size() == 3 && words[0] == "done" && absl::SimpleAtoi(words[1], &first_row) &&
          absl::SimpleAtoi(words[2], &rows) && (i + 1 < lines.size() || text.back() == '\n')) {
        done_first_rows->push_back(first_row);
      }
    }
    FILE* file = std::fopen(path.c_str(), "a");
    if (file == nullptr) return FileError("cannot write", path, errno);
    return std::unique_ptr<ResumeLog>(new ResumeLog(path, file));
  }
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return FileError("cannot write", path, errno);
  if (std::fprintf(file, "%s\n%s\n", kMagicLine, key.c_str()) < 0 || std::fflush(file) != 0) {
    const int error = errno;
    std::fclose(file);
    return FileError("cannot write", path, error);
  }
  return std::unique_ptr<ResumeLog>(new ResumeLog(path, file));
}

ResumeLog::~ResumeLog() {
  absl::MutexLock lock(&mutex_);
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status ResumeLog::MarkDone(uint64_t first_row, uint64_t rows) {
  absl::MutexLock lock(&mutex_);
  if (file_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  // One line per write, flushed at once: a killed CLI loses at most the line being written.
  if (std::fprintf(file_, "done %llu %llu\n", static_cast<unsigned long long>(first_row),
                   static_cast<unsigned long long>(rows)) < 0 ||
      std::fflush(file_) != 0) {
    return FileError("cannot write", path_, errno);
  }
  return absl::OkStatus();
}

absl::Status ResumeLog::Remove() {
  absl::MutexLock lock(&mutex_);
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
  if (std::remove(path_.c_str()) != 0) return FileError("cannot remove", path_, errno);
  return absl::OkStatus();
}

}  // namespace pkserve::client
