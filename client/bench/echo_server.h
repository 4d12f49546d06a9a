// The baseline pkserve-bench measures pkserve against: an in-process gRPC server (callback API)
// that serves pkserve.v1.SparseMemory with no top-k at all. Each TopK (or TopKStream) request is
// answered with a response of exactly the size pkserve's would have (rows, kk, dtype, values and
// slots bytes of the right lengths, zero-filled, Timing.batch_rows = rows), so the same workload
// measures what the RPC layer alone costs on the same host. Lookup (and LookupStream) requests
// for the memories it is told of (EchoOptions::memories, listed in its ServerInfo as pkserve
// lists its own) are answered the same way: outputs x dim values of the memory's dtype, and with
// return_slots rows x kk slots and weights, all zero.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "pkserve/v1/pkserve.pb.h"

namespace pkserve::bench {

struct EchoOptions {
  std::string address = "127.0.0.1:0";  // port 0: a free one
  // Unary answers leave after this long (for tests of slow servers); streams are not delayed.
  absl::Duration delay = absl::ZeroDuration();
  std::vector<v1::MemoryInfo> memories;  // the shapes its lookups answer with
};

// Sets `response` to pkserve's answer shape for `request`, values and slots zero. Fails with
// INVALID_ARGUMENT when the request's shape would not fit in memory (pkserve would refuse it too).
absl::Status FillEchoResponse(const v1::TopKRequest& request, v1::TopKResponse* response);

// Sets `response` to pkserve's answer shape for `request` against the memory it names among
// `memories`, values (and slots, weights) zero. NOT_FOUND naming the memories held when it is not
// one of them; INVALID_ARGUMENT when rows is not a multiple of heads or the answer is too large.
absl::Status FillEchoLookupResponse(const v1::LookupRequest& request,
                                    const std::vector<v1::MemoryInfo>& memories,
                                    v1::LookupResponse* response);

// A memory's shape as one flag value, "NAME:W0xW1:DIM:DTYPE" (DTYPE the wire enum's number), for
// the echo's own process (--echo_memory); ParseEchoMemory reads it back.
std::string EchoMemoryFlag(const v1::MemoryInfo& memory);
absl::StatusOr<v1::MemoryInfo> ParseEchoMemory(absl::string_view text);

class EchoServer {
 public:
  static absl::StatusOr<std::unique_ptr<EchoServer>> Start(const EchoOptions& options);
  virtual ~EchoServer() = default;
  // "127.0.0.1:<port>" (with the port picked).
  virtual const std::string& address() const = 0;
};

}  // namespace pkserve::bench
