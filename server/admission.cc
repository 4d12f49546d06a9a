#include "server/admission.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
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

absl::Status ParseTopKRequest(grpc::ByteBuffer& message, v1::TopKRequest* request) {
  const size_t bytes = message.Length();
  bool parsed = false;
  if (!message.Valid()) {
    parsed = request->ParseFromString("");  // gRPC's form of an empty message
  } else {
    grpc::ProtoBufferReader reader(&message);
    parsed = reader.status().ok() && request->ParseFromZeroCopyStream(&reader);
  }
  if (parsed) return absl::OkStatus();
  request->Clear();
  return absl::InvalidArgumentError(
      absl::StrCat("the message is not a pkserve.v1.TopKRequest: its ", bytes,
                   " bytes do not parse as one (see proto/pkserve/v1/pkserve.proto)"));
}

absl::Status SerializeMessage(const google::protobuf::MessageLite& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  const grpc::Status status = grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(
      message, out, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("could not serialize the answer: ", status.error_message()));
}

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

Admission::Admission(Batcher& batcher, uint32_t max_rows_per_request,
                     uint64_t max_caller_queued_rows)
    : batcher_(batcher),
      max_rows_per_request_(max_rows_per_request),
      caller_rows_(max_caller_queued_rows) {}

absl::Status Admission::Submit(absl::string_view caller, const v1::TopKRequest& request,
                               v1::TopKResponse* response, absl::Time deadline,
                               absl::AnyInvocable<bool() const> is_cancelled,
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
  if (absl::Status share = caller_rows_.Acquire(caller, rows); !share.ok()) {
    return refuse(std::move(share));
  }
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
  work->done = [&request, response, done = std::move(done), &caller_rows = caller_rows_,
                caller = std::string(caller)](absl::Status status,
                                              const WorkTiming& timing) mutable {
    caller_rows.Release(caller, request.rows());
    v1::Timing* wire = response->mutable_timing();
    wire->set_queue_us(static_cast<uint64_t>(absl::ToInt64Microseconds(timing.queue)));
    wire->set_compute_us(static_cast<uint64_t>(absl::ToInt64Microseconds(timing.compute)));
    wire->set_batch_rows(timing.batch_rows);
    LogRequest(request, status, &timing);
    std::move(done)(std::move(status));
  };
  absl::Status queued = batcher_.Enqueue(std::move(work));
  if (!queued.ok()) {
    caller_rows_.Release(caller, rows);
    return refuse(std::move(queued));
  }
  return absl::OkStatus();
}

}  // namespace pkserve
