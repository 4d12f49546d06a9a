#include "client/bench/echo_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace pkserve::bench {
namespace {

constexpr absl::string_view kListening = "echo baseline listening on ";

}  // namespace

absl::StatusOr<std::string> SelfExecutable() {
  char path[4096];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) {
    return absl::InternalError(
        absl::StrCat("cannot find this executable (/proc/self/exe): ", std::strerror(errno)));
  }
  return std::string(path, static_cast<size_t>(length));
}

absl::StatusOr<std::unique_ptr<EchoProcess>> EchoProcess::Start(
    const std::string& binary, absl::Duration timeout, const std::vector<std::string>& extra_args) {
  std::string serve_flag = "--serve_echo=127.0.0.1:0";
  std::vector<char*> argv = {const_cast<char*>(binary.c_str()), serve_flag.data()};
  for (const std::string& arg : extra_args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  int output[2];
  if (pipe2(output, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe for the echo process: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(output[0]);
    close(output[1]);
    return absl::InternalError(absl::StrCat("fork for the echo process: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the bench is already gone
    dup2(output[1], STDOUT_FILENO);     // dup2 clears O_CLOEXEC on the copy
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(output[1]);
  std::unique_ptr<EchoProcess> process(new EchoProcess(pid, output[0]));
  std::string said;
  const absl::Time give_up = absl::Now() + timeout;
  while (!absl::StrContains(said, '\n')) {
    pollfd readable{.fd = output[0], .events = POLLIN, .revents = 0};
    const int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(give_up - absl::Now()));
    if (wait_ms <= 0 || poll(&readable, 1, wait_ms) <= 0) break;
    char buffer[256];
    const ssize_t got = read(output[0], buffer, sizeof buffer);
    if (got <= 0) break;  // it exited
    said.append(buffer, static_cast<size_t>(got));
  }
  const std::string first_line = said.substr(0, said.find('\n'));
  absl::string_view line = first_line;
  if (!absl::ConsumePrefix(&line, kListening)) {
    return absl::UnavailableError(absl::StrCat(
        "the echo baseline process (", binary, " --serve_echo=127.0.0.1:0, pid ", pid,
        ") did not start within ", absl::FormatDuration(timeout), "; it said: '", said, "'"));
  }
  process->address_ = std::string(line);
  return process;
}

EchoProcess::~EchoProcess() {
  kill(pid_, SIGTERM);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  close(output_fd_);
}

}  // namespace pkserve::bench
