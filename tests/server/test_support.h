// Shared by the server and client tests: an in-process pkserve on loopback, the CPU reference a
// response must equal, random requests, and an executor that holds batches until told to run
// them (to make queue-full, deadline and drain behaviour deterministic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "kernels/problem.h"
#include "pkserve/v1/pkserve.grpc.pb.h"
#include "server/config.h"
#include "server/executor.h"
#include "server/server.h"

namespace pkserve::testing {

// A config for tests: loopback, a free port, 2 threads, short drain. The backend is the CPU, or
// CUDA when the environment says PKSERVE_TEST_BACKEND=cuda (the service tests then run on a GPU).
ServerConfig LoopbackConfig();

// "" when the backend LoopbackConfig() picks can run here, else why not (tests skip with it).
std::string TestBackendUnavailable();

// Starts a server (failing the current test if it cannot).
std::unique_ptr<Server> StartServer(const ServerConfig& config,
                                    std::unique_ptr<Executor> executor = nullptr);

std::shared_ptr<grpc::Channel> Connect(const Server& server);
std::unique_ptr<v1::SparseMemory::Stub> NewStub(const Server& server);

// The expected output of `rows` rows: what the CPU implementation gives for them alone.
struct Expected {
  std::vector<std::byte> values;
  std::vector<uint32_t> slots;
};
Expected Reference(const pk::Problem& problem, const std::byte* scores, size_t rows);

// Returns "" when `response` is the reference output for `request`, else what differs.
std::string CheckResponse(const v1::TopKRequest& request, const v1::TopKResponse& response);

pk::Problem MakeProblem(const std::vector<uint32_t>& widths, uint32_t k, pk::DType dtype);
v1::TopKRequest RandomRequest(const pk::Problem& problem, uint32_t rows, std::mt19937_64& engine,
                              const std::string& request_id = "");

// An executor that computes batches on its own thread, but only while open: closed, it holds every
// submitted batch until Open(). FailWith() makes batches fail instead.
class GatedExecutor final : public Executor {
 public:
  // `concurrent`: what concurrent_batches() reports (1..max_in_flight); batches run one at a
  // time here regardless.
  explicit GatedExecutor(int max_in_flight = 1, bool open = false, int concurrent = 1);
  ~GatedExecutor() override;

  void Open();
  void Close();
  // Makes every batch fail with `status` instead of computing.
  void FailWith(absl::Status status);
  // Waits until `count` batches have been submitted in all; false on timeout.
  bool WaitForSubmitted(int count, absl::Duration timeout);
  int batches_submitted() const;
  std::vector<size_t> batch_rows() const;  // rows of each submitted batch, in order
  uint64_t rows_computed() const;

  std::string_view backend() const override { return "gated-test"; }
  std::vector<std::string> devices() const override { return {"test: gated cpu"}; }
  int max_in_flight() const override { return max_in_flight_; }
  int concurrent_batches() const override { return concurrent_; }
  size_t max_batch_rows(const pk::Problem& problem) const override;
  absl::StatusOr<std::unique_ptr<Batch>> NewBatch(const pk::Problem& problem, size_t rows) override;
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override;

 private:
  void Loop();
  bool CanRun() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_in_flight_;
  const int concurrent_;
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::unique_ptr<Batch>, BatchDone>> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> batch_rows_ ABSL_GUARDED_BY(mu_);
  uint64_t rows_computed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace pkserve::testing
