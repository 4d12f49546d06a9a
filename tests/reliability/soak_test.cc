// The soak: pkserve (a child process) under a mixed workload from four pkserve-bench processes at
// once (shapes of 2, 3 and 4 factors, both dtypes, unary calls and streams, 1 to 64 rows) for
// 30 s, or PK_SOAK_SECONDS. No request may fail, every sampled answer must equal the CPU
// implementation's (--verify), and memory must be flat: after the warm-up (a third of the run,
// 10 s to 5 min), the server's RSS stays within 10% of the most it reached late in the warm-up.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/server/pkserve_process.h"

namespace pkserve {
namespace {

using testing::ChildServer;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// One pkserve-bench process, its output in a file.
struct Bench {
  Bench(std::string name, std::vector<std::string> flags)
      : name(std::move(name)), flags(std::move(flags)) {}

  std::string name;
  std::vector<std::string> flags;
  std::string output;
  std::string json;
  pid_t pid = -1;
  std::optional<int> wait_status;
};

void Spawn(Bench& bench, const std::string& target, int seconds) {
  std::vector<std::string> args = {PKSERVE_BENCH,
                                   absl::StrCat("--target=", target),
                                   "--warmup=2",
                                   absl::StrCat("--duration=", seconds - 2),
                                   absl::StrCat("--json=", bench.json),
                                   "--deadline_s=30"};
  args.insert(args.end(), bench.flags.begin(), bench.flags.end());
  bench.pid = testing::SpawnChild(args, bench.output);
}

struct Sample {
  double seconds;
  int64_t rss_kib;
};

TEST(Soak, MixedWorkloadHasNoErrorsAndFlatMemory) {
  int seconds = 30;
  if (const char* text = std::getenv("PK_SOAK_SECONDS"); text != nullptr) {
    ASSERT_TRUE(absl::SimpleAtoi(text, &seconds) && seconds >= 10)
        << "PK_SOAK_SECONDS must be a number of seconds >= 10, got '" << text << "'";
  }
  const double warmup = std::clamp(seconds / 3.0, 10.0, 300.0);

  ChildServer server(PKSERVE_BINARY, {"--backend=cpu", "--threads=2", "--drain_timeout_s=10"});
  ASSERT_GT(server.port(), 0);
  const std::string scratch = absl::StrCat(::testing::TempDir(), "pkserve_soak_", getpid(), "_");
  std::vector<Bench> benches = {
      {"1024x1024 k64 bf16, 1-16 rows, unary x4",
       {"--widths=1024,1024", "--k=64", "--dtype=bf16", "--rows=1-16", "--mode=unary",
        "--concurrency=4", "--verify=200", "--seed=1"}},
      {"64x64x64 k32 f32, 1-64 rows, stream x2",
       {"--widths=64,64,64", "--k=32", "--dtype=f32", "--rows=1-64", "--mode=stream",
        "--concurrency=2", "--verify=200", "--seed=2"}},
      {"16x16x16x16 k256 f32, 1-4 rows, unary x2",
       {"--widths=16,16,16,16", "--k=256", "--dtype=f32", "--rows=1-4", "--mode=unary",
        "--concurrency=2", "--verify=100", "--seed=3"}},
      {"4096x4096 k16 bf16, 1-2 rows, stream x1",
       {"--widths=4096,4096", "--k=16", "--dtype=bf16", "--rows=1-2", "--mode=stream",
        "--concurrency=1", "--verify=50", "--seed=4"}},
  };
  for (size_t i = 0; i < benches.size(); ++i) {
    benches[i].output = absl::StrCat(scratch, i, ".out");
    benches[i].json = absl::StrCat(scratch, i, ".json");
    Spawn(benches[i], server.target(), seconds);
  }

  // The server's RSS every half second until every bench has exited (or far past its time).
  std::vector<Sample> samples;
  const absl::Time start = absl::Now();
  const absl::Time give_up = start + absl::Seconds(seconds + 120);
  size_t running = benches.size();
  while (running > 0 && absl::Now() < give_up) {
    samples.push_back({absl::ToDoubleSeconds(absl::Now() - start), server.RssKib()});
    running = 0;
    for (Bench& bench : benches) {
      if (bench.pid <= 0 || bench.wait_status.has_value()) continue;
      int status = 0;
      if (waitpid(bench.pid, &status, WNOHANG) == bench.pid) {
        bench.wait_status = status;
      } else {
        ++running;
      }
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  for (Bench& bench : benches) {
    if (bench.pid > 0 && !bench.wait_status.has_value()) {
      ADD_FAILURE() << bench.name << ": pkserve-bench did not finish; killing it";
      kill(bench.pid, SIGKILL);  // our own child only
      waitpid(bench.pid, nullptr, 0);
    }
  }

  // Zero errors: every bench exited 0 (its --verify passed) and counted no failed request.
  for (const Bench& bench : benches) {
    const std::string output = ReadFile(bench.output);
    const std::string json = ReadFile(bench.json);
    EXPECT_TRUE(bench.wait_status.has_value() && WIFEXITED(*bench.wait_status) &&
                WEXITSTATUS(*bench.wait_status) == 0)
        << bench.name << ": pkserve-bench failed; its output:\n"
        << output;
    EXPECT_NE(json.find("\"errors\": {}"), std::string::npos)
        << bench.name << ": requests failed: " << json;
    EXPECT_EQ(json.find("\"errors\": {\""), std::string::npos)
        << bench.name << ": requests failed: " << json;
    EXPECT_NE(output.find("bit for bit"), std::string::npos)
        << bench.name << ": no answers were verified; output:\n"
        << output;
    std::printf("%s: %s", bench.name.c_str(), json.empty() ? "(no JSON)\n" : json.c_str());
    std::remove(bench.output.c_str());
    std::remove(bench.json.c_str());
  }

  // Flat memory after the warm-up.
  int64_t warm_kib = 0;
  int64_t after_kib = 0;
  for (const Sample& sample : samples) {
    if (sample.rss_kib <= 0) continue;
    if (sample.seconds >= warmup / 2 && sample.seconds <= warmup) {
      warm_kib = std::max(warm_kib, sample.rss_kib);
    } else if (sample.seconds > warmup && sample.seconds <= seconds) {
      after_kib = std::max(after_kib, sample.rss_kib);
    }
  }
  std::vector<std::string> trace;
  const size_t every = std::max<size_t>(1, samples.size() / 12);
  for (size_t i = 0; i < samples.size(); i += every) {
    trace.push_back(
        absl::StrCat(static_cast<int>(samples[i].seconds), "s:", samples[i].rss_kib / 1024, "M"));
  }
  std::printf("soak %d s (warm-up %.0f s): server RSS %s\n", seconds, warmup,
              absl::StrJoin(trace, " ").c_str());
  std::printf(
      "{\"test\":\"soak\",\"seconds\":%d,\"warm_rss_kib\":%lld,\"after_rss_kib\":%lld,"
      "\"growth\":%.3f,\"peak_rss_kib\":%lld}\n",
      seconds, static_cast<long long>(warm_kib), static_cast<long long>(after_kib),
      warm_kib > 0 ? static_cast<double>(after_kib) / warm_kib - 1 : 0.0,
      static_cast<long long>(server.PeakRssKib()));
  ASSERT_GT(warm_kib, 0) << "no RSS sample in the warm-up";
  ASSERT_GT(after_kib, 0) << "no RSS sample after the warm-up";
  EXPECT_LE(after_kib, warm_kib * 11 / 10)
      << "the server's RSS grew " << (after_kib - warm_kib) << " KiB (from " << warm_kib
      << " KiB) after the warm-up";

  ASSERT_TRUE(server.running()) << server.log();
  server.Signal(SIGTERM);
  const std::optional<int> exit = server.WaitExit(absl::Seconds(20));
  ASSERT_TRUE(exit.has_value()) << server.log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << server.log();
}

}  // namespace
}  // namespace pkserve
