// The CPU executor: batches run one after another on a pool of compute threads
// (pk::cpu::ParallelTopK splits each batch's rows across them); lookups read the hosted memory's
// table from its file's mapping.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cpu/parallel_topk.h"
#include "server/executor.h"

namespace pkserve {

class CpuExecutor final : public Executor {
 public:
  struct Options {
    int threads = 1;        // compute threads, the runner thread included
    int max_in_flight = 2;  // one batch computing while the batcher forms the next
    size_t staging_bytes = size_t{64} << 20;  // per batch: scores, values and slots together
  };

  explicit CpuExecutor(const Options& options);
  // Finishes the batches already submitted, then stops the runner thread.
  ~CpuExecutor() override;

  std::string_view backend() const override { return "cpu"; }
  std::vector<std::string> devices() const override;
  int max_in_flight() const override { return options_.max_in_flight; }
  size_t max_batch_rows(const pk::Problem& problem) const override;
  absl::StatusOr<std::unique_ptr<Batch>> NewBatch(const pk::Problem& problem, size_t rows) override;
  // Lookups read the table where the memory holds it (the file's mapping).
  absl::Status AddMemory(const HostedMemory& memory) override;
  size_t max_lookup_batch_rows(const LookupSpec& spec) const override;
  absl::StatusOr<std::unique_ptr<Batch>> NewLookupBatch(const LookupSpec& spec,
                                                        size_t rows) override;
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override;

 private:
  // Staging memory of one in-flight batch; grown to the largest batch seen, never shrunk.
  struct StagingSet {
    std::vector<std::byte> scores;
    std::vector<std::byte> values;
    std::vector<uint32_t> slots;
    std::vector<float> weights;      // lookups only
    std::vector<uint8_t> row_valid;  // lookups only
    std::vector<std::byte> outputs;  // lookups only
  };
  class CpuBatch;

  struct Computed {
    std::unique_ptr<Batch> batch;
    BatchDone done;
    BatchOutcome outcome;
  };

  // The runner thread ("pk-cpu-exec"): computes submitted batches in order. It completes a batch
  // itself when no other batch waits (no hand-over on an idle server), else hands it to the
  // completer thread ("pk-cpu-done") and goes on to the next: the completion writes the answers
  // to the sockets, and meanwhile the compute threads would stand idle.
  void RunLoop();
  void CompleteLoop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasComputedOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseSet(int index);
  // A free staging set's index, the set marked in use; INTERNAL when every one is held.
  absl::StatusOr<int> TakeSet();

  const Options options_;
  pk::cpu::ParallelTopK engine_;
  // One per in-flight batch. The set a Batch holds is its holder's alone until it is released.
  std::vector<std::unique_ptr<StagingSet>> sets_;

  absl::Mutex mu_;
  std::vector<bool> set_in_use_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::unique_ptr<Batch>, BatchDone>> submitted_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Computed> computed_ ABSL_GUARDED_BY(mu_);  // for the completer
  bool runner_stopped_ ABSL_GUARDED_BY(mu_) = false;

  std::thread runner_;
  std::thread completer_;
};

}  // namespace pkserve
