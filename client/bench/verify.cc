#include "client/bench/verify.h"

#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/topk_cpu.h"

namespace pkserve::bench {
namespace {

struct Expected {
  std::vector<std::byte> values;
  std::vector<uint32_t> slots;
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

}  // namespace pkserve::bench
