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

#include "kernels/byte_pieces.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/lookup/lookup.h"
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
  void Run(const Problem& problem, BytePieces inputs, std::byte* values, uint32_t* slots);

  // The memory lookup (kernels/lookup/lookup_cpu.h) of the rows in `inputs` (whole rows, back to
  // back as one batch; their count a multiple of problem.heads): phase 1 (LookupWeightsRows)
  // split by rows, then phase 2 (WeightedSumRows) split by outputs. slots, weights: room for
  // rows * kk each; row_valid: rows; outputs: (rows / heads) * problem.output_row_bytes().
  // The same bits as the one-thread functions, for any thread count.
  void RunLookup(const LookupProblem& problem, const ValuesView& values, BytePieces inputs,
                 uint32_t* slots, float* weights, uint8_t* row_valid, std::byte* outputs);

  int threads() const { return static_cast<int>(workspaces_.size()); }

 private:
  enum class Phase { kTopK, kLookupWeights, kWeightedSum };
  struct Job {
    Phase phase = Phase::kTopK;
    const Problem* problem = nullptr;
    const LookupProblem* lookup = nullptr;  // kLookupWeights and kWeightedSum
    const ValuesView* table = nullptr;      // kWeightedSum
    float* weights = nullptr;
    uint8_t* row_valid = nullptr;
    std::byte* outputs = nullptr;
    BytePieces inputs;  // whole rows in each piece
    size_t rows = 0;
    std::byte* values = nullptr;
    uint32_t* slots = nullptr;
    int parts = 0;          // threads at work
    size_t chunk_rows = 0;  // rows (outputs in kWeightedSum) a thread takes at a time
  };

  // Sets job.parts and job.chunk_rows for job.rows, at least `min_per_thread` rows a thread.
  void Split(Job& job, size_t min_per_thread) const;
  // Runs `job` on the pool and returns when it is done. The caller holds run_mutex_.
  void Dispatch(Job job);

  void WorkerLoop(int index);
  // Takes chunks of the job until none is left.
  void RunShare(const Job& job, Workspace& workspace);
  // Rows (outputs in kWeightedSum) [begin, end) of the job's batch.
  void RunRows(const Job& job, size_t begin, size_t end, Workspace& workspace);

  const size_t min_rows_per_thread_;
  std::vector<std::unique_ptr<Workspace>> workspaces_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;             // one Run() at a time
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
