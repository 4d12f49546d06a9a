#include "kernels/cpu/parallel_topk.h"

#include <algorithm>

#include "kernels/lookup/lookup_cpu.h"

namespace pk::cpu {

ParallelTopK::ParallelTopK(int threads, size_t min_rows_per_thread)
    : min_rows_per_thread_(std::max<size_t>(1, min_rows_per_thread)) {
  const int count = std::max(1, threads);
  for (int t = 0; t < count; ++t) workspaces_.push_back(std::make_unique<Workspace>());
  for (int t = 1; t < count; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ParallelTopK::~ParallelTopK() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ParallelTopK::RunShare(const Job& job, Workspace& workspace) {
  while (true) {
    const size_t begin = next_row_.fetch_add(job.chunk_rows, std::memory_order_relaxed);
    if (begin >= job.rows) return;
    RunRows(job, begin, std::min(job.rows, begin + job.chunk_rows), workspace);
  }
}

void ParallelTopK::RunRows(const Job& job, size_t begin, size_t end, Workspace& workspace) {
  if (job.phase == Phase::kWeightedSum) {
    const LookupProblem& lookup = *job.lookup;
    const size_t pairs = lookup.pairs_per_output();
    WeightedSumRows(lookup, *job.table, job.slots + begin * pairs, job.weights + begin * pairs,
                    end - begin, job.outputs + begin * lookup.output_row_bytes());
    return;
  }
  const Problem& problem = *job.problem;
  const size_t row_bytes = problem.row_bytes();
  const uint32_t kk = problem.kk();
  size_t input_first = 0;  // the batch row where the current input begins
  for (const std::span<const std::byte>& input : job.inputs) {
    if (begin >= end) return;
    const size_t input_end = input_first + input.size() / row_bytes;
    if (begin < input_end) {
      const size_t rows = std::min(end, input_end) - begin;
      const std::byte* scores = input.data() + (begin - input_first) * row_bytes;
      if (job.phase == Phase::kTopK) {
        TopKRows(problem, scores, rows, job.values + begin * problem.out_value_bytes(),
                 job.slots + begin * kk, workspace);
      } else {
        LookupWeightsRows(problem, scores, rows, job.slots + begin * kk, job.weights + begin * kk,
                          job.row_valid + begin, workspace);
      }
      begin += rows;
    }
    input_first = input_end;
  }
}

void ParallelTopK::Run(const Problem& problem, const std::byte* scores, size_t rows,
                       std::byte* values, uint32_t* slots) {
  const std::span<const std::byte> input(scores, rows * problem.row_bytes());
  Run(problem, std::span(&input, 1), values, slots);
}

void ParallelTopK::Run(const Problem& problem, std::span<const std::span<const std::byte>> inputs,
                       std::byte* values, uint32_t* slots) {
  std::lock_guard run_lock(run_mutex_);
  Job job;
  job.phase = Phase::kTopK;
  job.problem = &problem;
  job.inputs = inputs;
  job.values = values;
  job.slots = slots;
  job.rows = BatchRows(problem, inputs);
  Split(job, min_rows_per_thread_);
  Dispatch(job);
}

void ParallelTopK::RunLookup(const LookupProblem& problem, const ValuesView& values,
                             std::span<const std::span<const std::byte>> inputs, uint32_t* slots,
                             float* weights, uint8_t* row_valid, std::byte* outputs) {
  std::lock_guard run_lock(run_mutex_);
  Job job;
  job.phase = Phase::kLookupWeights;
  job.problem = &problem.topk;
  job.lookup = &problem;
  job.table = &values;
  job.inputs = inputs;
  job.slots = slots;
  job.weights = weights;
  job.row_valid = row_valid;
  job.outputs = outputs;
  job.rows = BatchRows(problem.topk, inputs);
  Split(job, min_rows_per_thread_);
  Dispatch(job);
  // An output sums heads * kk value rows: worth a thread on its own.
  job.phase = Phase::kWeightedSum;
  job.rows /= problem.heads;
  Split(job, 1);
  Dispatch(job);
}

void ParallelTopK::Split(Job& job, size_t min_per_thread) const {
  const size_t by_size = std::max<size_t>(1, job.rows / min_per_thread);
  job.parts = static_cast<int>(std::min<size_t>(workspaces_.size(), by_size));
  // About eight chunks a thread: a thread that the host holds back (the RPC threads share these
  // cores) leaves its rows to the others instead of keeping the whole batch waiting.
  const size_t parts = static_cast<size_t>(job.parts);
  job.chunk_rows = std::max(min_per_thread, (job.rows + 8 * parts - 1) / (8 * parts));
}

size_t ParallelTopK::BatchRows(const Problem& problem,
                               std::span<const std::span<const std::byte>> inputs) {
  size_t rows = 0;
  for (const std::span<const std::byte>& input : inputs) rows += input.size() / problem.row_bytes();
  return rows;
}

void ParallelTopK::Dispatch(Job job) {
  const int parts = job.parts;
  next_row_.store(0, std::memory_order_relaxed);
  if (parts > 1) {
    std::lock_guard lock(mutex_);
    job_ = job;
    pending_ = parts - 1;
    ++generation_;
  }
  if (parts > 1) work_ready_.notify_all();
  RunShare(job, *workspaces_[0]);
  if (parts > 1) {
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, [this] { return pending_ == 0; });
  }
}

// Worker `index` takes chunks of each job that has more than `index` parts.
void ParallelTopK::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    if (index >= job.parts) continue;
    RunShare(job, *workspaces_[index]);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace pk::cpu
