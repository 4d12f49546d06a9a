#include "kernels/cuda/topk_cuda.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernels/cuda/launch.h"

namespace pk::cuda {
namespace {

std::string Describe(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
         ")";
}

// Device memory owned for the duration of one TopKHost call.
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

bool DeviceAvailable(std::string* why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    if (why != nullptr) {
      *why = error != cudaSuccess ? Describe("no usable CUDA device", error)
                                  : std::string("no CUDA device present");
    }
    return false;
  }
  auto launcher = TopKLauncher::Create(0);
  if (!launcher.ok()) {
    if (why != nullptr) *why = launcher.error().message;
    return false;
  }
  return true;
}

std::string TopKHost(const Problem& problem, const std::byte* scores, size_t rows,
                     std::byte* values, uint32_t* slots) {
  auto launcher = TopKLauncher::Create(0);
  if (!launcher.ok()) return launcher.error().message;
  const size_t score_bytes = rows * problem.row_bytes();
  const size_t value_bytes = rows * problem.out_value_bytes();
  const size_t slot_bytes = rows * size_t{problem.kk()} * sizeof(uint32_t);
  DeviceBuffer device_scores, device_values, device_slots;
  for (auto [bytes, buffer] : {std::pair{score_bytes, &device_scores},
                               std::pair{value_bytes, &device_values},
                               std::pair{slot_bytes, &device_slots}}) {
    if (std::string error = Allocate(bytes, buffer); !error.empty()) return error;
  }
  cudaError_t error =
      cudaMemcpy(device_scores.get(), scores, score_bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return Describe("copying scores to the device", error);
  error = launcher.value().Launch(problem, device_scores.get(), rows, device_values.get(),
                                  static_cast<uint32_t*>(device_slots.get()), nullptr);
  if (error != cudaSuccess) return Describe("launching the top-k kernel", error);
  error = cudaDeviceSynchronize();
  if (error != cudaSuccess) return Describe("running the top-k kernel", error);
  error = cudaMemcpy(values, device_values.get(), value_bytes, cudaMemcpyDeviceToHost);
  if (error != cudaSuccess) return Describe("copying values from the device", error);
  error = cudaMemcpy(slots, device_slots.get(), slot_bytes, cudaMemcpyDeviceToHost);
  if (error != cudaSuccess) return Describe("copying slots from the device", error);
  return "";
}

}  // namespace pk::cuda
