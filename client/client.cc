#include "client/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pkserve::client {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

v1::TopKRequest MakeTopKRequest(std::span<const uint32_t> factor_widths, uint32_t k,
                                v1::DType dtype, uint32_t rows, std::span<const std::byte> scores,
                                const std::string& request_id) {
  v1::TopKRequest request;
  for (uint32_t width : factor_widths) request.add_factor_widths(width);
  request.set_k(k);
  request.set_dtype(dtype);
  request.set_rows(rows);
  request.set_scores(reinterpret_cast<const char*>(scores.data()), scores.size());
  request.set_request_id(request_id);
  return request;
}

std::string ServiceConfigJson(const ClientOptions& options) {
  if (!options.retry_unavailable && !options.check_replica_health) return "";
  // The load-balancing policy goes in too: a service config without one would leave the choice
  // to the channel argument only by gRPC's precedence rules; this way it is explicit.
  const std::string policy =
      options.load_balancing_policy.empty() ? "pick_first" : options.load_balancing_policy;
  std::vector<std::string> fields = {
      absl::StrCat(R"("loadBalancingConfig": [{")", policy, R"(": {}}])")};
  if (options.check_replica_health) {
    fields.push_back(R"("healthCheckConfig": {"serviceName": "pkserve.v1.SparseMemory"})");
  }
  if (options.retry_unavailable) {
    fields.push_back(
        absl::StrCat(R"("methodConfig": [{"name": [{"service": "pkserve.v1.SparseMemory"}], )",
                     R"("retryPolicy": {"maxAttempts": )", kRetryMaxAttempts,
                     R"(, "initialBackoff": "0.05s", "maxBackoff": "1s", "backoffMultiplier": 2, )",
                     R"("retryableStatusCodes": ["UNAVAILABLE"]}}])"));
  }
  return absl::StrCat("{", absl::StrJoin(fields, ", "), "}");
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("target must not be empty");
  const std::string& policy = options.load_balancing_policy;
  if (!policy.empty() && policy != "pick_first" && policy != "round_robin") {
    return absl::InvalidArgumentError(absl::StrCat(
        "load_balancing_policy must be empty, pick_first or round_robin, got '", policy, "'"));
  }
  if (options.check_replica_health && policy != "round_robin") {
    return absl::InvalidArgumentError(
        "check_replica_health needs load_balancing_policy round_robin (gRPC checks the health of "
        "addresses only there)");
  }
  grpc::ChannelArguments arguments;
  if (!policy.empty()) arguments.SetLoadBalancingPolicyName(policy);
  // Answers hold rows x kk x 8 bytes: far past gRPC's default 4 MiB for large requests.
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  if (options.own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (const std::string service_config = ServiceConfigJson(options); !service_config.empty()) {
    arguments.SetServiceConfigJSON(service_config);
    if (options.retry_unavailable) {
      // gRPC retries only calls whose request fits its per-call retry buffer (256 KiB by
      // default, far below pkserve's message limit): raised to pkserve's default
      // --max_message_bytes. It bounds what one call keeps for a retry until it is answered.
      arguments.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, 64 << 20);
      arguments.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
    }
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(options.tls, arguments);
  if (!credentials.ok()) return credentials.status();
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, *credentials, arguments);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot make a channel to '", options.target, "'"));
  }
  return std::make_unique<Client>(options, std::move(channel));
}

Client::Client(const ClientOptions& options, std::shared_ptr<grpc::Channel> channel)
    : options_(options),
      channel_(std::move(channel)),
      stub_(v1::SparseMemory::NewStub(channel_)),
      health_stub_(grpc::health::v1::Health::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::NewContext(absl::Duration deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (deadline != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
  context->set_wait_for_ready(options_.wait_for_ready);
  return context;
}

absl::StatusOr<v1::TopKResponse> Client::TopK(const v1::TopKRequest& request) {
  std::unique_ptr<grpc::ClientContext> context = NewContext(options_.deadline);
  v1::TopKResponse response;
  const grpc::Status status = stub_->TopK(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

std::unique_ptr<TopKStreamSession> Client::OpenStream(absl::Duration deadline) {
  return std::make_unique<TopKStreamSession>(NewContext(deadline), *stub_,
                                             &v1::SparseMemory::Stub::TopKStream);
}

absl::StatusOr<v1::LookupResponse> Client::Lookup(const v1::LookupRequest& request) {
  std::unique_ptr<grpc::ClientContext> context = NewContext(options_.deadline);
  v1::LookupResponse response;
  const grpc::Status status = stub_->Lookup(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

std::unique_ptr<LookupStreamSession> Client::OpenLookupStream(absl::Duration deadline) {
  return std::make_unique<LookupStreamSession>(NewContext(deadline), *stub_,
                                               &v1::SparseMemory::Stub::LookupStream);
}

absl::StatusOr<v1::ServerInfo> Client::GetServerInfo() {
  std::unique_ptr<grpc::ClientContext> context = NewContext(options_.deadline);
  v1::ServerInfo info;
  const grpc::Status status = stub_->GetServerInfo(context.get(), v1::ServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

absl::StatusOr<ServingStatus> Client::CheckHealth(const std::string& service) {
  std::unique_ptr<grpc::ClientContext> context = NewContext(options_.deadline);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_stub_->Check(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status();
}

}  // namespace pkserve::client
