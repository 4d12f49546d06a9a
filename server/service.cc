#include "server/service.h"

#include <memory>
#include <utility>

#include "server/grpc_status.h"

namespace pkserve {
namespace {

// One TopK call's request and answer, alive until the call is finished.
struct UnaryTopK {
  ReceivedTopK received;
  v1::TopKResponse response;
};

}  // namespace

SparseMemoryService::SparseMemoryService(Admission& admission, v1::ServerInfo info,
                                         ServerMetrics& metrics, const StreamLimits& stream_limits)
    : admission_(admission), info_(std::move(info)), metrics_(metrics), streams_(stream_limits) {}

void SparseMemoryService::StartDraining() {
  admission_.StartDraining();
  streams_.DrainAll();
}

grpc::ServerUnaryReactor* SparseMemoryService::TopK(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto call = std::make_shared<UnaryTopK>();
  // The default reactor may be finished from any thread, even before this handler returns.
  const auto answer = [reactor, response, call, &metrics = metrics_,
                       arrived = metrics_.RequestArrived()](absl::Status status) {
    if (status.ok()) status = SerializeMessage(call->response, response);
    metrics.RequestAnswered(Rpc::kTopK, status.code(), call->received.request.rows(), arrived);
    reactor->Finish(ToGrpcStatus(status));
  };
  // A call whose message never came (gRPC hands no buffer, not an empty one) was cancelled by
  // its client before sending it: there is nothing to judge, and nobody to read an answer. It is
  // counted as CANCELLED and finished without a word of its own (gRPC sends nothing on a call that
  // is gone).
  if (!request->Valid() || context->IsCancelled()) {
    answer(absl::CancelledError("the caller cancelled the call before its request came"));
    return reactor;
  }
  grpc::ByteBuffer message(*request);  // shares the slices, copies no bytes
  if (absl::Status parsed = ParseTopKRequest(message, &call->received); !parsed.ok()) {
    answer(parsed);
    return reactor;
  }
  absl::Status status = admission_.Submit(
      context->peer(), call->received, &call->response, CallDeadline(*context),
      [context] { return context->IsCancelled(); }, [answer](absl::Status done) { answer(done); });
  if (!status.ok()) answer(status);
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SparseMemoryService::TopKStream(
    grpc::CallbackServerContext* context) {
  return TopKStreamReactor::Start(context, admission_, streams_, metrics_);
}

grpc::ServerUnaryReactor* SparseMemoryService::GetServerInfo(
    grpc::CallbackServerContext* context, const v1::ServerInfoRequest* /*request*/,
    v1::ServerInfo* response) {
  const absl::Time arrived = metrics_.RequestArrived();
  *response = info_;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  metrics_.RequestAnswered(Rpc::kGetServerInfo, absl::StatusCode::kOk, 0, arrived);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace pkserve
