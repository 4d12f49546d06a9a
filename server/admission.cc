#include "server/admission.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/validation.h"
#include "spdlog/spdlog.h"

namespace pkserve {
namespace {

std::string ShapeText(const v1::TopKRequest& request) {
  return absl::StrCat(absl::StrJoin(request.factor_widths(), "x"), " k=", request.k(), " ",
                      v1::DType_IsValid(request.dtype())
                          ? v1::DType_Name(static_cast<v1::DType>(request.dtype()))
                          : std::to_string(request.dtype()));
}

std::string ShapeText(const v1::LookupRequest& request) {
  return absl::StrCat(
      "memory=", request.memory(), " k=", request.k(), " heads=", request.heads(), " ",
      v1::DType_IsValid(request.dtype()) ? v1::DType_Name(static_cast<v1::DType>(request.dtype()))
                                         : std::to_string(request.dtype()));
}

template <typename Request>
void LogRequest(const Request& request, const absl::Status& status, const WorkTiming* timing) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  if (timing == nullptr) {
    spdlog::debug("request id='{}' shape={} rows={} -> {}", request.request_id(),
                  ShapeText(request), request.rows(), status.ToString());
    return;
  }
  spdlog::debug("request id='{}' shape={} rows={} -> {} queue_us={} compute_us={} batch_rows={}",
                request.request_id(), ShapeText(request), request.rows(), status.ToString(),
                absl::ToInt64Microseconds(timing->queue),
                absl::ToInt64Microseconds(timing->compute), timing->batch_rows);
}

// `status`, logged as the answer to `request`, refused before it was queued.
template <typename Request>
absl::Status Refused(const Request& request, absl::Status status) {
  LogRequest(request, status, nullptr);
  return status;
}

absl::Status DrainingError() {
  return absl::UnavailableError("the server is draining; retry on another replica");
}

}  // namespace

absl::Status CallerRows::Acquire(absl::string_view caller, uint64_t rows) {
  absl::MutexLock lock(&mu_);
  auto it = rows_.find(caller);
  const uint64_t held = it == rows_.end() ? 0 : it->second;
  if (held + rows > max_rows_per_caller_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this caller's share of the queue is full: ", held,
        " of its rows are queued or computing, ", rows, " more would pass the per-caller limit of ",
        max_rows_per_caller_,
        " (--max_caller_queued_rows); retry once answers come back, or spread the load over more "
        "connections"));
  }
  if (it == rows_.end()) it = rows_.emplace(std::string(caller), 0).first;
  it->second += rows;
  return absl::OkStatus();
}

void CallerRows::Release(absl::string_view caller, uint64_t rows) {
  absl::MutexLock lock(&mu_);
  auto it = rows_.find(caller);
  if (it == rows_.end()) return;
  it->second -= std::min(it->second, rows);
  if (it->second == 0) rows_.erase(it);
}

uint64_t CallerRows::rows(absl::string_view caller) const {
  absl::MutexLock lock(&mu_);
  auto it = rows_.find(caller);
  return it == rows_.end() ? 0 : it->second;
}

Admission::Admission(Batcher& batcher, const MemoryStore& memories, uint32_t max_rows_per_request,
                     uint64_t max_caller_queued_rows)
    : batcher_(batcher),
      memories_(memories),
      max_rows_per_request_(max_rows_per_request),
      caller_rows_(max_caller_queued_rows) {}

template <typename Request>
absl::Status Admission::Queue(absl::string_view caller, const Request& request,
                              std::unique_ptr<Work> work, absl::Time deadline,
                              absl::AnyInvocable<bool() const> is_cancelled, v1::Timing* timing,
                              absl::AnyInvocable<void(absl::Status) &&> done) {
  const uint32_t rows = work->rows;
  if (absl::Status share = caller_rows_.Acquire(caller, rows); !share.ok()) {
    return Refused(request, std::move(share));
  }
  work->deadline = deadline;
  work->is_cancelled = std::move(is_cancelled);
  work->done = [&request, timing, rows, done = std::move(done), &caller_rows = caller_rows_,
                caller = std::string(caller)](absl::Status status,
                                              const WorkTiming& work_timing) mutable {
    caller_rows.Release(caller, rows);
    timing->set_queue_us(static_cast<uint64_t>(absl::ToInt64Microseconds(work_timing.queue)));
    timing->set_compute_us(static_cast<uint64_t>(absl::ToInt64Microseconds(work_timing.compute)));
    timing->set_batch_rows(work_timing.batch_rows);
    LogRequest(request, status, &work_timing);
    std::move(done)(std::move(status));
  };
  absl::Status queued = batcher_.Enqueue(std::move(work));
  if (queued.ok()) return queued;
  caller_rows_.Release(caller, rows);
  return Refused(request, std::move(queued));
}

absl::Status Admission::Submit(absl::string_view caller, const ReceivedTopK& received,
                               v1::TopKResponse* response, absl::Time deadline,
                               absl::AnyInvocable<bool() const> is_cancelled,
                               absl::AnyInvocable<void(absl::Status) &&> done) {
  const v1::TopKRequest& request = received.request;
  if (draining()) return Refused(request, DrainingError());
  absl::StatusOr<pk::Problem> problem =
      ValidateTopKRequest(request, received.scores.bytes(), max_rows_per_request_);
  if (!problem.ok()) return Refused(request, problem.status());

  const uint32_t rows = request.rows();
  response->set_rows(rows);
  response->set_kk(problem->kk());
  response->set_dtype(DTypeToWire(problem->dtype));
  response->set_request_id(request.request_id());
  std::string* values = response->mutable_values();
  std::string* slots = response->mutable_slots();
  values->resize(size_t{rows} * problem->out_value_bytes());
  slots->resize(size_t{rows} * problem->kk() * sizeof(uint32_t));

  auto work = std::make_unique<Work>();
  work->problem = *problem;
  work->rows = rows;
  work->scores = received.scores;
  work->values = std::as_writable_bytes(std::span(*values));
  work->slots = std::as_writable_bytes(std::span(*slots));
  return Queue(caller, request, std::move(work), deadline, std::move(is_cancelled),
               response->mutable_timing(), std::move(done));
}

absl::Status Admission::SubmitLookup(absl::string_view caller, const ReceivedLookup& received,
                                     v1::LookupResponse* response, absl::Time deadline,
                                     absl::AnyInvocable<bool() const> is_cancelled,
                                     absl::AnyInvocable<void(absl::Status) &&> done) {
  const v1::LookupRequest& request = received.request;
  if (draining()) return Refused(request, DrainingError());
  if (!memories_ready_.load(std::memory_order_acquire)) {
    return Refused(
        request,
        absl::UnavailableError(
            "the server is still loading its memories (health NOT_SERVING); retry shortly"));
  }
  absl::StatusOr<LookupSpec> spec =
      ValidateLookupRequest(request, received.scores.bytes(), max_rows_per_request_, memories_);
  if (!spec.ok()) return Refused(request, spec.status());

  const pk::LookupProblem& lookup = spec->problem;
  const uint32_t rows = request.rows();
  const uint32_t outputs = rows / lookup.heads;
  response->set_outputs(outputs);
  response->set_dim(lookup.dim);
  response->set_dtype(DTypeToWire(lookup.output_dtype));
  response->set_request_id(request.request_id());
  response->set_memory_version(spec->memory->version());
  std::string* values = response->mutable_values();
  values->resize(size_t{outputs} * lookup.output_row_bytes());

  auto work = std::make_unique<Work>();
  work->problem = lookup.topk;
  work->lookup = *spec;
  work->rows = rows;
  work->scores = received.scores;
  work->values = std::as_writable_bytes(std::span(*values));
  if (request.return_slots()) {
    const size_t pairs = size_t{rows} * lookup.topk.kk();
    response->set_kk(lookup.topk.kk());
    response->mutable_slots()->resize(pairs * sizeof(uint32_t));
    response->mutable_weights()->resize(pairs * sizeof(float));
    work->slots = std::as_writable_bytes(std::span(*response->mutable_slots()));
    work->weights = std::as_writable_bytes(std::span(*response->mutable_weights()));
  }
  return Queue(caller, request, std::move(work), deadline, std::move(is_cancelled),
               response->mutable_timing(), std::move(done));
}

}  // namespace pkserve
