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

// One message's bytes, read in order across its slices.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }

  bool done() const { return index_ == slices_.size(); }

  // A varint of at most 10 bytes, its bytes also appended to `raw`; false if cut short or longer.
  bool ReadVarint(uint64_t* value, std::string* raw) {
    *value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (done()) return false;
      const uint8_t byte = slices_[index_].begin()[offset_];
      Advance(1);
      raw->push_back(static_cast<char>(byte));
      *value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // The next `n` bytes, appended to `raw`; false if fewer remain.
  bool Copy(uint64_t n, std::string* raw) {
    return Walk(n, [raw](const uint8_t* data, size_t size) {
      raw->append(reinterpret_cast<const char*>(data), size);
    });
  }

  // The next `n` bytes where they lie: one piece per slice they touch; false if fewer remain.
  bool Take(uint64_t n, std::vector<std::span<const std::byte>>* pieces) {
    return Walk(n, [pieces](const uint8_t* data, size_t size) {
      pieces->push_back(std::as_bytes(std::span(data, size)));
    });
  }

 private:
  template <typename Visit>
  bool Walk(uint64_t n, Visit visit) {
    while (n > 0) {
      if (done()) return false;
      const grpc::Slice& slice = slices_[index_];
      const size_t run = static_cast<size_t>(std::min<uint64_t>(n, slice.size() - offset_));
      visit(slice.begin() + offset_, run);
      Advance(run);
      n -= run;
    }
    return true;
  }
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (index_ < slices_.size() && slices_[index_].size() == 0) ++index_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

constexpr uint32_t kScoresField = 5;  // TopKRequest.scores (proto/pkserve/v1/pkserve.proto)

// The quick path: walks the message's fields across its slices, leaving the last `scores` field's
// bytes where they are and copying every other field, as received, into one string that protobuf
// then parses. False for anything it does not handle (groups, malformed bytes), which the full
// parser then judges.
bool ParseLeavingScores(grpc::ByteBuffer& message, ReceivedTopK* received) {
  if (!message.Dump(&received->slices).ok()) return false;
  SliceReader reader(received->slices);
  std::string other_fields;
  while (!reader.done()) {
    uint64_t tag = 0;
    std::string tag_bytes;
    if (!reader.ReadVarint(&tag, &tag_bytes)) return false;
    const uint64_t field = tag >> 3;
    const uint64_t wire_type = tag & 7;
    // Only what protobuf surely takes: a tag in at most 5 bytes, a field number in range.
    if (tag_bytes.size() > 5 || field == 0 || field > 0x1fffffff) return false;
    if (field == kScoresField && wire_type == 2) {
      uint64_t length = 0;
      std::string length_bytes;
      if (!reader.ReadVarint(&length, &length_bytes)) return false;
      if (length_bytes.size() > 5 || length > 0x7fffffff) return false;
      received->scores.clear();  // a repeated singular field: the last one counts, as in protobuf
      if (!reader.Take(length, &received->scores)) return false;
      continue;
    }
    other_fields += tag_bytes;
    uint64_t value = 0;
    switch (wire_type) {
      case 0:
        if (!reader.ReadVarint(&value, &other_fields)) return false;
        break;
      case 1:
        if (!reader.Copy(8, &other_fields)) return false;
        break;
      case 2:
        if (!reader.ReadVarint(&value, &other_fields) || !reader.Copy(value, &other_fields)) {
          return false;
        }
        break;
      case 5:
        if (!reader.Copy(4, &other_fields)) return false;
        break;
      default:
        return false;  // groups and invalid wire types
    }
  }
  return received->request.ParseFromString(other_fields);
}

}  // namespace

size_t ReceivedTopK::scores_bytes() const {
  size_t bytes = 0;
  for (const std::span<const std::byte>& piece : scores) bytes += piece.size();
  return bytes;
}

void ReceivedTopK::Clear() {
  request = v1::TopKRequest();
  scores = {};
  slices = {};
}

absl::Status ParseTopKRequest(grpc::ByteBuffer& message, ReceivedTopK* received) {
  received->Clear();
  if (!message.Valid()) {  // gRPC's form of an empty message
    if (received->request.ParseFromString("")) return absl::OkStatus();
  } else if (ParseLeavingScores(message, received)) {
    return absl::OkStatus();
  }
  // The full parser, for what the quick path does not take; it has the last word on what parses.
  received->Clear();
  const size_t bytes = message.Length();
  bool parsed = false;
  if (message.Valid()) {
    grpc::ProtoBufferReader reader(&message);
    parsed = reader.status().ok() && received->request.ParseFromZeroCopyStream(&reader);
  }
  if (parsed) {
    if (!received->request.scores().empty()) {
      received->scores.push_back(std::as_bytes(std::span(received->request.scores())));
    }
    return absl::OkStatus();
  }
  received->Clear();
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

absl::Status Admission::Submit(absl::string_view caller, const ReceivedTopK& received,
                               v1::TopKResponse* response, absl::Time deadline,
                               absl::AnyInvocable<bool() const> is_cancelled,
                               absl::AnyInvocable<void(absl::Status) &&> done) {
  const v1::TopKRequest& request = received.request;
  const auto refuse = [&request](absl::Status status) {
    LogRequest(request, status, nullptr);
    return status;
  };
  if (draining()) {
    return refuse(absl::UnavailableError("the server is draining; retry on another replica"));
  }
  absl::StatusOr<pk::Problem> problem =
      ValidateTopKRequest(request, received.scores_bytes(), max_rows_per_request_);
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
  work->scores = received.scores;
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
