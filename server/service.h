// The pkserve.v1.SparseMemory service on gRPC's callback API. Reactions stay short: a request is
// validated and queued (Admission), and its call is finished from the thread that completes it.
#pragma once

#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"
#include "server/admission.h"
#include "server/server_metrics.h"
#include "server/topk_stream.h"

namespace pkserve {

class SparseMemoryService final : public v1::SparseMemory::CallbackService {
 public:
  // `admission` and `metrics` (which counts every request) must outlive the service; `info` is
  // what GetServerInfo answers.
  SparseMemoryService(Admission& admission, v1::ServerInfo info, ServerMetrics& metrics);

  // New requests get UNAVAILABLE from now on; open streams finish once their accepted requests
  // are answered.
  void StartDraining();

  grpc::ServerUnaryReactor* TopK(grpc::CallbackServerContext* context,
                                 const v1::TopKRequest* request,
                                 v1::TopKResponse* response) override;
  grpc::ServerBidiReactor<v1::TopKRequest, v1::TopKStreamResponse>* TopKStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::ServerInfoRequest* request,
                                          v1::ServerInfo* response) override;

 private:
  Admission& admission_;
  const v1::ServerInfo info_;
  ServerMetrics& metrics_;
  TopKStreamRegistry streams_;
};

}  // namespace pkserve
