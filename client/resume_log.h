// The sidecar file of a batch run (pkserve-cli --resume): which requests' rows are already in
// the output files, so that a run stopped part way (Ctrl-C, a server gone, a killed CLI) goes on
// where it stopped instead of starting over.
//
// Format (text): a first line "pkserve-cli resume 1", a second line the run's key (input file,
// its size and mtime, the command's parameters, the split), then one line per request done:
// "done FIRST_ROW ROWS". A request is recorded only after its outputs were written (pwrite), so a
// recorded request's rows are in the page cache of the partial files even when the CLI is killed;
// a crash of the machine itself can lose them (nothing is fsynced before the end).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace pkserve::client {

class ResumeLog {
 public:
  // Opens `path` for a run whose key is `key` (one line, no newline). With `resume`, reads the
  // requests an earlier run recorded (their first rows into `done_first_rows`) and fails when the
  // file is missing or was written for another key; without, starts a new file.
  static absl::StatusOr<std::unique_ptr<ResumeLog>> Open(const std::string& path,
                                                         const std::string& key, bool resume,
                                                         std::vector<uint64_t>* done_first_rows);
  ~ResumeLog();
  ResumeLog(const ResumeLog&) = delete;
  ResumeLog& operator=(const ResumeLog&) = delete;

  // Records that rows [first_row, first_row + rows) are written. Thread-safe.
  absl::Status MarkDone(uint64_t first_row, uint64_t rows);
  // Deletes the file: the run is complete.
  absl::Status Remove();

  const std::string& path() const { return path_; }

 private:
  ResumeLog(std::string path, FILE* file) : path_(std::move(path)), file_(file) {}

  const std::string path_;
  absl::Mutex mutex_;
  FILE* file_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace pkserve::client
