// The pkserve.v1.SparseMemory service on gRPC's callback API. Reactions stay short: a request is
// parsed, validated and queued (Admission), and its call is finished from the thread that
// completes it.
//
// TopK, TopKStream, Lookup and LookupStream are registered raw: gRPC hands them the message
// bytes and the service parses them itself, so that bytes that are not a request get
// INVALID_ARGUMENT saying so (a StreamError on a stream, which goes on) instead of gRPC's bare
// UNIMPLEMENTED, or, on a stream, a silent end. The service as clients see it (names, message types, reflection) is unchanged.
//
// A call its client has cancelled is not judged: a unary call whose message never came (or whose
// client is gone) and a stream request read after its stream was cancelled are counted as
// CANCELLED and answered nothing.
#pragma once

#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"
#include "server/admission.h"
#include "server/server_metrics.h"
#include "server/request_stream.h"

namespace pkserve {

using SparseMemoryRawService = v1::SparseMemory::WithRawCallbackMethod_TopK<
    v1::SparseMemory::WithRawCallbackMethod_TopKStream<
        v1::SparseMemory::WithRawCallbackMethod_Lookup<
            v1::SparseMemory::WithRawCallbackMethod_LookupStream<
                v1::SparseMemory::WithCallbackMethod_GetServerInfo<
                    v1::SparseMemory::Service>>>>>;

class SparseMemoryService final : public SparseMemoryRawService {
 public:
  // `admission` and `metrics` (which counts every request) must outlive the service; `info` is
  // what GetServerInfo answers. `stream_limits` bound each stream and how many may be open.
  SparseMemoryService(Admission& admission, v1::ServerInfo info, ServerMetrics& metrics,
                      const StreamLimits& stream_limits);

  // New requests get UNAVAILABLE from now on; open streams finish once their accepted requests
  // are answered.
  void StartDraining();

  grpc::ServerUnaryReactor* TopK(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TopKStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* LookupStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::ServerInfoRequest* request,
                                          v1::ServerInfo* response) override;

 private:
  Admission& admission_;
  const v1::ServerInfo info_;
  ServerMetrics& metrics_;
  StreamRegistry streams_;
};

}  // namespace pkserve
