#include "tests/server/pkserve_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace pkserve::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

}  // namespace

CommandRun RunCommand(const std::string& command) {
  CommandRun run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t count = 0;
  while ((count = fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, count);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

int64_t NumberAfter(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  size_t end = at + prefix.size();
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  int64_t number = -1;
  if (!absl::SimpleAtoi(text.substr(at + prefix.size(), end - at - prefix.size()), &number)) {
    return -1;
  }
  return number;
}

bool Sanitized() {
#if defined(PK_SANITIZED)
  return true;
#else
  return false;
#endif
}

pid_t SpawnChild(const std::vector<std::string>& args, const std::string& output) {
  // Everything the child needs is made before fork(): after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const int output_fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (output_fd < 0) {
    ADD_FAILURE() << "cannot write " << output << ": " << std::strerror(errno);
    return -1;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the test died before the line above
    dup2(output_fd, STDOUT_FILENO);
    dup2(output_fd, STDERR_FILENO);
    execve(argv[0], argv.data(), environ);
    _exit(127);
  }
  close(output_fd);
  if (pid < 0) {
    ADD_FAILURE() << "cannot start " << args[0] << ": " << std::strerror(errno);
    return -1;
  }
  return pid;
}

PkserveProcess::PkserveProcess(const std::string& binary, const std::vector<std::string>& flags) {
  static std::atomic<int> sequence{0};
  log_path_ = absl::StrCat(::testing::TempDir(), "pkserve_", getpid(), "_", sequence++, ".log");
  std::vector<std::string> args = {binary};
  args.insert(args.end(), flags.begin(), flags.end());
  pid_ = SpawnChild(args, log_path_);
  if (pid_ <= 0) {
    pid_ = -1;
    exited_ = true;
  }
}

PkserveProcess::~PkserveProcess() {
  if (pid_ > 0 && running()) {
    kill(pid_, SIGKILL);  // our own child only
    waitpid(pid_, nullptr, 0);
  }
  std::remove(log_path_.c_str());
}

bool PkserveProcess::WaitServing(absl::Duration timeout, bool metrics) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const std::string text = log();
    port_ = static_cast<int>(std::max<int64_t>(0, NumberAfter(text, "listening on 127.0.0.1:")));
    metrics_port_ =
        static_cast<int>(std::max<int64_t>(0, NumberAfter(text, "metrics on http://127.0.0.1:")));
    if (port_ > 0 && (!metrics || metrics_port_ > 0)) return true;
    if (!running() || absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string PkserveProcess::target() const { return absl::StrCat("127.0.0.1:", port_); }

std::string PkserveProcess::log() const { return ReadFile(log_path_); }

bool PkserveProcess::running() {
  if (exited_) return false;
  if (waitpid(pid_, &wait_status_, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

void PkserveProcess::Signal(int signal_number) {
  if (running()) kill(pid_, signal_number);
}

std::optional<int> PkserveProcess::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  if (!exited_) return std::nullopt;
  return wait_status_;
}

int64_t PkserveProcess::StatusField(const char* name) const {
  if (pid_ <= 0 || exited_) return -1;
  const std::string status = ReadFile(absl::StrCat("/proc/", pid_, "/status"));
  const size_t at = status.find(absl::StrCat(name, ":"));
  if (at == std::string::npos) return -1;
  size_t begin = at + std::strlen(name) + 1;
  while (begin < status.size() && std::isspace(static_cast<unsigned char>(status[begin]))) ++begin;
  return NumberAfter(status.substr(begin), "");
}

int64_t PkserveProcess::PeakRssKib() const { return StatusField("VmHWM"); }
int64_t PkserveProcess::RssKib() const { return StatusField("VmRSS"); }

namespace {

std::vector<std::string> LoopbackFlags(const std::vector<std::string>& flags) {
  // No metrics port unless a test asks for one (its default, 9090, may be taken).
  std::vector<std::string> all = {"--address=127.0.0.1:0", "--metrics_address="};
  all.insert(all.end(), flags.begin(), flags.end());
  return all;
}

}  // namespace

ChildServer::ChildServer(const std::string& binary, const std::vector<std::string>& flags)
    : PkserveProcess(binary, LoopbackFlags(flags)) {
  if (!WaitServing(absl::Seconds(20), /*metrics=*/false)) {
    ADD_FAILURE() << "pkserve did not start; its log:\n" << log();
  }
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(address.sin_port);
}

}  // namespace pkserve::testing
