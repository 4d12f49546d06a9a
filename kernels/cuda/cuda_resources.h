// Owners of CUDA resources (a stream, an event, device memory, pinned host memory) and the one way
// a CUDA error becomes a message: "what: cudaErrorName (description)". Each owner is move-only
// and frees its resource when destroyed (a failure to free is ignored: the owner is gone); each is
// made by a function that returns Result<owner> (kernels/problem.h), whose error, field "device",
// says what failed, with how much, and the CUDA error. No abseil, so that kernels/ stays
// dependency-free: server/ turns a pk::Error into an absl::Status where it calls these.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "kernels/problem.h"

namespace pk::cuda {

// "what: cudaErrorName (description)".
inline std::string CudaMessage(std::string_view what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
         ")";
}

// The Error (field "device") for `error`, returned by a step described by `what`.
inline Error CudaError(std::string_view what, cudaError_t error) {
  return Error{"device", CudaMessage(what, error)};
}

// Success, or the Error of the CUDA call that failed.
using Status = Result<std::monostate>;
inline Status Check(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return std::monostate{};
  return CudaError(what, error);
}

// A handle that kRelease frees when the owner is destroyed; the empty handle (Handle{}) owns
// nothing. Moving transfers ownership.
template <class Handle, cudaError_t (*kRelease)(Handle)>
class Owned {
 public:
  Owned() = default;
  explicit Owned(Handle handle) : handle_(handle) {}
  Owned(Owned&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  Owned& operator=(Owned&& other) noexcept {
    std::swap(handle_, other.handle_);  // `other` frees what this held
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (handle_ != Handle{}) kRelease(handle_);
  }

  Handle get() const { return handle_; }

 private:
  Handle handle_{};
};

using Stream = Owned<cudaStream_t, &cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, &cudaEventDestroy>;

// `bytes` bytes of memory that kRelease frees (cudaFree, cudaFreeHost).
template <cudaError_t (*kRelease)(void*)>
class Memory {
 public:
  Memory() = default;
  Memory(void* data, size_t bytes) : owned_(data), bytes_(bytes) {}

  std::byte* data() const { return static_cast<std::byte*>(owned_.get()); }
  size_t size() const { return bytes_; }

 private:
  Owned<void*, kRelease> owned_;
  size_t bytes_ = 0;
};

using DeviceBuffer = Memory<&cudaFree>;
using PinnedBuffer = Memory<&cudaFreeHost>;

// A stream of the current device (cudaStreamCreateWithFlags; cudaStreamNonBlocking: no implicit
// synchronization with the legacy default stream).
inline Result<Stream> CreateStream(unsigned flags = cudaStreamNonBlocking) {
  cudaStream_t stream = nullptr;
  if (const cudaError_t error = cudaStreamCreateWithFlags(&stream, flags); error != cudaSuccess) {
    return CudaError("creating a stream", error);
  }
  return Stream(stream);
}

// An event of the current device (cudaEventCreateWithFlags; cudaEventBlockingSync: a thread that
// synchronizes on it sleeps instead of spinning).
inline Result<Event> CreateEvent(unsigned flags = cudaEventDefault) {
  cudaEvent_t event = nullptr;
  if (const cudaError_t error = cudaEventCreateWithFlags(&event, flags); error != cudaSuccess) {
    return CudaError("creating an event", error);
  }
  return Event(event);
}

// `bytes` of device memory on the current device (at least 1 byte is allocated, so that an empty
// buffer still has an address).
inline Result<DeviceBuffer> AllocateDevice(size_t bytes) {
  void* data = nullptr;
  if (const cudaError_t error = cudaMalloc(&data, bytes == 0 ? 1 : bytes); error != cudaSuccess) {
    return CudaError("allocating " + std::to_string(bytes) + " bytes of device memory", error);
  }
  return DeviceBuffer(data, bytes);
}

// `bytes` of page-locked host memory (cudaHostAlloc, cudaHostAllocDefault), at least 1 byte.
inline Result<PinnedBuffer> AllocatePinned(size_t bytes) {
  void* data = nullptr;
  if (const cudaError_t error = cudaHostAlloc(&data, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
      error != cudaSuccess) {
    return CudaError("allocating " + std::to_string(bytes) + " bytes of pinned host memory", error);
  }
  return PinnedBuffer(data, bytes);
}

}  // namespace pk::cuda
