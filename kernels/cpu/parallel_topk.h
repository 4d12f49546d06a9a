// Runs the CPU top-k over a batch of rows split across a fixed pool of threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "kernels/cpu/topk_cpu.h"
#include "kernels/problem.h"

namespace pk::cpu {

// Owns `threads - 1` worker threads and one Workspace per thread; the calling thread works too.
// Run() has as many threads work as the rows allow (at least `min_rows_per_thread` rows each), each
// taking contiguous chunks of rows until none is left, and returns when all are done. Concurrent
// Run() calls are serialized.
class ParallelTopK {
 public:
  explicit ParallelTopK(int threads, size_t min_rows_per_thread = 4);
  ~ParallelTopK();
  ParallelTopK(const ParallelTopK&) = delete;
  ParallelTopK& operator=(const ParallelTopK&) = delete;

  // Same contract as TopKRows().
  void Run(const Problem& problem, const std::byte* scores, size_t rows, std::byte* values,
           uint32_t* slots);
  // The same for rows that lie in several places, read where they are: `inputs` hold whole rows,
  // taken back to back as one batch (values and slots are that batch's, contiguous).
  void Run(const Problem& problem, std::span<const std::span<const std::byte>> inputs,
           std::byte* values, uint32_t* slots);

  int threads() const { return static_cast<int>(workspaces_.size()); }

 private:
  struct Job {
    const Problem* problem = nullptr;
    std::span<const std::span<const std::byte>> inputs;
    size_t rows = 0;
    std::byte* values = nullptr;
    uint32_t* slots = nullptr;
    int parts = 0;          // threads at work
    size_t chunk_rows = 0;  // rows a thread takes at a time
  };

  void WorkerLoop(int index);
  // Takes chunks of the job until none is left.
  void RunShare(const Job& job, Workspace& workspace);
  // Rows [begin, end) of the job's batch.
  void RunRows(const Job& job, size_t begin, size_t end, Workspace& workspace);

  const size_t min_rows_per_thread_;
  std::vector<std::unique_ptr<Workspace>> workspaces_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one Run() at a time
  std::atomic<size_t> next_row_{0};  // the running job's first row not yet taken

  std::mutex mutex_;  // guards the fields below
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  Job job_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace pk::cpu
