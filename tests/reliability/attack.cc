#include "tests/reliability/attack.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"
#include "tests/server/test_support.h"

namespace pkserve::testing {
namespace {

constexpr absl::Duration kCallEvery = absl::Milliseconds(20);  // 50 calls/s
constexpr absl::Duration kRecovery = absl::Seconds(2);
constexpr int64_t kMaxGrowthKib = 256 * 1024;
constexpr int64_t kBackWithinKib = 64 * 1024;
constexpr int kDrainTimeoutSeconds = 2;

}  // namespace

absl::Duration AttackDuration() {
  int seconds = 0;
  if (const char* set = std::getenv("PK_ATTACK_SECONDS");
      set != nullptr && absl::SimpleAtoi(set, &seconds) && seconds > 0) {
    return absl::Seconds(seconds);
  }
  return absl::Seconds(30);
}

AttackHarness::AttackHarness(const std::vector<std::string>& extra_flags,
                             const std::vector<std::string>& launcher,
                             const std::function<int(int)>& front) {
  std::vector<std::string> command = launcher;
  command.push_back(PKSERVE_BINARY);
  for (std::string flag :
       {"--address=127.0.0.1:0", "--metrics_address=", "--backend=cpu", "--threads=2"}) {
    command.push_back(flag);
  }
  command.push_back(absl::StrCat("--drain_timeout_s=", kDrainTimeoutSeconds));
  command.insert(command.end(), extra_flags.begin(), extra_flags.end());
  server_ = std::make_unique<PkserveProcess>(
      command[0], std::vector<std::string>(command.begin() + 1, command.end()));
  if (!server_->WaitServing(absl::Seconds(20), /*metrics=*/false)) {
    ADD_FAILURE() << "pkserve did not start; its log:\n" << server_->log();
    return;
  }
  port_ = front ? front(server_->port()) : server_->port();
  if (port_ <= 0) return;
  caller_ = std::thread([this] { CallWell(11); });
  sampler_ = std::thread([this] { SampleRss(); });
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up && Calls(absl::InfinitePast(), absl::InfiniteFuture()).second < 10) {
    absl::SleepFor(absl::Milliseconds(50));
  }
}

AttackHarness::~AttackHarness() {
  stop_ = true;
  if (caller_.joinable()) caller_.join();
  if (sampler_.joinable()) sampler_.join();
}

void AttackHarness::CallWell(uint64_t seed) {
  std::mt19937_64 engine(seed);
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  auto stub = v1::SparseMemory::NewStub(
      grpc::CreateCustomChannel(target(), grpc::InsecureChannelCredentials(), arguments));
  const pk::Problem problem = MakeProblem({1024, 1024}, 32, pk::DType::kBFloat16);
  absl::Time next = absl::Now();
  while (!stop_) {
    absl::SleepFor(next - absl::Now());
    next = std::max(next + kCallEvery, absl::Now());
    const v1::TopKRequest request = RandomRequest(problem, 4, engine);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    v1::TopKResponse response;
    Call call{absl::Now()};
    const grpc::Status status = stub->TopK(&context, request, &response);
    std::string wrong =
        status.ok() ? CheckResponse(request, response)
                    : absl::StrCat("status ", status.error_code(), " ", status.error_message());
    call.ok = wrong.empty();
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(call);
    if (!call.ok && first_failure_.empty()) first_failure_ = std::move(wrong);
  }
}

void AttackHarness::SampleRss() {
  while (!stop_) {
    const int64_t rss = server_->RssKib();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      peak_rss_kib_ = std::max(peak_rss_kib_, rss);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

std::string AttackHarness::target() const { return absl::StrCat("127.0.0.1:", port_); }

std::pair<int64_t, int64_t> AttackHarness::Calls(absl::Time from, absl::Time to) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::pair<int64_t, int64_t> counted{0, 0};
  for (const Call& call : calls_) {
    if (call.started < from || call.started >= to) continue;
    ++counted.first;
    if (call.ok) ++counted.second;
  }
  return counted;
}

void AttackHarness::RunAndCheck(const std::string& name, int threads, const Attacker& attacker,
                                const std::function<void()>& after_attack) {
  ASSERT_GT(port_, 0);
  ASSERT_GE(Calls(absl::InfinitePast(), absl::InfiniteFuture()).second, 10)
      << "the good caller got no answers before the attack; log:\n"
      << server_->log();
  const int64_t baseline_kib = server_->RssKib();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_rss_kib_ = baseline_kib;
    first_failure_.clear();
  }
  const auto run_attack = [&](absl::Duration duration) {
    std::atomic<bool> stop_attack{false};
    std::vector<std::thread> attackers;
    for (int i = 0; i < threads; ++i) {
      attackers.emplace_back([&attacker, &stop_attack] { attacker(stop_attack); });
    }
    absl::SleepFor(duration);
    stop_attack = true;
    for (std::thread& thread : attackers) thread.join();
  };
  const absl::Time attack_start = absl::Now();
  run_attack(AttackDuration());
  const absl::Time attack_end = absl::Now();
  absl::SleepFor(kRecovery + absl::Seconds(3));
  const auto [during, during_ok] = Calls(attack_start, attack_end);
  const auto [after, after_ok] = Calls(attack_end + kRecovery, absl::InfiniteFuture());
  int64_t peak_kib = 0;
  std::string first_failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_kib = peak_rss_kib_;
    first_failure = first_failure_;
  }
  int64_t after_kib = server_->RssKib();
  for (int i = 0; i < 100 && after_kib > baseline_kib + kBackWithinKib; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    after_kib = server_->RssKib();
  }
  std::cout << name << ": " << absl::ToDoubleSeconds(attack_end - attack_start)
            << " s of attack on " << threads << " threads; good caller " << during_ok << "/"
            << during << " OK during, " << after_ok << "/" << after << " OK from 2 s after; RSS "
            << baseline_kib / 1024 << " MiB before, peak " << peak_kib / 1024 << " MiB, "
            << after_kib / 1024 << " MiB after\n";
  EXPECT_GT(during, 0);
  EXPECT_GE(during_ok, during * 9 / 10) << "first failure: " << first_failure;
  EXPECT_GT(after, 0);
  EXPECT_EQ(after_ok, after) << "first failure: " << first_failure;
  EXPECT_LE(peak_kib - baseline_kib, kMaxGrowthKib);
  EXPECT_LE(after_kib - baseline_kib, kBackWithinKib) << "the server's memory did not come back";
  if (after_attack) after_attack();

  stop_ = true;  // the good caller and sampler end here: the drain would refuse them
  caller_.join();
  sampler_.join();
  std::atomic<bool> stop_attack{false};
  std::vector<std::thread> attackers;
  for (int i = 0; i < threads; ++i) {
    attackers.emplace_back([&attacker, &stop_attack] { attacker(stop_attack); });
  }
  absl::SleepFor(absl::Seconds(1));
  const absl::Time signalled = absl::Now();
  server_->Signal(SIGTERM);
  const std::optional<int> exit = server_->WaitExit(absl::Seconds(kDrainTimeoutSeconds + 10));
  const absl::Duration took = absl::Now() - signalled;
  stop_attack = true;
  for (std::thread& thread : attackers) thread.join();
  std::cout << name << ": SIGTERM under attack exited after " << absl::ToDoubleSeconds(took)
            << " s\n";
  ASSERT_TRUE(exit.has_value()) << "pkserve still runs; log:\n" << server_->log();
  EXPECT_LE(took, absl::Seconds(kDrainTimeoutSeconds + 1));
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << "wait status " << *exit;
}

}  // namespace pkserve::testing
