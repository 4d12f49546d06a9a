#include "server/admission.h"

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

void LogRequest(const v1::TopKRequest& request, const absl::Status& status,
                const WorkTiming* timing) {
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

}  // namespace

Admission::Admission(Batcher& batcher, uint32_t max_rows_per_request)
    : batcher_(batcher), max_rows_per_request_(max_rows_per_request) {}

absl::Status Admission::Submit(const v1::TopKRequest& request, v1::TopKResponse* response,
                               absl::Time deadline, absl::AnyInvocable<bool() const> is_cancelled,
                               absl::AnyInvocable<void(absl::Status) &&> done) {
  const auto refuse = [&request](absl::Status status) {
    LogRequest(request, status, nullptr);
    return status;
  };
  if (draining()) {
    return refuse(absl::UnavailableError("the server is draining; retry on another replica"));
  }
  absl::StatusOr<pk::Problem> problem = ValidateTopKRequest(request, max_rows_per_request_);
  if (!problem.ok()) return refuse(problem.status());

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
  work->scores = std::as_bytes(std::span(request.scores()));
  work->values = std::as_writable_bytes(std::span(*values));
  work->slots = std::as_writable_bytes(std::span(*slots));
  work->deadline = deadline;
  work->is_cancelled = std::move(is_cancelled);
  work->done = [&request, response, done = std::move(done)](absl::Status status,
                                                            const WorkTiming& timing) mutable {
    v1::Timing* wire = response->mutable_timing();
    wire->set_queue_us(static_cast<uint64_t>(absl::ToInt64Microseconds(timing.queue)));
    wire->set_compute_us(static_cast<uint64_t>(absl::ToInt64Microseconds(timing.compute)));
    wire->set_batch_rows(timing.batch_rows);
    LogRequest(request, status, &timing);
    std::move(done)(std::move(status));
  };
  absl::Status queued = batcher_.Enqueue(std::move(work));
  if (!queued.ok()) return refuse(std::move(queued));
  return absl::OkStatus();
}

}  // namespace pkserve
