// The echo baseline in a process of its own: pkserve-bench runs itself again as
// `pkserve-bench --serve_echo=127.0.0.1:0` and measures that, so the baseline pays what a separate
// server pays (its own threads, no sharing of the bench's CPU caches or locks) instead of the
// cheaper in-process echo. The child is ended (SIGTERM, then reaped) when the EchoProcess goes,
// and by the kernel if the bench dies first (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pkserve::bench {

class EchoProcess {
 public:
  // Starts `binary --serve_echo=127.0.0.1:0 [extra_args...]` and waits (up to `timeout`) for its
  // "listening on" line. UNAVAILABLE, with what the child said, when it does not come. The child
  // only execs after fork (its argv is built before), so this is safe with gRPC's threads running.
  static absl::StatusOr<std::unique_ptr<EchoProcess>> Start(
      const std::string& binary, absl::Duration timeout,
      const std::vector<std::string>& extra_args = {});
  ~EchoProcess();
  EchoProcess(const EchoProcess&) = delete;
  EchoProcess& operator=(const EchoProcess&) = delete;

  const std::string& address() const { return address_; }  // "127.0.0.1:<port>"
  pid_t pid() const { return pid_; }

 private:
  EchoProcess(pid_t pid, int output_fd) : pid_(pid), output_fd_(output_fd) {}

  const pid_t pid_;
  const int output_fd_;  // the read end of the child's stdout
  std::string address_;
};

// This process's executable (/proc/self/exe), to start it again.
absl::StatusOr<std::string> SelfExecutable();

}  // namespace pkserve::bench
