#include "tests/reliability/probe.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "tests/server/test_support.h"

namespace pkserve::testing {

Probe::Probe(std::shared_ptr<grpc::Channel> channel, absl::Duration pause, uint64_t seed)
    : channel_(std::move(channel)), pause_(pause) {
  thread_ = std::thread([this, seed] { Run(seed); });
}

Probe::~Probe() { Stop(); }

void Probe::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> Probe::failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

bool Probe::WaitForMore(int64_t count, absl::Duration timeout) const {
  const int64_t target = ok_.load() + count;
  const absl::Time deadline = absl::Now() + timeout;
  while (ok_.load() < target) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

void Probe::Run(uint64_t seed) {
  const std::vector<pk::Problem> shapes = {
      MakeProblem({256, 256}, 16, pk::DType::kFloat32),
      MakeProblem({1024, 64}, 32, pk::DType::kBFloat16),
      MakeProblem({16, 16, 16}, 8, pk::DType::kFloat32),
  };
  std::mt19937_64 engine(seed);
  auto stub = v1::SparseMemory::NewStub(channel_);
  for (int64_t i = 0; !stop_.load(); ++i) {
    const v1::TopKRequest request = RandomRequest(
        shapes[engine() % shapes.size()], 1 + engine() % 8, engine, absl::StrCat("probe-", i));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::TopKResponse response;
    const grpc::Status status = stub->TopK(&context, request, &response);
    std::string failure;
    if (!status.ok()) {
      failure = absl::StrCat(request.request_id(), ": status ", status.error_code(), " ",
                             status.error_message());
    } else if (std::string difference = CheckResponse(request, response); !difference.empty()) {
      failure = absl::StrCat(request.request_id(), ": ", difference);
    }
    if (failure.empty()) {
      ++ok_;
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failures_.size() < 20) failures_.push_back(std::move(failure));
    }
    absl::SleepFor(pause_);
  }
}

}  // namespace pkserve::testing
