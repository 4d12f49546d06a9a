// Requests off the wire, parsed without copying their scores: TopK and Lookup are registered raw
// (gRPC hands the service the message's bytes), and the parser walks the message's fields across
// gRPC's slices, leaves the `scores` bytes where they lie, and has protobuf parse the rest. A
// message the quick walk does not take (groups, malformed bytes) goes to protobuf's own parser,
// which has the last word: exactly what protobuf accepts is accepted, with the same result. Bytes
// that are not the request type get INVALID_ARGUMENT saying so.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "kernels/byte_pieces.h"
#include "pkserve/v1/pkserve.pb.h"

namespace pkserve {

// A request as it came off the wire. `request` holds every field but `scores`; the scores' bytes
// stay where gRPC received them, so that the executor's one copy in (or the CPU's reading in
// place) is the only pass over them: `scores` lists them in order, as pieces of `slices`, which
// keeps them alive. (Where the message cannot be read that way, the parser parses it whole, and
// `scores` is then the one piece request.scores().) Neither moved nor copied once parsed.
template <typename Request>
struct Received {
  Request request;
  std::vector<grpc::Slice> slices;
  pk::BytePieceList scores;  // scores.bytes(): the field's length

  Received() = default;
  Received(const Received&) = delete;
  Received& operator=(const Received&) = delete;

  // Frees everything (for a stream, once a request is answered).
  void Clear() {
    request = Request();
    scores = {};
    slices = {};
  }
};

using ReceivedTopK = Received<v1::TopKRequest>;
using ReceivedLookup = Received<v1::LookupRequest>;

// `message` (one gRPC message, left as it was) parsed into `received`; INVALID_ARGUMENT saying so
// when its bytes are not the request type.
absl::Status ParseTopKRequest(grpc::ByteBuffer& message, ReceivedTopK* received);
absl::Status ParseLookupRequest(grpc::ByteBuffer& message, ReceivedLookup* received);

// `message` serialized into `out` for a raw write; INTERNAL if protobuf cannot.
absl::Status SerializeMessage(const google::protobuf::MessageLite& message, grpc::ByteBuffer* out);

}  // namespace pkserve
