// Host-side entry points of the CUDA backend for tools and tests: plain C++ (no CUDA types), so
// that any file compiled by the host compiler can include it. Executors use launch.h instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "kernels/problem.h"

namespace pk::cuda {

// True when a CUDA device is present and the kernels in this binary can run on device 0;
// otherwise false, with the reason in *why (when why is not null).
bool DeviceAvailable(std::string* why);

// Runs the top-k on device 0 for `rows` rows in host memory: copies in, launches, copies out.
// Same layout as pk::cpu::TopKRows. Allocates device memory per call (a convenience for tools and
// tests, not for serving). Returns success, or an Error (field "device") saying which step failed
// and the CUDA error.
Result<std::monostate> TopKHost(const Problem& problem, const std::byte* scores, size_t rows,
                                std::byte* values, uint32_t* slots);

}  // namespace pk::cuda
