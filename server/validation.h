// Validation at the edge: a TopKRequest or LookupRequest from the wire is checked once, here,
// against the contract's limits (docs/CONTRACT.md) and the server's own; everything behind it
// trusts the pk::Problem or LookupSpec it returns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/problem.h"
#include "pkserve/v1/pkserve.pb.h"
#include "server/executor.h"

namespace pkserve {

// DTYPE_FLOAT32 -> kFloat32, DTYPE_BFLOAT16 -> kBFloat16; anything else is INVALID_ARGUMENT
// naming `dtype`.
absl::StatusOr<pk::DType> DTypeFromWire(int wire_dtype);
v1::DType DTypeToWire(pk::DType dtype);

// Checks every field in order (factor_widths, k, dtype, rows, scores) and reports the first
// violation as INVALID_ARGUMENT whose message names the field, the value and the limit, e.g.
// "k must be in [1, 256], got 300".
absl::StatusOr<pk::Problem> ValidateTopKRequest(const v1::TopKRequest& request,
                                                uint32_t max_rows_per_request);
// The same for a request whose scores are held elsewhere (ReceivedTopK): `scores_bytes` stands for
// request.scores().size().
absl::StatusOr<pk::Problem> ValidateTopKRequest(const v1::TopKRequest& request,
                                                size_t scores_bytes,
                                                uint32_t max_rows_per_request);

class MemoryStore;

// A LookupRequest against the memories held: `memory` (NOT_FOUND naming the memories the server
// holds), then k, dtype, heads (0 means 1; 1..64), output_dtype (UNSPECIFIED: the memory's),
// rows (1..max_rows_per_request, a multiple of heads) and the scores' length, each violation
// INVALID_ARGUMENT naming the field, the value and the limit. `scores_bytes` stands for
// request.scores().size().
absl::StatusOr<LookupSpec> ValidateLookupRequest(const v1::LookupRequest& request,
                                                 size_t scores_bytes,
                                                 uint32_t max_rows_per_request,
                                                 const MemoryStore& memories);

}  // namespace pkserve
