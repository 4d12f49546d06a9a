#include "server/service.h"

#include <utility>

#include "server/grpc_status.h"

namespace pkserve {

SparseMemoryService::SparseMemoryService(Admission& admission, v1::ServerInfo info,
                                         ServerMetrics& metrics)
    : admission_(admission), info_(std::move(info)), metrics_(metrics) {}

void SparseMemoryService::StartDraining() {
  admission_.StartDraining();
  streams_.DrainAll();
}

grpc::ServerUnaryReactor* SparseMemoryService::TopK(grpc::CallbackServerContext* context,
                                                    const v1::TopKRequest* request,
                                                    v1::TopKResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The default reactor may be finished from any thread, even before this handler returns.
  const auto answer = [reactor, &metrics = metrics_, arrived = metrics_.RequestArrived(),
                       rows = request->rows()](const absl::Status& status) {
    metrics.RequestAnswered(Rpc::kTopK, status.code(), rows, arrived);
    reactor->Finish(ToGrpcStatus(status));
  };
  absl::Status status = admission_.Submit(
      *request, response, CallDeadline(*context), [context] { return context->IsCancelled(); },
      [answer](absl::Status done) { answer(done); });
  if (!status.ok()) answer(status);
  return reactor;
}

grpc::ServerBidiReactor<v1::TopKRequest, v1::TopKStreamResponse>* SparseMemoryService::TopKStream(
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
