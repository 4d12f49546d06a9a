// Runs the CPU top-k over a batch of rows split across a fixed pool of threads.
#pragma once

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
// Run() splits the rows into contiguous, near-equal parts (never fewer than `min_rows_per_thread`
// rows a part) and returns when all are done. Concurrent Run() calls are serialized.
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
    int parts = 0;
  };

  void WorkerLoop(int index);
  void RunPart(const Job& job, int part, Workspace& workspace);

  const size_t min_rows_per_thread_;
  std::vector<std::unique_ptr<Workspace>> workspaces_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one Run() at a time

  std::mutex mutex_;  // guards the fields below
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  Job job_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace pk::cpu
