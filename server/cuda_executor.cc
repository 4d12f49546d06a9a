#include "server/cuda_executor.h"

#include <cuda_runtime.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/lookup_launch.h"
#include "server/memory_store.h"
#include "spdlog/spdlog.h"

namespace pkserve {
namespace {

// Staging layout of one batch, the same on the host and on the device: scores, then values, then
// slots, each region starting on a 256-byte boundary, so that values and slots leave in one copy.
struct Layout {
  size_t scores = 0;  // bytes
  size_t values_offset = 0;
  size_t slots_offset = 0;
  size_t end = 0;  // bytes from the start of the scores to the end of the slots

  static constexpr size_t kAlign = 256;
  static size_t Up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

  Layout(const pk::Problem& problem, size_t rows) {
    scores = rows * problem.row_bytes();
    values_offset = Up(scores);
    slots_offset = values_offset + Up(rows * problem.out_value_bytes());
    end = slots_offset + rows * problem.kk() * sizeof(uint32_t);
  }
};

// Staging layout of one lookup batch, the same on the host and on the device: scores, the
// top-k's values (device only: a lookup does not return them), then slots, weights, row
// validity and outputs, which leave in one copy. Each region starts on a 256-byte boundary.
struct LookupLayout {
  size_t scores = 0;  // bytes
  size_t values_offset = 0;
  size_t slots_offset = 0;
  size_t weights_offset = 0;
  size_t valid_offset = 0;
  size_t outputs_offset = 0;
  size_t end = 0;

  LookupLayout(const pk::LookupProblem& lookup, size_t rows) {
    const pk::Problem& topk = lookup.topk;
    const size_t pairs = rows * topk.kk();
    scores = rows * topk.row_bytes();
    values_offset = Layout::Up(scores);
    slots_offset = values_offset + Layout::Up(rows * topk.out_value_bytes());
    weights_offset = slots_offset + Layout::Up(pairs * sizeof(uint32_t));
    valid_offset = weights_offset + Layout::Up(pairs * sizeof(float));
    outputs_offset = valid_offset + Layout::Up(rows);
    end = outputs_offset + rows / lookup.heads * lookup.output_row_bytes();
  }
};

// The table is copied to each device through two pinned chunks of this size, one filled from
// the mapping while the other goes to the device.
constexpr size_t kTableChunk = size_t{32} << 20;
// Device memory left free after the tables, for the lanes' kernels and the CUDA runtime.
constexpr size_t kDeviceHeadroom = size_t{256} << 20;

// The one conversion of the CUDA layer's errors (kernels/cuda/cuda_resources.h) to a status:
// `code` with the device's ordinal before the message.
absl::Status DeviceStatus(absl::StatusCode code, const pk::Error& error, int device) {
  return absl::Status(code, absl::StrCat("cuda device ", device, ": ", error.message));
}
absl::Status CudaError(cudaError_t error, const char* what, int device) {
  return DeviceStatus(absl::StatusCode::kInternal, pk::cuda::CudaError(what, error), device);
}

// How long a lane thread with nothing to do spins before it sleeps.
constexpr std::chrono::microseconds kSpinBeforeSleep{200};

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a lane polls for its batch to finish before it sleeps until it does: long enough for a
// small batch (copies and kernel of 64 rows take about 30 us), short enough that a core is not held
// for long while the device works.
constexpr std::chrono::microseconds kSpinForBatch{100};

// Batches of at least this many bytes of scores are throughput work: their lane neither polls for
// them (it sleeps on the event at once; the wake-up, tens of microseconds, is small beside their
// copies) nor spins for the next batch after them. At the plateau of 1 MiB requests, polling and
// spinning took about as much CPU per request as the gather itself, CPU the host's gRPC threads
// needed. Small batches, the latency-bound ones, keep both.
constexpr size_t kLatencyBatchBytes = size_t{256} << 10;

// Waits for `event` (created with cudaEventBlockingSync): polls for `spin`, then sleeps.
cudaError_t WaitForEvent(cudaEvent_t event, std::chrono::microseconds spin) {
  const auto spin_until = std::chrono::steady_clock::now() + spin;
  cudaError_t state = cudaEventQuery(event);
  while (state == cudaErrorNotReady && std::chrono::steady_clock::now() < spin_until) {
    CpuRelax();
    state = cudaEventQuery(event);
  }
  return state == cudaErrorNotReady ? cudaEventSynchronize(event) : state;
}

// The copy in goes to the device in pieces of this size, each gathered just before it is sent.
constexpr size_t kCopyInChunk = size_t{1} << 20;

// Errors after which the device's context is unusable until the process ends.
bool IsStickyError(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceUninitialized:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct CudaExecutor::Device {
  int index = 0;  // in devices_ (and devices())
  int ordinal = 0;
  std::string name;
  std::optional<pk::cuda::TopKLauncher> launcher;
  std::atomic<bool> failed{false};
  // Each hosted memory's table on this device; filled by AddMemory before lookups are served,
  // read without a lock after.
  std::vector<std::pair<const HostedMemory*, pk::cuda::DeviceBuffer>> tables;

  const std::byte* Table(const HostedMemory* memory) const {
    for (const auto& [held, buffer] : tables) {
      if (held == memory) return buffer.data();
    }
    return nullptr;
  }
};

struct CudaExecutor::Lane {
  int index = 0;
  Device* device = nullptr;
  pk::cuda::PinnedBuffer host;
  pk::cuda::DeviceBuffer on_device;
  pk::cuda::Stream stream;
  pk::cuda::Event start;
  pk::cuda::Event stop;

  // The lane's mailbox: at most one batch, since a lane's batch holds the lane. `posted` mirrors
  // `batch != nullptr` for the lane thread's spin, without the mutex.
  std::atomic<bool> posted{false};
  std::mutex mutex;
  std::condition_variable ready;
  std::unique_ptr<Batch> batch;
  BatchDone done;
  bool stopping = false;
  std::thread thread;
};

namespace {

// Moves `made` into `*into`, or returns its error as INTERNAL for `device`.
template <class T>
absl::Status Take(pk::Result<T> made, int device, T* into) {
  if (!made.ok()) return DeviceStatus(absl::StatusCode::kInternal, made.error(), device);
  *into = std::move(made.value());
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaExecutor::MakeLaneResources(size_t staging_bytes, int device, Lane& lane) {
  absl::Status status = Take(pk::cuda::AllocatePinned(staging_bytes), device, &lane.host);
  if (status.ok()) status = Take(pk::cuda::AllocateDevice(staging_bytes), device, &lane.on_device);
  if (status.ok()) status = Take(pk::cuda::CreateStream(), device, &lane.stream);
  if (status.ok()) status = Take(pk::cuda::CreateEvent(), device, &lane.start);
  // The stop event blocks its waiter (WaitForEvent sleeps on it once spinning is over).
  if (status.ok()) status = Take(pk::cuda::CreateEvent(cudaEventBlockingSync), device, &lane.stop);
  return status;
}

// A batch in one lane's pinned staging; gives the lane back when destroyed.
class CudaExecutor::CudaBatch final : public Batch {
 public:
  CudaBatch(CudaExecutor& executor, Lane& lane, const pk::Problem& problem, size_t rows,
            const Layout& layout)
      : Batch(problem, rows, std::span(lane.host.data(), layout.scores),
              std::span(lane.host.data() + layout.values_offset, rows * problem.out_value_bytes()),
              std::span(reinterpret_cast<uint32_t*>(lane.host.data() + layout.slots_offset),
                        rows * problem.kk())),
        executor_(executor),
        lane_(lane) {}
  // A lookup batch.
  CudaBatch(CudaExecutor& executor, Lane& lane, const LookupSpec& spec, size_t rows,
            const LookupLayout& layout)
      : Batch(spec.problem.topk, rows, std::span(lane.host.data(), layout.scores), {},
              std::span(reinterpret_cast<uint32_t*>(lane.host.data() + layout.slots_offset),
                        rows * spec.problem.topk.kk())),
        executor_(executor),
        lane_(lane) {
    SetLookup(spec,
              std::span(reinterpret_cast<float*>(lane.host.data() + layout.weights_offset),
                        rows * spec.problem.topk.kk()),
              std::span(reinterpret_cast<uint8_t*>(lane.host.data() + layout.valid_offset), rows),
              std::span(lane.host.data() + layout.outputs_offset,
                        rows / spec.problem.heads * spec.problem.output_row_bytes()));
  }
  ~CudaBatch() override { executor_.ReleaseLane(lane_.index); }

  Lane& lane() const { return lane_; }

 private:
  CudaExecutor& executor_;
  Lane& lane_;
};

CudaExecutor::CudaExecutor(const Options& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(const Options& options) {
  if (options.streams < 1) return absl::InvalidArgumentError("--streams must be at least 1");
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    return absl::UnavailableError(pk::cuda::CudaMessage("no usable CUDA device", error));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device present");
  std::vector<int> ordinals = options.devices;
  if (ordinals.empty()) {
    for (int d = 0; d < count; ++d) ordinals.push_back(d);
  }
  auto executor = std::unique_ptr<CudaExecutor>(new CudaExecutor(options));
  for (const int ordinal : ordinals) {
    if (ordinal < 0 || ordinal >= count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices: device ", ordinal, " does not exist; devices are 0 to ", count - 1));
    }
    auto device = std::make_unique<Device>();
    device->index = static_cast<int>(executor->devices_.size());
    device->ordinal = ordinal;
    auto launcher = pk::cuda::TopKLauncher::Create(ordinal);  // also makes it current
    if (!launcher.ok()) return absl::UnavailableError(launcher.error().message);
    device->launcher.emplace(std::move(launcher.value()));
    cudaDeviceProp properties{};
    if (const cudaError_t error = cudaGetDeviceProperties(&properties, ordinal);
        error != cudaSuccess) {
      return CudaError(error, "reading properties", ordinal);
    }
    device->name = absl::StrCat(
        "cuda:", ordinal, " ", properties.name, ", ", properties.multiProcessorCount, " SMs, ",
        properties.totalGlobalMem >> 20, " MiB, ", options.streams, " streams");
    for (int s = 0; s < options.streams; ++s) {
      auto lane = std::make_unique<Lane>();
      lane->index = static_cast<int>(executor->lanes_.size());
      lane->device = device.get();
      if (absl::Status made = MakeLaneResources(options.staging_bytes, ordinal, *lane);
          !made.ok()) {
        return made;
      }
      executor->lanes_.push_back(std::move(lane));
    }
    executor->devices_.push_back(std::move(device));
  }
  for (int s = 0; s < options.streams; ++s) {
    for (size_t d = 0; d < executor->devices_.size(); ++d) {
      executor->lane_order_.push_back(static_cast<int>(d) * options.streams + s);
    }
  }
  {
    absl::MutexLock lock(&executor->mu_);
    executor->lane_in_use_.assign(executor->lanes_.size(), false);
  }
  for (auto& lane : executor->lanes_) {
    Lane& lane_ref = *lane;
    CudaExecutor* self = executor.get();
    lane->thread = std::thread([self, &lane_ref] { self->LaneLoop(lane_ref); });
    pthread_setname_np(lane->thread.native_handle(), "pk-cuda-lane");
  }
  return executor;
}

CudaExecutor::~CudaExecutor() {
  for (auto& lane : lanes_) {
    {
      std::lock_guard lock(lane->mutex);
      lane->stopping = true;
    }
    lane->ready.notify_one();
  }
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
}

std::vector<std::string> CudaExecutor::devices() const {
  std::vector<std::string> names;
  for (const auto& device : devices_) {
    names.push_back(device->failed ? device->name + " (out of service)" : device->name);
  }
  return names;
}

bool CudaExecutor::healthy() const {
  return std::any_of(devices_.begin(), devices_.end(),
                     [](const auto& device) { return !device->failed.load(); });
}

size_t CudaExecutor::max_batch_rows(const pk::Problem& problem) const {
  // The largest row count whose layout fits a lane's staging.
  size_t rows = std::max<size_t>(
      1, options_.staging_bytes / (problem.row_bytes() + problem.out_value_bytes() +
                                   size_t{problem.kk()} * sizeof(uint32_t)));
  while (rows > 1 && Layout(problem, rows).end > options_.staging_bytes) --rows;
  return rows;
}

absl::StatusOr<std::unique_ptr<Batch>> CudaExecutor::NewBatch(const pk::Problem& problem,
                                                              size_t rows) {
  if (rows < 1 || rows > max_batch_rows(problem)) {
    return absl::InternalError(absl::StrCat(
        "batch of ", rows, " rows, a lane's staging holds 1 to ", max_batch_rows(problem)));
  }
  Lane* chosen = TakeLane();
  if (chosen == nullptr) {
    return absl::InternalError(absl::StrCat("all ", lanes_.size(), " CUDA lanes are in use"));
  }
  return std::make_unique<CudaBatch>(*this, *chosen, problem, rows, Layout(problem, rows));
}

size_t CudaExecutor::max_lookup_batch_rows(const LookupSpec& spec) const {
  const pk::LookupProblem& lookup = spec.problem;
  const size_t heads = lookup.heads;
  // Start from the bytes a score row needs, then step down to a layout that fits.
  const size_t row_bytes = lookup.topk.row_bytes() + lookup.topk.out_value_bytes() +
                           size_t{lookup.topk.kk()} * (sizeof(uint32_t) + sizeof(float)) + 1 +
                           (lookup.output_row_bytes() + heads - 1) / heads;
  size_t rows = std::max(heads, options_.staging_bytes / row_bytes / heads * heads);
  while (rows > heads && LookupLayout(lookup, rows).end > options_.staging_bytes) rows -= heads;
  return rows;
}

absl::StatusOr<std::unique_ptr<Batch>> CudaExecutor::NewLookupBatch(const LookupSpec& spec,
                                                                    size_t rows) {
  const size_t heads = spec.problem.heads;
  if (rows < heads || rows % heads != 0 || rows > max_lookup_batch_rows(spec)) {
    return absl::InternalError(absl::StrCat("lookup batch of ", rows,
                                            " rows, a lane's staging holds ", heads, " to ",
                                            max_lookup_batch_rows(spec), " in multiples of ",
                                            heads));
  }
  Lane* chosen = TakeLane();
  if (chosen == nullptr) {
    return absl::InternalError(absl::StrCat("all ", lanes_.size(), " CUDA lanes are in use"));
  }
  return std::make_unique<CudaBatch>(*this, *chosen, spec, rows,
                                     LookupLayout(spec.problem, rows));
}

absl::Status CudaExecutor::AddMemory(const HostedMemory& memory) {
  for (auto& device : devices_) {
    if (absl::Status copied = CopyTable(memory, *device); !copied.ok()) return copied;
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::CopyTable(const HostedMemory& memory, Device& device) {
  const pk::ValuesView table = memory.values();
  const size_t bytes = memory.layout().data_bytes;
  if (const cudaError_t error = cudaSetDevice(device.ordinal); error != cudaSuccess) {
    return CudaError(error, "selecting the device", device.ordinal);
  }
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (const cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes); error != cudaSuccess) {
    return CudaError(error, "reading its free memory", device.ordinal);
  }
  if (bytes + kDeviceHeadroom > free_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda device ", device.ordinal, ": the table of ", bytes >> 20, " MiB does not fit: ",
        free_bytes >> 20, " MiB of ", total_bytes >> 20, " MiB are free, and ",
        kDeviceHeadroom >> 20, " MiB stay free for the kernels (fewer or smaller memories, "
        "or a device with more memory)"));
  }
  pk::cuda::DeviceBuffer on_device;
  if (absl::Status made = Take(pk::cuda::AllocateDevice(bytes), device.ordinal, &on_device);
      !made.ok()) {
    return made;
  }
  pk::cuda::Stream stream;
  if (absl::Status made = Take(pk::cuda::CreateStream(), device.ordinal, &stream); !made.ok()) {
    return made;
  }
  std::array<pk::cuda::PinnedBuffer, 2> chunks;
  std::array<pk::cuda::Event, 2> copied;
  for (int i = 0; i < 2; ++i) {
    absl::Status made = Take(pk::cuda::AllocatePinned(std::min(bytes, kTableChunk)),
                             device.ordinal, &chunks[i]);
    if (made.ok()) made = Take(pk::cuda::CreateEvent(), device.ordinal, &copied[i]);
    if (!made.ok()) return made;
  }
  // Chunk i is filled from the mapping once its previous copy to the device is done.
  cudaError_t error = cudaSuccess;
  bool used[2] = {false, false};
  size_t chunk = 0;
  for (size_t begin = 0; begin < bytes && error == cudaSuccess; begin += kTableChunk, chunk ^= 1) {
    const size_t size = std::min(kTableChunk, bytes - begin);
    if (used[chunk]) error = cudaEventSynchronize(copied[chunk].get());
    if (error != cudaSuccess) break;
    std::memcpy(chunks[chunk].data(), table.data + begin, size);
    error = cudaMemcpyAsync(on_device.data() + begin, chunks[chunk].data(), size,
                            cudaMemcpyHostToDevice, stream.get());
    if (error == cudaSuccess) error = cudaEventRecord(copied[chunk].get(), stream.get());
    used[chunk] = true;
  }
  const cudaError_t synced = cudaStreamSynchronize(stream.get());
  if (error == cudaSuccess) error = synced;
  if (error != cudaSuccess) return CudaError(error, "copying a table", device.ordinal);
  device.tables.emplace_back(&memory, std::move(on_device));
  return absl::OkStatus();
}

CudaExecutor::Lane* CudaExecutor::TakeLane() {
  Lane* chosen = nullptr;
  {
    absl::MutexLock lock(&mu_);
    // The spinning lane if it is free, else the first free lane in lane_order_, preferring lanes
    // of devices in service; a lane of a failed device is handed out only when no other is free,
    // and its batch then fails at once.
    const int spinning = spinning_lane_.load(std::memory_order_relaxed);
    if (spinning >= 0 && !lane_in_use_[spinning] && !lanes_[spinning]->device->failed) {
      chosen = lanes_[spinning].get();
      lane_in_use_[spinning] = true;
    }
    for (int pass = 0; pass < 2 && chosen == nullptr; ++pass) {
      for (const int index : lane_order_) {
        if (lane_in_use_[index]) continue;
        if (pass == 0 && lanes_[index]->device->failed) continue;
        chosen = lanes_[index].get();
        lane_in_use_[index] = true;
        break;
      }
    }
  }
  return chosen;
}

void CudaExecutor::ReleaseLane(int index) {
  absl::MutexLock lock(&mu_);
  lane_in_use_[index] = false;
}

void CudaExecutor::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  Lane& lane = static_cast<CudaBatch&>(*batch).lane();
  {
    std::lock_guard lock(lane.mutex);
    lane.batch = std::move(batch);
    lane.done = std::move(done);
    lane.posted.store(true, std::memory_order_release);
  }
  lane.ready.notify_one();
}

void CudaExecutor::LaneLoop(Lane& lane) {
  cudaSetDevice(lane.device->ordinal);
  size_t last_batch_bytes = 0;
  while (true) {
    std::unique_ptr<Batch> batch;
    BatchDone done;
    // Under steady traffic the next batch usually comes within a round trip of the last one, and
    // a sleeping thread takes tens of microseconds to wake: after a small batch, spin a little
    // before sleeping, if no other lane is spinning. An idle server spins for nothing.
    int none = -1;
    if (last_batch_bytes < kLatencyBatchBytes &&
        spinning_lane_.compare_exchange_strong(none, lane.index, std::memory_order_relaxed)) {
      const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
      while (!lane.posted.load(std::memory_order_acquire) &&
             std::chrono::steady_clock::now() < spin_until) {
        CpuRelax();
      }
      spinning_lane_.store(-1, std::memory_order_relaxed);
    }
    {
      std::unique_lock lock(lane.mutex);
      lane.ready.wait(lock, [&] { return lane.stopping || lane.batch != nullptr; });
      if (lane.batch == nullptr) return;  // stopping with nothing left
      batch = std::move(lane.batch);
      done = std::move(lane.done);
      lane.posted.store(false, std::memory_order_relaxed);
    }
    last_batch_bytes = batch->scores().size();
    BatchOutcome outcome = RunOnLane(lane, *batch);
    outcome.device = lane.device->index;
    std::move(done)(std::move(batch), std::move(outcome));
  }
}

BatchOutcome CudaExecutor::RunOnLane(Lane& lane, Batch& batch) {
  Device& device = *lane.device;
  const absl::Time begin = absl::Now();
  if (device.failed) {
    return {absl::InternalError(absl::StrCat("cuda device ", device.ordinal,
                                             " is out of service after an earlier error")),
            absl::ZeroDuration()};
  }
  const pk::Problem& problem = batch.problem();
  const LookupSpec* lookup = batch.lookup();
  // Where the regions lie: a top-k copies out values and slots, a lookup slots to outputs.
  size_t scores_bytes = 0;
  size_t values_offset = 0;
  size_t slots_offset = 0;
  size_t out_offset = 0;
  size_t end = 0;
  if (lookup != nullptr) {
    const LookupLayout layout(lookup->problem, batch.rows());
    scores_bytes = layout.scores;
    values_offset = layout.values_offset;
    slots_offset = layout.slots_offset;
    out_offset = layout.slots_offset;
    end = layout.end;
  } else {
    const Layout layout(problem, batch.rows());
    scores_bytes = layout.scores;
    values_offset = layout.values_offset;
    slots_offset = layout.slots_offset;
    out_offset = layout.values_offset;
    end = layout.end;
  }
  const cudaStream_t stream = lane.stream.get();
  std::byte* on_device = lane.on_device.data();

  cudaError_t error = cudaEventRecord(lane.start.get(), stream);
  // The copy in, in chunks: while the device pulls one chunk out of the pinned staging, this
  // thread gathers the next one from the requests.
  for (size_t begin = 0; begin < scores_bytes && error == cudaSuccess; begin += kCopyInChunk) {
    const size_t chunk_end = std::min(scores_bytes, begin + kCopyInChunk);
    batch.GatherScores(begin, chunk_end);
    error = cudaMemcpyAsync(on_device + begin, lane.host.data() + begin, chunk_end - begin,
                            cudaMemcpyHostToDevice, stream);
  }
  auto* slots = reinterpret_cast<uint32_t*>(on_device + slots_offset);
  if (error == cudaSuccess) {
    error = device.launcher->Launch(problem, on_device, batch.rows(), on_device + values_offset,
                                    slots, stream);
  }
  if (error == cudaSuccess && lookup != nullptr) {
    const LookupLayout layout(lookup->problem, batch.rows());
    pk::ValuesView table = lookup->memory->values();
    table.data = device.Table(lookup->memory);
    error = table.data == nullptr
                ? cudaErrorInvalidValue  // AddMemory was not called for it: a bug
                : pk::cuda::LaunchLookup(
                      lookup->problem, table, on_device, slots, batch.rows(),
                      reinterpret_cast<float*>(on_device + layout.weights_offset),
                      reinterpret_cast<uint8_t*>(on_device + layout.valid_offset),
                      on_device + layout.outputs_offset, stream);
  }
  if (error == cudaSuccess) {
    error = cudaMemcpyAsync(lane.host.data() + out_offset, on_device + out_offset, end - out_offset,
                            cudaMemcpyDeviceToHost, stream);
  }
  if (error == cudaSuccess) error = cudaEventRecord(lane.stop.get(), stream);
  if (error == cudaSuccess) {
    error = WaitForEvent(lane.stop.get(), scores_bytes < kLatencyBatchBytes
                                               ? kSpinForBatch
                                               : std::chrono::microseconds::zero());
  } else {
    // Wait for the stream even after an enqueue error, so that no copy still runs into a buffer
    // the next batch will use.
    cudaStreamSynchronize(stream);
  }
  if (error != cudaSuccess) {
    // A launch error is also left as the thread's last error; clear it for the next batch.
    cudaGetLastError();
    absl::Status status = CudaError(error, "running a batch", device.ordinal);
    if (IsStickyError(error) && !device.failed.exchange(true)) {
      spdlog::error("{}; taking device {} out of service", std::string(status.message()),
                    device.ordinal);
    } else {
      spdlog::error("{} ({} rows failed)", std::string(status.message()), batch.rows());
    }
    return {std::move(status), absl::Now() - begin};
  }
  float milliseconds = 0;
  if (cudaEventElapsedTime(&milliseconds, lane.start.get(), lane.stop.get()) != cudaSuccess) {
    return {absl::OkStatus(), absl::Now() - begin};
  }
  return {absl::OkStatus(), absl::Microseconds(static_cast<int64_t>(milliseconds * 1000.0f))};
}

}  // namespace pkserve
