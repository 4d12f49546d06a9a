#include "tests/server/pkserve_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
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

PkserveProcess::PkserveProcess(const std::string& binary, const std::vector<std::string>& flags) {
  static std::atomic<int> sequence{0};
  log_path_ = absl::StrCat(::testing::TempDir(), "pkserve_", getpid(), "_", sequence++, ".log");
  std::vector<std::string> args = {binary};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const int error = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    ADD_FAILURE() << "cannot start " << binary << ": " << std::strerror(error);
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

}  // namespace pkserve::testing
