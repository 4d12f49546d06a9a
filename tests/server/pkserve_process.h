// The pkserve binary as a child process on loopback, for tests that need the real process: its
// flags, its log, its exit status, signals. The gRPC and metrics ports are the ones it logs (pass
// port 0 to let it pick). Only the child this object started is ever signalled.
#pragma once

#include <sys/types.h>

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

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  bool exited_ = false;
  int wait_status_ = 0;
};

// The integer right after the first `prefix` in `text`, or -1.
int64_t NumberAfter(const std::string& text, const std::string& prefix);

}  // namespace pkserve::testing
