// The SparseMemory service through a real gRPC server on loopback: golden bits over TopK and
// TopKStream, batching invisible to 32 concurrent callers, validation at the edge, the stream's
// per-request errors, server info, health and reflection.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "kernels/golden/golden.h"
#include "server/validation.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::CheckResponse;
using testing::LoopbackConfig;
using testing::MakeProblem;
using testing::RandomRequest;
using testing::StartServer;

const std::vector<pk::golden::Case>& GoldenCases() {
  static const std::vector<pk::golden::Case> cases = [] {
    auto read = pk::golden::ReadFile(PK_GOLDEN_FILE);
    EXPECT_TRUE(read.ok()) << read.error().message;
    return read.ok() ? std::move(read.value()) : std::vector<pk::golden::Case>();
  }();
  return cases;
}

v1::TopKRequest GoldenRequest(const pk::golden::Case& c) {
  v1::TopKRequest request;
  for (int f = 0; f < c.problem.factors; ++f) request.add_factor_widths(c.problem.widths[f]);
  request.set_k(c.problem.k);
  request.set_dtype(DTypeToWire(c.problem.dtype));
  request.set_rows(c.rows);
  request.set_scores(reinterpret_cast<const char*>(c.scores.data()), c.scores.size());
  request.set_request_id(c.name);
  return request;
}

// "" when the response holds the golden bits, else the first difference.
std::string CompareGolden(const pk::golden::Case& c, const v1::TopKResponse& response) {
  if (response.rows() != c.rows || response.kk() != c.problem.kk()) {
    return absl::StrCat("expected rows ", c.rows, " kk ", c.problem.kk(), ", got rows ",
                        response.rows(), " kk ", response.kk());
  }
  std::vector<uint32_t> slots(response.slots().size() / sizeof(uint32_t));
  std::memcpy(slots.data(), response.slots().data(), response.slots().size());
  const auto values = std::as_bytes(std::span(response.values()));
  std::optional<std::string> difference = pk::golden::Compare(c, values, slots);
  return difference.value_or("");
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::TestBackendUnavailable(); !why.empty())
      GTEST_SKIP() << why;
    ServerConfig config = LoopbackConfig();
    config.max_rows_per_request = 2048;
    server_ = StartServer(config);
    ASSERT_NE(server_, nullptr);
    stub_ = testing::NewStub(*server_);
  }

  absl::Status CallTopK(const v1::TopKRequest& request, v1::TopKResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status status = stub_->TopK(&context, request, response);
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::SparseMemory::Stub> stub_;
};

TEST_F(ServiceTest, EveryGoldenCaseOverTopKGivesTheGoldenBits) {
  ASSERT_EQ(GoldenCases().size(), 120u);
  for (const pk::golden::Case& c : GoldenCases()) {
    v1::TopKResponse response;
    const absl::Status status = CallTopK(GoldenRequest(c), &response);
    ASSERT_TRUE(status.ok()) << c.name << ": " << status;
    EXPECT_EQ(CompareGolden(c, response), "") << c.name;
    EXPECT_EQ(response.request_id(), c.name);
  }
}

TEST_F(ServiceTest, EveryGoldenCaseOverTopKStreamGivesTheGoldenBitsInOrder) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub_->TopKStream(&context);
  std::thread sender([&] {
    for (const pk::golden::Case& c : GoldenCases()) {
      if (!stream->Write(GoldenRequest(c))) break;
    }
    stream->WritesDone();
  });
  size_t answered = 0;
  v1::TopKStreamResponse answer;
  while (stream->Read(&answer)) {
    ASSERT_LT(answered, GoldenCases().size());
    const pk::golden::Case& c = GoldenCases()[answered];
    EXPECT_EQ(answer.request_id(), c.name) << "answers out of request order";
    ASSERT_TRUE(answer.has_result()) << c.name << ": " << answer.error().message();
    EXPECT_EQ(CompareGolden(c, answer.result()), "") << c.name;
    ++answered;
  }
  sender.join();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answered, GoldenCases().size());
}

TEST_F(ServiceTest, ThirtyTwoConcurrentCallersWithMixedShapesGetExactlyTheirOwnAnswers) {
  const std::vector<pk::Problem> shapes = {
      MakeProblem({256, 256}, 16, pk::DType::kFloat32),
      MakeProblem({512, 512}, 32, pk::DType::kBFloat16),
      MakeProblem({32, 32, 32}, 8, pk::DType::kFloat32),
      MakeProblem({128, 64}, 64, pk::DType::kBFloat16),
  };
  constexpr int kCallers = 32;
  constexpr int kRequestsEach = 6;
  std::atomic<int> failures{0};
  std::atomic<int> batched_with_others{0};
  std::vector<std::thread> callers;
  for (int caller = 0; caller < kCallers; ++caller) {
    callers.emplace_back([&, caller] {
      std::mt19937_64 engine(1000 + caller);
      auto stub = testing::NewStub(*server_);  // a channel each, as separate processes would
      for (int i = 0; i < kRequestsEach; ++i) {
        const pk::Problem& problem = shapes[engine() % shapes.size()];
        const uint32_t rows = 1 + static_cast<uint32_t>(engine() % 48);
        const v1::TopKRequest request =
            RandomRequest(problem, rows, engine, absl::StrCat("caller", caller, "-", i));
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        v1::TopKResponse response;
        const grpc::Status status = stub->TopK(&context, request, &response);
        if (!status.ok()) {
          ADD_FAILURE() << request.request_id() << ": " << status.error_message();
          ++failures;
          continue;
        }
        const std::string difference = CheckResponse(request, response);
        if (!difference.empty()) {
          ADD_FAILURE() << request.request_id() << ": " << difference;
          ++failures;
        }
        if (response.timing().batch_rows() > rows) ++batched_with_others;
      }
    });
  }
  for (std::thread& thread : callers) thread.join();
  EXPECT_EQ(failures.load(), 0);
  // Not a correctness requirement, but the point of the exercise: some batches were shared.
  EXPECT_GT(batched_with_others.load(), 0) << "no request ever shared a batch";
}

// One bad input, what its message must mention.
struct BadInput {
  const char* name;
  v1::TopKRequest request;
  const char* mention;
};

std::vector<BadInput> BadInputs() {
  std::mt19937_64 engine(5);
  const v1::TopKRequest good =
      RandomRequest(MakeProblem({64, 64}, 8, pk::DType::kFloat32), 3, engine);
  std::vector<BadInput> bad;
  const auto with = [&](const char* name, const char* mention, auto change) {
    v1::TopKRequest request = good;
    change(request);
    bad.push_back({name, request, mention});
  };
  with("one width", "factor_widths", [](auto& r) {
    r.clear_factor_widths();
    r.add_factor_widths(64);
  });
  with("five widths", "factor_widths", [](auto& r) {
    r.clear_factor_widths();
    for (int i = 0; i < 5; ++i) r.add_factor_widths(4);
  });
  with("width 0", "factor_widths[1]", [](auto& r) { r.set_factor_widths(1, 0); });
  with("width 65536", "65535", [](auto& r) { r.set_factor_widths(0, 65536); });
  with("33 slot bits", "slot bits", [](auto& r) {
    r.clear_factor_widths();
    for (uint32_t w : {1024u, 1024u, 1024u, 8u}) r.add_factor_widths(w);
  });
  with("k 0", "k must be in [1, 256], got 0", [](auto& r) { r.set_k(0); });
  with("k 257", "k must be in [1, 256], got 257", [](auto& r) { r.set_k(257); });
  with("dtype unspecified", "dtype", [](auto& r) { r.set_dtype(v1::DTYPE_UNSPECIFIED); });
  with("dtype 7", "dtype", [](auto& r) { r.set_dtype(static_cast<v1::DType>(7)); });
  with("payload one byte short", "scores", [](auto& r) { r.mutable_scores()->pop_back(); });
  with("payload one byte long", "scores", [](auto& r) { r.mutable_scores()->push_back('x'); });
  with("rows 0", "rows", [](auto& r) { r.set_rows(0); });
  with("rows over the limit", "max_rows_per_request", [](auto& r) { r.set_rows(2049); });
  with("rows disagree with payload", "scores", [](auto& r) { r.set_rows(4); });
  return bad;
}

TEST_F(ServiceTest, EachBadInputIsInvalidArgumentNamingTheFieldAndTheServerKeepsServing) {
  std::mt19937_64 engine(9);
  const v1::TopKRequest good =
      RandomRequest(MakeProblem({64, 64}, 8, pk::DType::kFloat32), 3, engine);
  for (const BadInput& bad : BadInputs()) {
    v1::TopKResponse response;
    const absl::Status status = CallTopK(bad.request, &response);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.name << ": " << status;
    EXPECT_NE(status.message().find(bad.mention), absl::string_view::npos)
        << bad.name << ": message '" << status.message() << "' does not mention '" << bad.mention
        << "'";
    // And the server still answers a good request.
    v1::TopKResponse good_response;
    ASSERT_TRUE(CallTopK(good, &good_response).ok()) << "after " << bad.name;
    EXPECT_EQ(CheckResponse(good, good_response), "");
  }
}

TEST_F(ServiceTest, AStreamAnswersABadRequestWithAStreamErrorAndGoesOn) {
  std::mt19937_64 engine(11);
  const pk::Problem problem = MakeProblem({64, 64}, 8, pk::DType::kFloat32);
  std::vector<v1::TopKRequest> requests;
  requests.push_back(RandomRequest(problem, 2, engine, "good-1"));
  for (const BadInput& bad : BadInputs()) {
    requests.push_back(bad.request);
    requests.back().set_request_id(bad.name);
  }
  requests.push_back(RandomRequest(problem, 5, engine, "good-2"));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub_->TopKStream(&context);
  for (const v1::TopKRequest& request : requests) ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  v1::TopKStreamResponse answer;
  for (const v1::TopKRequest& request : requests) {
    ASSERT_TRUE(stream->Read(&answer)) << "no answer for " << request.request_id();
    EXPECT_EQ(answer.request_id(), request.request_id());
    if (absl::StartsWith(request.request_id(), "good")) {
      ASSERT_TRUE(answer.has_result()) << answer.error().message();
      EXPECT_EQ(CheckResponse(request, answer.result()), "");
    } else {
      ASSERT_TRUE(answer.has_error()) << request.request_id() << " was not refused";
      EXPECT_EQ(answer.error().code(), grpc::StatusCode::INVALID_ARGUMENT)
          << request.request_id() << ": " << answer.error().message();
    }
  }
  EXPECT_FALSE(stream->Read(&answer));
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(ServiceTest, GetServerInfoReportsBackendLimitsAndBatching) {
  grpc::ClientContext context;
  v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&context, v1::ServerInfoRequest(), &info).ok());
  EXPECT_FALSE(info.version().empty());
  const bool cuda = LoopbackConfig().backend == Backend::kCuda;
  EXPECT_EQ(info.backend(), cuda ? "cuda" : "cpu");
  ASSERT_GE(info.devices_size(), 1);
  EXPECT_TRUE(absl::StartsWith(info.devices(0), cuda ? "cuda:" : "cpu: 2 threads"))
      << info.devices(0);
  EXPECT_EQ(info.limits().max_k(), 256u);
  EXPECT_EQ(info.limits().min_factors(), 2u);
  EXPECT_EQ(info.limits().max_factors(), 4u);
  EXPECT_EQ(info.limits().max_width(), 65535u);
  EXPECT_EQ(info.limits().max_slot_bits(), 32u);
  EXPECT_EQ(info.limits().max_rows_per_request(), 2048u);
  EXPECT_EQ(info.limits().max_message_bytes(), uint64_t{64} << 20);
  EXPECT_EQ(info.batching().max_batch_rows(), 1024u);
  EXPECT_EQ(info.batching().max_queue_delay_us(), 2000u);
  EXPECT_EQ(info.batching().max_queued_rows(), 65536u);
}

TEST_F(ServiceTest, HealthIsServingOverallAndForTheServiceAndUnknownServicesAreNotFound) {
  auto health = grpc::health::v1::Health::NewStub(testing::Connect(*server_));
  for (const char* service : {"", "pkserve.v1.SparseMemory"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(health->Check(&context, request, &response).ok()) << "'" << service << "'";
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_EQ(health->Check(&context, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, ReflectionListsTheService) {
  // grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo, spoken as raw bytes: the
  // request is {list_services: ""} (field 7, empty string).
  grpc::GenericStub generic(testing::Connect(*server_));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = generic.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  void* tag = nullptr;
  bool ok = false;
  const auto step = [&](intptr_t expected) {
    ASSERT_TRUE(queue.Next(&tag, &ok));
    ASSERT_EQ(reinterpret_cast<intptr_t>(tag), expected);
  };
  call->StartCall(reinterpret_cast<void*>(1));
  step(1);
  ASSERT_TRUE(ok);
  const char request_bytes[] = {0x3a, 0x00};
  grpc::Slice slice(request_bytes, sizeof request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  step(2);
  ASSERT_TRUE(ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  step(3);
  ASSERT_TRUE(ok) << "no reflection answer";
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& part : slices) {
    bytes.append(reinterpret_cast<const char*>(part.begin()), part.size());
  }
  EXPECT_NE(bytes.find("pkserve.v1.SparseMemory"), std::string::npos);
  EXPECT_NE(bytes.find("grpc.health.v1.Health"), std::string::npos);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  step(4);
  EXPECT_TRUE(status.ok()) << status.error_message();
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
}

TEST(ServiceLimits, AMessageOverMaxMessageBytesIsResourceExhausted) {
  ServerConfig config = LoopbackConfig();
  config.max_message_bytes = 64 << 10;
  std::unique_ptr<Server> server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(3);
  // 100 rows x 512 floats = 200 KiB.
  const v1::TopKRequest request =
      RandomRequest(MakeProblem({256, 256}, 8, pk::DType::kFloat32), 100, engine);
  grpc::ClientContext context;
  v1::TopKResponse response;
  const grpc::Status status = stub->TopK(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
}

TEST(ServiceLimits, AnAlreadyExpiredDeadlineIsDeadlineExceeded) {
  std::unique_ptr<Server> server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(3);
  const v1::TopKRequest request =
      RandomRequest(MakeProblem({64, 64}, 8, pk::DType::kFloat32), 2, engine);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
  v1::TopKResponse response;
  const grpc::Status status = stub->TopK(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
}

// A channel on a connection of its own: channels to one target otherwise share gRPC's global
// subchannel pool, and so one connection, which is one caller to the server.
std::unique_ptr<v1::SparseMemory::Stub> StubOnItsOwnConnection(const Server& server) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::SparseMemory::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", server.port()), grpc::InsecureChannelCredentials(), arguments));
}

// One stream pipelines far more rows than the whole queue holds while the executor is held; the
// per-caller share (--max_caller_queued_rows) refuses its excess at once, so a second caller on
// another connection still gets in, and is answered exactly once the executor runs.
TEST(CallerShare, AFloodingStreamCannotStarveASecondCaller) {
  ServerConfig config = LoopbackConfig();
  config.max_rows_per_request = 256;
  config.max_queued_rows = 4096;  // the flood below is 25600 rows
  config.max_caller_queued_rows = 1024;
  auto owned_gate = std::make_unique<testing::GatedExecutor>();
  testing::GatedExecutor* gate = owned_gate.get();
  std::unique_ptr<Server> server = StartServer(config, std::move(owned_gate));
  ASSERT_NE(server, nullptr);
  std::mt19937_64 engine(11);
  const pk::Problem problem = MakeProblem({16, 16}, 4, pk::DType::kFloat32);
  constexpr int kFlood = 100;

  auto flooder = StubOnItsOwnConnection(*server);
  grpc::ClientContext flood_context;
  flood_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto flood = flooder->TopKStream(&flood_context);
  std::vector<v1::TopKRequest> flood_requests;
  for (int i = 0; i < kFlood; ++i) {
    flood_requests.push_back(RandomRequest(problem, 256, engine, absl::StrCat("flood-", i)));
    ASSERT_TRUE(flood->Write(flood_requests.back()));
  }
  flood->WritesDone();
  // Let the server read the whole flood (without the share it would fill the queue).
  ASSERT_TRUE(gate->WaitForSubmitted(1, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(500));

  auto second = StubOnItsOwnConnection(*server);
  const v1::TopKRequest request = RandomRequest(problem, 256, engine, "second");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::TopKResponse response;
  std::promise<grpc::Status> second_done;
  second->async()->TopK(&context, &request, &response,
                        [&second_done](grpc::Status status) { second_done.set_value(status); });
  std::future<grpc::Status> second_status = second_done.get_future();
  // Accepted (queued behind the held batch), not refused: nothing is answered before the gate
  // opens but a refusal.
  ASSERT_NE(second_status.wait_for(std::chrono::milliseconds(500)), std::future_status::ready)
      << "the second caller was refused: " << second_status.get().error_message();
  gate->Open();
  const grpc::Status status = second_status.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(CheckResponse(request, response), "");

  // The flood: as many requests answered as its share holds, the rest refused naming the flag.
  int results = 0;
  int refused = 0;
  v1::TopKStreamResponse answer;
  for (int i = 0; i < kFlood; ++i) {
    ASSERT_TRUE(flood->Read(&answer)) << "the stream ended after " << i << " answers";
    EXPECT_EQ(answer.request_id(), absl::StrCat("flood-", i));
    if (answer.has_result()) {
      EXPECT_EQ(CheckResponse(flood_requests[i], answer.result()), "");
      ++results;
    } else {
      EXPECT_EQ(answer.error().code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
      EXPECT_NE(answer.error().message().find("--max_caller_queued_rows"), std::string::npos)
          << answer.error().message();
      ++refused;
    }
  }
  EXPECT_EQ(results, 1024 / 256) << "the flood got more or less than its share";
  EXPECT_EQ(refused, kFlood - results);
  EXPECT_TRUE(flood->Finish().ok());
}

// Past --max_open_streams a new stream ends at once with RESOURCE_EXHAUSTED naming the flag; once
// one closes, a new one is served.
TEST(StreamLimits, StreamsPastMaxOpenStreamsAreRefusedAtOnce) {
  ServerConfig config = LoopbackConfig();
  config.max_open_streams = 2;
  std::unique_ptr<Server> server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(5);
  const v1::TopKRequest request =
      RandomRequest(MakeProblem({64, 64}, 8, pk::DType::kFloat32), 2, engine, "r");
  const auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(30); };
  // Two open streams, each known to the server (it answered one request on each).
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::TopKRequest, v1::TopKStreamResponse>>>
      open;
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(deadline());
    open.push_back(stub->TopKStream(contexts.back().get()));
    ASSERT_TRUE(open.back()->Write(request));
    v1::TopKStreamResponse answer;
    ASSERT_TRUE(open.back()->Read(&answer));
    ASSERT_TRUE(answer.has_result()) << answer.error().message();
  }
  grpc::ClientContext refused_context;
  refused_context.set_deadline(deadline());
  auto refused = stub->TopKStream(&refused_context);
  refused->Write(request);
  refused->WritesDone();
  v1::TopKStreamResponse answer;
  EXPECT_FALSE(refused->Read(&answer)) << "a stream past --max_open_streams was answered";
  const grpc::Status status = refused->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("--max_open_streams"), std::string::npos)
      << status.error_message();

  open[0]->WritesDone();
  EXPECT_FALSE(open[0]->Read(&answer));
  EXPECT_TRUE(open[0]->Finish().ok());
  // The server forgets a stream when gRPC is done with it, a moment after the caller's Finish.
  grpc::Status later;
  for (int attempt = 0; attempt < 50; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    auto stream = stub->TopKStream(&context);
    stream->Write(request);
    stream->WritesDone();
    while (stream->Read(&answer)) {
    }
    later = stream->Finish();
    if (later.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(later.ok()) << later.error_message();
  open[1]->WritesDone();
  while (open[1]->Read(&answer)) {
  }
  EXPECT_TRUE(open[1]->Finish().ok());
}

}  // namespace
}  // namespace pkserve
