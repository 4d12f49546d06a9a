// The real pkserve binary as a child process on a loopback port: SIGTERM under load from unary
// and streaming callers loses no accepted request, and the process exits 0 within the drain
// timeout. Only the child this test started is ever signalled.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/server/test_support.h"

extern char** environ;

namespace pkserve {
namespace {

using testing::CheckResponse;
using testing::MakeProblem;
using testing::RandomRequest;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// The number after `prefix` in `text`, or -1.
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

// pkserve running as a child, its log in a file.
class ChildServer {
 public:
  explicit ChildServer(std::vector<std::string> flags) {
    log_path_ = absl::StrCat(::testing::TempDir(), "pkserve_sigterm_", getpid(), ".log");
    // Metrics on a free port too: the default 0.0.0.0:9090 may be taken (by another test's child).
    std::vector<std::string> args = {PKSERVE_BINARY, "--address=127.0.0.1:0",
                                     "--metrics_address=127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int error = posix_spawn(&pid_, PKSERVE_BINARY, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) {
      ADD_FAILURE() << "cannot start " << PKSERVE_BINARY << ": " << strerror(error);
      pid_ = -1;
      return;
    }
    // The server logs "listening on 127.0.0.1:PORT" once it serves.
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline && port_ <= 0 && running()) {
      port_ = static_cast<int>(NumberAfter(ReadFile(log_path_), "listening on 127.0.0.1:"));
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (port_ <= 0) ADD_FAILURE() << "pkserve did not start; its log:\n" << log();
  }

  ~ChildServer() {
    if (pid_ > 0 && running()) {
      kill(pid_, SIGKILL);  // only our own child
      waitpid(pid_, nullptr, 0);
    }
    std::remove(log_path_.c_str());
  }

  int port() const { return port_; }
  std::string log() const { return ReadFile(log_path_); }
  void Signal(int signal_number) { kill(pid_, signal_number); }

  bool running() {
    if (exited_) return false;
    const pid_t done = waitpid(pid_, &wait_status_, WNOHANG);
    if (done == pid_) exited_ = true;
    return !exited_;
  }
  // Waits for the exit; its wait status, or nothing on timeout.
  std::optional<int> WaitExit(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    if (!exited_) return std::nullopt;
    return wait_status_;
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  int wait_status_ = 0;
};

// What the callers saw.
struct Outcomes {
  std::atomic<int64_t> ok{0};           // answered with the right result
  std::atomic<int64_t> unavailable{0};  // refused: never accepted
  std::mutex mutex;
  std::vector<std::string> wrong;  // anything else

  void Wrong(std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    wrong.push_back(std::move(what));
  }
};

const std::vector<pk::Problem>& Shapes() {
  static const std::vector<pk::Problem> shapes = {
      MakeProblem({256, 256}, 16, pk::DType::kFloat32),
      MakeProblem({1024, 1024}, 32, pk::DType::kBFloat16),
      MakeProblem({32, 32, 32}, 8, pk::DType::kFloat32),
  };
  return shapes;
}

void UnaryCaller(int port, int seed, Outcomes& outcomes) {
  std::mt19937_64 engine(seed);
  auto stub = v1::SparseMemory::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  for (int i = 0;; ++i) {
    const v1::TopKRequest request =
        RandomRequest(Shapes()[engine() % Shapes().size()], 1 + engine() % 32, engine,
                      absl::StrCat("unary", seed, "-", i));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::TopKResponse response;
    const grpc::Status status = stub->TopK(&context, request, &response);
    if (status.ok()) {
      const std::string difference = CheckResponse(request, response);
      if (difference.empty()) {
        ++outcomes.ok;
      } else {
        outcomes.Wrong(absl::StrCat(request.request_id(), ": ", difference));
      }
      continue;
    }
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      ++outcomes.unavailable;
    } else {
      outcomes.Wrong(absl::StrCat(request.request_id(), ": status ", status.error_code(), " ",
                                  status.error_message()));
    }
    return;  // the server is going away
  }
}

void StreamCaller(int port, int seed, Outcomes& outcomes) {
  std::mt19937_64 engine(seed);
  auto stub = v1::SparseMemory::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->TopKStream(&context);
  // Two requests in flight at a time, answers checked in order.
  std::vector<v1::TopKRequest> sent;
  size_t answered = 0;
  bool open = true;
  for (int i = 0; open; ++i) {
    while (open && sent.size() - answered < 2) {
      sent.push_back(RandomRequest(Shapes()[engine() % Shapes().size()], 1 + engine() % 16, engine,
                                   absl::StrCat("stream", seed, "-", sent.size())));
      open = stream->Write(sent.back());
      if (!open) sent.pop_back();
    }
    v1::TopKStreamResponse answer;
    if (!stream->Read(&answer)) break;
    const v1::TopKRequest& request = sent[answered++];
    if (answer.request_id() != request.request_id()) {
      outcomes.Wrong(absl::StrCat("stream answer for ", answer.request_id(), " where ",
                                  request.request_id(), " was due"));
      break;
    }
    if (answer.has_result()) {
      const std::string difference = CheckResponse(request, answer.result());
      if (difference.empty()) {
        ++outcomes.ok;
      } else {
        outcomes.Wrong(absl::StrCat(request.request_id(), ": ", difference));
      }
    } else if (answer.error().code() == grpc::StatusCode::UNAVAILABLE) {
      ++outcomes.unavailable;
    } else {
      outcomes.Wrong(absl::StrCat(request.request_id(), ": stream error ", answer.error().code(),
                                  " ", answer.error().message()));
    }
  }
  stream->WritesDone();
  v1::TopKStreamResponse rest;
  while (stream->Read(&rest)) {
    if (rest.has_result()) ++outcomes.ok;
  }
  const grpc::Status status = stream->Finish();
  if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE) {
    outcomes.Wrong(
        absl::StrCat("stream ", seed, " ended ", status.error_code(), " ", status.error_message()));
  }
}

TEST(Sigterm, UnderLoadNoAcceptedRequestIsLostAndTheProcessExitsWithinTheDrainTimeout) {
  ChildServer child({"--threads=2", "--drain_timeout_s=8", "--max_queue_delay_us=1000"});
  ASSERT_GT(child.port(), 0);

  Outcomes outcomes;
  std::vector<std::thread> callers;
  for (int i = 0; i < 12; ++i) {
    callers.emplace_back(UnaryCaller, child.port(), 100 + i, std::ref(outcomes));
  }
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back(StreamCaller, child.port(), 200 + i, std::ref(outcomes));
  }
  // Under load: wait for a good number of answers, then SIGTERM.
  const absl::Time loaded_by = absl::Now() + absl::Seconds(20);
  while (outcomes.ok.load() < 200 && absl::Now() < loaded_by) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_GE(outcomes.ok.load(), 200) << "the server answered too little before SIGTERM";
  const absl::Time signalled = absl::Now();
  child.Signal(SIGTERM);

  const std::optional<int> status = child.WaitExit(absl::Seconds(8) + absl::Seconds(5));
  for (std::thread& caller : callers) caller.join();
  ASSERT_TRUE(status.has_value()) << "pkserve did not exit after SIGTERM; log:\n" << child.log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(8) + absl::Seconds(5));
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "wait status " << *status << "; log:\n"
      << child.log();

  for (const std::string& wrong : outcomes.wrong) ADD_FAILURE() << wrong;
  // Every request the server accepted reached its caller with the right answer.
  const std::string log = child.log();
  const int64_t accepted = NumberAfter(log, "drained: ");
  EXPECT_EQ(accepted, outcomes.ok.load())
      << "the server accepted " << accepted << " requests, callers got " << outcomes.ok.load()
      << " answers; log:\n"
      << log;
  EXPECT_NE(log.find("received SIGTERM"), std::string::npos) << log;
}

}  // namespace
}  // namespace pkserve
