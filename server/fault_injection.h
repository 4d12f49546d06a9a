// Test-only fault injection: an Executor decorator that fails every Nth batch, so that CI (no
// GPU, nothing to break) can show that an executor failure reaches only the requests of the
// failed batch (INTERNAL) and that the server keeps serving the rest. pkserve enables it with the
// hidden flag --inject_batch_failures=N (server/testing_flags.cc); never in production.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/executor.h"

namespace pkserve {

class FaultInjectingExecutor final : public Executor {
 public:
  // Wraps `inner`; batch number n (counted from 1, in Submit order) fails when n is a multiple of
  // `fail_every` (>= 1).
  FaultInjectingExecutor(std::unique_ptr<Executor> inner, uint32_t fail_every);

  std::string_view backend() const override { return inner_->backend(); }
  std::vector<std::string> devices() const override { return inner_->devices(); }
  int max_in_flight() const override { return inner_->max_in_flight(); }
  int concurrent_batches() const override { return inner_->concurrent_batches(); }
  size_t max_batch_rows(const pk::Problem& problem) const override {
    return inner_->max_batch_rows(problem);
  }
  absl::StatusOr<std::unique_ptr<Batch>> NewBatch(const pk::Problem& problem,
                                                  size_t rows) override {
    return inner_->NewBatch(problem, rows);
  }
  absl::Status AddMemory(const HostedMemory& memory) override {
    return inner_->AddMemory(memory);
  }
  size_t max_lookup_batch_rows(const LookupSpec& spec) const override {
    return inner_->max_lookup_batch_rows(spec);
  }
  absl::StatusOr<std::unique_ptr<Batch>> NewLookupBatch(const LookupSpec& spec,
                                                        size_t rows) override {
    return inner_->NewLookupBatch(spec, rows);
  }
  bool healthy() const override { return inner_->healthy(); }
  // The batch runs on the inner executor either way (so `done` comes from its thread, as the
  // contract asks); a batch picked to fail then completes with INTERNAL instead of its outcome.
  void Submit(std::unique_ptr<Batch> batch, BatchDone done) override;

  uint64_t batches_failed() const { return failed_.load(std::memory_order_relaxed); }

 private:
  const std::unique_ptr<Executor> inner_;
  const uint32_t fail_every_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> failed_{0};
};

// `executor` itself when `fail_every` is 0; otherwise `executor` wrapped to fail every
// `fail_every`-th batch, with a warning in the log.
std::unique_ptr<Executor> MaybeInjectBatchFailures(std::unique_ptr<Executor> executor,
                                                   uint32_t fail_every);

}  // namespace pkserve
