#include "client/bench/request_pool.h"

#include <algorithm>
#include <random>

#include "kernels/testing/random_rows.h"

namespace pkserve::bench {

v1::DType WireDType(pk::DType dtype) {
  return dtype == pk::DType::kBFloat16 ? v1::DTYPE_BFLOAT16 : v1::DTYPE_FLOAT32;
}

RequestPool::RequestPool(const Workload& workload, int max_requests, int64_t max_bytes,
                         uint64_t seed) {
  const pk::Problem& problem = workload.problem;
  const uint64_t largest = uint64_t{workload.max_rows} * problem.row_bytes();
  const int64_t by_bytes = static_cast<int64_t>(static_cast<uint64_t>(max_bytes) / largest);
  const int count = static_cast<int>(std::clamp<int64_t>(by_bytes, 1, std::max(1, max_requests)));
  const uint32_t span = workload.max_rows - workload.min_rows;

  std::vector<uint32_t> row_counts;
  for (int i = 0; i < count; ++i) {
    // Evenly over the range, both ends included when there are two requests or more.
    const uint64_t offset = count == 1 ? span / 2 : uint64_t{span} * i / (count - 1);
    row_counts.push_back(workload.min_rows + static_cast<uint32_t>(offset));
  }
  std::mt19937_64 engine(seed);
  std::shuffle(row_counts.begin(), row_counts.end(), engine);

  requests_.resize(count);
  for (int i = 0; i < count; ++i) {
    PooledRequest& pooled = requests_[i];
    pooled.rows = row_counts[i];
    if (workload.lookup.has_value()) {
      const uint32_t heads = workload.lookup->heads;
      pooled.rows = std::max(heads, pooled.rows / heads * heads);
    }
    const std::vector<std::byte> scores =
        pk::testing::RandomRows(problem, pooled.rows, pk::testing::Distribution::kNormal, engine);
    pooled.scores_bytes = scores.size();
    if (workload.lookup.has_value()) {
      const LookupWorkload& lookup = *workload.lookup;
      v1::LookupRequest& request = pooled.lookup;
      request.set_memory(lookup.memory);
      request.set_k(problem.k);
      request.set_dtype(WireDType(problem.dtype));
      request.set_rows(pooled.rows);
      request.set_heads(lookup.heads);
      request.set_scores(reinterpret_cast<const char*>(scores.data()), scores.size());
      request.set_return_slots(lookup.return_slots);
      request.SerializeToString(&pooled.wire);
      pooled.outputs = pooled.rows / lookup.heads;
      const size_t row_bytes = size_t{lookup.dim} * pk::ElementBytes(lookup.value_dtype);
      pooled.table_bytes = uint64_t{pooled.rows} * problem.kk() * row_bytes;
      pooled.response_bytes = size_t{pooled.outputs} * row_bytes +
                              (lookup.return_slots ? size_t{pooled.rows} * problem.kk() *
                                                         (sizeof(uint32_t) + sizeof(float))
                                                   : 0);
    } else {
      v1::TopKRequest& request = pooled.request;
      for (int f = 0; f < problem.factors; ++f) request.add_factor_widths(problem.widths[f]);
      request.set_k(problem.k);
      request.set_dtype(WireDType(problem.dtype));
      request.set_rows(pooled.rows);
      request.set_scores(reinterpret_cast<const char*>(scores.data()), scores.size());
      request.SerializeToString(&pooled.wire);
      pooled.response_bytes =
          size_t{pooled.rows} * problem.kk() * (pk::ElementBytes(problem.dtype) + sizeof(uint32_t));
    }
    // A static slice: the pool owns the bytes and outlives every call that sends them.
    grpc::Slice view(pooled.wire.data(), pooled.wire.size(), grpc::Slice::STATIC_SLICE);
    pooled.buffer = grpc::ByteBuffer(&view, 1);
  }
}

const std::string& PooledRequest::scores() const {
  return outputs > 0 ? lookup.scores() : request.scores();
}

double RequestPool::mean_rows() const {
  double sum = 0;
  for (const PooledRequest& pooled : requests_) sum += pooled.rows;
  return requests_.empty() ? 0 : sum / static_cast<double>(requests_.size());
}

}  // namespace pkserve::bench
