// Validation at the edge: a TopKRequest from the wire is checked once, here, against SPEC.md's
// limits and the server's own; everything behind it trusts the pk::Problem it returns.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/problem.h"
#include "pkserve/v1/pkserve.pb.h"

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

}  // namespace pkserve
