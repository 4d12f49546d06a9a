#include "server/request_parser.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace pkserve {
namespace {

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
  bool Take(uint64_t n, pk::BytePieceList* pieces) {
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

// The quick path: walks the message's fields across its slices, leaving the last `scores` field's
// (number `scores_field`) bytes where they are and copying every other field, as received, into
// one string that protobuf then parses. False for anything it does not handle (groups, malformed
// bytes), which the full parser then judges.
template <typename Request>
bool ParseLeavingScores(grpc::ByteBuffer& message, uint32_t scores_field,
                        Received<Request>* received) {
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
    if (field == scores_field && wire_type == 2) {
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

// Both request types: the quick path, else protobuf's parser. `type_name` for the error.
template <typename Request>
absl::Status ParseRequest(grpc::ByteBuffer& message, uint32_t scores_field,
                          absl::string_view type_name, Received<Request>* received) {
  received->Clear();
  if (!message.Valid()) {  // gRPC's form of an empty message
    if (received->request.ParseFromString("")) return absl::OkStatus();
  } else if (ParseLeavingScores(message, scores_field, received)) {
    return absl::OkStatus();
  }
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
      absl::StrCat("the message is not a ", type_name, ": its ", bytes,
                   " bytes do not parse as one (see proto/pkserve/v1/pkserve.proto)"));
}

}  // namespace

absl::Status ParseTopKRequest(grpc::ByteBuffer& message, ReceivedTopK* received) {
  return ParseRequest(message, v1::TopKRequest::kScoresFieldNumber, "pkserve.v1.TopKRequest",
                      received);
}

absl::Status ParseLookupRequest(grpc::ByteBuffer& message, ReceivedLookup* received) {
  return ParseRequest(message, v1::LookupRequest::kScoresFieldNumber, "pkserve.v1.LookupRequest",
                      received);
}

absl::Status SerializeMessage(const google::protobuf::MessageLite& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  const grpc::Status status = grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(
      message, out, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("could not serialize the answer: ", status.error_message()));
}

}  // namespace pkserve
