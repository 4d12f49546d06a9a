// pkserve-bench --memory as a user runs it, against an in-process pkserve (CPU backend) on
// loopback holding a small memory: a short run with --verify passes (unary and stream) with the
// lookup figures in its JSON, a table other than the server's fails --verify, a memory the server
// does not hold fails with a message naming the ones it does, and usage errors exit 2. And the
// echo baseline's lookup answers: the same bytes as pkserve's for the same request (values, and
// slots and weights when asked), the --echo_memory flag's round trip.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bench/echo_server.h"
#include "client/bench/request_pool.h"
#include "kernels/numeric.h"
#include "kernels/testing/random_rows.h"
#include "server/memory_file.h"
#include "tests/server/test_support.h"

#include "tests/server/pkserve_process.h"

namespace pkserve {
namespace {

constexpr uint32_t kDim = 48;
constexpr uint32_t kK = 8;
constexpr uint32_t kHeads = 4;

using BenchRun = testing::CommandRun;

BenchRun RunBench(const std::string& arguments) {
  return testing::RunCommand(absl::StrCat(PKSERVE_BENCH, " ", arguments));
}

// A safetensors memory file of random bf16 values (32x32 slots x kDim), removed with the object.
class MemoryFile {
 public:
  explicit MemoryFile(uint64_t seed) {
    const char* dir = std::getenv("TMPDIR");
    path_ = absl::StrCat(dir != nullptr ? dir : "/tmp", "/pkbench_lookup_", getpid(), "_", seed,
                         ".safetensors");
    const std::vector<uint32_t> widths = {32, 32};
    std::string bytes = SafetensorsHeader(widths, 1024, kDim, pk::DType::kBFloat16);
    std::mt19937_64 engine(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (uint64_t i = 0; i < uint64_t{1024} * kDim; ++i) {
      const uint16_t bits = pk::FloatToBf16(uniform(engine));
      bytes.append(reinterpret_cast<const char*>(&bits), 2);
    }
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    EXPECT_NE(file, nullptr) << path_;
    if (file == nullptr) return;
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
  }
  ~MemoryFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class BenchLookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = testing::TestBackendUnavailable(); !why.empty()) GTEST_SKIP() << why;
    ServerConfig config = testing::LoopbackConfig();
    config.memories = {MemorySpec{"m", memory_.path(), {}}};
    server_ = testing::StartServer(config);
    ASSERT_NE(server_, nullptr);
    target_ = absl::StrCat("--target=127.0.0.1:", server_->port());
  }

  // A short lookup run's flags (k 8, heads 4, 8 rows: 2 outputs a request).
  std::string Flags(const std::string& more) const {
    return absl::StrCat(target_, " --memory=m --k=", kK, " --heads=", kHeads,
                        " --rows=8 --concurrency=2 --warmup=0.1 --duration=0.4 ", more);
  }

  MemoryFile memory_{21};
  std::unique_ptr<Server> server_;
  std::string target_;
};

// The number after `key` in a JSON line ("\"key\": 12.5"); -1 when absent.
double JsonNumber(const std::string& line, const std::string& key) {
  const std::string marker = absl::StrCat("\"", key, "\": ");
  const size_t at = line.find(marker);
  return at == std::string::npos ? -1 : std::strtod(line.c_str() + at + marker.size(), nullptr);
}

std::vector<std::string> JsonLines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("{\"server\"", 0) == 0) lines.push_back(line);
  }
  return lines;
}

TEST_F(BenchLookupTest, AShortRunWithVerifyPassesUnaryAndStreamWithTheLookupFigures) {
  for (const char* mode : {"unary", "stream"}) {
    SCOPED_TRACE(mode);
    const BenchRun run =
        RunBench(Flags(absl::StrCat("--mode=", mode, " --baseline=echo --return_slots",
                                    " --verify=10 --memory_file=", memory_.path())));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "answers equal the CPU implementation's"))
        << run.output;
    EXPECT_TRUE(absl::StrContains(
        run.output, "lookup memory m (32x32 slots, dim 48 bfloat16) k=8 heads 4 bfloat16"))
        << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "| outputs/s | value MB/s |")) << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "| outputs/s, pkserve / echo |")) << run.output;
    const std::vector<std::string> lines = JsonLines(run.output);
    ASSERT_EQ(lines.size(), 2u) << run.output;  // pkserve, then the echo
    for (const std::string& line : lines) {
      SCOPED_TRACE(line);
      EXPECT_TRUE(absl::StrContains(line, "\"memory\": \"m\", \"heads\": 4, \"dim\": 48"));
      const double requests = JsonNumber(line, "requests_per_s");
      EXPECT_GT(requests, 0);
      EXPECT_NEAR(JsonNumber(line, "outputs_per_s"), requests * 2, 0.01);
      // Each row reads k table rows of 48 bf16 values.
      EXPECT_NEAR(JsonNumber(line, "value_mb_per_s"), requests * 8 * kK * kDim * 2 / 1e6, 0.01);
      // Scores (8 rows x 64 bf16) out; 2 x 48 bf16 values and 8 x 8 slots and weights back.
      EXPECT_NEAR(JsonNumber(line, "mb_per_s"),
                  requests * (8 * 64 * 2 + 2 * kDim * 2 + 8 * kK * 8) / 1e6, 0.01);
    }
  }
}

TEST_F(BenchLookupTest, VerifyFailsAgainstATableOtherThanTheServers) {
  const MemoryFile other(22);  // the same shape, other values
  const BenchRun run = RunBench(Flags(absl::StrCat("--verify=5 --memory_file=", other.path())));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "differ from the CPU implementation")) << run.output;
}

TEST_F(BenchLookupTest, AMemoryTheServerDoesNotHoldFailsNamingTheOnesItHolds) {
  const BenchRun run = RunBench(absl::StrCat(target_, " --memory=nope --rows=4 --heads=4",
                                             " --concurrency=1 --duration=0.2"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "--memory=nope: 127.0.0.1:"));
  EXPECT_TRUE(absl::StrContains(run.output, "holds no such memory; it holds 'm'")) << run.output;
}

TEST_F(BenchLookupTest, UsageErrorsExitTwo) {
  const BenchRun rows = RunBench(absl::StrCat(target_, " --memory=m --heads=4 --rows=6"));
  EXPECT_EQ(rows.exit_code, 2) << rows.output;
  EXPECT_TRUE(absl::StrContains(rows.output, "--rows must be a multiple of --heads (4)"))
      << rows.output;
  const BenchRun verify = RunBench(absl::StrCat(target_, " --memory=m --verify=3"));
  EXPECT_EQ(verify.exit_code, 2) << verify.output;
  EXPECT_TRUE(absl::StrContains(verify.output, "needs --memory_file")) << verify.output;
  const BenchRun heads = RunBench(absl::StrCat(target_, " --memory=m --heads=65 --rows=65"));
  EXPECT_EQ(heads.exit_code, 2) << heads.output;
  EXPECT_TRUE(absl::StrContains(heads.output, "--heads must be in [1, 64], got 65"))
      << heads.output;
}

TEST_F(BenchLookupTest, TheEchoAnswersALookupWithTheBytesPkserveAnswersWith) {
  std::unique_ptr<v1::SparseMemory::Stub> stub = testing::NewStub(*server_);
  v1::ServerInfo info;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetServerInfo(&context, v1::ServerInfoRequest(), &info).ok());
  }
  ASSERT_EQ(info.memories_size(), 1);
  bench::EchoOptions options;
  options.memories = {info.memories(0)};
  absl::StatusOr<std::unique_ptr<bench::EchoServer>> echo = bench::EchoServer::Start(options);
  ASSERT_TRUE(echo.ok()) << echo.status();
  std::unique_ptr<v1::SparseMemory::Stub> echo_stub = v1::SparseMemory::NewStub(
      grpc::CreateChannel((*echo)->address(), grpc::InsecureChannelCredentials()));

  const pk::Problem problem = testing::MakeProblem({32, 32}, kK, pk::DType::kBFloat16);
  std::mt19937_64 engine(5);
  for (const bool return_slots : {false, true}) {
    SCOPED_TRACE(return_slots ? "with slots" : "values only");
    const std::vector<std::byte> scores =
        pk::testing::RandomRows(problem, 12, pk::testing::Distribution::kNormal, engine);
    v1::LookupRequest request;
    request.set_memory("m");
    request.set_k(kK);
    request.set_dtype(v1::DTYPE_BFLOAT16);
    request.set_rows(12);
    request.set_heads(kHeads);
    request.set_scores(reinterpret_cast<const char*>(scores.data()), scores.size());
    request.set_return_slots(return_slots);
    v1::LookupResponse real;
    v1::LookupResponse echoed;
    grpc::ClientContext real_context;
    grpc::ClientContext echo_context;
    const grpc::Status real_status = stub->Lookup(&real_context, request, &real);
    ASSERT_TRUE(real_status.ok()) << real_status.error_message();
    const grpc::Status echo_status = echo_stub->Lookup(&echo_context, request, &echoed);
    ASSERT_TRUE(echo_status.ok()) << echo_status.error_message();
    EXPECT_EQ(echoed.outputs(), real.outputs());
    EXPECT_EQ(real.outputs(), 3u);
    EXPECT_EQ(echoed.dim(), real.dim());
    EXPECT_EQ(echoed.dtype(), real.dtype());
    EXPECT_EQ(echoed.kk(), real.kk());
    EXPECT_EQ(echoed.values().size(), real.values().size());
    EXPECT_EQ(real.values().size(), 3u * kDim * 2);
    EXPECT_EQ(echoed.slots().size(), real.slots().size());
    EXPECT_EQ(echoed.weights().size(), real.weights().size());
    EXPECT_EQ(real.slots().size(), return_slots ? 12u * kK * 4 : 0u);
    EXPECT_EQ(echoed.memory_version(), real.memory_version());
    // What the bench's pool counts as coming back is what both send.
    EXPECT_EQ(echoed.values().size() + echoed.slots().size() + echoed.weights().size(),
              real.values().size() + real.slots().size() + real.weights().size());
  }
  // A memory the echo was not told of: NOT_FOUND, as pkserve answers.
  v1::LookupRequest unknown;
  unknown.set_memory("nope");
  v1::LookupResponse response;
  grpc::ClientContext context;
  const grpc::Status status = echo_stub->Lookup(&context, unknown, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "'nope'")) << status.error_message();
}

TEST(EchoMemoryFlag, RoundTripsAMemoryAndRefusesMalformedValues) {
  v1::MemoryInfo memory;
  memory.set_name("layer.3_values");
  memory.add_factor_widths(1024);
  memory.add_factor_widths(1024);
  memory.set_slots(1024 * 1024);
  memory.set_dim(4096);
  memory.set_dtype(v1::DTYPE_BFLOAT16);
  memory.set_version(1);
  const std::string flag = bench::EchoMemoryFlag(memory);
  EXPECT_EQ(flag, "layer.3_values:1024x1024:4096:2");
  absl::StatusOr<v1::MemoryInfo> parsed = bench::ParseEchoMemory(flag);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->SerializeAsString(), memory.SerializeAsString());
  for (const char* bad : {"", "m", "m:1024x1024:4096", ":1024x1024:8:1", "m:1024x0:8:1",
                          "m:1024x1024:0:1", "m:1024x1024:8:9", "m:1024xx1024:8:1"}) {
    EXPECT_FALSE(bench::ParseEchoMemory(bad).ok()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace pkserve
