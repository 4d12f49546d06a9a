#include "server/validation.h"

#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/memory_store.h"

namespace pkserve {

absl::StatusOr<pk::DType> DTypeFromWire(int wire_dtype) {
  switch (wire_dtype) {
    case v1::DTYPE_FLOAT32:
      return pk::DType::kFloat32;
    case v1::DTYPE_BFLOAT16:
      return pk::DType::kBFloat16;
    default:
      break;
  }
  const std::string name = v1::DType_IsValid(wire_dtype)
                               ? v1::DType_Name(static_cast<v1::DType>(wire_dtype))
                               : std::string("unknown");
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype must be DTYPE_FLOAT32 (1) or DTYPE_BFLOAT16 (2), got ", name, " (", wire_dtype, ")"));
}

v1::DType DTypeToWire(pk::DType dtype) {
  return dtype == pk::DType::kFloat32 ? v1::DTYPE_FLOAT32 : v1::DTYPE_BFLOAT16;
}

absl::StatusOr<pk::Problem> ValidateTopKRequest(const v1::TopKRequest& request,
                                                uint32_t max_rows_per_request) {
  return ValidateTopKRequest(request, request.scores().size(), max_rows_per_request);
}

absl::StatusOr<pk::Problem> ValidateTopKRequest(const v1::TopKRequest& request,
                                                size_t scores_bytes,
                                                uint32_t max_rows_per_request) {
  absl::StatusOr<pk::DType> dtype = DTypeFromWire(request.dtype());
  // The shape first (widths, then k), so that a bad shape is reported whatever the dtype says.
  const std::span<const uint32_t> widths(request.factor_widths().data(),
                                         static_cast<size_t>(request.factor_widths_size()));
  pk::Result<pk::Problem> problem =
      pk::ValidateProblem(widths, request.k(), dtype.ok() ? *dtype : pk::DType::kFloat32);
  if (!problem.ok()) return absl::InvalidArgumentError(problem.error().message);
  if (!dtype.ok()) return dtype.status();
  if (request.rows() > max_rows_per_request) {
    return absl::InvalidArgumentError(absl::StrCat("rows must be in [1, ", max_rows_per_request,
                                                   "] (--max_rows_per_request), got ",
                                                   request.rows()));
  }
  pk::Result<std::monostate> payload =
      pk::ValidatePayload(problem.value(), request.rows(), scores_bytes);
  if (!payload.ok()) return absl::InvalidArgumentError(payload.error().message);
  return problem.value();
}

absl::StatusOr<LookupSpec> ValidateLookupRequest(const v1::LookupRequest& request,
                                                 size_t scores_bytes,
                                                 uint32_t max_rows_per_request,
                                                 const MemoryStore& memories) {
  const HostedMemory* memory = memories.Find(request.memory());
  if (memory == nullptr) {
    return absl::NotFoundError(absl::StrCat("memory '", request.memory(),
                                            "' is not held by this server; it holds ",
                                            memories.NamesText(), " (see ServerInfo.memories)"));
  }
  const MemoryLayout& layout = memory->layout();
  absl::StatusOr<pk::DType> dtype = DTypeFromWire(request.dtype());
  pk::Result<pk::Problem> topk = pk::ValidateProblem(
      layout.factor_widths, request.k(), dtype.ok() ? *dtype : pk::DType::kFloat32);
  if (!topk.ok()) return absl::InvalidArgumentError(topk.error().message);
  if (!dtype.ok()) return dtype.status();
  pk::DType output_dtype = layout.dtype;
  if (request.output_dtype() != v1::DTYPE_UNSPECIFIED) {
    absl::StatusOr<pk::DType> named = DTypeFromWire(request.output_dtype());
    if (!named.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("output_", named.status().message(),
                                                     " (or DTYPE_UNSPECIFIED for the memory's)"));
    }
    output_dtype = *named;
  }
  const uint32_t heads = request.heads() == 0 ? 1 : request.heads();
  pk::Result<pk::LookupProblem> lookup =
      pk::ValidateLookup(topk.value(), heads, layout.dim, layout.dtype, output_dtype);
  if (!lookup.ok()) return absl::InvalidArgumentError(lookup.error().message);
  if (request.rows() > max_rows_per_request) {
    return absl::InvalidArgumentError(absl::StrCat("rows must be in [1, ", max_rows_per_request,
                                                   "] (--max_rows_per_request), got ",
                                                   request.rows()));
  }
  pk::Result<std::monostate> payload =
      pk::ValidateLookupPayload(lookup.value(), request.rows(), scores_bytes);
  if (!payload.ok()) return absl::InvalidArgumentError(payload.error().message);
  return LookupSpec{lookup.value(), memory};
}

}  // namespace pkserve
