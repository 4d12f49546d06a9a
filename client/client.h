// The C++ client of pkserve: synchronous TopK and Lookup, TopKStream and LookupStream sessions,
// GetServerInfo and the standard health check, over one gRPC channel. A Client is thread-safe; share one per process.
//
//   absl::StatusOr<std::unique_ptr<pkserve::client::Client>> client =
//       pkserve::client::Client::Connect({.target = "127.0.0.1:50051"});
//   absl::StatusOr<pkserve::v1::TopKResponse> response = (*client)->TopK(request);
//
// Several servers behind one client: target "ipv4:10.0.0.1:50051,10.0.0.2:50051" with
// load_balancing_policy "round_robin" spreads calls over all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/tls.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"

namespace pkserve::client {

// A gRPC status as an absl::Status (same code, same message).
absl::Status FromGrpcStatus(const grpc::Status& status);

struct ClientOptions {
  // A gRPC target: "host:port", "dns:///name:port", "ipv4:a:p,b:p", "ipv6:[::1]:p", "unix:path".
  std::string target = "127.0.0.1:50051";
  // The deadline of each unary call; absl::InfiniteDuration() for none.
  absl::Duration deadline = absl::Seconds(30);
  // "" or "pick_first" (one address at a time), or "round_robin" (every address in turn).
  std::string load_balancing_policy;
  // Wait for the server to become reachable (within the deadline) instead of failing at once.
  bool wait_for_ready = false;
  // Retry calls that fail with UNAVAILABLE (a replica draining, shutting down, or gone) through
  // gRPC's retry policy in the channel's service config: at most kRetryMaxAttempts attempts in
  // all, backoff from 50 ms doubling up to 1 s (jittered), within the call's deadline; with
  // round_robin the next attempt goes to the next replica. TopK is idempotent, so a retry never
  // changes a result. It covers TopK and GetServerInfo, and a TopKStream only until its first
  // answer arrives (gRPC's rule for streams; a stream's per-request UNAVAILABLE StreamError is the
  // caller's to resend). Requests up to 64 MiB stay retryable.
  bool retry_unavailable = false;
  // With round_robin: watch each address's health (the standard health service, for
  // pkserve.v1.SparseMemory) and send calls only to addresses that report SERVING, so that a
  // replica stops getting calls as soon as it starts draining, rather than answering them
  // UNAVAILABLE (gRPC's client-side health checking). Use with retry_unavailable: calls already on
  // their way still need it.
  bool check_replica_health = false;
  // A connection of this client's own: without it, clients of one process with equal options
  // share gRPC's subchannels, so one TCP connection, to the same address.
  bool own_connection = false;
  // Plaintext unless tls.enabled (client/tls.h).
  TlsOptions tls;
};

// The most attempts (the first included) of a call with ClientOptions::retry_unavailable.
inline constexpr int kRetryMaxAttempts = 5;

// The channel's service config for `options` (load balancing, health checking, the retry
// policy), as JSON; empty when the options need none.
std::string ServiceConfigJson(const ClientOptions& options);

// The serving status of a health check, as grpc.health.v1 defines it.
using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

// A stream call (TopKStream or LookupStream): send requests, receive one answer per request, in
// order. Send and Receive may run on two different threads (one each); Cancel from any thread;
// otherwise it is not thread-safe.
template <typename Request, typename Response>
class StreamSession {
 public:
  using Stream = grpc::ClientReaderWriterInterface<Request, Response>;
  using Opener = std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> (
      v1::SparseMemory::Stub::*)(grpc::ClientContext*);

  StreamSession(std::unique_ptr<grpc::ClientContext> context, v1::SparseMemory::Stub& stub,
                Opener open)
      : context_(std::move(context)), stream_((stub.*open)(context_.get())) {}
  ~StreamSession() {
    if (!finished_) {
      context_->TryCancel();
      Finish().IgnoreError();
    }
  }
  StreamSession(const StreamSession&) = delete;
  StreamSession& operator=(const StreamSession&) = delete;

  // False when the stream is broken; Finish() then says why.
  bool Send(const Request& request) { return !send_closed_ && stream_->Write(request); }
  // Tells the server no more requests come; answers still arrive.
  bool CloseSend() {
    if (send_closed_) return true;
    send_closed_ = true;
    return stream_->WritesDone();
  }
  // The next answer (a result or a StreamError), in request order; false once the stream ended.
  bool Receive(Response* response) { return stream_->Read(response); }
  // Ends the call at once: a blocked Send or Receive returns false, Finish says CANCELLED.
  void Cancel() { context_->TryCancel(); }
  // Closes the send side if still open, reads any answers left, and returns the stream's status.
  absl::Status Finish() {
    if (finished_) return absl::FailedPreconditionError("the stream was already finished");
    CloseSend();
    Response unread;
    while (stream_->Read(&unread)) {
    }
    finished_ = true;
    return FromGrpcStatus(stream_->Finish());
  }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<Stream> stream_;
  bool send_closed_ = false;
  bool finished_ = false;
};

using TopKStreamSession = StreamSession<v1::TopKRequest, v1::TopKStreamResponse>;
using LookupStreamSession = StreamSession<v1::LookupRequest, v1::LookupStreamResponse>;

class Client {
 public:
  // Creates the channel (it connects lazily, on the first call). Fails only on bad options.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  explicit Client(const ClientOptions& options, std::shared_ptr<grpc::Channel> channel);

  // One request; the server's status (code and message) on failure.
  absl::StatusOr<v1::TopKResponse> TopK(const v1::TopKRequest& request);
  // A stream call; `deadline` bounds the whole stream.
  std::unique_ptr<TopKStreamSession> OpenStream(absl::Duration deadline = absl::InfiniteDuration());
  // One lookup on a hosted memory (ServerInfo.memories); the server's status on failure.
  absl::StatusOr<v1::LookupResponse> Lookup(const v1::LookupRequest& request);
  // A LookupStream call; `deadline` bounds the whole stream.
  std::unique_ptr<LookupStreamSession> OpenLookupStream(
      absl::Duration deadline = absl::InfiniteDuration());
  // GetServerInfo: version, backend, limits, batching, and the memories it holds.
  absl::StatusOr<v1::ServerInfo> GetServerInfo();
  // Health of `service`: "" for the server as a whole, or "pkserve.v1.SparseMemory".
  absl::StatusOr<ServingStatus> CheckHealth(const std::string& service = "");

  grpc::Channel& channel() { return *channel_; }

 private:
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Duration deadline) const;

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SparseMemory::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
};

// A request for `rows` rows of `scores` (little-endian elements of `dtype`, row-major).
v1::TopKRequest MakeTopKRequest(std::span<const uint32_t> factor_widths, uint32_t k,
                                v1::DType dtype, uint32_t rows, std::span<const std::byte> scores,
                                const std::string& request_id = "");

}  // namespace pkserve::client
