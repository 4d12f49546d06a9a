#include "server/service.h"

#include <memory>
#include <utility>

#include "server/grpc_status.h"

namespace pkserve {
namespace {

// One unary call's request and answer, alive until the call is finished.
template <typename Received, typename Response>
struct UnaryCall {
  Received received;
  Response response;
};

// A unary TopK or Lookup: parse, admit (`submit`), and finish the call from whichever thread
// answers it.
template <typename Received, typename Response, typename Parse, typename Submit>
grpc::ServerUnaryReactor* ServeUnary(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                     Rpc rpc, ServerMetrics& metrics, Parse parse, Submit submit) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto call = std::make_shared<UnaryCall<Received, Response>>();
  // The default reactor may be finished from any thread, even before this handler returns.
  const auto answer = [reactor, response, call, rpc, &metrics,
                       arrived = metrics.RequestArrived()](absl::Status status) {
    if (status.ok()) status = SerializeMessage(call->response, response);
    metrics.RequestAnswered(rpc, status.code(), call->received.request.rows(), arrived);
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
  if (absl::Status parsed = parse(message, &call->received); !parsed.ok()) {
    answer(parsed);
    return reactor;
  }
  absl::Status status = submit(
      context->peer(), call->received, &call->response, CallDeadline(*context),
      [context] { return context->IsCancelled(); }, [answer](absl::Status done) { answer(done); });
  if (!status.ok()) answer(status);
  return reactor;
}

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
  return ServeUnary<ReceivedTopK, v1::TopKResponse>(
      context, request, response, Rpc::kTopK, metrics_, ParseTopKRequest,
      [this](auto&&... args) { return admission_.Submit(std::forward<decltype(args)>(args)...); });
}

grpc::ServerUnaryReactor* SparseMemoryService::Lookup(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return ServeUnary<ReceivedLookup, v1::LookupResponse>(
      context, request, response, Rpc::kLookup, metrics_, ParseLookupRequest,
      [this](auto&&... args) {
        return admission_.SubmitLookup(std::forward<decltype(args)>(args)...);
      });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SparseMemoryService::TopKStream(
    grpc::CallbackServerContext* context) {
  return StreamReactor<TopKCall>::Start(context, admission_, streams_, metrics_);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SparseMemoryService::LookupStream(
    grpc::CallbackServerContext* context) {
  return StreamReactor<LookupCall>::Start(context, admission_, streams_, metrics_);
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
