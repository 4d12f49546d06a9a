#include "kernels/cuda/lookup_cuda.h"

#include <cuda_runtime.h>

#include <memory>
#include <tuple>
#include <utility>
#include <string>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/lookup_launch.h"

namespace pk::cuda {
namespace {

std::string Describe(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
         ")";
}

struct DeviceFree {
  void operator()(void* pointer) const { cudaFree(pointer); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

std::string Allocate(size_t bytes, DeviceBuffer* buffer) {
  void* pointer = nullptr;
  const cudaError_t error = cudaMalloc(&pointer, bytes == 0 ? 1 : bytes);
  if (error != cudaSuccess) return Describe("cudaMalloc", error);
  buffer->reset(pointer);
  return "";
}

}  // namespace

std::string LookupHost(const LookupProblem& problem, const std::byte* table, uint64_t table_slots,
                       const std::byte* scores, size_t rows, uint32_t* slots, float* weights,
                       uint8_t* row_valid, std::byte* outputs) {
  auto launcher = TopKLauncher::Create(0);
  if (!launcher.ok()) return launcher.error().message;
  const Problem& topk = problem.topk;
  const size_t pairs = rows * size_t{topk.kk()};
  const size_t table_bytes = table_slots * problem.value_row_bytes();
  const size_t score_bytes = rows * topk.row_bytes();
  const size_t output_bytes = rows / problem.heads * problem.output_row_bytes();
  DeviceBuffer d_table, d_scores, d_values, d_slots, d_weights, d_valid, d_outputs;
  for (auto [bytes, buffer] : {std::pair{table_bytes, &d_table}, std::pair{score_bytes, &d_scores},
                               std::pair{pairs * ElementBytes(topk.dtype), &d_values},
                               std::pair{pairs * 4, &d_slots}, std::pair{pairs * 4, &d_weights},
                               std::pair{rows, &d_valid}, std::pair{output_bytes, &d_outputs}}) {
    if (std::string error = Allocate(bytes, buffer); !error.empty()) return error;
  }
  cudaError_t error = cudaMemcpy(d_table.get(), table, table_bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return Describe("copying the table to the device", error);
  error = cudaMemcpy(d_scores.get(), scores, score_bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return Describe("copying scores to the device", error);
  auto* device_slots = static_cast<uint32_t*>(d_slots.get());
  error = launcher.value().Launch(topk, d_scores.get(), rows, d_values.get(), device_slots, nullptr);
  if (error != cudaSuccess) return Describe("launching the top-k kernel", error);
  const ValuesView view{static_cast<const std::byte*>(d_table.get()), table_slots, problem.dim,
                        problem.value_dtype};
  error = LaunchLookup(problem, view, static_cast<const std::byte*>(d_scores.get()), device_slots,
                       rows, static_cast<float*>(d_weights.get()),
                       static_cast<uint8_t*>(d_valid.get()), static_cast<std::byte*>(d_outputs.get()),
                       nullptr);
  if (error != cudaSuccess) return Describe("launching the lookup kernels", error);
  error = cudaDeviceSynchronize();
  if (error != cudaSuccess) return Describe("running the lookup kernels", error);
  for (auto [to, from, bytes] : {std::tuple{static_cast<void*>(slots), d_slots.get(), pairs * 4},
                                 std::tuple{static_cast<void*>(weights), d_weights.get(), pairs * 4},
                                 std::tuple{static_cast<void*>(row_valid), d_valid.get(), rows},
                                 std::tuple{static_cast<void*>(outputs), d_outputs.get(),
                                            output_bytes}}) {
    error = cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToHost);
    if (error != cudaSuccess) return Describe("copying results from the device", error);
  }
  return "";
}

}  // namespace pk::cuda
