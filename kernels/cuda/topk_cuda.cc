#include "kernels/cuda/topk_cuda.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/launch.h"

namespace pk::cuda {

bool DeviceAvailable(std::string* why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    if (why != nullptr) {
      *why = error != cudaSuccess ? CudaMessage("no usable CUDA device", error)
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

Status TopKHost(const Problem& problem, const std::byte* scores, size_t rows, std::byte* values,
                uint32_t* slots) {
  auto launcher = TopKLauncher::Create(0);
  if (!launcher.ok()) return launcher.error();
  const size_t score_bytes = rows * problem.row_bytes();
  const size_t value_bytes = rows * problem.out_value_bytes();
  const size_t slot_bytes = rows * size_t{problem.kk()} * sizeof(uint32_t);
  auto device_scores = AllocateDevice(score_bytes);
  if (!device_scores.ok()) return device_scores.error();
  auto device_values = AllocateDevice(value_bytes);
  if (!device_values.ok()) return device_values.error();
  auto device_slots = AllocateDevice(slot_bytes);
  if (!device_slots.ok()) return device_slots.error();
  std::byte* const on_device_values = device_values.value().data();
  uint32_t* const on_device_slots = reinterpret_cast<uint32_t*>(device_slots.value().data());
  Status step = Check(cudaMemcpy(device_scores.value().data(), scores, score_bytes,
                                 cudaMemcpyHostToDevice),
                      "copying scores to the device");
  if (step.ok()) {
    step = Check(launcher.value().Launch(problem, device_scores.value().data(), rows,
                                         on_device_values, on_device_slots, nullptr),
                 "launching the top-k kernel");
  }
  if (step.ok()) step = Check(cudaDeviceSynchronize(), "running the top-k kernel");
  if (step.ok()) {
    step = Check(cudaMemcpy(values, on_device_values, value_bytes, cudaMemcpyDeviceToHost),
                 "copying values from the device");
  }
  if (step.ok()) {
    step = Check(cudaMemcpy(slots, on_device_slots, slot_bytes, cudaMemcpyDeviceToHost),
                 "copying slots from the device");
  }
  return step;
}

}  // namespace pk::cuda
