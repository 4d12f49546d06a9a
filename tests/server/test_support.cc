#include "tests/server/test_support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/testing/random_rows.h"
#include "server/validation.h"
#if defined(PK_HAVE_CUDA)
#include "kernels/cuda/topk_cuda.h"
#endif

namespace pkserve::testing {

namespace {
bool CudaRequested() {
  const char* backend = std::getenv("PKSERVE_TEST_BACKEND");
  return backend != nullptr && std::strcmp(backend, "cuda") == 0;
}
}  // namespace

std::string TestBackendUnavailable() {
  if (!CudaRequested()) return "";
#if defined(PK_HAVE_CUDA)
  std::string why;
  return pk::cuda::DeviceAvailable(&why) ? "" : "PKSERVE_TEST_BACKEND=cuda: " + why;
#else
  return "PKSERVE_TEST_BACKEND=cuda: this build has no CUDA backend";
#endif
}

ServerConfig LoopbackConfig() {
  ServerConfig config;
  config.address = "127.0.0.1:0";
  config.backend = CudaRequested() ? Backend::kCuda : Backend::kCpu;
  config.threads = 2;
  config.max_queue_delay = absl::Milliseconds(2);
  config.drain_timeout = absl::Seconds(10);
  config.log_level = "warn";
  return config;
}

std::unique_ptr<Server> StartServer(const ServerConfig& config,
                                    std::unique_ptr<Executor> executor) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config, std::move(executor));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::shared_ptr<grpc::Channel> Connect(const Server& server) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server.port()),
                                   grpc::InsecureChannelCredentials(), arguments);
}

std::unique_ptr<v1::SparseMemory::Stub> NewStub(const Server& server) {
  return v1::SparseMemory::NewStub(Connect(server));
}

Expected Reference(const pk::Problem& problem, const std::byte* scores, size_t rows) {
  thread_local pk::cpu::Workspace workspace;
  Expected expected;
  expected.values.resize(rows * problem.out_value_bytes());
  expected.slots.resize(rows * problem.kk());
  pk::cpu::TopKRows(problem, scores, rows, expected.values.data(), expected.slots.data(),
                    workspace);
  return expected;
}

std::string CheckResponse(const v1::TopKRequest& request, const v1::TopKResponse& response) {
  absl::StatusOr<pk::Problem> problem = ValidateTopKRequest(request, 1u << 30);
  if (!problem.ok())
    return absl::StrCat("the request itself is invalid: ", problem.status().ToString());
  const Expected expected = Reference(
      *problem, reinterpret_cast<const std::byte*>(request.scores().data()), request.rows());
  if (response.rows() != request.rows() || response.kk() != problem->kk() ||
      response.dtype() != request.dtype() || response.request_id() != request.request_id()) {
    return absl::StrCat("header: expected rows ", request.rows(), " kk ", problem->kk(), " dtype ",
                        request.dtype(), " id '", request.request_id(), "', got rows ",
                        response.rows(), " kk ", response.kk(), " dtype ", response.dtype(),
                        " id '", response.request_id(), "'");
  }
  if (response.values().size() != expected.values.size() ||
      std::memcmp(response.values().data(), expected.values.data(), expected.values.size()) != 0) {
    return absl::StrCat("values differ from the CPU reference (", response.values().size(),
                        " bytes, expected ", expected.values.size(), ")");
  }
  if (response.slots().size() != expected.slots.size() * sizeof(uint32_t) ||
      std::memcmp(response.slots().data(), expected.slots.data(), response.slots().size()) != 0) {
    return "slots differ from the CPU reference";
  }
  return "";
}

pk::Problem MakeProblem(const std::vector<uint32_t>& widths, uint32_t k, pk::DType dtype) {
  pk::Result<pk::Problem> problem = pk::ValidateProblem(widths, k, dtype);
  EXPECT_TRUE(problem.ok()) << problem.error().message;
  return problem.value();
}

v1::TopKRequest RandomRequest(const pk::Problem& problem, uint32_t rows, std::mt19937_64& engine,
                              const std::string& request_id) {
  const auto distribution =
      pk::testing::kAllDistributions[engine() % std::size(pk::testing::kAllDistributions)];
  const std::vector<std::byte> scores =
      pk::testing::RandomRows(problem, rows, distribution, engine);
  v1::TopKRequest request;
  for (int f = 0; f < problem.factors; ++f) request.add_factor_widths(problem.widths[f]);
  request.set_k(problem.k);
  request.set_dtype(DTypeToWire(problem.dtype));
  request.set_rows(rows);
  request.set_scores(reinterpret_cast<const char*>(scores.data()), scores.size());
  request.set_request_id(request_id);
  return request;
}

namespace {

// The memory of a HeapBatch; a base class so that it exists before the Batch that points into it.
struct BatchStorage {
  BatchStorage(const pk::Problem& problem, size_t rows)
      : score_memory(rows * problem.row_bytes()),
        value_memory(rows * problem.out_value_bytes()),
        slot_memory(rows * problem.kk()) {}
  std::vector<std::byte> score_memory;
  std::vector<std::byte> value_memory;
  std::vector<uint32_t> slot_memory;
};

// A batch in memory of its own.
class HeapBatch final : private BatchStorage, public Batch {
 public:
  HeapBatch(const pk::Problem& problem, size_t rows)
      : BatchStorage(problem, rows),
        Batch(problem, rows, score_memory, value_memory, slot_memory) {}
};

}  // namespace

GatedExecutor::GatedExecutor(int max_in_flight, bool open, int concurrent)
    : max_in_flight_(max_in_flight), concurrent_(concurrent), open_(open) {
  thread_ = std::thread([this] { Loop(); });
}

GatedExecutor::~GatedExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    open_ = true;  // run what is left, so that every completion is delivered
  }
  thread_.join();
}

void GatedExecutor::Open() {
  absl::MutexLock lock(&mu_);
  open_ = true;
}

void GatedExecutor::Close() {
  absl::MutexLock lock(&mu_);
  open_ = false;
}

void GatedExecutor::FailWith(absl::Status status) {
  absl::MutexLock lock(&mu_);
  failure_ = std::move(status);
}

bool GatedExecutor::WaitForSubmitted(int count, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto enough = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(batch_rows_.size()) >= count;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

int GatedExecutor::batches_submitted() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(batch_rows_.size());
}

std::vector<size_t> GatedExecutor::batch_rows() const {
  absl::MutexLock lock(&mu_);
  return batch_rows_;
}

uint64_t GatedExecutor::rows_computed() const {
  absl::MutexLock lock(&mu_);
  return rows_computed_;
}

size_t GatedExecutor::max_batch_rows(const pk::Problem& /*problem*/) const { return 1 << 20; }

absl::StatusOr<std::unique_ptr<Batch>> GatedExecutor::NewBatch(const pk::Problem& problem,
                                                               size_t rows) {
  return std::make_unique<HeapBatch>(problem, rows);
}

void GatedExecutor::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  absl::MutexLock lock(&mu_);
  batch_rows_.push_back(batch->rows());
  pending_.emplace_back(std::move(batch), std::move(done));
}

bool GatedExecutor::CanRun() const {
  return (open_ && !pending_.empty()) || (stopping_ && pending_.empty());
}

void GatedExecutor::Loop() {
  pk::cpu::Workspace workspace;
  while (true) {
    std::pair<std::unique_ptr<Batch>, BatchDone> work;
    absl::Status failure;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &GatedExecutor::CanRun));
      if (pending_.empty()) return;  // stopping
      work = std::move(pending_.front());
      pending_.erase(pending_.begin());
      failure = failure_;
    }
    Batch& batch = *work.first;
    if (failure.ok()) {
      batch.GatherScores();
      pk::cpu::TopKRows(batch.problem(), batch.scores().data(), batch.rows(), batch.values().data(),
                        batch.slots().data(), workspace);
      absl::MutexLock lock(&mu_);
      rows_computed_ += batch.rows();
    }
    std::move(work.second)(std::move(work.first), BatchOutcome{failure, absl::Microseconds(1)});
  }
}

}  // namespace pkserve::testing
