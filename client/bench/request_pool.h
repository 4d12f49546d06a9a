// The requests pkserve-bench sends: a pool generated once (random normal scores, never zeros) and
// reused round after round, so that generating data costs nothing while measuring. Each request is
// also serialized once: calls send a buffer that references those bytes (no copy per call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/bench/options.h"
#include "grpcpp/support/byte_buffer.h"
#include "pkserve/v1/pkserve.pb.h"

namespace pkserve::bench {

struct PooledRequest {
  v1::TopKRequest request;   // TopK load: what is sent
  v1::LookupRequest lookup;  // lookup load (Workload::lookup): what is sent
  std::string wire;          // request, serialized
  grpc::ByteBuffer buffer;   // a view of `wire`; copies of it share the bytes
  uint32_t rows = 0;
  size_t scores_bytes = 0;    // payload out
  size_t response_bytes = 0;  // payload back: values and slots (lookups: and weights)
  uint32_t outputs = 0;       // lookups: rows / heads
  uint64_t table_bytes = 0;   // lookups: values-table bytes the answer reads, rows x kk x row
  const std::string& scores() const;  // of whichever request is sent
};

class RequestPool {
 public:
  // At most `max_requests` requests and `max_bytes` of scores (at least one request); row counts
  // spread evenly over [min_rows, max_rows] (a fixed count: all the same), in a shuffled order;
  // lookups round each count down to a multiple of heads (at least heads).
  RequestPool(const Workload& workload, int max_requests, int64_t max_bytes, uint64_t seed);
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  size_t size() const { return requests_.size(); }
  const PooledRequest& operator[](size_t i) const { return requests_[i]; }
  double mean_rows() const;

 private:
  std::vector<PooledRequest> requests_;
};

v1::DType WireDType(pk::DType dtype);

}  // namespace pkserve::bench
