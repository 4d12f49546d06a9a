// The CUDA executor: per device, `streams` lanes, each a CUDA stream with its own pinned host
// staging and device buffers, sized once at start and reused. A lane takes one batch at a time,
// on its own thread: gathers the requests' rows into its pinned staging in 1 MiB pieces, each sent
// to the device as soon as it is gathered, then kernel and copy out on its stream, then completes
// the batch. Lanes of one device overlap each other's gathers, copies and kernels. After a small
// batch (under 256 KiB of scores) a lane thread spins for up to 200 us before it sleeps (one lane
// at a time), and the next batch goes to the spinning lane when it is free, so that a steady
// trickle of requests finds a lane awake; an idle server does not spin, and a busy one spends at
// most one core on it. While a small batch runs, its lane polls for 100 us (such a batch is done
// by then), then sleeps until the device finishes; a lane with a large batch sleeps at once, so
// that at high throughput the lanes leave the host's cores to gRPC.
//
// Lookups: each hosted memory's table is copied once to every device (AddMemory) and read there;
// a lookup batch runs the top-k, then the weights and the weighted sum (kernels/cuda/
// lookup_launch.h) on the same stream, its slots never leaving the device, and copies out the
// slots, weights and outputs in one piece.
//
// A CUDA error fails the batch with INTERNAL and is logged. An error that leaves the device's
// context unusable (a kernel fault, a lost device) takes every lane of that device out of
// service: later batches go to the other devices, and with none left every batch fails with
// INTERNAL and healthy() turns false, so health reports NOT_SERVING.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/executor.h"

namespace pkserve {

class CudaExecutor final : public Executor {
 public:
  struct Options {
    std::vector<int> devices;  // CUDA device ordinals; empty = all
    int streams = 4;           // lanes per device
    // Per lane, for the scores, values and slots of one batch together, on the host (pinned)
    // and on the device alike.
    size_t staging_bytes = size_t{64} << 20;
  };

  // Opens the devices, creates the streams and allocates every buffer. Errors name the device
  // and the CUDA error (no device, out of memory, a kernel image that does not fit the device).
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const Options& options);

  // Finishes the batches already submitted, then releases the devices.
  ~CudaExecutor() override;

  std::string_view backend() const override { return "cuda"; }
  std::vector<std::string> devices() const override;
  int max_in_flight() const override { return static_cast<int>(lanes_.size()); }
  // Every lane computes on its own stream and thread.
  int concurrent_batches() const override { return static_cast<int>(lanes_.size()); }
  size_t max_batch_rows(const pk::Problem& problem) const override;
  absl::StatusOr<std::unique_ptr<Batch>> NewBatch(const pk::Problem& problem, size_t rows) override;
  // Copies the memory's table to every device (in pinned chunks), after checking it fits each
  // one; FAILED_PRECONDITION with the sizes when it does not.
  absl::Status AddMemory(const HostedMemory& memory) override;
  size_t max_lookup_batch_rows(const LookupSpec& spec) const override;
  absl::StatusOr<std::unique_ptr<Batch>> NewLookupBatch(const LookupSpec& spec,
                                                        size_t rows) override;
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override;
  bool healthy() const override;

 private:
  struct Device;
  struct Lane;
  class CudaBatch;

  explicit CudaExecutor(const Options& options);
  // A lane's pinned and device staging of `staging_bytes` each, its stream and its two events, on
  // the current device (`device`); errors are INTERNAL and name the device and the CUDA error.
  static absl::Status MakeLaneResources(size_t staging_bytes, int device, Lane& lane);
  // A free lane, marked in use, or null (see lane_order_).
  Lane* TakeLane();
  // Copies `memory`'s table to `device`.
  absl::Status CopyTable(const HostedMemory& memory, Device& device);
  void ReleaseLane(int index);
  // The lane's thread ("pk-cuda-lane"): runs each batch handed to the lane, then completes it.
  void LaneLoop(Lane& lane);
  BatchOutcome RunOnLane(Lane& lane, Batch& batch);

  const Options options_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<Lane>> lanes_;

  absl::Mutex mu_;
  std::vector<bool> lane_in_use_ ABSL_GUARDED_BY(mu_);
  // The order NewBatch tries lanes in: first stream of each device, then the second, and so on.
  // The first free one is taken, so that under light traffic the same lane (still spinning, see
  // LaneLoop) takes the next batch, and under heavy traffic the devices share the load.
  std::vector<int> lane_order_;
  // The lane whose thread is spinning for its next batch (LaneLoop), or -1: at most one spins, and
  // NewBatch hands it the next batch when it is free.
  std::atomic<int> spinning_lane_{-1};
};

}  // namespace pkserve
