#include "client/bench/channels.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pkserve::bench {
namespace {

// "1.2.3.4:80"
bool IsIpv4Address(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == address.size()) return false;
  for (char c : address.substr(0, colon)) {
    if (!absl::ascii_isdigit(c) && c != '.') return false;
  }
  for (char c : address.substr(colon + 1)) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// "[::1]:80"
bool IsIpv6Address(absl::string_view address) {
  return absl::StartsWith(address, "[") && absl::StrContains(address, "]:");
}

}  // namespace

absl::StatusOr<TargetSpec> ParseTarget(absl::string_view flag) {
  if (flag.empty()) return absl::InvalidArgumentError("--target must not be empty");
  if (!absl::StrContains(flag, ',')) return TargetSpec{std::string(flag), ""};
  if (absl::StartsWith(flag, "ipv4:") || absl::StartsWith(flag, "ipv6:")) {
    return TargetSpec{std::string(flag), "round_robin"};
  }
  std::vector<absl::string_view> addresses = absl::StrSplit(flag, ',');
  bool all_v4 = true;
  bool all_v6 = true;
  for (absl::string_view address : addresses) {
    all_v4 = all_v4 && IsIpv4Address(address);
    all_v6 = all_v6 && IsIpv6Address(address);
  }
  if (!all_v4 && !all_v6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target with several addresses takes IP literals of one family (a:port,b:port or "
        "[a]:port,[b]:port); for a name, give one dns:/// target instead; got '",
        flag, "'"));
  }
  return TargetSpec{absl::StrCat(all_v4 ? "ipv4:" : "ipv6:", flag), "round_robin"};
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> MakeChannels(
    const TargetSpec& spec, int connections, const client::TlsOptions& tls) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int connection = 0; connection < connections; ++connection) {
    grpc::ChannelArguments arguments;
    if (!spec.load_balancing.empty()) arguments.SetLoadBalancingPolicyName(spec.load_balancing);
    arguments.SetMaxReceiveMessageSize(-1);
    arguments.SetMaxSendMessageSize(-1);
    // A channel shares subchannels (connections) with any other channel of equal arguments
    // through the global pool; a local pool and a distinct argument keep each one separate.
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    arguments.SetInt("pkserve_bench.connection", connection);
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        client::MakeChannelCredentials(tls, arguments);
    if (!credentials.ok()) return credentials.status();
    channels.push_back(grpc::CreateCustomChannel(spec.target, *credentials, arguments));
  }
  return channels;
}

absl::Status WaitForChannels(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                             const std::string& target, absl::Duration timeout) {
  const auto deadline = absl::ToChronoTime(absl::Now() + timeout);
  for (size_t i = 0; i < channels.size(); ++i) {
    if (!channels[i]->WaitForConnected(deadline)) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", target, " (connection ",
                                                 i + 1, " of ", channels.size(), ") within ",
                                                 absl::FormatDuration(timeout),
                                                 " (is pkserve running there? check --target)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pkserve::bench
