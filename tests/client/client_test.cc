// The client side: .npy reading and writing, the C++ client library against an in-process server
// on loopback (round_robin across two), and pkserve-cli as a user runs it.
#include "client/client.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/npy.h"
#include "kernels/testing/random_rows.h"
#include "tests/server/test_support.h"

#include "tests/server/pkserve_process.h"

namespace pkserve {
namespace {

using client::NpyArray;
using testing::CheckResponse;
using testing::LoopbackConfig;
using testing::MakeProblem;
using testing::RandomRequest;

// ---------------------------------------------------------------------------------------------
// .npy

NpyArray Sample() {
  NpyArray array{"<f4", {2, 3}, {}};
  const float values[] = {1.5f, -2.f, 0.25f, 3.f, 4.f, -0.f};
  array.data.resize(sizeof values);
  std::memcpy(array.data.data(), values, sizeof values);
  return array;
}

TEST(Npy, RoundTripsAndAlignsTheData) {
  const std::string bytes = client::SerializeNpy(Sample());
  EXPECT_EQ((bytes.size() - Sample().data.size()) % 64, 0u) << "data not 64-byte aligned";
  absl::StatusOr<NpyArray> parsed = client::ParseNpy(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->descr, "<f4");
  EXPECT_EQ(parsed->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(parsed->data, Sample().data);
}

TEST(Npy, ReadsOneDimensionalAndVersionTwoFiles) {
  NpyArray one{"<u2", {4}, std::vector<std::byte>(8, std::byte{7})};
  absl::StatusOr<NpyArray> parsed = client::ParseNpy(client::SerializeNpy(one));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->shape, (std::vector<uint64_t>{4}));

  // Version 2.0: a 4-byte header length.
  const std::string header = "{'descr': '<u4', 'fortran_order': False, 'shape': (1, 2), }\n";
  std::string bytes = "\x93NUMPY";
  bytes += '\x02';
  bytes += '\x00';
  const uint32_t length = static_cast<uint32_t>(header.size());
  bytes.append(reinterpret_cast<const char*>(&length), 4);
  bytes += header;
  bytes.append(8, '\x01');
  parsed = client::ParseNpy(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->descr, "<u4");
  EXPECT_EQ(parsed->shape, (std::vector<uint64_t>{1, 2}));
}

TEST(Npy, RefusesWhatItCannotRead) {
  std::string bytes = client::SerializeNpy(Sample());
  EXPECT_FALSE(client::ParseNpy("not numpy").ok());
  EXPECT_FALSE(client::ParseNpy(bytes.substr(0, bytes.size() - 1)).ok()) << "short data";
  std::string big_endian = bytes;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  absl::StatusOr<NpyArray> parsed = client::ParseNpy(big_endian);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("little-endian"), absl::string_view::npos);
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  parsed = client::ParseNpy(fortran);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("Fortran"), absl::string_view::npos);
  EXPECT_EQ(client::ReadNpy("/nonexistent/rows.npy").status().code(), absl::StatusCode::kNotFound);
}

TEST(Npy, AHeaderWhoseShapeOverflowsIsRefused) {
  const std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n";
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size());
  bytes += '\x00';
  bytes += header;
  absl::StatusOr<client::NpyHeader> parsed = client::ParseNpyHeader(bytes);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("more than 2^64 bytes"), absl::string_view::npos)
      << parsed.status();
}

// ---------------------------------------------------------------------------------------------
// The client library

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartServer(LoopbackConfig());
    ASSERT_NE(server_, nullptr);
    client::ClientOptions options;
    options.target = absl::StrCat("127.0.0.1:", server_->port());
    options.deadline = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<client::Client>> connected = client::Client::Connect(options);
    ASSERT_TRUE(connected.ok()) << connected.status();
    client_ = *std::move(connected);
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<client::Client> client_;
  std::mt19937_64 engine_{23};
};

TEST_F(ClientTest, TopKReturnsTheExactAnswer) {
  const v1::TopKRequest request =
      RandomRequest(MakeProblem({300, 200}, 40, pk::DType::kBFloat16), 9, engine_, "lib");
  absl::StatusOr<v1::TopKResponse> response = client_->TopK(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(CheckResponse(request, *response), "");
}

TEST_F(ClientTest, ErrorsCarryTheServersCodeAndMessage) {
  v1::TopKRequest request =
      RandomRequest(MakeProblem({64, 64}, 8, pk::DType::kFloat32), 2, engine_);
  request.set_k(300);
  absl::StatusOr<v1::TopKResponse> response = client_->TopK(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(response.status().message(), "k must be in [1, 256], got 300");
}

TEST_F(ClientTest, AStreamSessionAnswersInOrder) {
  std::unique_ptr<client::TopKStreamSession> session = client_->OpenStream(absl::Seconds(30));
  std::vector<v1::TopKRequest> requests;
  for (int i = 0; i < 20; ++i) {
    requests.push_back(RandomRequest(MakeProblem({64, 32}, 1 + i, pk::DType::kFloat32), 1 + i % 5,
                                     engine_, absl::StrCat("s", i)));
    ASSERT_TRUE(session->Send(requests.back()));
  }
  ASSERT_TRUE(session->CloseSend());
  v1::TopKStreamResponse answer;
  for (const v1::TopKRequest& request : requests) {
    ASSERT_TRUE(session->Receive(&answer));
    ASSERT_TRUE(answer.has_result()) << answer.error().message();
    EXPECT_EQ(answer.request_id(), request.request_id());
    EXPECT_EQ(CheckResponse(request, answer.result()), "");
  }
  EXPECT_FALSE(session->Receive(&answer));
  EXPECT_TRUE(session->Finish().ok());
}

TEST_F(ClientTest, LookupOfAMemoryTheServerDoesNotHoldIsNotFound) {
  v1::LookupRequest request;
  request.set_memory("no_such_memory");
  request.set_k(4);
  request.set_dtype(v1::DTYPE_FLOAT32);
  request.set_rows(1);
  request.set_scores(std::string(128 * sizeof(float), '\0'));
  absl::StatusOr<v1::LookupResponse> response = client_->Lookup(request);
  if (response.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "this branch's server answers Lookup UNIMPLEMENTED";
  }
  EXPECT_EQ(response.status().code(), absl::StatusCode::kNotFound) << response.status();

  // The stream session: a StreamError for the request, then the stream ends OK.
  std::unique_ptr<client::LookupStreamSession> session =
      client_->OpenLookupStream(absl::Seconds(30));
  request.set_request_id("lookup-1");
  ASSERT_TRUE(session->Send(request));
  ASSERT_TRUE(session->CloseSend());
  v1::LookupStreamResponse answer;
  ASSERT_TRUE(session->Receive(&answer));
  ASSERT_TRUE(answer.has_error());
  EXPECT_EQ(answer.error().code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(answer.request_id(), "lookup-1");
  EXPECT_FALSE(session->Receive(&answer));
  EXPECT_TRUE(session->Finish().ok());
}

TEST_F(ClientTest, ALookupStreamOnAServerWithoutLookupEndsWithItsStatus) {
  std::unique_ptr<client::LookupStreamSession> session =
      client_->OpenLookupStream(absl::Seconds(30));
  v1::LookupRequest request;
  request.set_memory("no_such_memory");
  session->Send(request);
  session->CloseSend();
  v1::LookupStreamResponse answer;
  if (session->Receive(&answer)) {
    EXPECT_TRUE(answer.has_error()) << "a lookup of no memory must not succeed";
    EXPECT_TRUE(session->Finish().ok());
  } else {
    EXPECT_EQ(session->Finish().code(), absl::StatusCode::kUnimplemented);
  }
}

TEST_F(ClientTest, ServerInfoAndHealth) {
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend(), "cpu");
  EXPECT_EQ(info->limits().max_k(), 256u);
  for (const char* service : {"", "pkserve.v1.SparseMemory"}) {
    absl::StatusOr<client::ServingStatus> health = client_->CheckHealth(service);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
  }
  EXPECT_EQ(client_->CheckHealth("no.such.Service").status().code(), absl::StatusCode::kNotFound);
}

TEST(ClientOptions, AnUnknownLoadBalancingPolicyIsRefused) {
  client::ClientOptions options;
  options.load_balancing_policy = "random_spray";
  EXPECT_EQ(client::Client::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClientOptions, RoundRobinSpreadsCallsOverEveryServer) {
  std::unique_ptr<Server> first = testing::StartServer(LoopbackConfig());
  std::unique_ptr<Server> second = testing::StartServer(LoopbackConfig());
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  client::ClientOptions options;
  options.target = absl::StrCat("ipv4:127.0.0.1:", first->port(), ",127.0.0.1:", second->port());
  options.load_balancing_policy = "round_robin";
  options.wait_for_ready = true;
  absl::StatusOr<std::unique_ptr<client::Client>> client = client::Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937_64 engine(31);
  const pk::Problem problem = MakeProblem({64, 64}, 8, pk::DType::kFloat32);
  auto call = [&] {
    absl::StatusOr<v1::TopKResponse> response = (*client)->TopK(RandomRequest(problem, 1, engine));
    return response.status();
  };
  auto accepted = [&](const std::unique_ptr<Server>& server) {
    return server->batcher_stats().requests_accepted;
  };
  // round_robin picks among the subchannels that are READY, so the first calls all go to whichever
  // server connected first (the CI run of 2026-12-05: 19 to one, 1 to the other). Call until both
  // have answered (bounded), then every call alternates.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  const auto both_answered = [&] { return accepted(first) > 0 && accepted(second) > 0; };
  for (int i = 0; i < 400 && absl::Now() < give_up && !both_answered(); ++i) {
    const absl::Status status = call();
    ASSERT_TRUE(status.ok()) << status;
  }
  ASSERT_GT(accepted(first), 0u) << "round_robin never reached the first server";
  ASSERT_GT(accepted(second), 0u) << "round_robin never reached the second server";
  const uint64_t first_before = accepted(first);
  const uint64_t second_before = accepted(second);
  for (int i = 0; i < 20; ++i) {
    const absl::Status status = call();
    ASSERT_TRUE(status.ok()) << status;
  }
  const uint64_t on_first = accepted(first) - first_before;
  const uint64_t on_second = accepted(second) - second_before;
  EXPECT_EQ(on_first + on_second, 20u);
  EXPECT_GE(on_first, 5u) << "round_robin left the first server nearly idle";
  EXPECT_GE(on_second, 5u) << "round_robin left the second server nearly idle";
}

// ---------------------------------------------------------------------------------------------
// pkserve-cli

using CliRun = testing::CommandRun;

CliRun RunCli(const std::string& arguments) {
  return testing::RunCommand(absl::StrCat(PKSERVE_CLI, " ", arguments));
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartServer(LoopbackConfig());
    ASSERT_NE(server_, nullptr);
    target_ = absl::StrCat("--target=127.0.0.1:", server_->port());
    directory_ = ::testing::TempDir();
  }
  std::string Path(const std::string& name) const {
    return absl::StrCat(directory_, "pkserve_cli_", getpid(), "_", name);
  }

  // Writes `rows` random rows of `problem` as .npy, runs `topk` on them, and checks the .npy
  // answers against the CPU reference.
  void CheckTopKFromFile(const pk::Problem& problem, uint32_t rows, const std::string& extra) {
    std::mt19937_64 engine(41);
    const std::vector<std::byte> scores =
        pk::testing::RandomRows(problem, rows, pk::testing::Distribution::kTies, engine);
    const bool bf16 = problem.dtype == pk::DType::kBFloat16;
    ASSERT_TRUE(
        client::WriteNpy(Path("in.npy"),
                         NpyArray{bf16 ? "<u2" : "<f4", {rows, problem.row_width()}, scores})
            .ok());
    std::string widths;
    for (int f = 0; f < problem.factors; ++f) {
      absl::StrAppend(&widths, f == 0 ? "" : ",", problem.widths[f]);
    }
    const CliRun run = RunCli(absl::StrCat(
        "topk ", target_, " --widths=", widths, " --k=", problem.k, " --input=", Path("in.npy"),
        " --out_values=", Path("values.npy"), " --out_slots=", Path("slots.npy"), " ", extra));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find(absl::StrCat("topk: ", rows, " rows")), std::string::npos)
        << run.output;
    absl::StatusOr<NpyArray> values = client::ReadNpy(Path("values.npy"));
    absl::StatusOr<NpyArray> slots = client::ReadNpy(Path("slots.npy"));
    ASSERT_TRUE(values.ok()) << values.status();
    ASSERT_TRUE(slots.ok()) << slots.status();
    EXPECT_EQ(values->descr, bf16 ? "<u2" : "<f4");
    EXPECT_EQ(slots->descr, "<u4");
    EXPECT_EQ(slots->shape, (std::vector<uint64_t>{rows, problem.kk()}));
    const testing::Expected expected = testing::Reference(problem, scores.data(), rows);
    EXPECT_EQ(values->data, expected.values);
    ASSERT_EQ(slots->data.size(), expected.slots.size() * sizeof(uint32_t));
    EXPECT_EQ(std::memcmp(slots->data.data(), expected.slots.data(), slots->data.size()), 0);
    for (const char* name : {"in.npy", "values.npy", "slots.npy"}) std::remove(Path(name).c_str());
  }

  std::unique_ptr<Server> server_;
  std::string target_;
  std::string directory_;
};

TEST_F(CliTest, TopKFromAFloat32FileWritesTheExactAnswers) {
  CheckTopKFromFile(MakeProblem({128, 96}, 16, pk::DType::kFloat32), 7, "");
}

TEST_F(CliTest, TopKFromABfloat16FileOverAStreamWritesTheExactAnswers) {
  CheckTopKFromFile(MakeProblem({32, 16, 8}, 20, pk::DType::kBFloat16), 5, "--stream");
}

TEST_F(CliTest, TopKOfRandomRowsPrintsSlotsAndValues) {
  const CliRun run = RunCli(
      absl::StrCat("topk ", target_, " --widths=1024,1024 --k=4 --random_rows=3 --print_rows=2"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("topk: 3 rows, factor widths 1024x1024, k 4 -> kk 4 float32"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("row 1:"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("row 2:"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("(1 more row)\n"), std::string::npos) << run.output;
}

TEST_F(CliTest, AServerErrorIsPrintedAndTheExitStatusIsOne) {
  const CliRun run =
      RunCli(absl::StrCat("topk ", target_, " --widths=64,64 --k=300 --random_rows=1"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("INVALID_ARGUMENT: k must be in [1, 256], got 300"), std::string::npos)
      << run.output;
}

TEST_F(CliTest, PrintRowsZeroPrintsNoRowsAndNoCountOfMore) {
  const CliRun run = RunCli(absl::StrCat("topk ", target_,
                                         " --widths=64,64 --k=4 --random_rows=30 --print_rows=0"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("row 0:"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("more row"), std::string::npos) << run.output;
}

TEST_F(CliTest, OneRowIsSingular) {
  const CliRun run =
      RunCli(absl::StrCat("topk ", target_, " --widths=64,64 --k=4 --random_rows=1"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("topk: 1 row,"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("batch of 1 row;"), std::string::npos) << run.output;
}

TEST_F(CliTest, Bf16AndF32AreAcceptedAsDTypes) {
  CliRun run = RunCli(
      absl::StrCat("topk ", target_, " --widths=64,64 --k=4 --random_rows=2 --dtype=bf16"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("kk 4 bfloat16"), std::string::npos) << run.output;
  run = RunCli(absl::StrCat("topk ", target_, " --widths=64,64 --k=4 --random_rows=2 --dtype=f32"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("kk 4 float32"), std::string::npos) << run.output;
  run = RunCli(absl::StrCat("topk ", target_, " --widths=64,64 --random_rows=2 --dtype=f16"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
}

TEST_F(CliTest, FileErrorsAreClearMessagesWithExitStatusTwo) {
  const std::string common = absl::StrCat("topk ", target_, " --widths=64,64 --k=4 ");
  // A directory.
  CliRun run = RunCli(absl::StrCat(common, "--input=", directory_));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("Is a directory"), std::string::npos) << run.output;
  // A missing file.
  run = RunCli(absl::StrCat(common, "--input=/nonexistent/rows.npy"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("cannot read /nonexistent/rows.npy: No such file or directory"),
            std::string::npos)
      << run.output;
  // Truncated data, and a header that claims more than the file holds.
  NpyArray rows{"<f4", {3, 128}, std::vector<std::byte>(3 * 128 * 4, std::byte{0})};
  const std::string whole = client::SerializeNpy(rows);
  const std::pair<const char*, std::string> broken[] = {
      {"truncated.npy", whole.substr(0, whole.size() - 100)},
      {"short_header.npy", whole.substr(0, 40)},
      {"lying_header.npy",
       [&] {
         std::string lie = whole;
         lie.replace(lie.find("(3, 128)"), 8, "(9, 128)");
         return lie;
       }()},
  };
  for (const auto& [name, bytes] : broken) {
    std::FILE* file = std::fopen(Path(name).c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
    for (const char* output : {"", " --out_slots="}) {
      run = RunCli(absl::StrCat(common, "--input=", Path(name), output,
                                *output != '\0' ? Path("slots.npy") : ""));
      EXPECT_EQ(run.exit_code, 2) << name << ": " << run.output;
      EXPECT_NE(run.output.find(Path(name)), std::string::npos) << name << ": " << run.output;
      EXPECT_EQ(run.output.find("terminate"), std::string::npos) << run.output;
    }
    std::remove(Path(name).c_str());
  }
  // Unreadable: only a test for a user that permissions apply to.
  if (geteuid() != 0) {
    std::FILE* file = std::fopen(Path("locked.npy").c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fclose(file);
    chmod(Path("locked.npy").c_str(), 0);
    run = RunCli(absl::StrCat(common, "--input=", Path("locked.npy")));
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find("Permission denied"), std::string::npos) << run.output;
    std::remove(Path("locked.npy").c_str());
  }
}

TEST_F(CliTest, AnOutputThatCannotBeWrittenSaysWhatHappenedToTheFile) {
  NpyArray rows{"<f4", {2, 128}, std::vector<std::byte>(2 * 128 * 4, std::byte{0})};
  ASSERT_TRUE(client::WriteNpy(Path("rows.npy"), rows).ok());
  for (const char* source : {"--random_rows=2", "--input="}) {
    const std::string input = *source == '-' && source[2] == 'i' ? Path("rows.npy") : "";
    const CliRun run = RunCli(absl::StrCat("topk ", target_, " --widths=64,64 --k=4 ", source,
                                           input, " --out_values=/nonexistent/v.npy"));
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find("cannot write /nonexistent/v.npy: No such file or directory"),
              std::string::npos)
        << run.output;
    EXPECT_EQ(run.output.find("PERMISSION_DENIED"), std::string::npos) << run.output;
  }
  std::remove(Path("rows.npy").c_str());
}

TEST(CliOversize, AMessagePastTheServersLimitNamesMaxMessageBytes) {
  ServerConfig config = LoopbackConfig();
  config.max_message_bytes = 16384;
  std::unique_ptr<Server> server = testing::StartServer(config);
  ASSERT_NE(server, nullptr);
  const CliRun run = RunCli(absl::StrCat("topk --target=127.0.0.1:", server->port(),
                                         " --widths=512,512 --k=4 --random_rows=8"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("RESOURCE_EXHAUSTED"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("the server's --max_message_bytes"), std::string::npos)
      << run.output;
}

TEST_F(CliTest, InfoAndHealth) {
  CliRun run = RunCli(absl::StrCat("info ", target_));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("backend   cpu"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rows per request <= 4096"), std::string::npos) << run.output;
  run = RunCli(absl::StrCat("health ", target_));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("server: SERVING"), std::string::npos) << run.output;
  run = RunCli(absl::StrCat("health ", target_, " --service=pkserve.v1.SparseMemory"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST(Cli, HelpAndUsageErrors) {
  CliRun run = RunCli("topk --help");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  for (const char* option : {"--widths", "--input", "--random_rows", "--out_slots", "--target"}) {
    EXPECT_NE(run.output.find(option), std::string::npos) << option << " missing:\n" << run.output;
  }
  EXPECT_EQ(RunCli("info --help").exit_code, 0);
  EXPECT_EQ(RunCli("health --help").exit_code, 0);
  EXPECT_EQ(RunCli("--help").exit_code, 0);
  run = RunCli("--version");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("pkserve-cli " PKSERVE_VERSION), std::string::npos) << run.output;
  run = RunCli("topk --widths=64,64 --no_such_option=1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("unknown option --no_such_option"), std::string::npos) << run.output;
  EXPECT_EQ(RunCli("frobnicate").exit_code, 2);
  run = RunCli("topk --widths=64,,64 --random_rows=1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("'64,,64'"), std::string::npos) << run.output;
  EXPECT_EQ(RunCli("lookup --k=4").exit_code, 2) << "--memory, --input and --out are required";
  EXPECT_EQ(RunCli("lookup --help").exit_code, 0);
  run = RunCli("topk --widths=64,64 --random_rows=1 --target=127.0.0.1:1 --deadline_ms=2000");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("UNAVAILABLE"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("is pkserve running at 127.0.0.1:1?"), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace pkserve
