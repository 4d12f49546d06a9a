#include "client/bench/verify.h"

#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/lookup/lookup_cpu.h"

namespace pkserve::bench {
namespace {

struct Expected {
  std::vector<std::byte> values;
  std::vector<uint32_t> slots;
  std::vector<float> weights;  // lookups
};

std::string ValueHex(const std::byte* value, size_t element_bytes) {
  uint32_t bits = 0;
  std::memcpy(&bits, value, element_bytes);  // little-endian host, as the wire is
  return absl::StrFormat("0x%0*x", static_cast<int>(2 * element_bytes), bits);
}

}  // namespace

std::string CompareWithReference(const pk::Problem& problem, const PooledRequest& request,
                                 const v1::TopKResponse& response,
                                 const std::vector<std::byte>& expected_values,
                                 const std::vector<uint32_t>& expected_slots) {
  const uint32_t kk = problem.kk();
  if (response.rows() != request.rows || response.kk() != kk ||
      response.dtype() != request.request.dtype()) {
    return absl::StrCat("answer says rows ", response.rows(), " kk ", response.kk(), " dtype ",
                        response.dtype(), ", expected rows ", request.rows, " kk ", kk, " dtype ",
                        request.request.dtype());
  }
  if (response.values().size() != expected_values.size() ||
      response.slots().size() != expected_slots.size() * sizeof(uint32_t)) {
    return absl::StrCat("answer holds ", response.values().size(), " value bytes and ",
                        response.slots().size(), " slot bytes, expected ", expected_values.size(),
                        " and ", expected_slots.size() * sizeof(uint32_t));
  }
  const size_t element_bytes = pk::ElementBytes(problem.dtype);
  const auto* values = reinterpret_cast<const std::byte*>(response.values().data());
  for (size_t pair = 0; pair < expected_slots.size(); ++pair) {
    uint32_t slot = 0;
    std::memcpy(&slot, response.slots().data() + pair * sizeof(uint32_t), sizeof(uint32_t));
    const std::byte* value = values + pair * element_bytes;
    const std::byte* expected_value = expected_values.data() + pair * element_bytes;
    if (slot != expected_slots[pair] || std::memcmp(value, expected_value, element_bytes) != 0) {
      return absl::StrCat("row ", pair / kk, " pair ", pair % kk, ": slot ", slot, " value ",
                          ValueHex(value, element_bytes), ", expected slot ", expected_slots[pair],
                          " value ", ValueHex(expected_value, element_bytes));
    }
  }
  return "";
}

VerifyResult VerifySamples(const pk::Problem& problem, const std::vector<Sample>& samples) {
  VerifyResult result;
  pk::cpu::Workspace workspace;
  std::map<const PooledRequest*, Expected> expected_by_request;
  for (const Sample& sample : samples) {
    const PooledRequest& request = *sample.request;
    auto [it, inserted] = expected_by_request.try_emplace(&request);
    Expected& expected = it->second;
    if (inserted) {
      expected.values.resize(size_t{request.rows} * problem.out_value_bytes());
      expected.slots.resize(size_t{request.rows} * problem.kk());
      pk::cpu::TopKRows(problem,
                        reinterpret_cast<const std::byte*>(request.request.scores().data()),
                        request.rows, expected.values.data(), expected.slots.data(), workspace);
    }
    ++result.checked;
    std::string difference =
        CompareWithReference(problem, request, sample.response, expected.values, expected.slots);
    if (!difference.empty()) {
      if (result.mismatched == 0) {
        result.first_mismatch = absl::StrCat("a request of ", request.rows, " rows: ", difference);
      }
      ++result.mismatched;
    }
  }
  return result;
}

std::string CompareLookupWithReference(const pk::LookupProblem& problem,
                                       const PooledRequest& request,
                                       const v1::LookupResponse& response,
                                       const std::vector<std::byte>& expected_values,
                                       const std::vector<uint32_t>& expected_slots,
                                       const std::vector<float>& expected_weights) {
  const v1::DType dtype = WireDType(problem.output_dtype);
  if (response.outputs() != request.outputs || response.dim() != problem.dim ||
      response.dtype() != dtype) {
    return absl::StrCat("answer says outputs ", response.outputs(), " dim ", response.dim(),
                        " dtype ", response.dtype(), ", expected outputs ", request.outputs,
                        " dim ", problem.dim, " dtype ", dtype);
  }
  if (response.values().size() != expected_values.size()) {
    return absl::StrCat("answer holds ", response.values().size(), " value bytes, expected ",
                        expected_values.size());
  }
  const size_t element_bytes = pk::ElementBytes(problem.output_dtype);
  const auto* values = reinterpret_cast<const std::byte*>(response.values().data());
  for (size_t i = 0; i < expected_values.size() / element_bytes; ++i) {
    const std::byte* value = values + i * element_bytes;
    const std::byte* expected = expected_values.data() + i * element_bytes;
    if (std::memcmp(value, expected, element_bytes) != 0) {
      return absl::StrCat("output ", i / problem.dim, " column ", i % problem.dim, ": value ",
                          ValueHex(value, element_bytes), ", expected ",
                          ValueHex(expected, element_bytes));
    }
  }
  if (!request.lookup.return_slots()) return "";
  const size_t pair_bytes = expected_slots.size() * sizeof(uint32_t);
  if (response.kk() != problem.topk.kk() || response.slots().size() != pair_bytes ||
      response.weights().size() != pair_bytes) {
    return absl::StrCat("answer says kk ", response.kk(), " with ", response.slots().size(),
                        " slot and ", response.weights().size(), " weight bytes, expected kk ",
                        problem.topk.kk(), " and ", pair_bytes, " of each");
  }
  const uint32_t kk = problem.topk.kk();
  for (size_t pair = 0; pair < expected_slots.size(); ++pair) {
    uint32_t slot = 0;
    uint32_t weight_bits = 0;
    uint32_t expected_bits = 0;
    std::memcpy(&slot, response.slots().data() + pair * 4, 4);
    std::memcpy(&weight_bits, response.weights().data() + pair * 4, 4);
    std::memcpy(&expected_bits, &expected_weights[pair], 4);
    if (slot != expected_slots[pair] || weight_bits != expected_bits) {
      return absl::StrFormat(
          "row %d pair %d: slot %d weight 0x%08x, expected slot %d weight 0x%08x", pair / kk,
          pair % kk, slot, weight_bits, expected_slots[pair], expected_bits);
    }
  }
  return "";
}

VerifyResult VerifyLookupSamples(const Workload& workload, const pk::ValuesView& values,
                                 const std::vector<Sample>& samples) {
  VerifyResult result;
  const LookupWorkload& lookup = *workload.lookup;
  pk::Result<pk::LookupProblem> validated = pk::ValidateLookup(
      workload.problem, lookup.heads, lookup.dim, lookup.value_dtype, lookup.value_dtype);
  if (!validated.ok()) {
    result.checked = samples.size();
    result.mismatched = samples.size();
    result.first_mismatch =
        absl::StrCat("the lookup shape is invalid: ", validated.error().message);
    return result;
  }
  const pk::LookupProblem& problem = validated.value();
  pk::cpu::Workspace workspace;
  std::map<const PooledRequest*, Expected> expected_by_request;
  for (const Sample& sample : samples) {
    const PooledRequest& request = *sample.request;
    auto [it, inserted] = expected_by_request.try_emplace(&request);
    Expected& expected = it->second;
    if (inserted) {
      const size_t pairs = size_t{request.rows} * problem.topk.kk();
      expected.slots.resize(pairs);
      expected.weights.resize(pairs);
      std::vector<uint8_t> row_valid(request.rows);
      pk::cpu::LookupWeightsRows(
          problem.topk, reinterpret_cast<const std::byte*>(request.scores().data()), request.rows,
          expected.slots.data(), expected.weights.data(), row_valid.data(), workspace);
      expected.values.resize(size_t{request.outputs} * problem.output_row_bytes());
      pk::cpu::WeightedSumRows(problem, values, expected.slots.data(), expected.weights.data(),
                               request.outputs, expected.values.data());
    }
    ++result.checked;
    std::string difference = CompareLookupWithReference(
        problem, request, sample.lookup, expected.values, expected.slots, expected.weights);
    if (!difference.empty()) {
      if (result.mismatched == 0) {
        result.first_mismatch = absl::StrCat("a lookup of ", request.rows, " rows: ", difference);
      }
      ++result.mismatched;
    }
  }
  return result;
}

}  // namespace pkserve::bench
