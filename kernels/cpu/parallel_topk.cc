#include "kernels/cpu/parallel_topk.h"

#include <algorithm>

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

void ParallelTopK::RunPart(const Job& job, int part, Workspace& workspace) {
  const size_t begin = job.rows * static_cast<size_t>(part) / static_cast<size_t>(job.parts);
  const size_t end = job.rows * static_cast<size_t>(part + 1) / static_cast<size_t>(job.parts);
  if (begin == end) return;
  const Problem& problem = *job.problem;
  const uint32_t kk = problem.kk();
  TopKRows(problem, job.scores + begin * problem.row_bytes(), end - begin,
           job.values + begin * problem.out_value_bytes(), job.slots + begin * kk, workspace);
}

void ParallelTopK::Run(const Problem& problem, const std::byte* scores, size_t rows,
                       std::byte* values, uint32_t* slots) {
  std::lock_guard run_lock(run_mutex_);
  const size_t by_size = std::max<size_t>(1, rows / min_rows_per_thread_);
  const int parts = static_cast<int>(std::min<size_t>(workspaces_.size(), by_size));
  Job job{&problem, scores, rows, values, slots, parts};
  if (parts > 1) {
    std::lock_guard lock(mutex_);
    job_ = job;
    pending_ = parts - 1;
    ++generation_;
  }
  if (parts > 1) work_ready_.notify_all();
  RunPart(job, 0, *workspaces_[0]);
  if (parts > 1) {
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, [this] { return pending_ == 0; });
  }
}

// Worker `index` runs part `index` of each job that has that many parts.
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
    RunPart(job, index, *workspaces_[index]);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace pk::cpu
