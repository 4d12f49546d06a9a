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
  // Each piece holds whole rows, so each run of the rows' bytes does.
  job.inputs.ForEachRun(begin * row_bytes, end * row_bytes, [&](size_t at, BytePiece run) {
    const size_t first = at / row_bytes;
    const size_t rows = run.size() / row_bytes;
    if (job.phase == Phase::kTopK) {
      TopKRows(problem, run.data(), rows, job.values + first * problem.out_value_bytes(),
               job.slots + first * kk, workspace);
    } else {
      LookupWeightsRows(problem, run.data(), rows, job.slots + first * kk, job.weights + first * kk,
                        job.row_valid + first, workspace);
    }
  });
}

void ParallelTopK::Run(const Problem& problem, const std::byte* scores, size_t rows,
                       std::byte* values, uint32_t* slots) {
  const BytePiece input(scores, rows * problem.row_bytes());
  Run(problem, std::span(&input, 1), values, slots);
}

void ParallelTopK::Run(const Problem& problem, BytePieces inputs, std::byte* values,
                       uint32_t* slots) {
  std::lock_guard run_lock(run_mutex_);
  Job job;
  job.phase = Phase::kTopK;
  job.problem = &problem;
  job.inputs = inputs;
  job.values = values;
  job.slots = slots;
  job.rows = inputs.bytes() / problem.row_bytes();
  Split(job, min_rows_per_thread_);
  Dispatch(job);
}

void ParallelTopK::RunLookup(const LookupProblem& problem, const ValuesView& values,
                             BytePieces inputs, uint32_t* slots, float* weights, uint8_t* row_valid,
                             std::byte* outputs) {
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
  job.rows = inputs.bytes() / problem.topk.row_bytes();
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
