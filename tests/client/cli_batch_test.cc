// pkserve-cli's batch runs against a real pkserve (a child process on loopback): inputs past the
// server's message and row limits, outputs equal to the client library's answers row for row, a
// server killed mid-run, --resume, Ctrl-C, and the progress line only on a terminal. Lookup runs
// need a server with hosted memories; they skip, saying why, when the server answers Lookup
// UNIMPLEMENTED. The environment variable PKSERVE_UNDER_TEST names another pkserve binary to run
// them against (default: this build's).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/npy.h"
#include "tests/server/pkserve_process.h"

namespace pkserve {
namespace {

using client::NpyArray;

const char* Pkserve() {
  const char* binary = std::getenv("PKSERVE_UNDER_TEST");
  return binary != nullptr && *binary != '\0' ? binary : PKSERVE_BINARY;
}

// The limits the servers of these tests run with: an input of 1200 rows of 512 float32 scores
// (2.4 MB) is past --max_message_bytes and 18 times --max_rows_per_request.
const std::vector<std::string> kSmallLimits = {"--max_message_bytes=262144",
                                               "--max_rows_per_request=64"};
constexpr uint32_t kRows = 1200;
const std::vector<uint32_t> kWidths = {256, 256};
constexpr uint32_t kK = 24;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

using CliRun = testing::CommandRun;

CliRun RunCli(const std::string& arguments) {
  return testing::RunCommand(absl::StrCat(PKSERVE_CLI, " ", arguments));
}

// Waits for a child's exit: its exit code, or -1 on a signal or past `timeout`.
int WaitExitCode(pid_t pid, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    int status = 0;
    const pid_t reaped = waitpid(pid, &status, WNOHANG);
    if (reaped == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Lines "done ..." in a --resume sidecar.
int DoneLines(const std::string& path) {
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n')) {
    if (absl::StartsWith(line, "done ")) ++lines;
  }
  return lines;
}

class CliBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = absl::StrCat(::testing::TempDir(), "cli_batch_", getpid(), "_",
                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(system(absl::StrCat("rm -rf '", directory_, "' && mkdir -p '", directory_, "'").c_str()),
              0);
    // Random float32 score rows.
    std::mt19937_64 engine(7);
    std::normal_distribution<float> normal;
    NpyArray input{"<f4", {kRows, RowWidth()}, {}};
    input.data.resize(size_t{kRows} * RowWidth() * sizeof(float));
    for (size_t i = 0; i < input.data.size() / sizeof(float); ++i) {
      const float value = normal(engine);
      std::memcpy(input.data.data() + i * sizeof value, &value, sizeof value);
    }
    ASSERT_TRUE(client::WriteNpy(Path("in.npy"), input).ok());
    scores_ = std::move(input.data);
  }
  void TearDown() override {
    if (!HasFailure()) system(absl::StrCat("rm -rf '", directory_, "'").c_str());
  }

  static uint32_t RowWidth() { return kWidths[0] + kWidths[1]; }
  std::string Path(const std::string& name) const { return absl::StrCat(directory_, "/", name); }
  static std::string Target(const testing::ChildServer& server) {
    return absl::StrCat("--target=", server.target());
  }
  std::string TopKArguments(const testing::ChildServer& server, const std::string& values,
                            const std::string& slots) const {
    return absl::StrCat("topk ", Target(server), " --widths=256,256 --k=", kK,
                        " --input=", Path("in.npy"), " --out_values=", Path(values),
                        " --out_slots=", Path(slots));
  }

  // The client library's answers for the whole input, in requests of 64 rows.
  void LibraryAnswers(const std::string& target, std::string* values, std::string* slots) {
    client::ClientOptions options;
    options.target = target;
    absl::StatusOr<std::unique_ptr<client::Client>> connected = client::Client::Connect(options);
    ASSERT_TRUE(connected.ok()) << connected.status();
    const size_t row_bytes = RowWidth() * sizeof(float);
    for (uint32_t first = 0; first < kRows; first += 64) {
      const uint32_t rows = std::min<uint32_t>(64, kRows - first);
      const v1::TopKRequest request = client::MakeTopKRequest(
          kWidths, kK, v1::DTYPE_FLOAT32, rows,
          std::span<const std::byte>(scores_.data() + first * row_bytes, rows * row_bytes));
      absl::StatusOr<v1::TopKResponse> response = (*connected)->TopK(request);
      ASSERT_TRUE(response.ok()) << response.status();
      values->append(response->values());
      slots->append(response->slots());
    }
  }

  // Checks that the .npy files hold the library's answers row for row.
  void ExpectLibraryAnswers(const std::string& target, const std::string& values_path,
                            const std::string& slots_path) {
    std::string values;
    std::string slots;
    LibraryAnswers(target, &values, &slots);
    absl::StatusOr<NpyArray> got_values = client::ReadNpy(values_path);
    absl::StatusOr<NpyArray> got_slots = client::ReadNpy(slots_path);
    ASSERT_TRUE(got_values.ok()) << got_values.status();
    ASSERT_TRUE(got_slots.ok()) << got_slots.status();
    EXPECT_EQ(got_values->shape, (std::vector<uint64_t>{kRows, kK}));
    EXPECT_EQ(got_slots->shape, (std::vector<uint64_t>{kRows, kK}));
    ASSERT_EQ(got_values->data.size(), values.size());
    ASSERT_EQ(got_slots->data.size(), slots.size());
    const size_t row_values = kK * sizeof(float);
    for (uint32_t row = 0; row < kRows; ++row) {
      ASSERT_EQ(std::memcmp(got_values->data.data() + row * row_values,
                            values.data() + row * row_values, row_values),
                0)
          << "values of row " << row << " differ";
      ASSERT_EQ(std::memcmp(got_slots->data.data() + row * row_values,
                            slots.data() + row * row_values, row_values),
                0)
          << "slots of row " << row << " differ";
    }
  }

  std::string directory_;
  std::vector<std::byte> scores_;
};

TEST_F(CliBatchTest, AFilePastTheServersLimitsGivesTheLibrarysAnswersRowForRow) {
  testing::ChildServer server(Pkserve(), kSmallLimits);
  ASSERT_NE(server.port(), 0);
  ASSERT_GT(scores_.size(), 262144u);
  ASSERT_GT(kRows, 4 * 64u);
  const CliRun run = RunCli(absl::StrCat(TopKArguments(server, "v.npy", "s.npy"),
                                         " --streams=3 --connections=2"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("topk: 1200 rows in "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("on 3 streams over 2 connections"), std::string::npos) << run.output;
  ExpectLibraryAnswers(server.target(), Path("v.npy"), Path("s.npy"));
  EXPECT_FALSE(Exists(Path("v.npy.partial")));
  EXPECT_FALSE(Exists(Path("v.npy.resume"))) << "a complete run leaves no sidecar";
}

TEST_F(CliBatchTest, ANonTerminalRunPrintsNoProgressLine) {
  testing::ChildServer server(Pkserve(), kSmallLimits);
  ASSERT_NE(server.port(), 0);
  const CliRun run = RunCli(TopKArguments(server, "v.npy", "s.npy"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("ETA"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find('\r'), std::string::npos) << run.output;
  // The summary and the files written: three lines.
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 3) << run.output;
}

TEST_F(CliBatchTest, ARunRefusedFromItsFirstRequestLeavesNoFilesBehind) {
  testing::ChildServer server(Pkserve(), kSmallLimits);
  ASSERT_NE(server.port(), 0);
  const CliRun run = RunCli(absl::StrCat("topk ", Target(server), " --widths=256,256 --k=300",
                                         " --input=", Path("in.npy"), " --out_values=",
                                         Path("v.npy"), " --streams=1"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("INVALID_ARGUMENT: rows 0..63: k must be in [1, 256], got 300"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("no rows written"), std::string::npos) << run.output;
  for (const char* name : {"v.npy", "v.npy.partial", "v.npy.resume"}) {
    EXPECT_FALSE(Exists(Path(name))) << name << " left behind";
  }
}

TEST_F(CliBatchTest, ATooLargeRowsPerRequestNamesTheServersLimits) {
  testing::ChildServer server(Pkserve(), kSmallLimits);
  ASSERT_NE(server.port(), 0);
  const CliRun run =
      RunCli(absl::StrCat(TopKArguments(server, "v.npy", "s.npy"), " --rows_per_request=500"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--max_message_bytes (262144)"), std::string::npos) << run.output;
}

// Runs the topk of the fixture's input as a child process, slowly (one row a request, one in
// flight), and returns its pid once `done_lines` requests are recorded in the sidecar.
pid_t StartSlowRun(const std::string& arguments, const std::string& output,
                   const std::string& sidecar, int done_lines, int streams = 1) {
  std::vector<std::string> args = {PKSERVE_CLI};
  for (absl::string_view word : absl::StrSplit(arguments, ' ', absl::SkipEmpty())) {
    args.emplace_back(word);
  }
  for (const char* slow : {"--rows_per_request=1", "--max_in_flight=1"}) args.emplace_back(slow);
  args.push_back(absl::StrCat("--streams=", streams));
  const pid_t pid = testing::SpawnChild(args, output);
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (absl::Now() < until && DoneLines(sidecar) < done_lines) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  return pid;
}

TEST_F(CliBatchTest, AServerKilledMidRunFailsNamingTheRowsAndResumeFinishesTheSameFiles) {
  std::string reference_target;
  {
    // The uninterrupted run's files, to compare with.
    testing::ChildServer server(Pkserve(), kSmallLimits);
    ASSERT_NE(server.port(), 0);
    const CliRun run = RunCli(TopKArguments(server, "v_whole.npy", "s_whole.npy"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  auto server = std::make_unique<testing::ChildServer>(Pkserve(), kSmallLimits);
  ASSERT_NE(server->port(), 0);
  const pid_t cli = StartSlowRun(TopKArguments(*server, "v.npy", "s.npy"), Path("cli.log"),
                                 Path("v.npy.resume"), 20);
  ASSERT_GT(cli, 0);
  ASSERT_GE(DoneLines(Path("v.npy.resume")), 20) << ReadFile(Path("cli.log"));
  server->Signal(SIGKILL);
  const int exit_code = WaitExitCode(cli, absl::Seconds(30));
  const std::string log = ReadFile(Path("cli.log"));
  EXPECT_EQ(exit_code, 1) << log;
  EXPECT_NE(log.find("UNAVAILABLE"), std::string::npos) << log;
  EXPECT_NE(log.find("topk stopped at rows "), std::string::npos) << log;
  EXPECT_NE(log.find("--resume"), std::string::npos) << log;
  EXPECT_FALSE(Exists(Path("v.npy"))) << "an unfinished output must not look complete";
  EXPECT_TRUE(Exists(Path("v.npy.partial")));
  const int done_before = DoneLines(Path("v.npy.resume"));
  EXPECT_LT(done_before, static_cast<int>(kRows));

  server = std::make_unique<testing::ChildServer>(Pkserve(), kSmallLimits);
  ASSERT_NE(server->port(), 0);
  const CliRun resumed = RunCli(absl::StrCat(TopKArguments(*server, "v.npy", "s.npy"),
                                             " --rows_per_request=1 --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(absl::StrCat("(", done_before, " from the earlier run)")),
            std::string::npos)
      << resumed.output;
  EXPECT_EQ(ReadFile(Path("v.npy")), ReadFile(Path("v_whole.npy")));
  EXPECT_EQ(ReadFile(Path("s.npy")), ReadFile(Path("s_whole.npy")));
  EXPECT_FALSE(Exists(Path("v.npy.resume")));
}

TEST_F(CliBatchTest, AReplicaKilledMidRunIsRetriedOnTheOtherOneWithRoundRobin) {
  // Debug logs say which replica answers (a line per request).
  std::vector<std::string> flags = kSmallLimits;
  flags.push_back("--log_level=debug");
  testing::ChildServer first(Pkserve(), flags);
  testing::ChildServer second(Pkserve(), flags);
  ASSERT_NE(first.port(), 0);
  ASSERT_NE(second.port(), 0);
  const std::string arguments = absl::StrCat(
      "topk --target=ipv4:127.0.0.1:", first.port(), ",127.0.0.1:", second.port(),
      " --lb_policy=round_robin --widths=256,256 --k=", kK, " --input=", Path("in.npy"),
      " --out_values=", Path("v.npy"), " --out_slots=", Path("s.npy"));
  const pid_t cli = StartSlowRun(arguments, Path("cli.log"), Path("v.npy.resume"), 20, 2);
  ASSERT_GT(cli, 0);
  // The replica that answers (both, or the one the two streams went to) is killed.
  auto answered = [](const testing::ChildServer& server) {
    const std::string log = server.log();
    size_t count = 0;
    for (size_t at = log.find("-> OK"); at != std::string::npos; at = log.find("-> OK", at + 1)) {
      ++count;
    }
    return count;
  };
  const bool kill_first = answered(first) >= answered(second);
  testing::ChildServer& killed = kill_first ? first : second;
  testing::ChildServer& survivor = kill_first ? second : first;
  killed.Signal(SIGKILL);
  const int exit_code = WaitExitCode(cli, absl::Seconds(60));
  const std::string log = ReadFile(Path("cli.log"));
  ASSERT_EQ(exit_code, 0) << log;
  EXPECT_EQ(log.find(" 0 retries"), std::string::npos)
      << "the killed replica's stream was not retried:\n" << log;
  ExpectLibraryAnswers(survivor.target(), Path("v.npy"), Path("s.npy"));
}

TEST_F(CliBatchTest, CtrlCStopsCleanlyAndResumeFinishesTheSameFiles) {
  testing::ChildServer server(Pkserve(), kSmallLimits);
  ASSERT_NE(server.port(), 0);
  const CliRun whole = RunCli(TopKArguments(server, "v_whole.npy", "s_whole.npy"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const pid_t cli = StartSlowRun(TopKArguments(server, "v.npy", "s.npy"), Path("cli.log"),
                                 Path("v.npy.resume"), 10);
  ASSERT_GT(cli, 0);
  kill(cli, SIGINT);
  const int exit_code = WaitExitCode(cli, absl::Seconds(30));
  const std::string log = ReadFile(Path("cli.log"));
  EXPECT_EQ(exit_code, 130) << log;
  EXPECT_NE(log.find("topk interrupted"), std::string::npos) << log;
  EXPECT_FALSE(Exists(Path("v.npy")));
  // The answers in flight at the signal were taken: every request sent is recorded.
  const CliRun resumed = RunCli(absl::StrCat(TopKArguments(server, "v.npy", "s.npy"),
                                             " --rows_per_request=1 --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(ReadFile(Path("v.npy")), ReadFile(Path("v_whole.npy")));
  EXPECT_EQ(ReadFile(Path("s.npy")), ReadFile(Path("s_whole.npy")));
}

TEST_F(CliBatchTest, ResumeRefusesASidecarOfAnotherRun) {
  testing::ChildServer server(Pkserve(), kSmallLimits);
  ASSERT_NE(server.port(), 0);
  const pid_t cli = StartSlowRun(TopKArguments(server, "v.npy", "s.npy"), Path("cli.log"),
                                 Path("v.npy.resume"), 3);
  ASSERT_GT(cli, 0);
  kill(cli, SIGINT);
  ASSERT_EQ(WaitExitCode(cli, absl::Seconds(30)), 130) << ReadFile(Path("cli.log"));
  // Another k: the partial files hold other answers.
  const CliRun run = RunCli(absl::StrCat("topk ", Target(server), " --widths=256,256 --k=8",
                                         " --input=", Path("in.npy"), " --out_values=",
                                         Path("v.npy"), " --out_slots=", Path("s.npy"),
                                         " --rows_per_request=1 --resume"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("was written for another run"), std::string::npos) << run.output;
}

// ---------------------------------------------------------------------------------------------
// lookup

// Whether `server` implements Lookup: "" if so, else the reason to skip.
std::string LookupMissing(const std::string& target) {
  client::ClientOptions options;
  options.target = target;
  absl::StatusOr<std::unique_ptr<client::Client>> connected = client::Client::Connect(options);
  if (!connected.ok()) return connected.status().ToString();
  v1::LookupRequest request;
  request.set_memory("probe");
  absl::StatusOr<v1::LookupResponse> response = (*connected)->Lookup(request);
  if (response.status().code() == absl::StatusCode::kUnimplemented) {
    return absl::StrCat("this branch's pkserve answers Lookup UNIMPLEMENTED (",
                        response.status().message(), ")");
  }
  return "";
}

TEST_F(CliBatchTest, ALookupFilePastTheServersLimitsGivesTheLibrarysAnswersRowForRow) {
  {
    testing::ChildServer probe(Pkserve(), {});
    ASSERT_NE(probe.port(), 0);
    if (const std::string missing = LookupMissing(probe.target()); !missing.empty()) {
      GTEST_SKIP() << missing;
    }
  }
  // A memory of 256 x 256 slots, dim 16, float32 values.
  constexpr uint32_t kDim = 16;
  constexpr uint32_t kHeads = 4;
  NpyArray table{"<f4", {256 * 256, kDim}, {}};
  table.data.resize(size_t{256} * 256 * kDim * sizeof(float));
  std::mt19937_64 engine(11);
  std::normal_distribution<float> normal;
  for (size_t i = 0; i < table.data.size() / sizeof(float); ++i) {
    const float value = normal(engine);
    std::memcpy(table.data.data() + i * sizeof value, &value, sizeof value);
  }
  ASSERT_TRUE(client::WriteNpy(Path("memory.npy"), table).ok());
  std::vector<std::string> flags = kSmallLimits;
  flags.push_back(absl::StrCat("--memory=m=", Path("memory.npy"), ",widths=256x256"));
  testing::ChildServer server(Pkserve(), flags);
  ASSERT_NE(server.port(), 0) << server.log();
  const CliRun run = RunCli(absl::StrCat(
      "lookup ", Target(server), " --memory=m --k=", kK, " --heads=", kHeads, " --input=",
      Path("in.npy"), " --out=", Path("out.npy"), " --out_slots=", Path("slots.npy"),
      " --out_weights=", Path("weights.npy"), " --streams=3 --connections=2"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("lookup: 1200 rows in "), std::string::npos) << run.output;

  client::ClientOptions options;
  options.target = server.target();
  absl::StatusOr<std::unique_ptr<client::Client>> connected = client::Client::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  std::string values, slots, weights;
  const size_t row_bytes = RowWidth() * sizeof(float);
  for (uint32_t first = 0; first < kRows; first += 64) {
    const uint32_t rows = std::min<uint32_t>(64, kRows - first);
    v1::LookupRequest request;
    request.set_memory("m");
    request.set_k(kK);
    request.set_dtype(v1::DTYPE_FLOAT32);
    request.set_rows(rows);
    request.set_heads(kHeads);
    request.set_scores(reinterpret_cast<const char*>(scores_.data()) + first * row_bytes,
                       rows * row_bytes);
    request.set_return_slots(true);
    absl::StatusOr<v1::LookupResponse> response = (*connected)->Lookup(request);
    ASSERT_TRUE(response.ok()) << response.status();
    values.append(response->values());
    slots.append(response->slots());
    weights.append(response->weights());
  }
  const std::pair<const char*, const std::string*> files[] = {
      {"out.npy", &values}, {"slots.npy", &slots}, {"weights.npy", &weights}};
  for (const auto& [name, expected] : files) {
    absl::StatusOr<NpyArray> got = client::ReadNpy(Path(name));
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->data.size(), expected->size()) << name;
    EXPECT_EQ(std::memcmp(got->data.data(), expected->data(), expected->size()), 0) << name;
  }
}

}  // namespace
}  // namespace pkserve
