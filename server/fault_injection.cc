#include "server/fault_injection.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace pkserve {

FaultInjectingExecutor::FaultInjectingExecutor(std::unique_ptr<Executor> inner, uint32_t fail_every)
    : inner_(std::move(inner)), fail_every_(fail_every < 1 ? 1 : fail_every) {}

void FaultInjectingExecutor::Submit(std::unique_ptr<Batch> batch, BatchDone done) {
  const uint64_t number = submitted_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (number % fail_every_ != 0) {
    inner_->Submit(std::move(batch), std::move(done));
    return;
  }
  failed_.fetch_add(1, std::memory_order_relaxed);
  inner_->Submit(
      std::move(batch), [this, number, done = std::move(done)](std::unique_ptr<Batch> failed_batch,
                                                               BatchOutcome outcome) mutable {
        outcome.status = absl::InternalError(
            absl::StrCat("injected executor failure: batch ", number,
                         " (--inject_batch_failures=", fail_every_, ", a test-only flag)"));
        std::move(done)(std::move(failed_batch), std::move(outcome));
      });
}

std::unique_ptr<Executor> MaybeInjectBatchFailures(std::unique_ptr<Executor> executor,
                                                   uint32_t fail_every) {
  if (fail_every == 0) return executor;
  spdlog::warn(
      "TESTING ONLY (--inject_batch_failures={}): every batch whose number is a multiple of {} "
      "fails with INTERNAL; never use this in production",
      fail_every, fail_every);
  return std::make_unique<FaultInjectingExecutor>(std::move(executor), fail_every);
}

}  // namespace pkserve
