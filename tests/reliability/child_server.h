// The real pkserve binary as a child process on a loopback port, for tests that need what only a
// process has: its peak memory (/proc/PID/status), its exit status, signals. Only the child this
// object started is ever signalled or killed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace pkserve::testing {

class ChildServer {
 public:
  // Starts `binary --address=127.0.0.1:0 --metrics_address= <flags>` (no metrics port unless
  // `flags` give one) with its output in a log file, and waits (up to 20 s) for it to log its port.
  // On failure port() is 0 and the test has a failure recorded.
  ChildServer(const std::string& binary, const std::vector<std::string>& flags);
  // SIGKILLs the child if it still runs; removes the log.
  ~ChildServer();
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;

  int port() const { return port_; }
  std::string target() const;  // "127.0.0.1:PORT"
  pid_t pid() const { return pid_; }
  std::string log() const;

  bool running();
  void Signal(int signal_number);
  // Waits for the exit; the wait status, or nothing on timeout.
  std::optional<int> WaitExit(absl::Duration timeout);

  // From /proc/PID/status, in KiB: the peak resident set (VmHWM) and the current one (VmRSS);
  // -1 when the child is gone.
  int64_t PeakRssKib() const;
  int64_t RssKib() const;

 private:
  int64_t StatusField(const char* name) const;

  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  int wait_status_ = 0;
};

// Starts `args` (args[0] the binary) with stdout and stderr into the file `output`, as a child that
// the kernel kills (SIGKILL) if this test process dies first, so that a test killed on timeout
// leaves no server behind. Returns its pid, or -1 (and a test failure).
pid_t SpawnChild(const std::vector<std::string>& args, const std::string& output);

// The integer right after `prefix` in `text` (the first occurrence), or -1.
int64_t NumberAfter(const std::string& text, const std::string& prefix);

// Whether this build runs under a sanitizer (PK_SANITIZE): memory and time bounds then widen.
bool Sanitized();

}  // namespace pkserve::testing
