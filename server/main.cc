// pkserve: parses the flags, sets up logging, raises its open-files limit, starts the server, and
// drains it on SIGINT/SIGTERM. A second signal during the drain exits at once. Exit status: 0
// after a drain (or --help), 2 on bad usage (server/flag_usage.h), 1 when the server cannot start.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "server/flag_usage.h"
#include "server/flags.h"
#include "server/large_messages.h"
#include "server/logging.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

namespace {

// Blocks SIGINT and SIGTERM in this thread and every thread started after it, so that only
// sigwait() sees them.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

const char* SignalName(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

// Raises the soft limit on open files to the hard limit and logs both. Every connection costs
// a descriptor, and gRPC 1.51's listener stops for good the first time accept() fails with
// EMFILE: the usual soft limit of 1 024 would let that many idle connections end serving.
void RaiseOpenFilesLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("open files: getrlimit failed: {}", std::strerror(errno));
    return;
  }
  const rlim_t soft_before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      spdlog::warn("open files: could not raise the soft limit {} to the hard limit {}: {}",
                   soft_before, limit.rlim_max, std::strerror(errno));
      return;
    }
  }
  spdlog::info("open files: soft limit {} (was {}), hard limit {}", limit.rlim_cur, soft_before,
               limit.rlim_max);
}

}  // namespace

int main(int argc, char** argv) {
  const sigset_t signals = BlockShutdownSignals();
  // Requests are at most --max_message_bytes (64 MiB by default) and the queue bounds how many
  // are held at once.
  pkserve::SetUpForLargeMessages(128 << 20);

  pkserve::SetUpFlagsUsage();
  const std::vector<std::string> memory_flags = pkserve::TakeMemoryFlags(argc, argv);
  const std::vector<char*> positional = pkserve::ParseFlagsOrExit(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr, "pkserve: unexpected argument '%s' (flags are --name=value; see --help)\n",
                 positional[1]);
    return pkserve::kUsageError;
  }
  absl::StatusOr<pkserve::ServerConfig> config = pkserve::ConfigFromFlags(memory_flags);
  if (!config.ok()) {
    std::fprintf(stderr, "pkserve: %s\n", std::string(config.status().message()).c_str());
    return pkserve::kUsageError;
  }
  if (absl::Status logging = pkserve::SetUpLogging(config->log_level, config->log_format);
      !logging.ok()) {
    std::fprintf(stderr, "pkserve: %s\n", std::string(logging.message()).c_str());
    return pkserve::kUsageError;
  }

  RaiseOpenFilesLimit();
  absl::StatusOr<std::unique_ptr<pkserve::Server>> server = pkserve::Server::Start(*config);
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", std::string(server.status().message()));
    return 1;
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("received {}, draining (--drain_timeout_s={})", SignalName(signal_number),
               absl::ToDoubleSeconds(config->drain_timeout));
  std::thread([signals] {
    int again = 0;
    sigwait(&signals, &again);
    spdlog::warn("received {} while draining: exiting now", SignalName(again));
    std::_Exit(1);
  }).detach();

  (*server)->Drain(config->drain_timeout);
  server->reset();
  spdlog::info("exiting");
  return 0;
}
