// Overload, deadlines and shutdown through a real gRPC server whose executor the test holds
// closed: queue full, a deadline that passes in the queue, and the drain sequence (health
// NOT_SERVING, new work UNAVAILABLE, accepted work answered).
#include <gtest/gtest.h>

#include <future>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::CheckResponse;
using testing::GatedExecutor;
using testing::LoopbackConfig;
using testing::MakeProblem;
using testing::RandomRequest;

struct CallResult {
  grpc::Status status;
  v1::TopKResponse response;
};

class LifecycleTest : public ::testing::Test {
 protected:
  void Start(ServerConfig config) {
    auto executor = std::make_unique<GatedExecutor>(/*max_in_flight=*/1);
    gate_ = executor.get();
    server_ = testing::StartServer(config, std::move(executor));
    ASSERT_NE(server_, nullptr);
    stub_ = testing::NewStub(*server_);
    health_ = grpc::health::v1::Health::NewStub(testing::Connect(*server_));
  }
  void TearDown() override {
    if (gate_ != nullptr) gate_->Open();  // nothing may stay held while the server stops
    server_.reset();
  }

  // A TopK call on another thread.
  std::future<CallResult> CallAsync(v1::TopKRequest request,
                                    absl::Duration deadline = absl::Seconds(30)) {
    return std::async(std::launch::async, [this, request = std::move(request), deadline] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
      CallResult result;
      result.status = stub_->TopK(&context, request, &result.response);
      return result;
    });
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& service) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health_->Check(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.status();
  }

  // Polls until `done` holds, at most `timeout`.
  template <typename Predicate>
  static bool Eventually(Predicate done, absl::Duration timeout = absl::Seconds(5)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return done();
  }

  GatedExecutor* gate_ = nullptr;  // owned by server_
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::SparseMemory::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  std::mt19937_64 engine_{17};
  const pk::Problem problem_ = MakeProblem({128, 128}, 16, pk::DType::kBFloat16);
};

TEST_F(LifecycleTest, QueueFullIsResourceExhaustedAtOnce) {
  ServerConfig config = LoopbackConfig();
  config.max_rows_per_request = 8;
  config.max_queued_rows = 8;
  config.max_caller_queued_rows = 1000;  // the batcher's bound, not the per-caller one
  Start(config);
  const v1::TopKRequest held = RandomRequest(problem_, 4, engine_, "held");
  const v1::TopKRequest queued = RandomRequest(problem_, 8, engine_, "queued");
  const v1::TopKRequest refused = RandomRequest(problem_, 1, engine_, "refused");
  std::future<CallResult> held_call = CallAsync(held);
  ASSERT_TRUE(gate_->WaitForSubmitted(1, absl::Seconds(10)));
  std::future<CallResult> queued_call = CallAsync(queued);
  ASSERT_TRUE(Eventually([&] { return server_->batcher_stats().requests_accepted == 2; }));

  const absl::Time start = absl::Now();
  std::future<CallResult> refused_call = CallAsync(refused);
  const CallResult refusal = refused_call.get();
  EXPECT_EQ(refusal.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refusal.status.error_message();
  EXPECT_NE(refusal.status.error_message().find("max_queued_rows"), std::string::npos)
      << refusal.status.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "a full queue must refuse at once";

  gate_->Open();
  for (auto* call : {&held_call, &queued_call}) {
    const CallResult result = call->get();
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  }
}

TEST_F(LifecycleTest, ADeadlineThatPassesInTheQueueIsDroppedBeforeCompute) {
  Start(LoopbackConfig());
  const v1::TopKRequest held = RandomRequest(problem_, 3, engine_, "held");
  const v1::TopKRequest late = RandomRequest(problem_, 5, engine_, "late");
  std::future<CallResult> held_call = CallAsync(held);
  ASSERT_TRUE(gate_->WaitForSubmitted(1, absl::Seconds(10)));
  const CallResult late_result = CallAsync(late, absl::Milliseconds(150)).get();
  EXPECT_EQ(late_result.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server drops it from its queue by itself, without computing it.
  EXPECT_TRUE(Eventually([&] { return server_->batcher_stats().requests_dropped_deadline == 1; }))
      << "the expired request was not dropped";
  gate_->Open();
  const CallResult held_result = held_call.get();
  ASSERT_TRUE(held_result.status.ok()) << held_result.status.error_message();
  EXPECT_EQ(CheckResponse(held, held_result.response), "");
  EXPECT_EQ(gate_->rows_computed(), 3u) << "the expired request's rows were computed";
}

TEST_F(LifecycleTest, ACancelledStreamsQueuedRequestsAreDroppedAndTheServerGoesOn) {
  Start(LoopbackConfig());
  {
    grpc::ClientContext context;
    auto stream = stub_->TopKStream(&context);
    // The first request alone in the executor's one batch (sent together, several could share
    // it when the batcher thread wakes late), then five queued behind it.
    ASSERT_TRUE(stream->Write(RandomRequest(problem_, 2, engine_, "s0")));
    ASSERT_TRUE(gate_->WaitForSubmitted(1, absl::Seconds(10)));
    for (int i = 1; i < 6; ++i) {
      ASSERT_TRUE(stream->Write(RandomRequest(problem_, 2, engine_, absl::StrCat("s", i))));
    }
    ASSERT_TRUE(Eventually([&] { return server_->batcher_stats().requests_accepted == 6; }));
    context.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The first request is held in the executor; the five queued behind it are dropped unrun.
  EXPECT_TRUE(Eventually([&] { return server_->batcher_stats().requests_dropped_cancelled == 5; }))
      << "dropped " << server_->batcher_stats().requests_dropped_cancelled;
  gate_->Open();
  const v1::TopKRequest after = RandomRequest(problem_, 3, engine_, "after");
  const CallResult result = CallAsync(after).get();
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(CheckResponse(after, result.response), "");
  EXPECT_EQ(gate_->rows_computed(), 2u + 3u);
}

TEST_F(LifecycleTest, DrainTurnsHealthNotServingRefusesNewWorkAndAnswersAcceptedWork) {
  Start(LoopbackConfig());
  EXPECT_EQ(Health(""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(kServiceName), grpc::health::v1::HealthCheckResponse::SERVING);

  // Accepted before the drain: one computing (held), one queued, one on a stream.
  const v1::TopKRequest computing = RandomRequest(problem_, 2, engine_, "computing");
  const v1::TopKRequest queued = RandomRequest(problem_, 6, engine_, "queued");
  const v1::TopKRequest streamed = RandomRequest(problem_, 3, engine_, "streamed");
  std::future<CallResult> computing_call = CallAsync(computing);
  ASSERT_TRUE(gate_->WaitForSubmitted(1, absl::Seconds(10)));
  std::future<CallResult> queued_call = CallAsync(queued);
  grpc::ClientContext stream_context;
  auto stream = stub_->TopKStream(&stream_context);
  ASSERT_TRUE(stream->Write(streamed));
  ASSERT_TRUE(Eventually([&] { return server_->batcher_stats().requests_accepted == 3; }));

  std::thread drain([&] { server_->Drain(absl::Seconds(20)); });
  EXPECT_TRUE(Eventually([&] {
    return Health("") == grpc::health::v1::HealthCheckResponse::NOT_SERVING;
  })) << "health did not turn NOT_SERVING while draining";
  EXPECT_EQ(Health(kServiceName), grpc::health::v1::HealthCheckResponse::NOT_SERVING);

  // New work is refused while the accepted work is still held.
  const CallResult refused = CallAsync(RandomRequest(problem_, 1, engine_, "new")).get();
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();
  {
    grpc::ClientContext late_context;
    auto late_stream = stub_->TopKStream(&late_context);
    late_stream->Write(RandomRequest(problem_, 1, engine_, "late-stream"));
    late_stream->WritesDone();
    v1::TopKStreamResponse answer;
    while (late_stream->Read(&answer)) {
      ASSERT_TRUE(answer.has_error()) << "a stream opened while draining was served";
      EXPECT_EQ(answer.error().code(), grpc::StatusCode::UNAVAILABLE);
    }
    EXPECT_EQ(late_stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(gate_->rows_computed(), 0u);

  // Let the held work run: everything accepted is answered, exactly.
  gate_->Open();
  for (auto* call : {&computing_call, &queued_call}) {
    const CallResult result = call->get();
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  }
  v1::TopKStreamResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  ASSERT_TRUE(answer.has_result()) << answer.error().message();
  EXPECT_EQ(CheckResponse(streamed, answer.result()), "");
  // The stream then ends: UNAVAILABLE, every request it accepted answered.
  EXPECT_FALSE(stream->Read(&answer));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  drain.join();
  EXPECT_EQ(gate_->rows_computed(), 11u);
}

}  // namespace
}  // namespace pkserve
