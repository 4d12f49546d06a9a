#include "server/service.h"

#include <utility>

#include "server/grpc_status.h"

namespace pkserve {

SparseMemoryService::SparseMemoryService(Admission& admission, v1::ServerInfo info)
    : admission_(admission), info_(std::move(info)) {}

void SparseMemoryService::StartDraining() {
  admission_.StartDraining();
  streams_.DrainAll();
}

grpc::ServerUnaryReactor* SparseMemoryService::TopK(grpc::CallbackServerContext* context,
                                                    const v1::TopKRequest* request,
                                                    v1::TopKResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The default reactor may be finished from any thread, even before this handler returns.
  absl::Status status = admission_.Submit(
      *request, response, CallDeadline(*context), [context] { return context->IsCancelled(); },
      [reactor](absl::Status done) { reactor->Finish(ToGrpcStatus(done)); });
  if (!status.ok()) reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerBidiReactor<v1::TopKRequest, v1::TopKStreamResponse>* SparseMemoryService::TopKStream(
    grpc::CallbackServerContext* context) {
  return TopKStreamReactor::Start(context, admission_, streams_);
}

grpc::ServerUnaryReactor* SparseMemoryService::GetServerInfo(
    grpc::CallbackServerContext* context, const v1::ServerInfoRequest* /*request*/,
    v1::ServerInfo* response) {
  *response = info_;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace pkserve
