// Overload: ten times the load the server can compute. What it cannot queue is refused with
// RESOURCE_EXHAUSTED at once, its memory stays bounded (the child's peak RSS, VmHWM), and what it
// accepts keeps its latency bound (the queue delay plus the compute of the batches ahead of it).
// And deadlines shorter than the queue delay: such requests are dropped before compute, never
// computed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "server/cpu_executor.h"
#include "tests/reliability/load.h"
#include "tests/reliability/raw_http2.h"
#include "tests/server/pkserve_process.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::CallRecord;
using testing::ChildServer;
using testing::Load;
using testing::MakeProblem;
using testing::Quantile;
using testing::RandomRequest;

std::vector<std::shared_ptr<grpc::Channel>> Channels(const std::string& target, int count) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < count; ++i) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(-1);
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
    channels.push_back(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));
  }
  return channels;
}

// GET /metrics from the server's metrics port; the text, or "" on failure.
std::string ScrapeMetrics(int port) {
  std::unique_ptr<testing::http2::Connection> connection = testing::http2::Connection::Open(port);
  if (connection == nullptr) return "";
  connection->Send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  std::string response;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!connection->closed_by_peer() && absl::Now() < deadline) {
    response += connection->ReadFor(absl::Milliseconds(200));
  }
  return response;
}

// The value of the series `name` (with its labels, as printed) in a Prometheus text, or -1.
int64_t MetricValue(const std::string& text, const std::string& name) {
  const std::string prefix = absl::StrCat("\n", name, " ");
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  return testing::NumberAfter(text.substr(at), prefix);
}

// The settings of the overloaded server: one compute thread, a queue of two batches.
constexpr int kMaxBatchRows = 256;
constexpr int kMaxQueuedRows = 512;
constexpr int kRowsPerRequest = 64;
constexpr int kMaxQueueDelayUs = 2000;
constexpr int kMaxInFlight = 2;  // the CPU executor's

TEST(Overload, TenTimesCapacityIsRefusedFastWithBoundedMemoryAndLatency) {
  ChildServer server(PKSERVE_BINARY, {"--backend=cpu", "--threads=1", "--drain_timeout_s=10",
                                      absl::StrCat("--max_batch_rows=", kMaxBatchRows),
                                      absl::StrCat("--max_queued_rows=", kMaxQueuedRows),
                                      absl::StrCat("--max_rows_per_request=", kRowsPerRequest),
                                      absl::StrCat("--max_queue_delay_us=", kMaxQueueDelayUs),
                                      // The shared queue's bound is what this test checks: no
                                      // per-caller share below it (CallerShare tests that).
                                      absl::StrCat("--max_caller_queued_rows=", kMaxQueuedRows * 4),
                                      "--metrics_address=127.0.0.1:0"});
  ASSERT_GT(server.port(), 0);
  const int metrics_port =
      static_cast<int>(testing::NumberAfter(server.log(), "metrics on http://127.0.0.1:"));
  ASSERT_GT(metrics_port, 0) << server.log();
  // Much compute for few bytes (a 256-byte row, 256 slots out of 65536), so that the server, not
  // the transport or the test's own calls, is what runs out. Under a sanitizer the kernel slows
  // down far more than the rest (a 256-row batch of that takes seconds): a lighter shape there,
  // but not so light that ten times its capacity outruns the instrumented client's calls (k=32
  // there: 336 requests/s, of which the CI host's client offered only 4.3 times).
  const pk::Problem problem = testing::Sanitized()
                                  ? MakeProblem({128, 128}, 128, pk::DType::kFloat32)
                                  : MakeProblem({16, 16, 16, 16}, 256, pk::DType::kFloat32);
  std::mt19937_64 engine(99);
  std::vector<v1::TopKRequest> requests;
  for (int i = 0; i < 8; ++i) {
    requests.push_back(RandomRequest(problem, kRowsPerRequest, engine, absl::StrCat("r", i)));
  }
  Load load(Channels(server.target(), 4), &requests, absl::Seconds(20), /*check_answers=*/true);

  // What it can do: a closed loop that keeps the queue full but never over it.
  const absl::Duration measure_for = absl::Seconds(2);
  load.RunClosedLoop(kMaxQueuedRows / kRowsPerRequest, measure_for);
  std::vector<CallRecord> measured = load.TakeRecords();
  int64_t measured_ok = 0;
  for (const CallRecord& record : measured) {
    ASSERT_TRUE(record.code == grpc::StatusCode::OK ||
                record.code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << "status " << record.code << " while measuring capacity";
    if (record.code == grpc::StatusCode::OK) {
      ASSERT_TRUE(record.correct) << "a wrong answer while measuring capacity";
      ++measured_ok;
    }
  }
  const double capacity = measured_ok / absl::ToDoubleSeconds(measure_for);
  ASSERT_GT(capacity, testing::Sanitized() ? 2 : 10) << "the server computed almost nothing";
  const int64_t warm_rss_kib = server.RssKib();
  const std::string metrics_before = ScrapeMetrics(metrics_port);

  // Ten times that, in an open loop.
  const absl::Duration overload_for = absl::Seconds(testing::Sanitized() ? 3 : 4);
  load.RunOpenLoop(10 * capacity, overload_for, /*max_outstanding=*/4000);
  const double offered = load.calls_started() - static_cast<double>(measured.size());
  const std::vector<CallRecord> overload = load.TakeRecords();
  const int64_t peak_rss_kib = server.PeakRssKib();
  const std::string metrics_after = ScrapeMetrics(metrics_port);

  std::map<grpc::StatusCode, int64_t> codes;
  std::vector<double> refused_ms, accepted_queue_ms, accepted_compute_ms, accepted_latency_ms;
  int64_t wrong = 0;
  for (const CallRecord& record : overload) {
    ++codes[record.code];
    if (record.code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      refused_ms.push_back(absl::ToDoubleMilliseconds(record.latency));
    } else if (record.code == grpc::StatusCode::OK) {
      if (!record.correct) ++wrong;
      accepted_queue_ms.push_back(record.timing.queue_us() / 1000.0);
      accepted_compute_ms.push_back(record.timing.compute_us() / 1000.0);
      accepted_latency_ms.push_back(absl::ToDoubleMilliseconds(record.latency));
    }
  }
  const int64_t accepted = codes[grpc::StatusCode::OK];
  const int64_t refused = codes[grpc::StatusCode::RESOURCE_EXHAUSTED];
  // An accepted request waits for the batches in the executor and those queued ahead of it, plus
  // the queue delay; the slack is for scheduling on a busy host.
  const double batch_ms = Quantile(accepted_compute_ms, 0.99);
  const double queue_bound_ms = kMaxQueueDelayUs / 1000.0 +
                                (kMaxInFlight + kMaxQueuedRows / kMaxBatchRows + 1) * batch_ms +
                                (testing::Sanitized() ? 200 : 25);
  const double offered_per_s = offered / absl::ToDoubleSeconds(overload_for);
  std::printf(
      "overload: capacity %.0f req/s (%d rows each); offered %.0f req/s (%.1fx) for %.0f s: "
      "%lld accepted, %lld RESOURCE_EXHAUSTED\n"
      "  refused in p50 %.2f ms, p99 %.2f ms, max %.2f ms\n"
      "  accepted: server queue p50 %.2f ms, p99 %.2f ms, max %.2f ms (bound %.1f ms); batch "
      "compute p99 %.2f ms; round trip p99 %.2f ms, max %.2f ms\n"
      "  server RSS: %lld KiB warm, peak %lld KiB\n",
      capacity, kRowsPerRequest, offered_per_s, offered_per_s / capacity,
      absl::ToDoubleSeconds(overload_for), static_cast<long long>(accepted),
      static_cast<long long>(refused), Quantile(refused_ms, 0.5), Quantile(refused_ms, 0.99),
      Quantile(refused_ms, 1.0), Quantile(accepted_queue_ms, 0.5),
      Quantile(accepted_queue_ms, 0.99), Quantile(accepted_queue_ms, 1.0), queue_bound_ms, batch_ms,
      Quantile(accepted_latency_ms, 0.99), Quantile(accepted_latency_ms, 1.0),
      static_cast<long long>(warm_rss_kib),
      static_cast<long long>(peak_rss_kib));
  std::printf(
      "{\"test\":\"overload\",\"capacity_rps\":%.0f,\"offered_rps\":%.0f,\"accepted\":%lld,"
      "\"refused\":%lld,\"refused_p99_ms\":%.2f,\"accepted_queue_p99_ms\":%.2f,"
      "\"queue_bound_ms\":%.1f,\"warm_rss_kib\":%lld,\"peak_rss_kib\":%lld}\n",
      capacity, offered_per_s, static_cast<long long>(accepted), static_cast<long long>(refused),
      Quantile(refused_ms, 0.99), Quantile(accepted_queue_ms, 0.99), queue_bound_ms,
      static_cast<long long>(warm_rss_kib), static_cast<long long>(peak_rss_kib));

  EXPECT_GT(offered_per_s, 6 * capacity) << "the test could not offer the overload it meant to";
  EXPECT_EQ(accepted + refused, static_cast<int64_t>(overload.size()))
      << "codes other than OK and RESOURCE_EXHAUSTED under overload";
  EXPECT_EQ(wrong, 0) << "accepted requests got wrong answers";
  EXPECT_GT(refused, static_cast<int64_t>(overload.size()) / 2)
      << "ten times the capacity should be mostly refused";
  EXPECT_GT(accepted, 0);
  // A refusal never waits in the queue. Seen from this client the times also hold the client's
  // own backlog: ten times more calls than the server can answer, sent and received on the same
  // 2 cores as the server. That backlog alone reaches 1-1.5 s at p99 on a quiet host and over 3 s
  // on a busy CI host, and it delays accepted and refused calls alike. So the client-side checks
  // compare refusals with accepted answers, which wait for the queue and a batch as well: most
  // refusals come before an accepted answer's tail, and the refusals' tail is within the slowest
  // accepted answer plus the queue's own bound. (Not 1.25 times the accepted p99, as before: with
  // ten refusals to an acceptance the two p99s sample the backlog's tail unevenly, and on a busy
  // CI host the refusals' p99 came out 2 567 ms against 2 477, with every server-side check met.)
  // The queue's bound itself is checked server-side below, where the client's backlog does not
  // count.
  EXPECT_LT(Quantile(refused_ms, 0.5), Quantile(accepted_latency_ms, 0.99))
      << "RESOURCE_EXHAUSTED must come at once, not after a wait";
  EXPECT_LT(Quantile(refused_ms, 0.99), Quantile(accepted_latency_ms, 1.0) + queue_bound_ms)
      << "RESOURCE_EXHAUSTED must come at once, not after a wait";
  // Server-side, where the client's scheduling does not count: the requests answered within
  // 5 ms of arrival (an accepted one waits for a batch of 256 rows to be computed first) are at
  // least 95% as many as the refusals.
  const std::string fast_bucket = absl::StrCat("pkserve_request_duration_seconds_bucket{le=\"",
                                               testing::Sanitized() ? "0.05" : "0.005", "\"}");
  const std::string refusals = "pkserve_requests_total{rpc=\"TopK\",code=\"RESOURCE_EXHAUSTED\"}";
  const int64_t fast =
      MetricValue(metrics_after, fast_bucket) - MetricValue(metrics_before, fast_bucket);
  const int64_t refused_server = MetricValue(metrics_after, refusals) -
                                 std::max<int64_t>(0, MetricValue(metrics_before, refusals));
  std::printf("  server side: %lld refusals, %lld requests answered within %s s of arrival\n",
              static_cast<long long>(refused_server), static_cast<long long>(fast),
              testing::Sanitized() ? "0.05" : "0.005");
  EXPECT_EQ(refused_server, refused) << "the server's count of refusals differs from the callers'";
  EXPECT_GE(fast, refused_server * 95 / 100)
      << "RESOURCE_EXHAUSTED must come at once, not after a wait (server-side durations)";
  EXPECT_LT(Quantile(accepted_queue_ms, 0.99), queue_bound_ms)
      << "accepted requests waited longer than the queue delay plus the batches ahead";
  // Warm RSS plus a bounded amount: the queue holds 512 rows, the calls in flight their bytes.
  const int64_t rss_bound_kib = testing::Sanitized() ? 1024 * 1024 : 160 * 1024;
  EXPECT_LT(peak_rss_kib - warm_rss_kib, rss_bound_kib)
      << "peak RSS " << peak_rss_kib << " KiB, warm " << warm_rss_kib << " KiB";

  // The server's own count agrees: every accepted request answered, every refusal counted.
  server.Signal(SIGTERM);
  const std::optional<int> exit = server.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(exit.has_value()) << server.log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << server.log();
  const std::string log = server.log();
  EXPECT_EQ(testing::NumberAfter(log, "drained: "), measured_ok + accepted) << log;
  const size_t batches_at = log.find("rows computed, ");
  ASSERT_NE(batches_at, std::string::npos) << log;
  int64_t measured_refused = static_cast<int64_t>(measured.size()) - measured_ok;
  EXPECT_EQ(testing::NumberAfter(log.substr(batches_at), "rows computed, "),
            refused + measured_refused)
      << log;
}

// An executor that counts the rows it computes of each shape (by factor widths).
class CountingExecutor final : public Executor {
 public:
  explicit CountingExecutor(std::unique_ptr<Executor> inner) : inner_(std::move(inner)) {}
  std::string_view backend() const override { return inner_->backend(); }
  std::vector<std::string> devices() const override { return inner_->devices(); }
  int max_in_flight() const override { return inner_->max_in_flight(); }
  size_t max_batch_rows(const pk::Problem& problem) const override {
    return inner_->max_batch_rows(problem);
  }
  absl::StatusOr<std::unique_ptr<Batch>> NewBatch(const pk::Problem& problem,
                                                  size_t rows) override {
    return inner_->NewBatch(problem, rows);
  }
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override {
    {
      absl::MutexLock lock(&mu_);
      rows_[batch->problem().widths[0]] += batch->rows();
    }
    inner_->Submit(std::move(batch), std::move(done));
  }
  // Rows computed of shapes whose first factor width is `width`.
  uint64_t rows_with_first_width(uint32_t width) const {
    absl::MutexLock lock(&mu_);
    auto it = rows_.find(width);
    return it == rows_.end() ? 0 : it->second;
  }

 private:
  std::unique_ptr<Executor> inner_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, uint64_t> rows_ ABSL_GUARDED_BY(mu_);
};

TEST(Overload, DeadlinesShorterThanTheQueueDelayAreDroppedAndNeverComputed) {
  ServerConfig config = testing::LoopbackConfig();
  config.backend = Backend::kCpu;
  config.threads = 1;
  config.max_batch_rows = 256;
  config.max_rows_per_request = 16 * config.max_batch_rows;
  config.max_queue_delay = absl::Milliseconds(200);
  CpuExecutor::Options cpu;
  cpu.threads = 1;
  auto counting = std::make_unique<CountingExecutor>(std::make_unique<CpuExecutor>(cpu));
  CountingExecutor* counter = counting.get();
  std::unique_ptr<Server> server = testing::StartServer(config, std::move(counting));
  ASSERT_NE(server, nullptr);
  const std::string target = absl::StrCat("127.0.0.1:", server->port());

  // Background: callers of a heavy shape (first width 1024) whose requests span 16 batches each,
  // so that rows are always queued and the executor is never idle (an idle executor takes any
  // request at once): a request of another shape waits for the queue delay (200 ms) to go out.
  std::mt19937_64 engine(5);
  std::vector<v1::TopKRequest> heavy;
  for (int i = 0; i < 2; ++i) {
    heavy.push_back(RandomRequest(MakeProblem({1024, 1024}, 256, pk::DType::kBFloat16),
                                  16 * config.max_batch_rows, engine));
  }
  Load background(Channels(target, 2), &heavy, absl::Seconds(30), /*check_answers=*/false);
  std::thread busy([&] { background.RunClosedLoop(3, absl::Seconds(5)); });
  absl::SleepFor(absl::Milliseconds(500));

  // Short deadlines (25 ms, far under the queue delay) on a quiet shape (first width 64).
  const pk::Problem quiet = MakeProblem({64, 64}, 8, pk::DType::kFloat32);
  auto stub = v1::SparseMemory::NewStub(testing::Connect(*server));
  int ok = 0;
  int exceeded = 0;
  int sent = 0;
  for (; sent < 100; ++sent) {
    const v1::TopKRequest request = RandomRequest(quiet, 1, engine);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(25)));
    v1::TopKResponse response;
    const grpc::Status status = stub->TopK(&context, request, &response);
    if (status.ok()) {
      EXPECT_EQ(testing::CheckResponse(request, response), "");
      ++ok;
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
      ++exceeded;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  busy.join();
  for (const CallRecord& record : background.TakeRecords()) {
    EXPECT_EQ(record.code, grpc::StatusCode::OK) << "a background request failed";
  }
  // Let the sweep (every 20 ms) finish with the last short request.
  absl::SleepFor(absl::Milliseconds(100));
  const BatcherStats stats = server->batcher_stats();
  const uint64_t computed = counter->rows_with_first_width(64);
  std::printf(
      "short deadlines: %d sent, %d answered in time, %d DEADLINE_EXCEEDED; the server dropped "
      "%llu unrun and computed %llu rows of their shape\n",
      sent, ok, exceeded, static_cast<unsigned long long>(stats.requests_dropped_deadline),
      static_cast<unsigned long long>(computed));
  EXPECT_GT(exceeded, sent / 2) << "the executor was idle too often for the test to mean much";
  // Each short request (one row) was computed once, dropped unrun, or expired before it reached
  // the batcher, and every one answered in time was computed. A request can be computed and still
  // miss its deadline: its batch left before the deadline and the answer came after (CI of
  // 03eec28: 2 of 100, computed 8 against 6 answered). Those are few; every other expired one was
  // dropped, never computed.
  const uint64_t dropped = stats.requests_dropped_deadline + stats.requests_dropped_cancelled;
  EXPECT_LE(computed + dropped, static_cast<uint64_t>(sent));
  EXPECT_GE(computed, static_cast<uint64_t>(ok));
  EXPECT_LE(computed - std::min(computed, static_cast<uint64_t>(ok)), static_cast<uint64_t>(exceeded / 4))
      << "expired requests were computed instead of dropped";
  EXPECT_GE(stats.requests_dropped_deadline, 1u);
  EXPECT_LE(dropped, static_cast<uint64_t>(exceeded));
  server->Drain(absl::Seconds(5));
}

}  // namespace
}  // namespace pkserve
