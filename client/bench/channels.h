// Where pkserve-bench sends: the --target flag turned into a gRPC target and load-balancing
// policy, and the one function that makes the bench's channels (credentials and channel arguments
// live here and nowhere else).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/tls.h"
#include "grpcpp/grpcpp.h"

namespace pkserve::bench {

struct TargetSpec {
  std::string target;          // a gRPC target URI or host:port
  std::string load_balancing;  // "" (pick_first) or "round_robin"
};

// One address ("127.0.0.1:50051", "dns:///name:port", "unix:/path") is used as given. Several,
// comma-separated ("10.0.0.1:50051,10.0.0.2:50051", "[::1]:5000,[::1]:5001", or
// "ipv4:a:p,b:p"), become one ipv4:/ipv6: target spread with round_robin.
absl::StatusOr<TargetSpec> ParseTarget(absl::string_view flag);

// `connections` channels to `spec`, each its own HTTP/2 connection (per server): they use local
// subchannel pools and differ in a channel argument, so gRPC shares no connection between them.
// No message size limit either way. Plaintext, or TLS as `tls` says (client/tls.h; it fails only
// on TLS files it cannot read). Channels connect lazily; see WaitForChannels.
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> MakeChannels(
    const TargetSpec& spec, int connections, const client::TlsOptions& tls = {});

// Connects every channel, failing with the target and the channel's state after `timeout`.
absl::Status WaitForChannels(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                             const std::string& target, absl::Duration timeout);

}  // namespace pkserve::bench
