// The baseline pkserve-bench measures pkserve against: an in-process gRPC server (callback API)
// that serves pkserve.v1.SparseMemory with no top-k at all. Each TopK (or TopKStream) request is
// answered with a response of exactly the size pkserve's would have (rows, kk, dtype, values and
// slots bytes of the right lengths, zero-filled, Timing.batch_rows = rows), so the same workload
// measures what the RPC layer alone costs on the same host.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pkserve/v1/pkserve.pb.h"

namespace pkserve::bench {

struct EchoOptions {
  std::string address = "127.0.0.1:0";  // port 0: a free one
  // Unary answers leave after this long (for tests of slow servers); streams are not delayed.
  absl::Duration delay = absl::ZeroDuration();
};

// Sets `response` to pkserve's answer shape for `request`, values and slots zero. Fails with
// INVALID_ARGUMENT when the request's shape would not fit in memory (pkserve would refuse it too).
absl::Status FillEchoResponse(const v1::TopKRequest& request, v1::TopKResponse* response);

class EchoServer {
 public:
  static absl::StatusOr<std::unique_ptr<EchoServer>> Start(const EchoOptions& options);
  virtual ~EchoServer() = default;
  // "127.0.0.1:<port>" (with the port picked).
  virtual const std::string& address() const = 0;
};

}  // namespace pkserve::bench
