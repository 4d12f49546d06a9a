#include "server/cpu_executor.h"

#include <pthread.h>

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/topk_cpu.h"
#include "server/memory_store.h"

namespace pkserve {
namespace {

// Grow only: the largest batch seen sets a staging buffer's size, so steady state allocates
// nothing.
template <typename Buffer>
void GrowTo(Buffer& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
}

}  // namespace

// A batch in one of the executor's staging sets; gives the set back when destroyed.
class CpuExecutor::CpuBatch final : public Batch {
 public:
  CpuBatch(CpuExecutor& executor, int set_index, const pk::Problem& problem, size_t rows,
           StagingSet& set)
      : Batch(problem, rows, std::span(set.scores.data(), rows * problem.row_bytes()),
              std::span(set.values.data(), rows * problem.out_value_bytes()),
              std::span(set.slots.data(), rows * problem.kk())),
        executor_(executor),
        set_index_(set_index) {}
  // A lookup batch in `set` (sized for it).
  CpuBatch(CpuExecutor& executor, int set_index, const LookupSpec& spec, size_t rows,
           StagingSet& set)
      : Batch(spec.problem.topk, rows,
              std::span(set.scores.data(), rows * spec.problem.topk.row_bytes()), {},
              std::span(set.slots.data(), rows * spec.problem.topk.kk())),
        executor_(executor),
        set_index_(set_index) {
    SetLookup(
        spec, std::span(set.weights.data(), rows * spec.problem.topk.kk()),
        std::span(set.row_valid.data(), rows),
        std::span(set.outputs.data(), rows / spec.problem.heads * spec.problem.output_row_bytes()));
  }
  ~CpuBatch() override { executor_.ReleaseSet(set_index_); }

 private:
  CpuExecutor& executor_;
  const int set_index_;
};

CpuExecutor::CpuExecutor(const Options& options)
    : options_(options), engine_(std::max(1, options.threads)) {
  for (int i = 0; i < options_.max_in_flight; ++i) {
    sets_.push_back(std::make_unique<StagingSet>());
  }
  set_in_use_.assign(sets_.size(), false);
  runner_ = std::thread([this] { RunLoop(); });
  pthread_setname_np(runner_.native_handle(), "pk-cpu-exec");
  completer_ = std::thread([this] { CompleteLoop(); });
  pthread_setname_np(completer_.native_handle(), "pk-cpu-done");
}

CpuExecutor::~CpuExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  runner_.join();  // computes what was submitted
  {
    absl::MutexLock lock(&mu_);
    runner_stopped_ = true;
  }
  completer_.join();  // completes what the runner handed over
}

std::vector<std::string> CpuExecutor::devices() const {
  return {absl::StrCat("cpu: ", engine_.threads(),
                       engine_.threads() == 1 ? " thread, " : " threads, ",
                       pk::cpu::CpuPathName())};
}

size_t CpuExecutor::max_batch_rows(const pk::Problem& problem) const {
  const size_t row_bytes =
      problem.row_bytes() + problem.out_value_bytes() + size_t{problem.kk()} * sizeof(uint32_t);
  return std::max<size_t>(1, options_.staging_bytes / row_bytes);
}

absl::StatusOr<std::unique_ptr<Batch>> CpuExecutor::NewBatch(const pk::Problem& problem,
                                                             size_t rows) {
  if (rows < 1 || rows > max_batch_rows(problem)) {
    return absl::InternalError(
        absl::StrCat("batch of ", rows, " rows, the staging holds 1 to ", max_batch_rows(problem)));
  }
  absl::StatusOr<int> index = TakeSet();
  if (!index.ok()) return index.status();
  StagingSet& set = *sets_[*index];
  GrowTo(set.scores, rows * problem.row_bytes());
  GrowTo(set.values, rows * problem.out_value_bytes());
  GrowTo(set.slots, rows * problem.kk());
  return std::make_unique<CpuBatch>(*this, *index, problem, rows, set);
}

absl::Status CpuExecutor::AddMemory(const HostedMemory& memory) {
  memory.TouchPages();
  return absl::OkStatus();
}

size_t CpuExecutor::max_lookup_batch_rows(const LookupSpec& spec) const {
  const pk::LookupProblem& lookup = spec.problem;
  const size_t kk = lookup.topk.kk();
  // Per score row: its scores, slots, weights and validity, and its share of an output.
  const size_t row_bytes = lookup.topk.row_bytes() + kk * (sizeof(uint32_t) + sizeof(float)) + 1 +
                           (lookup.output_row_bytes() + lookup.heads - 1) / lookup.heads;
  const size_t rows = options_.staging_bytes / row_bytes;
  return std::max<size_t>(lookup.heads, rows / lookup.heads * lookup.heads);
}

absl::StatusOr<std::unique_ptr<Batch>> CpuExecutor::NewLookupBatch(const LookupSpec& spec,
                                                                   size_t rows) {
  const pk::LookupProblem& lookup = spec.problem;
  if (rows < 1 || rows % lookup.heads != 0 || rows > max_lookup_batch_rows(spec)) {
    return absl::InternalError(absl::StrCat("lookup batch of ", rows, " rows, the staging holds ",
                                            lookup.heads, " to ", max_lookup_batch_rows(spec),
                                            " in multiples of ", lookup.heads));
  }
  absl::StatusOr<int> index = TakeSet();
  if (!index.ok()) return index.status();
  StagingSet& set = *sets_[*index];
  const size_t pairs = rows * lookup.topk.kk();
  GrowTo(set.scores, rows * lookup.topk.row_bytes());
  GrowTo(set.slots, pairs);
  GrowTo(set.weights, pairs);
  GrowTo(set.row_valid, rows);
  GrowTo(set.outputs, rows / lookup.heads * lookup.output_row_bytes());
  return std::make_unique<CpuBatch>(*this, *index, spec, rows, set);
}

absl::StatusOr<int> CpuExecutor::TakeSet() {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < set_in_use_.size(); ++i) {
    if (!set_in_use_[i]) {
      set_in_use_[i] = true;
      return static_cast<int>(i);
    }
  }
  return absl::InternalError(
      absl::StrCat("all ", options_.max_in_flight, " CPU staging sets are in use"));
}

void CpuExecutor::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  absl::MutexLock lock(&mu_);
  submitted_.emplace_back(std::move(batch), std::move(done));
}

void CpuExecutor::ReleaseSet(int index) {
  absl::MutexLock lock(&mu_);
  set_in_use_[index] = false;
}

bool CpuExecutor::HasWorkOrStopping() const { return stopping_ || !submitted_.empty(); }

bool CpuExecutor::HasComputedOrStopping() const { return runner_stopped_ || !computed_.empty(); }

void CpuExecutor::RunLoop() {
  while (true) {
    std::pair<std::unique_ptr<Batch>, BatchDone> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CpuExecutor::HasWorkOrStopping));
      if (submitted_.empty()) return;  // stopping, and nothing left to compute
      work = std::move(submitted_.front());
      submitted_.pop_front();
    }
    Batch& batch = *work.first;
    const absl::Time start = absl::Now();
    // The rows are read where the requests hold them; only a row split across two of gRPC's
    // slices is copied first.
    const pk::BytePieceList rows = batch.WholeRows();
    if (const LookupSpec* lookup = batch.lookup()) {
      engine_.RunLookup(lookup->problem, lookup->memory->values(), rows, batch.slots().data(),
                        batch.weights().data(), batch.row_valid().data(), batch.outputs().data());
    } else {
      engine_.Run(batch.problem(), rows, batch.values().data(), batch.slots().data());
    }
    BatchOutcome outcome{absl::OkStatus(), absl::Now() - start};
    {
      absl::MutexLock lock(&mu_);
      if (!submitted_.empty()) {
        computed_.push_back({std::move(work.first), std::move(work.second), std::move(outcome)});
        continue;
      }
    }
    std::move(work.second)(std::move(work.first), std::move(outcome));
  }
}

void CpuExecutor::CompleteLoop() {
  while (true) {
    Computed computed;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CpuExecutor::HasComputedOrStopping));
      if (computed_.empty()) return;  // the runner has stopped and nothing is left
      computed = std::move(computed_.front());
      computed_.pop_front();
    }
    std::move(computed.done)(std::move(computed.batch), std::move(computed.outcome));
  }
}

}  // namespace pkserve
