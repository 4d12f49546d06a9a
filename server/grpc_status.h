// Conversions between abseil and gRPC status (the codes are the same numbers) and the deadline of
// a call as absl::Time.
#pragma once

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "server/deadline.h"

namespace pkserve {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// The call's deadline; InfiniteFuture when the caller set none, or one too far away to mean
// anything (server/deadline.h).
inline absl::Time CallDeadline(const grpc::CallbackServerContext& context) {
  return DeadlineFromTimespec(context.raw_deadline(), absl::Now());
}

}  // namespace pkserve
