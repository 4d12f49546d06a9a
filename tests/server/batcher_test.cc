// The dynamic batcher on its own, against executors the test controls: when batches go out, what
// they hold, the queue bound, and the drops before compute.
#include "server/batcher.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/testing/random_rows.h"
#include "server/cpu_executor.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::GatedExecutor;
using testing::MakeProblem;

// One caller's request with its own buffers, and what the batcher answered. Its scores are handed
// over in pieces of `piece_bytes` (0: one piece), as gRPC's slices would hold them: pieces need not
// hold whole rows.
class Caller {
 public:
  Caller(const pk::Problem& problem, uint32_t rows, uint64_t seed = 1, size_t piece_bytes = 0)
      : problem_(problem), rows_(rows) {
    std::mt19937_64 engine(seed);
    scores_ = pk::testing::RandomRows(problem, rows, pk::testing::Distribution::kTies, engine);
    const std::span<const std::byte> all(scores_);
    const size_t step = piece_bytes == 0 ? all.size() : piece_bytes;
    for (size_t begin = 0; begin < all.size(); begin += step) {
      pieces_.push_back(all.subspan(begin, std::min(step, all.size() - begin)));
    }
    values_.resize(rows * problem.out_value_bytes());
    slots_.resize(rows * problem.kk() * sizeof(uint32_t));
  }

  std::unique_ptr<Work> MakeWork(absl::Time deadline = absl::InfiniteFuture()) {
    auto work = std::make_unique<Work>();
    work->problem = problem_;
    work->rows = rows_;
    work->scores = pieces_;
    work->values = values_;
    work->slots = slots_;
    work->deadline = deadline;
    work->is_cancelled = [this] { return cancelled_.load(); };
    work->done = [this](absl::Status status, const WorkTiming& timing) {
      status_ = std::move(status);
      timing_ = timing;
      done_.Notify();
    };
    return work;
  }

  void Cancel() { cancelled_ = true; }
  bool WaitDone(absl::Duration timeout = absl::Seconds(10)) {
    return done_.WaitForNotificationWithTimeout(timeout);
  }
  bool done() const { return done_.HasBeenNotified(); }
  const absl::Status& status() const { return status_; }
  const WorkTiming& timing() const { return timing_; }

  // The answer equals the CPU implementation run on this request alone.
  void ExpectExact() const {
    const testing::Expected expected = testing::Reference(problem_, scores_.data(), rows_);
    EXPECT_EQ(std::memcmp(values_.data(), expected.values.data(), values_.size()), 0)
        << "values differ from the CPU reference";
    EXPECT_EQ(std::memcmp(slots_.data(), expected.slots.data(), slots_.size()), 0)
        << "slots differ from the CPU reference";
  }

 private:
  pk::Problem problem_;
  uint32_t rows_;
  std::vector<std::byte> scores_;
  std::vector<std::span<const std::byte>> pieces_;
  std::vector<std::byte> values_;
  std::vector<std::byte> slots_;
  std::atomic<bool> cancelled_{false};
  absl::Notification done_;
  absl::Status status_;
  WorkTiming timing_;
};

// Every caller is answered OK, with the CPU implementation's results.
void ExpectAllAnsweredExactly(std::initializer_list<Caller*> callers) {
  for (Caller* caller : callers) {
    ASSERT_TRUE(caller->WaitDone());
    ASSERT_TRUE(caller->status().ok()) << caller->status();
    caller->ExpectExact();
  }
}

BatcherOptions Options(uint32_t max_batch_rows, absl::Duration delay, uint64_t max_queued_rows) {
  BatcherOptions options;
  options.max_batch_rows = max_batch_rows;
  options.max_queue_delay = delay;
  options.max_queued_rows = max_queued_rows;
  options.sweep_interval = absl::Milliseconds(5);
  return options;
}

const pk::Problem& Shape() {
  static const pk::Problem problem = MakeProblem({64, 64}, 8, pk::DType::kFloat32);
  return problem;
}

// A Batch over memory of its own, to check the gather of its sources.
class VectorBatch final : public Batch {
 public:
  VectorBatch(const pk::Problem& problem, size_t rows, std::vector<std::byte>& scores)
      : Batch(problem, rows, scores, {}, {}) {}
};

TEST(Batch, GatherScoresCopiesTheSourcesBackToBackInAnyPieces) {
  const pk::Problem problem = MakeProblem({4, 4}, 2, pk::DType::kFloat32);  // 32-byte rows
  constexpr size_t kRows = 300;
  // Sources that split rows, one of a single byte, long enough for the cache-bypassing stores.
  std::vector<std::byte> a(3213), b(40), c(1), d(32 * kRows - 3213 - 40 - 1);
  std::mt19937 engine(7);
  for (auto* source : {&a, &b, &c, &d}) {
    for (std::byte& byte : *source) byte = static_cast<std::byte>(engine());
  }
  std::vector<std::byte> expected;
  for (auto* source : {&a, &b, &c, &d}) {
    expected.insert(expected.end(), source->begin(), source->end());
  }

  // Pieces of 1 byte, of sizes that straddle every source boundary, and the whole at once.
  for (const size_t piece :
       {size_t{1}, size_t{7}, size_t{32}, size_t{45}, size_t{1000}, size_t{4099}, size_t{100000}}) {
    std::vector<std::byte> scores(expected.size(), std::byte{0xEE});
    VectorBatch batch(problem, kRows, scores);
    batch.set_sources({a, b, c, d});
    for (size_t begin = 0; begin < scores.size(); begin += piece) {
      batch.GatherScores(begin, begin + piece);  // the last piece runs past the end: clamped
    }
    EXPECT_EQ(scores, expected) << "pieces of " << piece << " bytes";
  }
  // Without sources the scores are left as they were written.
  std::vector<std::byte> scores(expected.size(), std::byte{0x5A});
  VectorBatch batch(problem, kRows, scores);
  batch.GatherScores();
  EXPECT_EQ(scores, std::vector<std::byte>(expected.size(), std::byte{0x5A}));
}

TEST(Batch, WholeRowsReadsRowsInPlaceAndCopiesOnlyRowsSplitAcrossSources) {
  const pk::Problem problem = MakeProblem({4, 4}, 2, pk::DType::kFloat32);  // 32-byte rows
  constexpr size_t kRows = 9;
  std::vector<std::byte> all(32 * kRows);
  std::mt19937 engine(11);
  for (std::byte& byte : all) byte = static_cast<std::byte>(engine());
  // Cut points that fall on row boundaries, inside rows, and several inside one row.
  for (const std::vector<size_t>& cuts :
       {std::vector<size_t>{}, {64, 96}, {5}, {31, 33}, {40, 50, 60, 70, 200}, {1, 2, 3, 287}}) {
    pk::BytePieceList sources;
    size_t begin = 0;
    for (const size_t cut : cuts) {
      sources.push_back(std::span(all).subspan(begin, cut - begin));
      begin = cut;
    }
    sources.push_back(std::span(all).subspan(begin));
    std::vector<std::byte> staging(all.size(), std::byte{0xEE});
    VectorBatch batch(problem, kRows, staging);
    batch.set_sources(sources);

    std::vector<std::byte> joined;
    for (const std::span<const std::byte> rows : batch.WholeRows()) {
      ASSERT_EQ(rows.size() % 32, 0u) << "a span of part of a row";
      const bool in_place = rows.data() >= all.data() && rows.data() < all.data() + all.size();
      const bool staged =
          rows.data() >= staging.data() && rows.data() < staging.data() + staging.size();
      ASSERT_TRUE(in_place || staged);
      if (staged) {
        EXPECT_EQ(rows.size(), 32u) << "more than the split row was copied";
        // A staged row sits at its own place in the batch's staging.
        const size_t at = static_cast<size_t>(rows.data() - staging.data());
        EXPECT_EQ(at, joined.size());
      }
      joined.insert(joined.end(), rows.begin(), rows.end());
    }
    EXPECT_EQ(joined, all) << cuts.size() << " cuts";
  }
}

// The CPU executor completes a batch itself when nothing else waits, and hands it to its
// completer thread when another batch does (so the compute threads go on); every batch is
// completed exactly once with exact rows either way, also when the executor is destroyed with
// batches still submitted.
TEST(CpuExecutor, CompletesOnTheCompleterWhileAnotherBatchWaitsAndDrainsOnDestruction) {
  const pk::Problem problem = MakeProblem({1024, 1024}, 64, pk::DType::kBFloat16);
  std::mt19937_64 engine(23);
  constexpr size_t kRows = 256;
  for (const bool destroy_at_once : {false, true}) {
    struct Done {
      std::atomic<int> calls{0};
      std::string thread;
      absl::Status status;
      std::vector<std::byte> values;
      std::vector<uint32_t> slots;
      absl::Notification finished;
    };
    const auto thread_name = [] {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      return std::string(name);
    };
    std::vector<std::vector<std::byte>> inputs;
    Done done[2];
    std::string blocker_thread;
    {
      // A first batch, alone, whose completion holds the runner until both batches under test
      // are submitted: so the first of them surely has the second waiting behind it, however the
      // host schedules this thread. The runner is let go on every way out of this scope, before
      // the executor's destructor waits for it.
      absl::Notification holding, release;
      CpuExecutor executor(CpuExecutor::Options{.threads = 2});
      struct LetGo {
        absl::Notification& release;
        ~LetGo() {
          if (!release.HasBeenNotified()) release.Notify();
        }
      } let_go{release};
      auto blocker = executor.NewBatch(problem, 1);
      ASSERT_TRUE(blocker.ok()) << blocker.status();
      const std::vector<std::byte> row =
          pk::testing::RandomRows(problem, 1, pk::testing::Distribution::kNormal, engine);
      std::memcpy((*blocker)->scores().data(), row.data(), row.size());
      executor.Submit(std::move(*blocker), [&](std::unique_ptr<Batch> batch, BatchOutcome) {
        blocker_thread = thread_name();
        batch.reset();  // its staging back, for the batches under test
        holding.Notify();
        release.WaitForNotification();
      });
      holding.WaitForNotification();

      std::vector<std::unique_ptr<Batch>> batches;
      for (int b = 0; b < 2; ++b) {
        inputs.push_back(pk::testing::RandomRows(problem, kRows, pk::testing::Distribution::kNormal,
                                                 engine));
        auto batch = executor.NewBatch(problem, kRows);
        ASSERT_TRUE(batch.ok()) << batch.status();
        std::memcpy((*batch)->scores().data(), inputs[b].data(), inputs[b].size());
        batches.push_back(std::move(*batch));
      }
      for (int b = 0; b < 2; ++b) {
        executor.Submit(std::move(batches[b]), [&done, &thread_name, b](
                                                   std::unique_ptr<Batch> batch,
                                                   BatchOutcome outcome) {
          Done& d = done[b];
          d.thread = thread_name();
          d.status = outcome.status;
          d.values.assign(batch->values().begin(), batch->values().end());
          d.slots.assign(batch->slots().begin(), batch->slots().end());
          ++d.calls;
          d.finished.Notify();
        });
      }
      release.Notify();
      if (!destroy_at_once) {
        for (Done& d : done) d.finished.WaitForNotification();
      }
    }  // the destructor finishes what was submitted
    for (int b = 0; b < 2; ++b) {
      SCOPED_TRACE(::testing::Message() << "batch " << b << (destroy_at_once ? ", destroyed" : ""));
      ASSERT_EQ(done[b].calls.load(), 1);
      ASSERT_TRUE(done[b].status.ok()) << done[b].status;
      std::vector<std::byte> values(kRows * problem.out_value_bytes());
      std::vector<uint32_t> slots(kRows * problem.kk());
      pk::cpu::Workspace workspace;
      pk::cpu::TopKRows(problem, inputs[b].data(), kRows, values.data(), slots.data(), workspace);
      EXPECT_EQ(done[b].values, values);
      EXPECT_EQ(done[b].slots, slots);
    }
    // The lone first batch, and the second of those under test, had nothing behind them: the
    // runner completed them itself. The first under test had the second waiting: the completer
    // answered it.
    EXPECT_EQ(blocker_thread, "pk-cpu-exec");
    EXPECT_EQ(done[0].thread, "pk-cpu-done");
    EXPECT_EQ(done[1].thread, "pk-cpu-exec");
  }
}

TEST(Batcher, IdleExecutorTakesALoneRequestAtOnce) {
  pk::Problem problem = Shape();
  CpuExecutor executor(CpuExecutor::Options{.threads = 1});
  // A 10 s delay: if the lone request waited for company, the test would time out.
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  Caller caller(problem, 3);
  ASSERT_TRUE(batcher.Enqueue(caller.MakeWork()).ok());
  ASSERT_TRUE(caller.WaitDone(absl::Seconds(2))) << "an idle executor did not take the request";
  ASSERT_TRUE(caller.status().ok()) << caller.status();
  EXPECT_EQ(caller.timing().batch_rows, 3u);
  EXPECT_LT(caller.timing().queue, absl::Seconds(1));
  caller.ExpectExact();
}

TEST(Batcher, LoneRequestIsHandedToTheIdleExecutorByEnqueueItself) {
  // No hop through the batcher thread: the batch is with the executor when Enqueue returns.
  GatedExecutor executor(/*max_in_flight=*/2);
  Batcher batcher(Options(4, absl::Seconds(10), 1000), executor);
  Caller lone(Shape(), 3, 1);
  ASSERT_TRUE(batcher.Enqueue(lone.MakeWork()).ok());
  EXPECT_EQ(executor.batches_submitted(), 1);
  // A request larger than a batch: its first batch goes the same way, the rest by the batcher
  // thread once the executor has room (here at once: it holds one of two batches).
  executor.Open();
  ASSERT_TRUE(lone.WaitDone());
  Caller large(Shape(), 10, 2);
  ASSERT_TRUE(batcher.Enqueue(large.MakeWork()).ok());
  EXPECT_GE(executor.batches_submitted(), 2);
  ASSERT_TRUE(large.WaitDone());
  ASSERT_TRUE(large.status().ok()) << large.status();
  large.ExpectExact();
  lone.ExpectExact();
  EXPECT_EQ(executor.batch_rows(), (std::vector<size_t>{3, 4, 4, 2}));
}

TEST(Batcher, RequestsArrivingWhileTheExecutorWorksWaitForTheBatcherThread) {
  GatedExecutor executor(/*max_in_flight=*/2);
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  Caller first(Shape(), 1, 1), second(Shape(), 1, 2);
  ASSERT_TRUE(batcher.Enqueue(first.MakeWork()).ok());
  ASSERT_TRUE(batcher.Enqueue(second.MakeWork()).ok());
  // The executor holds the first batch and has room for another, but the second request is
  // alone and young: it waits for company (or max_queue_delay), not sent on its own.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(executor.batches_submitted(), 1);
  executor.Open();
  ASSERT_TRUE(first.WaitDone());
  ASSERT_TRUE(second.WaitDone());
  first.ExpectExact();
  second.ExpectExact();
}

TEST(Batcher, CoalescesRequestsWhileTheExecutorIsBusy) {
  GatedExecutor executor(/*max_in_flight=*/1);
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  Caller first(Shape(), 2, 1), second(Shape(), 5, 2), third(Shape(), 7, 3);
  ASSERT_TRUE(batcher.Enqueue(first.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  ASSERT_TRUE(batcher.Enqueue(second.MakeWork()).ok());
  ASSERT_TRUE(batcher.Enqueue(third.MakeWork()).ok());
  executor.Open();
  ExpectAllAnsweredExactly({&first, &second, &third});
  EXPECT_EQ(executor.batch_rows(), (std::vector<size_t>{2, 12}));
  EXPECT_EQ(second.timing().batch_rows, 12u);
  EXPECT_EQ(third.timing().batch_rows, 12u);
}

TEST(Batcher, QueueDelayBoundsTheWaitWhenTheExecutorIsBusy) {
  // Two batches may be in flight; the first is held, so the executor is busy but has room.
  GatedExecutor executor(/*max_in_flight=*/2);
  Batcher batcher(Options(1024, absl::Milliseconds(30), 1000), executor);
  Caller held(Shape(), 1, 1), waiting(Shape(), 1, 2);
  ASSERT_TRUE(batcher.Enqueue(held.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  const absl::Time enqueued = absl::Now();
  ASSERT_TRUE(batcher.Enqueue(waiting.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(2, absl::Seconds(5)))
      << "the second batch did not go out after max_queue_delay";
  const absl::Duration waited = absl::Now() - enqueued;
  EXPECT_GE(waited, absl::Milliseconds(25)) << "it went out before the delay ran out";
  EXPECT_LT(waited, absl::Seconds(2));
  executor.Open();
  ASSERT_TRUE(waiting.WaitDone());
  waiting.ExpectExact();
}

TEST(Batcher, AFreeComputeSlotTakesABatchWorthOfRowsAtOnce) {
  // Three batches computed at once (as CUDA lanes are). With one held, requests of a batch's worth
  // of bytes (here one 512-byte row) each go out at once, without waiting for max_queue_delay;
  // once all three slots are held, the rows that arrive coalesce and go out together when a slot
  // frees.
  GatedExecutor executor(/*max_in_flight=*/3, /*open=*/false, /*concurrent=*/3);
  BatcherOptions options = Options(1024, absl::Seconds(10), 1000);
  options.parallel_batch_bytes = Shape().row_bytes();
  Batcher batcher(options, executor);
  Caller a(Shape(), 1, 1), b(Shape(), 2, 2), c(Shape(), 3, 3), d(Shape(), 4, 4), e(Shape(), 5, 5);
  ASSERT_TRUE(batcher.Enqueue(a.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  ASSERT_TRUE(batcher.Enqueue(b.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(2, absl::Seconds(2)))
      << "a request waited for max_queue_delay while a slot was free to compute it";
  ASSERT_TRUE(batcher.Enqueue(c.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(3, absl::Seconds(2)));
  ASSERT_TRUE(batcher.Enqueue(d.MakeWork()).ok());
  ASSERT_TRUE(batcher.Enqueue(e.MakeWork()).ok());
  EXPECT_FALSE(executor.WaitForSubmitted(4, absl::Milliseconds(100)))
      << "a batch went out with every slot held";
  executor.Open();
  ExpectAllAnsweredExactly({&a, &b, &c, &d, &e});
  EXPECT_EQ(executor.batch_rows(), (std::vector<size_t>{1, 2, 3, 9}));
}

TEST(Batcher, SmallRequestsCoalesceWhileAnythingComputesEvenWithAFreeSlot) {
  // A free slot takes four rows' worth at once; fewer wait (here up to a 10 s delay) to coalesce
  // while a batch computes.
  GatedExecutor executor(/*max_in_flight=*/3, /*open=*/false, /*concurrent=*/3);
  BatcherOptions options = Options(1024, absl::Seconds(10), 1000);
  options.parallel_batch_bytes = 4 * Shape().row_bytes();
  Batcher batcher(options, executor);
  Caller a(Shape(), 1, 1), b(Shape(), 1, 2), c(Shape(), 2, 3), d(Shape(), 1, 4);
  ASSERT_TRUE(batcher.Enqueue(a.MakeWork()).ok());  // the executor is idle: at once
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  ASSERT_TRUE(batcher.Enqueue(b.MakeWork()).ok());
  ASSERT_TRUE(batcher.Enqueue(c.MakeWork()).ok());
  EXPECT_FALSE(executor.WaitForSubmitted(2, absl::Milliseconds(100)))
      << "three rows went out alone while a batch computed";
  ASSERT_TRUE(batcher.Enqueue(d.MakeWork()).ok());  // four rows queued: worth a slot
  ASSERT_TRUE(executor.WaitForSubmitted(2, absl::Seconds(2)));
  executor.Open();
  ExpectAllAnsweredExactly({&a, &b, &c, &d});
  EXPECT_EQ(executor.batch_rows(), (std::vector<size_t>{1, 4}));
}

TEST(Batcher, AFullBatchGoesOutBeforeTheDelay) {
  GatedExecutor executor(/*max_in_flight=*/2);
  Batcher batcher(Options(8, absl::Seconds(10), 1000), executor);
  Caller held(Shape(), 1, 1), full(Shape(), 8, 2);
  ASSERT_TRUE(batcher.Enqueue(held.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  ASSERT_TRUE(batcher.Enqueue(full.MakeWork()).ok());
  EXPECT_TRUE(executor.WaitForSubmitted(2, absl::Seconds(2)))
      << "a full batch waited for max_queue_delay";
  executor.Open();
  ASSERT_TRUE(full.WaitDone());
  full.ExpectExact();
}

TEST(Batcher, SplitsARequestLargerThanABatch) {
  CpuExecutor executor(CpuExecutor::Options{.threads = 2});
  Batcher batcher(Options(5, absl::Milliseconds(1), 1000), executor);
  // Its scores in pieces that split rows: every batch reads some rows in place, copies others.
  Caller big(Shape(), 12, /*seed=*/1, /*piece_bytes=*/700);
  ASSERT_TRUE(batcher.Enqueue(big.MakeWork()).ok());
  ASSERT_TRUE(big.WaitDone());
  ASSERT_TRUE(big.status().ok()) << big.status();
  big.ExpectExact();
  EXPECT_EQ(big.timing().batch_rows, 5u);
  EXPECT_EQ(batcher.stats().batches, 3u);
}

TEST(Batcher, ShapeClassesNeverShareABatch) {
  GatedExecutor executor(/*max_in_flight=*/1);
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  const pk::Problem other = MakeProblem({64, 64}, 9, pk::DType::kFloat32);  // k differs
  const pk::Problem bf16 = MakeProblem({64, 64}, 8, pk::DType::kBFloat16);  // dtype differs
  Caller first(Shape(), 1, 1), a(Shape(), 2, 2), b(other, 3, 3), c(bf16, 4, 4), d(Shape(), 5, 5);
  ASSERT_TRUE(batcher.Enqueue(first.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  for (Caller* caller : {&a, &b, &c, &d}) ASSERT_TRUE(batcher.Enqueue(caller->MakeWork()).ok());
  executor.Open();
  ExpectAllAnsweredExactly({&first, &a, &b, &c, &d});
  // Oldest queue first: [first], then a+d (same class), then b, then c.
  EXPECT_EQ(executor.batch_rows(), (std::vector<size_t>{1, 7, 3, 4}));
}

TEST(Batcher, QueueFullIsRejectedAtOnceAndCountsOnlyQueuedRows) {
  GatedExecutor executor(/*max_in_flight=*/1);
  Batcher batcher(Options(1024, absl::Seconds(10), 10), executor);
  Caller in_flight(Shape(), 9, 1), queued(Shape(), 6, 2), too_many(Shape(), 5, 3),
      fits(Shape(), 4, 4);
  ASSERT_TRUE(batcher.Enqueue(in_flight.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));  // no longer queued
  ASSERT_TRUE(batcher.Enqueue(queued.MakeWork()).ok());
  const absl::Status full = batcher.Enqueue(too_many.MakeWork());
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("max_queued_rows"), absl::string_view::npos) << full;
  EXPECT_FALSE(too_many.done()) << "a rejected work must not be answered by the batcher";
  EXPECT_TRUE(batcher.Enqueue(fits.MakeWork()).ok());
  executor.Open();
  for (Caller* caller : {&in_flight, &queued, &fits}) {
    ASSERT_TRUE(caller->WaitDone());
    EXPECT_TRUE(caller->status().ok()) << caller->status();
  }
  EXPECT_EQ(batcher.stats().requests_rejected_full, 1u);
}

TEST(Batcher, ExpiredDeadlineIsDroppedBeforeCompute) {
  GatedExecutor executor(/*max_in_flight=*/1);
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  Caller held(Shape(), 1, 1), late(Shape(), 4, 2);
  ASSERT_TRUE(batcher.Enqueue(held.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  ASSERT_TRUE(batcher.Enqueue(late.MakeWork(absl::Now() + absl::Milliseconds(30))).ok());
  // Answered while the executor is still held: the sweep dropped it, it never ran.
  ASSERT_TRUE(late.WaitDone(absl::Seconds(5)));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  executor.Open();
  ASSERT_TRUE(held.WaitDone());
  EXPECT_EQ(executor.rows_computed(), 1u) << "the expired request's rows were computed";
  EXPECT_EQ(batcher.stats().requests_dropped_deadline, 1u);
}

TEST(Batcher, AlreadyExpiredDeadlineIsRefusedAtEnqueue) {
  CpuExecutor executor(CpuExecutor::Options{.threads = 1});
  Batcher batcher(Options(1024, absl::Milliseconds(1), 1000), executor);
  Caller caller(Shape(), 1);
  const absl::Status status = batcher.Enqueue(caller.MakeWork(absl::Now() - absl::Seconds(1)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

TEST(Batcher, CancelledCallerIsDroppedBeforeCompute) {
  GatedExecutor executor(/*max_in_flight=*/1);
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  Caller held(Shape(), 1, 1), gone(Shape(), 4, 2);
  ASSERT_TRUE(batcher.Enqueue(held.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  ASSERT_TRUE(batcher.Enqueue(gone.MakeWork()).ok());
  gone.Cancel();
  ASSERT_TRUE(gone.WaitDone(absl::Seconds(5)));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kCancelled) << gone.status();
  executor.Open();
  ASSERT_TRUE(held.WaitDone());
  EXPECT_EQ(executor.rows_computed(), 1u);
  EXPECT_EQ(batcher.stats().requests_dropped_cancelled, 1u);
}

TEST(Batcher, ExecutorFailureReachesEveryRequestOfTheBatch) {
  GatedExecutor executor(/*max_in_flight=*/1, /*open=*/true);
  executor.FailWith(absl::InternalError("device fell off the bus"));
  Batcher batcher(Options(1024, absl::Milliseconds(1), 1000), executor);
  Caller caller(Shape(), 2);
  ASSERT_TRUE(batcher.Enqueue(caller.MakeWork()).ok());
  ASSERT_TRUE(caller.WaitDone());
  EXPECT_EQ(caller.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(caller.status().message(), "device fell off the bus");
}

TEST(Batcher, StopAcceptingThenEveryAcceptedRequestIsAnswered) {
  GatedExecutor executor(/*max_in_flight=*/1);
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  Caller a(Shape(), 1, 1), b(Shape(), 2, 2), refused(Shape(), 1, 3);
  ASSERT_TRUE(batcher.Enqueue(a.MakeWork()).ok());
  ASSERT_TRUE(batcher.Enqueue(b.MakeWork()).ok());
  batcher.StopAccepting();
  EXPECT_EQ(batcher.Enqueue(refused.MakeWork()).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(batcher.WaitIdle(absl::Now() + absl::Milliseconds(20)));
  executor.Open();
  EXPECT_TRUE(batcher.WaitIdle(absl::Now() + absl::Seconds(10)));
  EXPECT_TRUE(a.done() && a.status().ok());
  EXPECT_TRUE(b.done() && b.status().ok());
}

TEST(Batcher, CancelQueuedAnswersWhatNeverReachedTheExecutor) {
  GatedExecutor executor(/*max_in_flight=*/1);
  Batcher batcher(Options(1024, absl::Seconds(10), 1000), executor);
  Caller held(Shape(), 1, 1), queued(Shape(), 2, 2);
  ASSERT_TRUE(batcher.Enqueue(held.MakeWork()).ok());
  ASSERT_TRUE(executor.WaitForSubmitted(1, absl::Seconds(5)));
  ASSERT_TRUE(batcher.Enqueue(queued.MakeWork()).ok());
  batcher.CancelQueued(absl::UnavailableError("shutting down"));
  ASSERT_TRUE(queued.WaitDone());
  EXPECT_EQ(queued.status().code(), absl::StatusCode::kUnavailable);
  executor.Open();
  ASSERT_TRUE(held.WaitDone());
  EXPECT_TRUE(held.status().ok());
}

TEST(Batcher, ManyThreadsManyShapesAllExact) {
  CpuExecutor executor(CpuExecutor::Options{.threads = 2});
  Batcher batcher(Options(64, absl::Microseconds(200), 100000), executor);
  const std::vector<pk::Problem> shapes = {
      MakeProblem({64, 64}, 8, pk::DType::kFloat32),
      MakeProblem({100, 30}, 5, pk::DType::kBFloat16),
      MakeProblem({16, 16, 16}, 32, pk::DType::kFloat32),
  };
  std::vector<std::unique_ptr<Caller>> callers;
  std::mt19937_64 engine(7);
  for (int i = 0; i < 300; ++i) {
    // Two in three callers' scores come in pieces of 1 to 600 bytes, as gRPC's slices may cut them.
    const size_t piece_bytes = i % 3 == 0 ? 0 : 1 + engine() % 600;
    callers.push_back(std::make_unique<Caller>(shapes[engine() % shapes.size()],
                                               1 + static_cast<uint32_t>(engine() % 40), i,
                                               piece_bytes));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < callers.size(); i += 6) {
        ASSERT_TRUE(batcher.Enqueue(callers[i]->MakeWork()).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& caller : callers) {
    ASSERT_TRUE(caller->WaitDone());
    ASSERT_TRUE(caller->status().ok()) << caller->status();
    caller->ExpectExact();
  }
  EXPECT_LT(batcher.stats().batches, callers.size()) << "nothing was batched together";
}

}  // namespace
}  // namespace pkserve
