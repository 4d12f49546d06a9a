// The pkserve binary (or any helper program) as a child process of a test, for what only a process
// has: its flags, its log, its exit status, signals, its memory (/proc/PID/status). Used by
// tests/server, tests/reliability and tests/scaleout.
//
// Every child is started by SpawnChild: the kernel kills it (SIGKILL) if the test process dies
// first, so a test killed on timeout leaves nothing behind. Only the child an object started is
// ever signalled or killed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace pkserve::testing {

class PkserveProcess {
 public:
  // Starts `binary` with `flags` as they are (give --address, and --metrics_address unless the
  // default 0.0.0.0:9090 is meant), its output in a log file under the test's temp folder.
  PkserveProcess(const std::string& binary, const std::vector<std::string>& flags);
  // SIGKILLs the child if it still runs, reaps it, removes the log.
  ~PkserveProcess();
  PkserveProcess(const PkserveProcess&) = delete;
  PkserveProcess& operator=(const PkserveProcess&) = delete;

  // Waits until the log says it listens on 127.0.0.1 (and, with `metrics`, serves metrics on
  // 127.0.0.1), or it exits, or `timeout`; true when it serves.
  bool WaitServing(absl::Duration timeout, bool metrics = true);

  int port() const { return port_; }                  // 0 until WaitServing saw it
  int metrics_port() const { return metrics_port_; }  // 0 until WaitServing saw it
  std::string target() const;                         // "127.0.0.1:PORT"
  pid_t pid() const { return pid_; }
  std::string log() const;

  bool running();
  void Signal(int signal_number);
  // Waits for the exit: its wait status, or nothing on timeout.
  std::optional<int> WaitExit(absl::Duration timeout);

  // From /proc/PID/status, in KiB: the peak resident set (VmHWM) and the current one (VmRSS);
  // -1 once the child is gone.
  int64_t PeakRssKib() const;
  int64_t RssKib() const;

 private:
  int64_t StatusField(const char* name) const;

  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  bool exited_ = false;
  int wait_status_ = 0;
};

// A pkserve on a free loopback port with no metrics endpoint unless `flags` ask for one:
// `binary --address=127.0.0.1:0 --metrics_address= <flags>`, waited for (up to 20 s) until it
// serves. On failure port() is 0 and the test has a failure recorded, with the log.
class ChildServer : public PkserveProcess {
 public:
  ChildServer(const std::string& binary, const std::vector<std::string>& flags);
};

// Starts `args` (args[0] the binary) with stdout and stderr into the file `output`, as a child that
// the kernel kills (SIGKILL) if this test process dies first. Returns its pid, or -1 (and a test
// failure).
pid_t SpawnChild(const std::vector<std::string>& args, const std::string& output);

// How a command run to completion went: its exit status (-1 if it did not exit normally) and its
// stdout and stderr together.
struct CommandRun {
  int exit_code = -1;
  std::string output;
};

// Runs `command` through the shell, its stderr joined to its stdout, and waits for it.
CommandRun RunCommand(const std::string& command);

// A free loopback port (bound, read back and closed: free again unless taken in between), or 0.
int FreeLoopbackPort();

// The integer right after the first `prefix` in `text`, or -1.
int64_t NumberAfter(const std::string& text, const std::string& prefix);

// Whether this build runs under a sanitizer (PK_SANITIZE): memory and time bounds then widen.
bool Sanitized();

}  // namespace pkserve::testing
