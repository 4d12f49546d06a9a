// Host-side entry point of the CUDA memory lookup for tools and tests: plain C++ (no CUDA types),
// like topk_cuda.h. Executors use lookup_launch.h (and launch.h for the top-k) instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/lookup/lookup.h"

namespace pk::cuda {

// The whole lookup on device 0 for `rows` score rows in host memory (a multiple of heads) and a
// values table in host memory (`table_slots` rows of problem.dim): copies in, runs the top-k
// (TopKLauncher) and LaunchLookup, copies slots, weights, row_valid and outputs out (layouts as
// pk::cpu's). Allocates device memory per call (a convenience, not for serving). Returns "" on
// success, else what failed.
std::string LookupHost(const LookupProblem& problem, const std::byte* table, uint64_t table_slots,
                       const std::byte* scores, size_t rows, uint32_t* slots, float* weights,
                       uint8_t* row_valid, std::byte* outputs);

}  // namespace pk::cuda
