// pkserve-bench as a user runs it, against servers on loopback: an in-process pkserve (CPU
// backend) and in-process echo servers (the baseline's, which answers zeros: a wrong server).
// Checks the --json file's schema and sanity (the same objects as the JSON lines on stdout, each
// with its workload), the exit past --max_error_fraction and the verdict line, that --verify
// passes against pkserve and fails against the echo, that open-loop mode keeps its rate when the
// server is slow, --help, and usage errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bench/echo_server.h"
#include "client/bench/histogram.h"
#include "tests/server/test_support.h"

#include "tests/server/pkserve_process.h"

namespace pkserve {
namespace {

// ---------------------------------------------------------------------------------------------
// A minimal JSON reader: enough for the bench's output (objects, arrays, numbers, strings).

struct Json {
  enum class Type { kNull, kNumber, kString, kArray, kObject } type = Type::kNull;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* Find(const std::string& key) const {
    for (const auto& [name, value] : members) {
      if (name == key) return &value;
    }
    return nullptr;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string text) : text_(std::move(text)) {}

  // Parses the whole text; false (with `error()`) on anything malformed or trailing.
  bool Parse(Json* out) {
    if (!Value(out)) return false;
    SkipSpace();
    if (pos_ != text_.size()) return Fail("text after the value");
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool Fail(const std::string& what) {
    error_ = absl::StrCat(what, " at offset ", pos_);
    return false;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Value(Json* out) {
    SkipSpace();
    if (pos_ >= text_.size()) return Fail("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return Object(out);
    if (c == '[') return Array(out);
    if (c == '"') {
      out->type = Json::Type::kString;
      return String(&out->text);
    }
    return Number(out);
  }
  bool String(std::string* out) {
    ++pos_;  // the opening quote
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\') return Fail("escapes are not expected");
      out->push_back(text_[pos_++]);
    }
    if (pos_ >= text_.size()) return Fail("unterminated string");
    ++pos_;
    return true;
  }
  bool Number(Json* out) {
    const char* begin = text_.c_str() + pos_;
    char* end = nullptr;
    out->number = std::strtod(begin, &end);
    if (end == begin) return Fail("expected a value");
    out->type = Json::Type::kNumber;
    pos_ += static_cast<size_t>(end - begin);
    return true;
  }
  bool Array(Json* out) {
    out->type = Json::Type::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') return ++pos_, true;
    while (true) {
      out->items.emplace_back();
      if (!Value(&out->items.back())) return false;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') return ++pos_, true;
      return Fail("expected , or ]");
    }
  }
  bool Object(Json* out) {
    out->type = Json::Type::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') return ++pos_, true;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Fail("expected a key");
      std::string key;
      if (!String(&key)) return false;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Fail("expected :");
      ++pos_;
      Json value;
      if (!Value(&value)) return false;
      out->members.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') return ++pos_, true;
      return Fail("expected , or }");
    }
  }

  std::string text_;
  size_t pos_ = 0;
  std::string error_;
};

// ---------------------------------------------------------------------------------------------
// Running the binary.

using BenchRun = testing::CommandRun;

BenchRun RunBench(const std::string& arguments) {
  return testing::RunCommand(absl::StrCat(PKSERVE_BENCH, " ", arguments));
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/pkbench_", getpid(), "_", name);
}

Json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  Json json;
  JsonReader reader(text.str());
  EXPECT_TRUE(reader.Parse(&json)) << path << ": " << reader.error() << "\n" << text.str();
  return json;
}

std::unique_ptr<bench::EchoServer> StartEcho(absl::Duration delay = absl::ZeroDuration()) {
  bench::EchoOptions options;
  options.delay = delay;
  absl::StatusOr<std::unique_ptr<bench::EchoServer>> echo = bench::EchoServer::Start(options);
  EXPECT_TRUE(echo.ok()) << echo.status();
  return echo.ok() ? *std::move(echo) : nullptr;
}

double NumberAt(const Json& object, const std::string& key) {
  const Json* value = object.Find(key);
  EXPECT_NE(value, nullptr) << "missing key '" << key << "'";
  if (value == nullptr) return -1;
  EXPECT_EQ(value->type, Json::Type::kNumber) << "'" << key << "' is not a number";
  return value->number;
}

// Checks one run's figures (a level, or its baseline) against the schema; `rows` is the fixed
// rows per request.
void ExpectSaneFigures(const Json& figures, double rows, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(figures.type, Json::Type::kObject);
  const double requests = NumberAt(figures, "requests_per_s");
  const double rows_per_s = NumberAt(figures, "rows_per_s");
  const double mb = NumberAt(figures, "mb_per_s");
  EXPECT_GT(requests, 0);
  EXPECT_NEAR(rows_per_s, requests * rows, 1e-6 * rows_per_s + 0.01)
      << "rows_per_s should be requests_per_s x " << rows;
  // 1024x1024 bf16 k=64: 4096 score bytes and 64 x 6 answer bytes a row.
  EXPECT_NEAR(mb, rows_per_s * (4096 + 64 * 6) / 1e6, 1e-3 * mb + 0.01);
  const Json* latency = figures.Find("latency_us");
  ASSERT_NE(latency, nullptr) << "missing latency_us";
  double previous = 0;
  for (const char* key : {"p50", "p90", "p99", "p999", "max"}) {
    const double value = NumberAt(*latency, key);
    EXPECT_GT(value, 0) << key;
    EXPECT_GE(value, previous) << key << " below the lower percentile";
    EXPECT_LT(value, 10e6) << key << " over 10 s";
    previous = value;
  }
  const Json* errors = figures.Find("errors");
  ASSERT_NE(errors, nullptr) << "missing errors";
  EXPECT_EQ(errors->type, Json::Type::kObject);
  EXPECT_TRUE(errors->members.empty()) << "errors on loopback: " << errors->members.front().first;
}

class BenchRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartServer(testing::LoopbackConfig());
    ASSERT_NE(server_, nullptr);
    target_ = absl::StrCat("--target=127.0.0.1:", server_->port());
  }

  std::unique_ptr<Server> server_;
  std::string target_;
};

// Whether two JSON values are the same (members in the same order).
bool SameJson(const Json& a, const Json& b) {
  if (a.type != b.type || a.number != b.number || a.text != b.text ||
      a.items.size() != b.items.size() || a.members.size() != b.members.size()) {
    return false;
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!SameJson(a.items[i], b.items[i])) return false;
  }
  for (size_t i = 0; i < a.members.size(); ++i) {
    if (a.members[i].first != b.members[i].first ||
        !SameJson(a.members[i].second, b.members[i].second)) {
      return false;
    }
  }
  return true;
}

std::string TextAt(const Json& object, const std::string& key) {
  const Json* value = object.Find(key);
  EXPECT_NE(value, nullptr) << "missing key '" << key << "'";
  if (value == nullptr) return "";
  EXPECT_EQ(value->type, Json::Type::kString) << "'" << key << "' is not a string";
  return value->text;
}

// The JSON lines of a run's output (each result's object), parsed.
std::vector<Json> JsonLines(const std::string& output) {
  std::vector<Json> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("{\"server\"", 0) != 0) continue;
    JsonReader reader(line);
    lines.emplace_back();
    EXPECT_TRUE(reader.Parse(&lines.back())) << reader.error() << "\n" << line;
  }
  return lines;
}

std::string LastLine(const std::string& output) {
  std::string trimmed = output;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  const size_t newline = trimmed.rfind('\n');
  return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

TEST_F(BenchRunTest, JsonFileAndJsonLinesShareOneSchemaWithTheWorkloadForEveryResult) {
  const std::string json_path = TempPath("levels.json");
  const BenchRun run = RunBench(absl::StrCat(
      target_, " --widths=1024,1024 --k=64 --dtype=bf16 --rows=4 --concurrency=1,4 --warmup=0.2",
      " --duration=0.5 --baseline=echo --verify=5 --json=", json_path));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "1024x1024 k=64 bfloat16, rows 4, unary"))
      << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "1 connection, up to ")) << run.output;
  // The comparison with the echo has column labels of its own.
  const size_t ratios = run.output.find(
      "| level | rows/s, pkserve / echo | p50 us, pkserve - echo | p90 us, pkserve - echo | "
      "p99 us, pkserve - echo |");
  ASSERT_NE(ratios, std::string::npos) << run.output;
  EXPECT_NE(run.output.find("| concurrency 4 | ", ratios), std::string::npos) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "| pkserve / echo |")) << run.output;
  EXPECT_EQ(LastLine(run.output).rfind("pkserve-bench: PASS: 2 levels", 0), 0u) << run.output;

  const Json results = ReadJsonFile(json_path);
  ASSERT_EQ(results.type, Json::Type::kArray);
  const std::vector<Json> lines = JsonLines(run.output);
  ASSERT_EQ(results.items.size(), 4u) << "pkserve and echo at each of 2 levels";
  ASSERT_EQ(lines.size(), results.items.size());
  const double concurrency[] = {1, 1, 4, 4};
  const char* server[] = {"pkserve", "echo", "pkserve", "echo"};
  for (size_t i = 0; i < results.items.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("result ", i));
    const Json& result = results.items[i];
    EXPECT_TRUE(SameJson(result, lines[i])) << "the --json file and the stdout line differ";
    EXPECT_EQ(TextAt(result, "server"), server[i]);
    EXPECT_EQ(NumberAt(result, "concurrency"), concurrency[i]);
    ExpectSaneFigures(result, 4, "figures");
    const Json* workload = result.Find("workload");
    ASSERT_NE(workload, nullptr);
    const Json* widths = workload->Find("widths");
    ASSERT_NE(widths, nullptr);
    ASSERT_EQ(widths->items.size(), 2u);
    EXPECT_EQ(widths->items[0].number, 1024);
    EXPECT_EQ(widths->items[1].number, 1024);
    EXPECT_EQ(NumberAt(*workload, "k"), 64);
    EXPECT_EQ(TextAt(*workload, "dtype"), "bfloat16");
    const Json* rows = workload->Find("rows");
    ASSERT_NE(rows, nullptr);
    EXPECT_EQ(NumberAt(*rows, "min"), 4);
    EXPECT_EQ(NumberAt(*rows, "max"), 4);
    EXPECT_EQ(TextAt(*workload, "mode"), "unary");
    EXPECT_EQ(TextAt(*workload, "loop"), "closed");
    EXPECT_EQ(NumberAt(*workload, "connections"), 1);
    EXPECT_GE(NumberAt(*workload, "threads"), 1);
    EXPECT_EQ(NumberAt(*workload, "duration_s"), 0.5);
    EXPECT_EQ(TextAt(*workload, "target"), target_.substr(std::string("--target=").size()));
    EXPECT_GT(NumberAt(result, "bench_cpu_cores"), 0);
    if (i % 2 == 0) {  // pkserve reports its batches and times; the echo has none
      EXPECT_NE(result.Find("batch_rows"), nullptr);
      EXPECT_NE(result.Find("server_us"), nullptr);
      EXPECT_GE(NumberAt(result, "executor_busy"), 0);
    }
  }
  std::remove(json_path.c_str());
}

TEST(BenchRun, ExitsOneWhenMoreRequestsFailThanMaxErrorFractionAndSaysSoLast) {
  // Requests of 1..8 rows against a server taking at most 4: about half are INVALID_ARGUMENT.
  ServerConfig config = testing::LoopbackConfig();
  config.max_rows_per_request = 4;
  std::unique_ptr<Server> server = testing::StartServer(config);
  ASSERT_NE(server, nullptr);
  const std::string arguments =
      absl::StrCat("--target=127.0.0.1:", server->port(),
                   " --widths=64,64 --k=8 --rows=1-8 --concurrency=2 --warmup=0 --duration=0.3");
  const BenchRun failing = RunBench(arguments);
  EXPECT_EQ(failing.exit_code, 1) << failing.output;
  EXPECT_TRUE(absl::StrContains(failing.output, "errors: concurrency 2, pkserve: "))
      << failing.output;
  EXPECT_TRUE(absl::StrContains(failing.output, "requests failed")) << failing.output;
  EXPECT_TRUE(absl::StrContains(failing.output, "  first INVALID_ARGUMENT: rows "))
      << failing.output;
  EXPECT_EQ(LastLine(failing.output)
                .rfind("pkserve-bench: FAIL: 1 result failed more requests "
                       "than --max_error_fraction=0.01",
                       0),
            0u)
      << failing.output;

  const BenchRun tolerated = RunBench(absl::StrCat(arguments, " --max_error_fraction=1"));
  EXPECT_EQ(tolerated.exit_code, 0) << tolerated.output;
  EXPECT_EQ(LastLine(tolerated.output).rfind("pkserve-bench: PASS: 1 level,", 0), 0u)
      << tolerated.output;
}

TEST(BenchRun, AMessageOverTheServersSizeLimitIsReportedWithTheFlagThatSetsIt) {
  // 64 rows of 1024 x 1024 float32 scores are 512 KiB, over a 64 KiB --max_message_bytes.
  ServerConfig config = testing::LoopbackConfig();
  config.max_message_bytes = 64 << 10;
  std::unique_ptr<Server> server = testing::StartServer(config);
  ASSERT_NE(server, nullptr);
  const BenchRun run = RunBench(absl::StrCat("--target=127.0.0.1:", server->port(),
                                             " --dtype=float32 --rows=64 --concurrency=1",
                                             " --warmup=0 --duration=0.2 --pool=2"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "  first RESOURCE_EXHAUSTED: ")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "pkserve takes requests up to its --max_message_bytes"))
      << run.output;
}

TEST_F(BenchRunTest, TheEchoBaselineRunsInAProcessOfItsOwnThatEndsWithTheRun) {
  const std::string common =
      absl::StrCat(target_, " --rows=1 --concurrency=1 --warmup=0 --duration=0.3 --baseline=echo");
  const BenchRun run = RunBench(common);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string marker = "(a process of its own, pid ";
  const size_t at = run.output.find(marker);
  ASSERT_NE(at, std::string::npos) << run.output;
  const pid_t echo_pid = std::atoi(run.output.c_str() + at + marker.size());
  ASSERT_GT(echo_pid, 0) << run.output;
  EXPECT_NE(echo_pid, getpid());
  // Gone (and reaped) once the bench has exited.
  EXPECT_EQ(kill(echo_pid, 0), -1) << "the echo process " << echo_pid << " outlived the bench";
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(absl::StrContains(run.output, "| concurrency 1 | echo |")) << run.output;

  const BenchRun in_process = RunBench(absl::StrCat(common, " --baseline_in_process"));
  ASSERT_EQ(in_process.exit_code, 0) << in_process.output;
  EXPECT_TRUE(absl::StrContains(in_process.output, "(in this process)")) << in_process.output;
}

TEST(BenchRun, HelpExitsZeroAndNamesTheFlagsFileAsTheRepositoryDoes) {
  const BenchRun run = RunBench("--help");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "Flags from client/bench/main.cc:")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--max_error_fraction")) << run.output;
  EXPECT_FALSE(absl::StrContains(run.output, "../")) << run.output;
  EXPECT_EQ(RunBench("--version").exit_code, 0);
}

// No server at the target: exit 1 (the run could not run), and the last line says where it
// looked and what to check, not only gRPC's text.
TEST(BenchRun, NoServerAtTheTargetExitsOneWithAHintToCheckIt) {
  const int port = testing::FreeLoopbackPort();  // nothing listens there
  ASSERT_GT(port, 0);
  const std::string target = absl::StrCat("127.0.0.1:", port);
  const BenchRun run = RunBench(absl::StrCat("--target=", target, " --duration=1 --concurrency=1"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "cannot connect to " + target)) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "is pkserve running there? check --target"))
      << run.output;
}

// A closed-loop stream takes its next request after recording an answer, while the level's end
// closes every stream's writes. The pause holds each stream in that gap, so the level ends there:
// the stream must then send nothing more (a write after WritesDone aborted the bench in gRPC's
// API check).
TEST_F(BenchRunTest, StreamsClosedWhileAnAnswerIsRecordedSendNothingMore) {
  const BenchRun run =
      RunBench(absl::StrCat(target_, " --widths=64,64 --k=8 --dtype=f32 --rows=1-4 --mode=stream",
                            " --concurrency=3,8 --warmup=0.05 --duration=0.1 --verify=10",
                            " --inject_answer_pause_us=2000"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "pkserve-bench: PASS: 2 levels")) << run.output;
}

TEST_F(BenchRunTest, VerifyPassesAgainstPkserveInStreamModeWithRowRanges) {
  const BenchRun run = RunBench(
      absl::StrCat(target_, " --widths=256,256,16 --k=32 --dtype=f32 --rows=1-24 --mode=stream",
                   " --concurrency=3 --warmup=0.1 --duration=0.5 --verify=40 --connections=2"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  // Up to 40 answers are sampled; a slow build (a sanitizer, a loaded host) may answer fewer in
  // the half second, but some must have been checked, and all must have matched.
  const size_t at = run.output.find("verify: ");
  ASSERT_NE(at, std::string::npos) << run.output;
  size_t checked = 0;
  char tail[64] = {};
  ASSERT_EQ(std::sscanf(run.output.c_str() + at, "verify: %zu answers %63s", &checked, tail), 2)
      << run.output;
  EXPECT_EQ(std::string(tail), "equal") << run.output;
  EXPECT_GE(checked, 1u) << run.output;
  EXPECT_LE(checked, 40u) << run.output;
}

TEST(BenchRun, VerifyFailsAgainstAServerThatAnswersWrongly) {
  // The echo answers responses of the right size, all zeros: --verify must catch it.
  std::unique_ptr<bench::EchoServer> echo = StartEcho();
  ASSERT_NE(echo, nullptr);
  for (const char* mode : {"unary", "stream"}) {
    const BenchRun run = RunBench(absl::StrCat("--target=", echo->address(), " --mode=", mode,
                                               " --concurrency=2 --warmup=0 --duration=0.3",
                                               " --rows=2 --verify=10"));
    EXPECT_EQ(run.exit_code, 1) << mode << "\n" << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "differ from the CPU implementation")) << mode << "\n"
                                                                                     << run.output;
  }
}

TEST(BenchRun, OpenLoopKeepsItsRateWhenTheServerIsSlow) {
  // Every answer takes 30 ms: a sender that waited for answers would manage ~33 requests/s per
  // request in flight; open loop must still send 400/s and charge latency from the schedule.
  std::unique_ptr<bench::EchoServer> slow = StartEcho(absl::Milliseconds(30));
  ASSERT_NE(slow, nullptr);
  for (const char* arrivals : {"constant", "poisson"}) {
    SCOPED_TRACE(arrivals);
    const std::string json_path = TempPath(absl::StrCat("rate_", arrivals, ".json"));
    const BenchRun run =
        RunBench(absl::StrCat("--target=", slow->address(), " --rate=400 --arrivals=", arrivals,
                              " --warmup=0.2 --duration=1.5 --json=", json_path));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const Json levels = ReadJsonFile(json_path);
    ASSERT_EQ(levels.items.size(), 1u);
    const Json& level = levels.items[0];
    EXPECT_EQ(NumberAt(level, "rate"), 400);
    ASSERT_NE(level.Find("workload"), nullptr);
    EXPECT_EQ(TextAt(*level.Find("workload"), "loop"), "open");
    EXPECT_EQ(TextAt(*level.Find("workload"), "arrivals"), arrivals);
    // Constant: exactly 600 sends in 1.5 s; Poisson: 600 expected, sd ~24.5 (tolerance ~4 sd).
    const double tolerance = absl::string_view(arrivals) == "constant" ? 0.02 : 0.17;
    EXPECT_NEAR(NumberAt(level, "requests_per_s"), 400, 400 * tolerance) << run.output;
    const Json* latency = level.Find("latency_us");
    ASSERT_NE(latency, nullptr);
    EXPECT_GE(NumberAt(*latency, "p50"), 30000 * (1 - bench::LogHistogram::kRelativeError));
    EXPECT_LT(NumberAt(*latency, "p50"), 200000) << run.output;
    std::remove(json_path.c_str());
  }
}

TEST(BenchRun, BadUsageExitsTwo) {
  for (const char* arguments :
       {"--k=300", "--widths=1024", "--rows=0", "--dtype=f16", "--mode=bidi", "--rate=-1",
        "--concurrency=0", "--baseline=grpc", "--target=a:1,b:2", "--duration=0", "--widths=64,,64",
        "--widths=64,64,", "--max_error_fraction=1.5", "--no_such_flag", "--threads=abc",
        "positional"}) {
    const BenchRun run = RunBench(arguments);
    EXPECT_EQ(run.exit_code, 2) << arguments << "\n" << run.output;
  }
}

}  // namespace
}  // namespace pkserve
