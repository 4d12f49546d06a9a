// Faults: SIGTERM under load from streams (every accepted request answered OK, or refused
// UNAVAILABLE; streams end cleanly; nothing hangs; exit 0 within the drain timeout), a stream that
// never reads cannot hold the process past the drain timeout, and an executor whose batches fail
// (the test-only --inject_batch_failures) costs only the requests of the failed batches (INTERNAL)
// while the rest are served.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/topk_cpu.h"
#include "server/cpu_executor.h"
#include "server/fault_injection.h"
#include "tests/reliability/probe.h"
#include "tests/server/pkserve_process.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::CheckResponse;
using testing::ChildServer;
using testing::MakeProblem;
using testing::RandomRequest;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& target) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
}

const std::vector<pk::Problem>& Shapes() {
  static const std::vector<pk::Problem> shapes = {
      MakeProblem({256, 256}, 16, pk::DType::kFloat32),
      MakeProblem({1024, 1024}, 32, pk::DType::kBFloat16),
      MakeProblem({32, 32, 32}, 8, pk::DType::kFloat32),
  };
  return shapes;
}

// What the callers of one test saw.
struct Tally {
  std::atomic<int64_t> ok{0};           // right answers
  std::atomic<int64_t> unavailable{0};  // refused, never accepted
  std::atomic<int64_t> internal{0};     // failed batches (fault injection only)
  std::mutex mutex;
  std::vector<std::string> wrong;

  void Wrong(std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (wrong.size() < 20) wrong.push_back(std::move(what));
  }
};

// One pipelined stream: a sender keeps up to `depth` requests unanswered, a receiver checks the
// answers in order. `read_pause` slows the reader down. Ends when the server ends the stream.
// With `allow_internal`, StreamErrors INTERNAL (injected failures) are expected too.
void PipelinedStream(const std::string& target, int seed, int depth, absl::Duration read_pause,
                     bool allow_internal, int max_requests, Tally& tally) {
  std::mt19937_64 engine(seed);
  auto stub = v1::SparseMemory::NewStub(NewChannel(target));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = stub->TopKStream(&context);

  std::mutex mutex;
  std::condition_variable room;
  std::deque<v1::TopKRequest> unanswered;
  bool receiver_done = false;
  std::thread sender([&] {
    for (int i = 0; i < max_requests; ++i) {
      v1::TopKRequest request =
          RandomRequest(Shapes()[engine() % Shapes().size()], 1 + engine() % 16, engine,
                        absl::StrCat("s", seed, "-", i));
      {
        std::unique_lock<std::mutex> lock(mutex);
        room.wait(lock,
                  [&] { return unanswered.size() < static_cast<size_t>(depth) || receiver_done; });
        if (receiver_done) break;
        unanswered.push_back(request);
      }
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
  });

  v1::TopKStreamResponse answer;
  while (stream->Read(&answer)) {
    v1::TopKRequest request;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (unanswered.empty()) {
        tally.Wrong(absl::StrCat("stream ", seed, ": an answer to nothing"));
        break;
      }
      request = std::move(unanswered.front());
      unanswered.pop_front();
    }
    room.notify_all();
    if (answer.request_id() != request.request_id()) {
      tally.Wrong(absl::StrCat("stream ", seed, ": answer for ", answer.request_id(), " where ",
                               request.request_id(), " was due"));
      break;
    }
    if (answer.has_result()) {
      if (std::string difference = CheckResponse(request, answer.result()); difference.empty()) {
        ++tally.ok;
      } else {
        tally.Wrong(absl::StrCat(request.request_id(), ": ", difference));
      }
    } else if (answer.error().code() == static_cast<int>(grpc::StatusCode::UNAVAILABLE)) {
      ++tally.unavailable;
    } else if (allow_internal &&
               answer.error().code() == static_cast<int>(grpc::StatusCode::INTERNAL) &&
               absl::StrContains(answer.error().message(), "injected")) {
      ++tally.internal;
    } else {
      tally.Wrong(absl::StrCat(request.request_id(), ": stream error ", answer.error().code(), " ",
                               answer.error().message()));
    }
    if (read_pause > absl::ZeroDuration()) absl::SleepFor(read_pause);
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    receiver_done = true;
  }
  room.notify_all();
  sender.join();
  const grpc::Status status = stream->Finish();
  if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE) {
    tally.Wrong(
        absl::StrCat("stream ", seed, " ended ", status.error_code(), " ", status.error_message()));
  }
}

TEST(Faults, SigtermUnderStreamLoadAnswersEveryAcceptedRequestAndExitsInTime) {
  constexpr int kDrainTimeoutS = 8;
  ChildServer server(PKSERVE_BINARY, {"--backend=cpu", "--threads=2", "--max_queue_delay_us=1000",
                                      absl::StrCat("--drain_timeout_s=", kDrainTimeoutS)});
  ASSERT_GT(server.port(), 0);
  Tally tally;
  std::vector<std::future<void>> streams;
  // Deep pipelines, shallow ones, and slow readers.
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::async(std::launch::async, PipelinedStream, server.target(), 300 + i, 32,
                                 absl::ZeroDuration(), false, 1 << 30, std::ref(tally)));
  }
  for (int i = 0; i < 2; ++i) {
    streams.push_back(std::async(std::launch::async, PipelinedStream, server.target(), 400 + i, 2,
                                 absl::ZeroDuration(), false, 1 << 30, std::ref(tally)));
  }
  streams.push_back(std::async(std::launch::async, PipelinedStream, server.target(), 500, 16,
                               absl::Milliseconds(30), false, 1 << 30, std::ref(tally)));
  // Idle streams: one request answered, then nothing sent; they must end at once on SIGTERM.
  std::vector<std::future<absl::Duration>> idle;
  absl::Time signalled = absl::InfiniteFuture();
  std::mutex signal_mutex;
  for (int i = 0; i < 2; ++i) {
    idle.push_back(std::async(std::launch::async, [&, i]() -> absl::Duration {
      std::mt19937_64 engine(600 + i);
      auto stub = v1::SparseMemory::NewStub(NewChannel(server.target()));
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      auto stream = stub->TopKStream(&context);
      const v1::TopKRequest request = RandomRequest(Shapes()[0], 2, engine, "idle");
      v1::TopKStreamResponse answer;
      if (!stream->Write(request) || !stream->Read(&answer) || !answer.has_result()) {
        tally.Wrong("an idle stream's one request was not answered");
      } else {
        ++tally.ok;
      }
      while (stream->Read(&answer)) tally.Wrong("an idle stream got an answer to nothing");
      const grpc::Status status = stream->Finish();
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) {
        tally.Wrong(absl::StrCat("an idle stream ended ", status.error_code(), " ",
                                 status.error_message(), ", not UNAVAILABLE"));
      }
      std::lock_guard<std::mutex> lock(signal_mutex);
      return absl::Now() - signalled;
    }));
  }

  const absl::Time loaded_by = absl::Now() + absl::Seconds(30);
  while (tally.ok.load() < 300 && absl::Now() < loaded_by) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_GE(tally.ok.load(), 300) << "the streams got too few answers before SIGTERM";
  {
    std::lock_guard<std::mutex> lock(signal_mutex);
    signalled = absl::Now();
    server.Signal(SIGTERM);
  }

  // Nothing hangs: every caller is done, and the process gone, within the drain timeout.
  const absl::Time limit = signalled + absl::Seconds(kDrainTimeoutS + 5);
  for (auto& stream : streams) {
    ASSERT_EQ(stream.wait_until(absl::ToChronoTime(limit)), std::future_status::ready)
        << "a stream caller hung after SIGTERM; log:\n"
        << server.log();
  }
  for (auto& stream : idle) {
    ASSERT_EQ(stream.wait_until(absl::ToChronoTime(limit)), std::future_status::ready)
        << "an idle stream hung after SIGTERM";
    EXPECT_LT(stream.get(), absl::Seconds(3)) << "an idle stream was held until the drain timeout";
  }
  const std::optional<int> exit = server.WaitExit(limit - absl::Now());
  ASSERT_TRUE(exit.has_value()) << "pkserve did not exit in time; log:\n" << server.log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(kDrainTimeoutS + 1));
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << server.log();

  for (const std::string& wrong : tally.wrong) ADD_FAILURE() << wrong;
  const std::string log = server.log();
  const int64_t accepted = testing::NumberAfter(log, "drained: ");
  std::printf(
      "SIGTERM under stream load: %lld answered OK, %lld refused UNAVAILABLE; server: %lld "
      "accepted\n",
      static_cast<long long>(tally.ok.load()), static_cast<long long>(tally.unavailable.load()),
      static_cast<long long>(accepted));
  EXPECT_EQ(accepted, tally.ok.load())
      << "the server accepted " << accepted << " requests, the callers got " << tally.ok.load()
      << " right answers; log:\n"
      << log;
}

TEST(Faults, AStreamThatNeverReadsCannotHoldTheProcessPastTheDrainTimeout) {
  constexpr int kDrainTimeoutS = 3;
  ChildServer server(PKSERVE_BINARY, {"--backend=cpu", "--threads=2",
                                      absl::StrCat("--drain_timeout_s=", kDrainTimeoutS)});
  ASSERT_GT(server.port(), 0);
  std::mt19937_64 engine(7);
  const v1::TopKRequest request = RandomRequest(Shapes()[1], 64, engine);
  auto stub = v1::SparseMemory::NewStub(NewChannel(server.target()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  std::atomic<int> written{0};
  std::thread writer([&] {
    auto stream = stub->TopKStream(&context);
    while (written.load() < 100000 && stream->Write(request)) ++written;
    stream->Finish();
  });
  // Until the server pushes back.
  for (int last = -1, settled = 0; settled < 4; absl::SleepFor(absl::Milliseconds(200))) {
    settled = written.load() == last ? settled + 1 : 0;
    last = written.load();
  }
  const absl::Time signalled = absl::Now();
  server.Signal(SIGTERM);
  const std::optional<int> exit = server.WaitExit(absl::Seconds(kDrainTimeoutS + 5));
  context.TryCancel();
  writer.join();
  ASSERT_TRUE(exit.has_value()) << "a stream that never reads held pkserve; log:\n" << server.log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(kDrainTimeoutS + 2));
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << server.log();
}

TEST(Faults, FaultInjectingExecutorFailsEveryNthBatchFromTheInnerThread) {
  CpuExecutor::Options options;
  options.threads = 1;
  FaultInjectingExecutor executor(std::make_unique<CpuExecutor>(options), 3);
  EXPECT_EQ(executor.backend(), "cpu");
  const pk::Problem problem = MakeProblem({64, 64}, 8, pk::DType::kFloat32);
  std::mt19937_64 engine(3);
  const v1::TopKRequest rows = RandomRequest(problem, 4, engine);
  const testing::Expected expected = testing::Reference(
      problem, reinterpret_cast<const std::byte*>(rows.scores().data()), rows.rows());
  const std::thread::id test_thread = std::this_thread::get_id();
  for (int number = 1; number <= 7; ++number) {
    absl::StatusOr<std::unique_ptr<Batch>> batch = executor.NewBatch(problem, rows.rows());
    ASSERT_TRUE(batch.ok()) << batch.status();
    std::memcpy((*batch)->scores().data(), rows.scores().data(), rows.scores().size());
    std::promise<std::pair<absl::Status, bool>> done;
    executor.Submit(*std::move(batch), [&](std::unique_ptr<Batch> back, BatchOutcome outcome) {
      bool right =
          outcome.status.ok() &&
          std::memcmp(back->values().data(), expected.values.data(), expected.values.size()) == 0 &&
          std::memcmp(back->slots().data(), expected.slots.data(),
                      expected.slots.size() * sizeof(uint32_t)) == 0;
      EXPECT_NE(std::this_thread::get_id(), test_thread) << "done ran inside Submit";
      back.reset();  // the staging goes back before the next NewBatch
      done.set_value({outcome.status, right});
    });
    const auto [status, right] = done.get_future().get();
    if (number % 3 == 0) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << "batch " << number;
      EXPECT_TRUE(absl::StrContains(status.message(), "injected")) << status.message();
    } else {
      EXPECT_TRUE(status.ok()) << "batch " << number << ": " << status;
      EXPECT_TRUE(right) << "batch " << number << " computed wrong";
    }
  }
  EXPECT_EQ(executor.batches_failed(), 2u);

  auto plain = std::make_unique<CpuExecutor>(options);
  Executor* raw = plain.get();
  EXPECT_EQ(MaybeInjectBatchFailures(std::move(plain), 0).get(), raw) << "0 must mean off";
}

TEST(Faults, InjectedBatchFailuresCostOnlyTheirOwnRequests) {
  ChildServer server(PKSERVE_BINARY, {"--backend=cpu", "--threads=2", "--drain_timeout_s=5",
                                      "--inject_batch_failures=4"});
  ASSERT_GT(server.port(), 0);
  EXPECT_TRUE(absl::StrContains(server.log(), "TESTING ONLY")) << server.log();
  Tally tally;
  std::vector<std::thread> callers;
  const absl::Time until = absl::Now() + absl::Seconds(2);
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 engine(700 + t);
      auto stub = v1::SparseMemory::NewStub(NewChannel(server.target()));
      for (int i = 0; absl::Now() < until; ++i) {
        const v1::TopKRequest request = RandomRequest(
            Shapes()[engine() % Shapes().size()], 1 + engine() % 16, engine, absl::StrCat(t, i));
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
        v1::TopKResponse response;
        const grpc::Status status = stub->TopK(&context, request, &response);
        if (status.ok()) {
          if (std::string difference = CheckResponse(request, response); difference.empty()) {
            ++tally.ok;
          } else {
            tally.Wrong(difference);
          }
        } else if (status.error_code() == grpc::StatusCode::INTERNAL &&
                   absl::StrContains(status.error_message(), "injected")) {
          ++tally.internal;
        } else {
          tally.Wrong(absl::StrCat("status ", status.error_code(), " ", status.error_message()));
        }
      }
    });
  }
  // Streams go on past a failed request.
  std::thread stream(PipelinedStream, server.target(), 800, 8, absl::ZeroDuration(), true, 200,
                     std::ref(tally));
  for (std::thread& caller : callers) caller.join();
  stream.join();

  for (const std::string& wrong : tally.wrong) ADD_FAILURE() << wrong;
  std::printf("injected failures (every 4th batch): %lld requests OK, %lld INTERNAL\n",
              static_cast<long long>(tally.ok.load()),
              static_cast<long long>(tally.internal.load()));
  EXPECT_GT(tally.internal.load(), 0) << "no failure was injected";
  EXPECT_GT(tally.ok.load(), 3 * tally.internal.load() / 2)
      << "failing one batch in four cost more than its own requests";
  // The server is still up and healthy, and stops cleanly.
  ASSERT_TRUE(server.running()) << server.log();
  testing::Probe probe(NewChannel(server.target()));
  EXPECT_TRUE(probe.WaitForMore(1, absl::Seconds(10)));
  probe.Stop();
  server.Signal(SIGTERM);
  const std::optional<int> exit = server.WaitExit(absl::Seconds(15));
  ASSERT_TRUE(exit.has_value()) << server.log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << server.log();
}

}  // namespace
}  // namespace pkserve
