// Scale-out on one machine: three pkserve processes on loopback ports behind ONE client channel
// (round_robin over "ipv4:127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3", with
// ClientOptions::retry_unavailable and check_replica_health).
// Every replica gets traffic (each one's /metrics says so), and taking replicas away mid-run, one
// drained by SIGTERM and one killed by SIGKILL, loses no request: every call returns OK with the
// result pk::cpu::ParallelTopK gives for its rows. Loopback only; only the processes this test
// started are signalled.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "kernels/cpu/parallel_topk.h"
#include "server/validation.h"
#include "tests/server/pkserve_process.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::MakeProblem;
using testing::PkserveProcess;
using testing::RandomRequest;

constexpr int kReplicas = 3;
constexpr int kCallers = 4;

// A request and the answer the CPU implementation gives for it.
struct Case {
  v1::TopKRequest request;
  std::string values;
  std::string slots;
};

std::vector<Case> MakeCases() {
  const std::vector<pk::Problem> shapes = {
      MakeProblem({256, 256}, 16, pk::DType::kFloat32),
      MakeProblem({1024, 1024}, 32, pk::DType::kBFloat16),
      MakeProblem({32, 32, 32}, 8, pk::DType::kFloat32),
      MakeProblem({16, 16, 16, 16}, 64, pk::DType::kBFloat16),
  };
  pk::cpu::ParallelTopK reference(/*threads=*/2);
  std::mt19937_64 engine(2024);
  std::vector<Case> cases;
  for (int i = 0; i < 64; ++i) {
    const pk::Problem& problem = shapes[i % shapes.size()];
    Case item;
    item.request = RandomRequest(problem, 1 + engine() % 8, engine, absl::StrCat("case", i));
    const uint32_t rows = item.request.rows();
    item.values.resize(size_t{rows} * problem.out_value_bytes());
    std::vector<uint32_t> slots(size_t{rows} * problem.kk());
    reference.Run(problem, reinterpret_cast<const std::byte*>(item.request.scores().data()), rows,
                  reinterpret_cast<std::byte*>(item.values.data()), slots.data());
    item.slots.assign(reinterpret_cast<const char*>(slots.data()), slots.size() * sizeof(uint32_t));
    cases.push_back(std::move(item));
  }
  return cases;
}

// What the callers saw, all calls together.
struct Outcomes {
  std::atomic<int64_t> ok{0};
  std::mutex mutex;
  std::vector<std::string> failures;  // every call that was not OK with the reference answer

  void Fail(std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failures.size() < 20) failures.push_back(std::move(what));
  }
  size_t failure_count() {
    std::lock_guard<std::mutex> lock(mutex);
    return failures.size();
  }
};

void Caller(client::Client& client, const std::vector<Case>& cases, int seed,
            const std::atomic<bool>& stop, Outcomes& outcomes) {
  std::mt19937_64 engine(seed);
  while (!stop.load()) {
    const Case& item = cases[engine() % cases.size()];
    absl::StatusOr<v1::TopKResponse> response = client.TopK(item.request);
    if (!response.ok()) {
      outcomes.Fail(absl::StrCat(item.request.request_id(), ": ", response.status().ToString()));
      continue;
    }
    if (response->values() != item.values || response->slots() != item.slots ||
        response->request_id() != item.request.request_id()) {
      outcomes.Fail(absl::StrCat(item.request.request_id(),
                                 ": the answer differs from pk::cpu::ParallelTopK's"));
      continue;
    }
    ++outcomes.ok;
  }
}

// pkserve_requests_total{rpc="TopK",code="OK"} on the replica's /metrics; -1 if unreadable.
int64_t ScrapeTopKOk(int metrics_port) {
  httplib::Client http("127.0.0.1", metrics_port);
  http.set_connection_timeout(2);
  http.set_read_timeout(2);
  httplib::Result result = http.Get("/metrics");
  if (!result || result->status != 200) return -1;
  for (absl::string_view line : absl::StrSplit(result->body, '\n')) {
    constexpr absl::string_view kSeries = "pkserve_requests_total{rpc=\"TopK\",code=\"OK\"} ";
    if (!absl::ConsumePrefix(&line, kSeries)) continue;
    int64_t value = -1;
    return absl::SimpleAtoi(line, &value) ? value : -1;
  }
  return -1;
}

// Waits until `count` more calls have succeeded (or `timeout`); true if they did.
bool WaitForMoreOk(Outcomes& outcomes, int64_t count, absl::Duration timeout) {
  const int64_t target = outcomes.ok.load() + count;
  const absl::Time deadline = absl::Now() + timeout;
  while (outcomes.ok.load() < target && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  return outcomes.ok.load() >= target;
}

TEST(ScaleOut, ThreeReplicasShareTheLoadAndLosingTwoLosesNoRequest) {
  const absl::Time test_start = absl::Now();
  const std::vector<Case> cases = MakeCases();

  std::vector<std::unique_ptr<PkserveProcess>> replicas;
  for (int i = 0; i < kReplicas; ++i) {
    replicas.push_back(std::make_unique<PkserveProcess>(
        PKSERVE_BINARY,
        std::vector<std::string>{"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                                 "--backend=cpu", "--threads=1", "--drain_timeout_s=5",
                                 "--max_queue_delay_us=200"}));
  }
  std::vector<std::string> addresses;
  for (auto& replica : replicas) {
    ASSERT_TRUE(replica->WaitServing(absl::Seconds(15))) << "a replica did not start:\n"
                                                         << replica->log();
    addresses.push_back(replica->target());
  }

  // One channel over all three.
  client::ClientOptions options;
  options.target = absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
  options.load_balancing_policy = "round_robin";
  options.retry_unavailable = true;
  options.check_replica_health = true;
  options.deadline = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<client::Client>> connected = client::Client::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  client::Client& client = **connected;

  Outcomes outcomes;
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back(Caller, std::ref(client), std::cref(cases), 100 + i, std::cref(stop),
                         std::ref(outcomes));
  }
  // Whatever happens below, the callers stop before the test returns.
  struct StopCallers {
    std::atomic<bool>& stop;
    std::vector<std::thread>& callers;
    ~StopCallers() {
      stop = true;
      for (std::thread& caller : callers) {
        if (caller.joinable()) caller.join();
      }
    }
  } stop_callers{stop, callers};

  // 1. All three serve: each one's metrics count OK TopK calls, and together they count every
  // call answered so far (nothing was retried: nothing failed).
  ASSERT_TRUE(WaitForMoreOk(outcomes, 300, absl::Seconds(10)))
      << "only " << outcomes.ok.load() << " calls succeeded";
  std::vector<int64_t> served(kReplicas);
  for (int i = 0; i < kReplicas; ++i) {
    served[i] = ScrapeTopKOk(replicas[i]->metrics_port());
  }
  const int64_t answered_by_now = outcomes.ok.load();
  for (int i = 0; i < kReplicas; ++i) {
    EXPECT_GT(served[i], 0) << "replica " << i << " (" << addresses[i]
                            << ") got no traffic; its metrics say " << served[i];
  }
  const int64_t total = served[0] + served[1] + served[2];
  EXPECT_GE(total, 300);
  EXPECT_LE(total, answered_by_now + kCallers) << "replicas counted more calls than were made";
  for (int i = 0; i < kReplicas; ++i) {
    EXPECT_GE(served[i] * 10, total)
        << "round_robin left replica " << i << " with " << served[i] << " of " << total << " calls";
  }

  // 2. Replica 0 drains on SIGTERM while the calls go on; it exits 0 and no call fails.
  replicas[0]->Signal(SIGTERM);
  const std::optional<int> drained = replicas[0]->WaitExit(absl::Seconds(10));
  ASSERT_TRUE(drained.has_value()) << "replica 0 did not exit after SIGTERM:\n"
                                   << replicas[0]->log();
  EXPECT_TRUE(WIFEXITED(*drained) && WEXITSTATUS(*drained) == 0) << replicas[0]->log();
  ASSERT_TRUE(WaitForMoreOk(outcomes, 200, absl::Seconds(10)))
      << "calls stalled after replica 0 left";

  // 3. Replica 1 is killed outright, with calls in flight on it.
  const int64_t replica2_before = ScrapeTopKOk(replicas[2]->metrics_port());
  replicas[1]->Signal(SIGKILL);
  ASSERT_TRUE(replicas[1]->WaitExit(absl::Seconds(5)).has_value());
  ASSERT_TRUE(WaitForMoreOk(outcomes, 200, absl::Seconds(10)))
      << "calls stalled after replica 1 was killed";
  EXPECT_GT(ScrapeTopKOk(replicas[2]->metrics_port()), replica2_before + 100)
      << "the last replica did not take over the calls";

  stop = true;
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(outcomes.failure_count(), 0u) << "calls failed or came back wrong:\n"
                                          << absl::StrJoin(outcomes.failures, "\n");
  EXPECT_LT(absl::Now() - test_start, absl::Seconds(30));
  std::printf(
      "scaleout: %lld calls OK and exact, %zu not; the replicas served %lld, %lld and "
      "%lld before the first left\n",
      static_cast<long long>(outcomes.ok.load()), outcomes.failure_count(),
      static_cast<long long>(served[0]), static_cast<long long>(served[1]),
      static_cast<long long>(served[2]));
}

TEST(ScaleOut, TheServiceConfigHasWhatTheOptionsAskFor) {
  client::ClientOptions options;
  options.load_balancing_policy = "round_robin";
  EXPECT_EQ(client::ServiceConfigJson(options), "");
  options.retry_unavailable = true;
  std::string config = client::ServiceConfigJson(options);
  for (const char* part : {R"("loadBalancingConfig": [{"round_robin": {}}])",
                           R"("service": "pkserve.v1.SparseMemory")",
                           R"("retryableStatusCodes": ["UNAVAILABLE"])", R"("maxAttempts": 5)"}) {
    EXPECT_NE(config.find(part), std::string::npos) << part << " is not in " << config;
  }
  EXPECT_EQ(config.find("healthCheckConfig"), std::string::npos) << config;
  options.check_replica_health = true;
  config = client::ServiceConfigJson(options);
  EXPECT_NE(config.find(R"("healthCheckConfig": {"serviceName": "pkserve.v1.SparseMemory"})"),
            std::string::npos)
      << config;
  // gRPC checks health only under round_robin: asking for it elsewhere is a mistake.
  options.load_balancing_policy = "pick_first";
  EXPECT_EQ(client::Client::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkserve
