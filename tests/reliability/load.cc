#include "tests/reliability/load.h"

#include <algorithm>
#include <cmath>

#include "tests/server/test_support.h"

namespace pkserve::testing {

// One call in flight; deletes itself when it finishes.
struct Load::Call {
  grpc::ClientContext context;
  v1::TopKResponse response;
  absl::Time start;
  int caller = -1;  // closed loop: who sends the next one; -1 for the open loop
  int request_index = 0;
  absl::Time stop_at;
};

Load::Load(std::vector<std::shared_ptr<grpc::Channel>> channels,
           const std::vector<v1::TopKRequest>* requests, absl::Duration deadline,
           bool check_answers)
    : channels_(std::move(channels)),
      requests_(requests),
      deadline_(deadline),
      check_answers_(check_answers) {
  for (const auto& channel : channels_) stubs_.push_back(v1::SparseMemory::NewStub(channel));
}

Load::~Load() { WaitAllDone(); }

void Load::Start(int caller, absl::Time stop_at) {
  const int64_t number = started_.fetch_add(1);
  auto* call = new Call;  // owned by the callback below, which deletes it
  call->caller = caller;
  call->stop_at = stop_at;
  call->request_index = static_cast<int>(number % static_cast<int64_t>(requests_->size()));
  call->start = absl::Now();
  call->context.set_deadline(absl::ToChronoTime(call->start + deadline_));
  ++outstanding_;
  stubs_[number % stubs_.size()]->async()->TopK(
      &call->context, &(*requests_)[call->request_index], &call->response,
      [this, call](grpc::Status status) { Finish(call, status); });
}

void Load::Finish(Call* call, const grpc::Status& status) {
  CallRecord record;
  record.code = status.error_code();
  record.latency = absl::Now() - call->start;
  record.request_index = call->request_index;
  if (status.ok()) {
    record.timing = call->response.timing();
    record.correct =
        !check_answers_ || CheckResponse((*requests_)[call->request_index], call->response).empty();
  }
  const int caller = call->caller;
  const absl::Time stop_at = call->stop_at;
  delete call;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    records_.push_back(record);
  }
  if (caller >= 0 && absl::Now() < stop_at) Start(caller, stop_at);
  --outstanding_;
}

void Load::WaitAllDone() {
  const absl::Time give_up = absl::Now() + deadline_ + absl::Seconds(30);
  while (outstanding_.load() > 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(2));
}

void Load::RunClosedLoop(int callers, absl::Duration duration) {
  const absl::Time stop_at = absl::Now() + duration;
  for (int caller = 0; caller < callers; ++caller) Start(caller, stop_at);
  absl::SleepFor(duration);
  WaitAllDone();
}

void Load::RunOpenLoop(double per_second, absl::Duration duration, int max_outstanding) {
  const absl::Time begin = absl::Now();
  const absl::Time end = begin + duration;
  int64_t sent = 0;
  for (absl::Time now = begin; now < end; now = absl::Now()) {
    // Every call due by now, in a burst; then a short sleep (sub-millisecond sleeps are coarse).
    const int64_t due = static_cast<int64_t>(absl::ToDoubleSeconds(now - begin) * per_second);
    for (; sent < due && outstanding_.load() < max_outstanding; ++sent) Start(-1, end);
    absl::SleepFor(absl::Microseconds(500));
  }
  WaitAllDone();
}

std::vector<CallRecord> Load::TakeRecords() {
  std::vector<CallRecord> taken;
  std::lock_guard<std::mutex> lock(mutex_);
  taken.swap(records_);
  return taken;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(q * values.size()));
  return values[index];
}

}  // namespace pkserve::testing
