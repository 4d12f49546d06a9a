// The dynamic batcher: one FIFO queue per shape class (factor widths, k, dtype; for a lookup also
// the memory, heads and output type), rows from many requests coalesced into batches for the
// executor.
//
// When a batch goes out:
//   - the executor is idle (holds no batch): at once, whatever is queued; a lone request never
//     waits for company;
//   - the executor is busy but can take another batch: when a queue holds a full batch
//     (max_batch_rows, or what fits the executor's staging) or its oldest request has waited
//     max_queue_delay;
//   - the executor is full: when one of its batches completes.
// Among ready queues the one with the oldest request goes first. A request larger than a batch is
// split across batches (a lookup at a multiple of its heads, so that an output's rows stay in one
// batch); it is answered once all its rows are back.
//
// Queued rows are bounded (max_queued_rows): past it Enqueue fails at once with
// RESOURCE_EXHAUSTED. A request whose deadline passed or whose caller cancelled is dropped before
// compute and answered DEADLINE_EXCEEDED / CANCELLED.
//
// Threads: Enqueue is called from gRPC threads; one batcher thread ("pk-batcher") forms batches
// and hands them to the executor, which copies the request rows into its staging on its own
// threads; a lone request on an idle executor is handed over by the Enqueue call itself.
// Completions arrive on executor threads, which copy the rows out to the requests and answer
// them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernels/problem.h"
#include "server/executor.h"

namespace pkserve {

// Where a request's time went on the server.
struct WorkTiming {
  absl::Duration queue;     // from Enqueue to the hand-off of its first batch
  absl::Duration compute;   // the executor's time on its batch(es)
  uint32_t batch_rows = 0;  // rows of the batch it ran in (the largest, if it was split)
};

// One request's rows, as the batcher sees them. The caller fills every field, and keeps the memory
// behind `scores`, `values` and `slots` valid until `done` has been called.
struct Work {
  pk::Problem problem;                // validated
  // Set for a lookup (validated): rows is then a multiple of lookup->problem.heads, and `values`,
  // `slots` and `weights` hold what the comments after "lookup:" say.
  std::optional<LookupSpec> lookup;
  uint32_t rows = 0;                  // >= 1
  // rows x problem.row_bytes() bytes in all, in order, in pieces that need not hold whole rows
  // (as gRPC received them; see ReceivedTopK)
  pk::BytePieces scores;
  // rows x problem.out_value_bytes(), filled on success; lookup: rows / heads outputs of
  // lookup->problem.output_row_bytes()
  std::span<std::byte> values;
  // rows x problem.kk() little-endian uint32, filled on success; lookup: the same, or empty when
  // the caller did not ask for slots
  std::span<std::byte> slots;
  // lookup: rows x problem.kk() little-endian float32 weights, or empty; unused for a top-k
  std::span<std::byte> weights;
  absl::Time deadline = absl::InfiniteFuture();
  absl::AnyInvocable<bool() const> is_cancelled;  // optional: has the caller gone away?
  // Called exactly once, from a batcher or executor thread: OK with values and slots filled, or
  // why the rows were not computed (for a lookup, INVALID_ARGUMENT naming the first row whose
  // selected scores have no finite maximum).
  absl::AnyInvocable<void(absl::Status status, const WorkTiming& timing) &&> done;
};

// Told what the batcher does, for metrics. Called on batcher and executor threads without the
// batcher's lock held; it must be cheap and thread-safe.
class BatcherObserver {
 public:
  virtual ~BatcherObserver() = default;
  // A batch of `rows` rows came back from the executor.
  virtual void BatchDone(size_t rows, const BatchOutcome& outcome) = 0;
  // An accepted work is being answered with `status`.
  virtual void WorkDone(const Work& work, const absl::Status& status, const WorkTiming& timing) = 0;
};

struct BatcherOptions {
  uint32_t max_batch_rows = 1024;
  absl::Duration max_queue_delay = absl::Microseconds(500);
  uint64_t max_queued_rows = 65536;
  // Queued scores of one shape worth a batch of their own: while the executor computes fewer
  // batches than it could (a free CUDA lane), this many bytes go out at once instead of waiting
  // to coalesce. Smaller requests still coalesce while anything computes, since for them the
  // per-batch cost (hand-offs, a launch, copies) is what batching saves.
  uint64_t parallel_batch_bytes = uint64_t{256} << 10;
  // How often queued requests are checked for a passed deadline or a cancelled caller (the head
  // of a queue is also checked whenever a batch is formed).
  absl::Duration sweep_interval = absl::Milliseconds(20);
  // Optional; must outlive the batcher.
  BatcherObserver* observer = nullptr;
};

// Counters since start, for tests and logs.
struct BatcherStats {
  uint64_t requests_accepted = 0;
  uint64_t requests_rejected_full = 0;
  uint64_t requests_dropped_deadline = 0;
  uint64_t requests_dropped_cancelled = 0;
  uint64_t batches = 0;
  uint64_t rows_computed = 0;
  uint64_t queued_rows = 0;  // now: rows waiting in the queues, not yet in a batch
};

class Batcher {
 public:
  // `executor` must outlive the batcher.
  Batcher(const BatcherOptions& options, Executor& executor);
  // Answers queued work UNAVAILABLE, waits for the batches in flight, stops the batcher thread.
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `work`. OK: the batcher owns it and will call its `done` exactly once (never from
  // inside Enqueue). Otherwise `work` is discarded without a call, and the caller answers with the
  // status: RESOURCE_EXHAUSTED (queue full), DEADLINE_EXCEEDED (deadline already passed),
  // UNAVAILABLE (StopAccepting was called).
  absl::Status Enqueue(std::unique_ptr<Work> work);

  // From now on Enqueue answers UNAVAILABLE; accepted work still runs.
  void StopAccepting();
  // Waits until every accepted work has been answered, or `deadline`; true if it was.
  bool WaitIdle(absl::Time deadline);
  // Answers every queued work that has not reached the executor with `status` (rows already in
  // a batch still complete, and their request then gets `status` too).
  void CancelQueued(const absl::Status& status);

  BatcherStats stats() const;

 private:
  struct Tracked;
  struct Segment {
    std::shared_ptr<Tracked> tracked;
    uint32_t first_row = 0;  // in the request
    uint32_t rows = 0;
  };
  struct Plan {
    pk::Problem problem;
    std::optional<LookupSpec> lookup;
    size_t rows = 0;
    std::vector<Segment> segments;  // in batch order
  };
  struct ShapeKey {
    std::array<uint32_t, pk::kMaxFactors> widths{};
    uint32_t k = 0;
    pk::DType dtype = pk::DType::kFloat32;
    // A lookup's class adds its memory, heads and output type; a top-k has no memory.
    const HostedMemory* memory = nullptr;
    uint32_t heads = 0;
    pk::DType output_dtype = pk::DType::kFloat32;
    bool operator==(const ShapeKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H hash, const ShapeKey& key) {
      return H::combine(std::move(hash), key.widths, key.k, key.dtype, key.memory, key.heads,
                        key.output_dtype);
    }
  };
  struct ShapeQueue {
    pk::Problem problem;
    std::optional<LookupSpec> lookup;
    size_t batch_capacity = 1;  // rows in one batch of this shape
    uint64_t rows = 0;          // rows queued and not yet in a batch
    std::deque<std::shared_ptr<Tracked>> entries;
  };
  // A work to answer, once the mutex is released.
  struct Answer {
    std::unique_ptr<Work> work;
    absl::Status status;
    WorkTiming timing;
  };

  void Loop();
  // The next batch to send, or none; when none, *wake_at is when a queue's delay runs out.
  std::optional<Plan> TakeBatchLocked(absl::Time now, absl::Time* wake_at,
                                      std::vector<Answer>* answers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the not-yet-batched rows of a queue entry and records why.
  void DropLocked(ShapeQueue& queue, Tracked& tracked, const absl::Status& status,
                  std::vector<Answer>* answers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops every queued entry whose deadline passed or whose caller cancelled.
  void SweepLocked(absl::Time now, std::vector<Answer>* answers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseEmptyQueuesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answer for a work all of whose rows are accounted for.
  Answer FinishLocked(Tracked& tracked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::vector<Answer> answers) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `queue` should go out now rather than wait to coalesce: the executor is idle, or a
  // compute slot is free and the queue holds parallel_batch_bytes of scores.
  bool ReadyNowLocked(const ShapeQueue& queue) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the front entry's next rows into `plan`, as many as the batch has room for.
  void AddFrontLocked(ShapeQueue& queue, absl::Time now, Plan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Gets staging for `plan` and dispatches it; a batch the executor cannot stage fails its rows.
  void Send(Plan plan) ABSL_LOCKS_EXCLUDED(mu_);
  // Names the plan's rows as the batch's sources and submits it.
  void Dispatch(Plan plan, std::unique_ptr<Batch> batch) ABSL_LOCKS_EXCLUDED(mu_);
  void OnBatchDone(const Plan& plan, std::unique_ptr<Batch> batch, const BatchOutcome& outcome)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The one copy out of a lookup batch: outputs (and slots and weights where asked for) to each
  // request; the requests with a row whose weights are undefined go to `invalid_rows`, each with
  // its first such row.
  static void ScatterLookup(const Plan& plan, const Batch& batch,
                            std::vector<std::pair<const Segment*, uint32_t>>* invalid_rows);
  // Rows of a batch of `queue`'s class: within max_batch_rows and the executor's staging; for a
  // lookup a multiple of heads.
  static size_t BatchCapacity(uint32_t max_batch_rows, const Executor& executor,
                              const ShapeQueue& queue);

  bool IsIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InFlightDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BatcherOptions options_;
  Executor& executor_;
  const int max_in_flight_;
  const int concurrent_;  // batches the executor computes at once: below that, no waiting

  mutable absl::Mutex mu_;
  absl::CondVar wake_;  // the batcher thread: work queued, a batch completed, stop
  absl::flat_hash_map<ShapeKey, ShapeQueue> queues_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_rows_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;       // batches held from the executor
  uint64_t open_work_ ABSL_GUARDED_BY(mu_) = 0;  // accepted and not yet answered
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_sweep_ ABSL_GUARDED_BY(mu_);
  BatcherStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
};

}  // namespace pkserve
