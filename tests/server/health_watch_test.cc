// The health service follows the executor's healthy(): an executor that goes out of service (as
// the CUDA executor does when every device has failed) turns health NOT_SERVING, and back.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/cpu_executor.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using HealthStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

// A CPU executor whose healthy() the test sets.
class SwitchableExecutor final : public Executor {
 public:
  std::atomic<bool> is_healthy{true};

  std::string_view backend() const override { return cpu_.backend(); }
  std::vector<std::string> devices() const override { return cpu_.devices(); }
  int max_in_flight() const override { return cpu_.max_in_flight(); }
  size_t max_batch_rows(const pk::Problem& problem) const override {
    return cpu_.max_batch_rows(problem);
  }
  absl::StatusOr<std::unique_ptr<Batch>> NewBatch(const pk::Problem& problem,
                                                  size_t rows) override {
    return cpu_.NewBatch(problem, rows);
  }
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override {
    cpu_.Submit(std::move(batch), std::move(done));
  }
  bool healthy() const override { return is_healthy; }

 private:
  CpuExecutor cpu_{CpuExecutor::Options{}};
};

HealthStatus Check(grpc::health::v1::Health::Stub& health, const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health.Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// Polls until the health of `service` is `want` or 3 s pass; returns the last status seen.
HealthStatus WaitFor(grpc::health::v1::Health::Stub& health, const std::string& service,
                     HealthStatus want) {
  HealthStatus seen = Check(health, service);
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  while (seen != want && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    seen = Check(health, service);
  }
  return seen;
}

TEST(HealthWatch, FollowsTheExecutor) {
  auto executor = std::make_unique<SwitchableExecutor>();
  SwitchableExecutor* switchable = executor.get();
  auto server = testing::StartServer(testing::LoopbackConfig(), std::move(executor));
  ASSERT_NE(server, nullptr);
  auto health = grpc::health::v1::Health::NewStub(testing::Connect(*server));
  const auto kServing = grpc::health::v1::HealthCheckResponse::SERVING;
  const auto kNotServing = grpc::health::v1::HealthCheckResponse::NOT_SERVING;
  for (const std::string service : {"", kServiceName}) {
    EXPECT_EQ(Check(*health, service), kServing) << "service '" << service << "'";
  }
  switchable->is_healthy = false;
  for (const std::string service : {"", kServiceName}) {
    EXPECT_EQ(WaitFor(*health, service, kNotServing), kNotServing) << "service '" << service << "'";
  }
  switchable->is_healthy = true;
  for (const std::string service : {"", kServiceName}) {
    EXPECT_EQ(WaitFor(*health, service, kServing), kServing) << "service '" << service << "'";
  }
  server->Drain(absl::Seconds(2));
}

}  // namespace
}  // namespace pkserve
