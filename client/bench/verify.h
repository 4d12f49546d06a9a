// --verify: sampled answers checked against the CPU implementation (pk::cpu::TopKRows), bit for
// bit: rows, kk, dtype, every value's bytes and every slot. Lookup answers are checked against
// pk::cpu::LookupWeightsRows and WeightedSumRows on the same values table the server loaded
// (--memory_file): outputs, dim, dtype, every output value's bytes, and with return_slots every
// slot and weight.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "client/bench/load.h"
#include "kernels/lookup/lookup.h"
#include "kernels/problem.h"

namespace pkserve::bench {

struct VerifyResult {
  size_t checked = 0;
  size_t mismatched = 0;
  std::string first_mismatch;  // what differed in the first bad answer; "" when none
};

// Checks every sample; the expected output of each pooled request is computed once.
VerifyResult VerifySamples(const pk::Problem& problem, const std::vector<Sample>& samples);

// "" when `response` is exactly the CPU implementation's answer to `request`, else the first
// difference (e.g. "row 3 pair 5: slot 1234 value 0x3f80, expected slot 1240 value 0x3f80").
std::string CompareWithReference(const pk::Problem& problem, const PooledRequest& request,
                                 const v1::TopKResponse& response,
                                 const std::vector<std::byte>& expected_values,
                                 const std::vector<uint32_t>& expected_slots);

// Checks every lookup sample of `workload` (whose lookup is set) against `values`, which has the
// shape the workload names.
VerifyResult VerifyLookupSamples(const Workload& workload, const pk::ValuesView& values,
                                 const std::vector<Sample>& samples);

// "" when `response` is exactly the CPU implementation's answer to the lookup `request` (its
// expected outputs, slots and weights given), else the first difference.
std::string CompareLookupWithReference(const pk::LookupProblem& problem,
                                       const PooledRequest& request,
                                       const v1::LookupResponse& response,
                                       const std::vector<std::byte>& expected_values,
                                       const std::vector<uint32_t>& expected_slots,
                                       const std::vector<float>& expected_weights);

}  // namespace pkserve::bench
