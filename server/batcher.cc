#include "server/batcher.h"

#include <pthread.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pkserve {

static_assert(std::endian::native == std::endian::little,
              "slots go on the wire as the host's uint32 bytes, which must be little-endian");

// One accepted Work and how far along it is.
struct Batcher::Tracked {
  // Set at Enqueue; moved into an Answer only once every row is accounted for (rows_left == 0).
  // Completions read its spans without the mutex, which is safe: their rows are not yet
  // accounted for, so it is still here. Everything below is guarded by the batcher's mutex.
  std::unique_ptr<Work> work;
  absl::Time enqueued;
  absl::Time dispatched;  // when its first rows went into a batch
  bool any_dispatched = false;
  uint32_t next_row = 0;    // rows before it are in a batch, or were dropped
  uint32_t rows_left = 0;   // rows neither computed nor dropped
  absl::Status status;      // the first failure, if any
  absl::Duration compute;   // summed over its batches
  uint32_t batch_rows = 0;  // the largest batch it ran in
};

namespace {

// Why queued work must not run, if it must not: its deadline passed or its caller went away.
std::optional<absl::Status> DropReason(const Work& work, absl::Time now) {
  if (now >= work.deadline) {
    return absl::DeadlineExceededError("the deadline passed before the request was computed");
  }
  if (work.is_cancelled && work.is_cancelled()) {
    // gRPC cancels a call when its deadline passes, on its own clock: a cancellation at (about)
    // the deadline is the deadline.
    if (now + absl::Milliseconds(10) >= work.deadline) {
      return absl::DeadlineExceededError("the deadline passed before the request was computed");
    }
    return absl::CancelledError("the caller cancelled the request before it was computed");
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<Batch>> NewBatchFor(Executor& executor, const pk::Problem& problem,
                                                   const std::optional<LookupSpec>& lookup,
                                                   size_t rows) {
  if (lookup.has_value()) return executor.NewLookupBatch(*lookup, rows);
  return executor.NewBatch(problem, rows);
}

// The first row of `rows` (request rows first_row.. of the batch's rows at batch_row..) whose
// selected scores had no finite maximum, as the request's row number.
std::optional<uint32_t> FirstInvalidRow(const Batch& batch, size_t batch_row, uint32_t first_row,
                                        uint32_t rows) {
  const std::span<const uint8_t> valid = batch.row_valid().subspan(batch_row, rows);
  for (uint32_t i = 0; i < rows; ++i) {
    if (valid[i] == 0) return first_row + i;
  }
  return std::nullopt;
}

}  // namespace

size_t Batcher::BatchCapacity(uint32_t max_batch_rows, const Executor& executor,
                              const ShapeQueue& queue) {
  if (!queue.lookup.has_value()) {
    return std::max<size_t>(
        1, std::min<size_t>(max_batch_rows, executor.max_batch_rows(queue.problem)));
  }
  // Whole outputs only: a multiple of heads, at least one output's rows.
  const size_t heads = queue.lookup->problem.heads;
  const size_t rows =
      std::min<size_t>(max_batch_rows, executor.max_lookup_batch_rows(*queue.lookup));
  return std::max(heads, rows / heads * heads);
}

Batcher::Batcher(const BatcherOptions& options, Executor& executor)
    : options_(options),
      executor_(executor),
      max_in_flight_(executor.max_in_flight()),
      concurrent_(std::clamp(executor.concurrent_batches(), 1, std::max(1, max_in_flight_))) {
  next_sweep_ = absl::Now() + options_.sweep_interval;
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "pk-batcher");
}

Batcher::~Batcher() {
  {
    absl::MutexLock lock(&mu_);
    accepting_ = false;
    stopping_ = true;
    wake_.Signal();
  }
  CancelQueued(absl::UnavailableError("the server shut down before the request was computed"));
  thread_.join();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &Batcher::InFlightDone));
}

bool Batcher::IsIdle() const { return open_work_ == 0; }

bool Batcher::InFlightDone() const { return in_flight_ == 0 && open_work_ == 0; }

absl::Status Batcher::Enqueue(std::unique_ptr<Work> work) {
  const absl::Time now = absl::Now();
  if (now >= work->deadline) {
    return absl::DeadlineExceededError("the deadline had passed when the request arrived");
  }
  const pk::Problem& problem = work->problem;
  ShapeKey key;
  std::copy_n(problem.widths.begin(), problem.factors, key.widths.begin());
  key.k = problem.k;
  key.dtype = problem.dtype;
  if (work->lookup.has_value()) {
    key.memory = work->lookup->memory;
    key.heads = work->lookup->problem.heads;
    key.output_dtype = work->lookup->problem.output_dtype;
  }

  absl::ReleasableMutexLock lock(&mu_);
  if (!accepting_) return absl::UnavailableError("the server is shutting down");
  if (queued_rows_ + work->rows > options_.max_queued_rows) {
    ++stats_.requests_rejected_full;
    return absl::ResourceExhaustedError(absl::StrCat("queue full: ", queued_rows_, " rows queued, ",
                                                     work->rows, " more would pass the limit of ",
                                                     options_.max_queued_rows,
                                                     " (--max_queued_rows); retry later"));
  }
  auto [it, inserted] = queues_.try_emplace(key);
  ShapeQueue& queue = it->second;
  if (inserted) {
    queue.problem = problem;
    queue.lookup = work->lookup;
    queue.batch_capacity = BatchCapacity(options_.max_batch_rows, executor_, queue);
  }
  auto tracked = std::make_shared<Tracked>();
  tracked->rows_left = work->rows;
  tracked->enqueued = now;
  queue.rows += work->rows;
  queued_rows_ += work->rows;
  tracked->work = std::move(work);
  queue.entries.push_back(std::move(tracked));
  ++open_work_;
  ++stats_.requests_accepted;

  // A lone request on an executor with room to compute goes out at once from this thread (a
  // light-load request then skips the hop through the batcher thread). Its staging is taken under
  // the lock, so that nothing can fail once the rows are planned.
  std::optional<std::pair<Plan, std::unique_ptr<Batch>>> direct;
  if (ReadyNowLocked(queue) && queues_.size() == 1 && queue.entries.size() == 1) {
    absl::StatusOr<std::unique_ptr<Batch>> batch = NewBatchFor(
        executor_, queue.problem, queue.lookup, std::min<size_t>(queue.rows, queue.batch_capacity));
    if (batch.ok()) {
      Plan plan;
      plan.problem = queue.problem;
      plan.lookup = queue.lookup;
      AddFrontLocked(queue, now, plan);
      EraseEmptyQueuesLocked();
      ++in_flight_;
      direct.emplace(std::move(plan), std::move(batch).value());
    }
  }
  // The batcher thread handles the rest: anything not sent here, or rows of a request larger than
  // a batch.
  if (!queues_.empty()) wake_.Signal();
  lock.Release();
  if (direct.has_value()) Dispatch(std::move(direct->first), std::move(direct->second));
  return absl::OkStatus();
}

void Batcher::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
}

bool Batcher::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(this, &Batcher::IsIdle), deadline);
}

void Batcher::CancelQueued(const absl::Status& status) {
  std::vector<Answer> answers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, queue] : queues_) {
      for (const auto& tracked : queue.entries) DropLocked(queue, *tracked, status, &answers);
      queue.entries.clear();
    }
    queues_.clear();
    wake_.Signal();
  }
  Deliver(std::move(answers));
}

BatcherStats Batcher::stats() const {
  absl::MutexLock lock(&mu_);
  BatcherStats stats = stats_;
  stats.queued_rows = queued_rows_;
  return stats;
}

void Batcher::Loop() {
  while (true) {
    std::optional<Plan> plan;
    std::vector<Answer> answers;
    bool exit = false;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        const absl::Time now = absl::Now();
        if (now >= next_sweep_) {
          SweepLocked(now, &answers);
          next_sweep_ = now + options_.sweep_interval;
        }
        absl::Time wake_at = absl::InfiniteFuture();
        plan = TakeBatchLocked(now, &wake_at, &answers);
        if (plan.has_value() || !answers.empty()) break;
        if (stopping_ && queues_.empty()) {
          exit = true;
          break;
        }
        if (!queues_.empty()) wake_at = std::min(wake_at, next_sweep_);
        wake_.WaitWithDeadline(&mu_, wake_at);
      }
    }
    Deliver(std::move(answers));
    if (plan.has_value()) Send(std::move(*plan));
    if (exit) return;
  }
}

std::optional<Batcher::Plan> Batcher::TakeBatchLocked(absl::Time now, absl::Time* wake_at,
                                                      std::vector<Answer>* answers) {
  if (in_flight_ >= max_in_flight_) return std::nullopt;  // a completion wakes us

  // The ready queue whose oldest request has waited longest.
  ShapeQueue* chosen = nullptr;
  for (auto& [key, queue] : queues_) {
    const absl::Time oldest = queue.entries.front()->enqueued;
    const bool ready = ReadyNowLocked(queue) || queue.rows >= queue.batch_capacity ||
                       now >= oldest + options_.max_queue_delay;
    if (!ready) {
      *wake_at = std::min(*wake_at, oldest + options_.max_queue_delay);
      continue;
    }
    if (chosen == nullptr || oldest < chosen->entries.front()->enqueued) chosen = &queue;
  }
  if (chosen == nullptr) return std::nullopt;

  Plan plan;
  plan.problem = chosen->problem;
  plan.lookup = chosen->lookup;
  while (plan.rows < chosen->batch_capacity && !chosen->entries.empty()) {
    const std::shared_ptr<Tracked> tracked = chosen->entries.front();
    if (std::optional<absl::Status> reason = DropReason(*tracked->work, now)) {
      DropLocked(*chosen, *tracked, *reason, answers);
      chosen->entries.pop_front();
      continue;
    }
    AddFrontLocked(*chosen, now, plan);
  }
  EraseEmptyQueuesLocked();
  if (plan.segments.empty()) return std::nullopt;
  ++in_flight_;
  return plan;
}

bool Batcher::ReadyNowLocked(const ShapeQueue& queue) const {
  if (in_flight_ == 0) return true;  // an idle executor: nothing to wait for
  // A free compute slot (a CUDA lane) takes a batch's worth of bytes at once; fewer rows wait to
  // coalesce while anything computes.
  return in_flight_ < concurrent_ &&
         queue.rows * queue.problem.row_bytes() >= options_.parallel_batch_bytes;
}

void Batcher::AddFrontLocked(ShapeQueue& queue, absl::Time now, Plan& plan) {
  const std::shared_ptr<Tracked> tracked = queue.entries.front();
  const uint32_t rows = static_cast<uint32_t>(
      std::min<size_t>(tracked->work->rows - tracked->next_row, queue.batch_capacity - plan.rows));
  plan.segments.push_back(Segment{tracked, tracked->next_row, rows});
  plan.rows += rows;
  if (!tracked->any_dispatched) {
    tracked->any_dispatched = true;
    tracked->dispatched = now;
  }
  tracked->next_row += rows;
  queue.rows -= rows;
  queued_rows_ -= rows;
  if (tracked->next_row == tracked->work->rows) queue.entries.pop_front();
}

void Batcher::DropLocked(ShapeQueue& queue, Tracked& tracked, const absl::Status& status,
                         std::vector<Answer>* answers) {
  const uint32_t remaining = tracked.work->rows - tracked.next_row;
  queue.rows -= remaining;
  queued_rows_ -= remaining;
  tracked.next_row = tracked.work->rows;
  tracked.rows_left -= remaining;
  if (tracked.status.ok()) {
    tracked.status = status;
    if (status.code() == absl::StatusCode::kDeadlineExceeded) ++stats_.requests_dropped_deadline;
    if (status.code() == absl::StatusCode::kCancelled) ++stats_.requests_dropped_cancelled;
  }
  if (tracked.rows_left == 0) answers->push_back(FinishLocked(tracked));
}

void Batcher::SweepLocked(absl::Time now, std::vector<Answer>* answers) {
  for (auto& [key, queue] : queues_) {
    std::erase_if(queue.entries, [&](const std::shared_ptr<Tracked>& tracked) {
      std::optional<absl::Status> reason = DropReason(*tracked->work, now);
      if (!reason.has_value()) return false;
      DropLocked(queue, *tracked, *reason, answers);
      return true;
    });
  }
  EraseEmptyQueuesLocked();
}

void Batcher::EraseEmptyQueuesLocked() {
  absl::erase_if(queues_, [](const auto& entry) { return entry.second.entries.empty(); });
}

Batcher::Answer Batcher::FinishLocked(Tracked& tracked) {
  Answer answer;
  answer.status = tracked.status;
  answer.timing.queue =
      (tracked.any_dispatched ? tracked.dispatched : absl::Now()) - tracked.enqueued;
  answer.timing.compute = tracked.compute;
  answer.timing.batch_rows = tracked.batch_rows;
  answer.work = std::move(tracked.work);
  return answer;
}

void Batcher::Deliver(std::vector<Answer> answers) {
  if (answers.empty()) return;
  for (Answer& answer : answers) {
    if (options_.observer != nullptr)
      options_.observer->WorkDone(*answer.work, answer.status, answer.timing);
    std::move(answer.work->done)(answer.status, answer.timing);
  }
  absl::MutexLock lock(&mu_);
  open_work_ -= answers.size();
}

void Batcher::Send(Plan plan) {
  absl::StatusOr<std::unique_ptr<Batch>> batch =
      NewBatchFor(executor_, plan.problem, plan.lookup, plan.rows);
  if (!batch.ok()) {
    OnBatchDone(plan, nullptr, BatchOutcome{batch.status(), absl::ZeroDuration()});
    return;
  }
  Dispatch(std::move(plan), std::move(batch).value());
}

void Batcher::Dispatch(Plan plan, std::unique_ptr<Batch> batch) {
  // Where each request's rows are; the executor makes the one copy in, on its own threads.
  const size_t row_bytes = plan.problem.row_bytes();
  pk::BytePieceList sources;
  sources.reserve(plan.segments.size());
  for (const Segment& segment : plan.segments) {
    const size_t begin = size_t{segment.first_row} * row_bytes;
    sources.Append(segment.tracked->work->scores, begin, begin + size_t{segment.rows} * row_bytes);
  }
  batch->set_sources(std::move(sources));
  executor_.Submit(std::move(batch),
                   [this, plan = std::move(plan)](std::unique_ptr<Batch> done_batch,
                                                  BatchOutcome outcome) mutable {
                     OnBatchDone(plan, std::move(done_batch), outcome);
                   });
}

void Batcher::ScatterLookup(const Plan& plan, const Batch& batch,
                            std::vector<std::pair<const Segment*, uint32_t>>* invalid_rows) {
  const pk::LookupProblem& lookup = plan.lookup->problem;
  const size_t output_bytes = lookup.output_row_bytes();
  const size_t pair_bytes =
      size_t{plan.problem.kk()} * sizeof(uint32_t);  // a row's slots or weights
  const std::byte* outputs = batch.outputs().data();
  const auto* slots = reinterpret_cast<const std::byte*>(batch.slots().data());
  const auto* weights = reinterpret_cast<const std::byte*>(batch.weights().data());
  size_t batch_row = 0;
  for (const Segment& segment : plan.segments) {
    const Work& work = *segment.tracked->work;
    // Segments hold whole outputs: first_row and rows are multiples of heads.
    const size_t outputs_before = segment.first_row / lookup.heads;
    const size_t segment_outputs = segment.rows / lookup.heads;
    std::memcpy(work.values.data() + outputs_before * output_bytes,
                outputs + batch_row / lookup.heads * output_bytes, segment_outputs * output_bytes);
    if (!work.slots.empty()) {
      std::memcpy(work.slots.data() + segment.first_row * pair_bytes,
                  slots + batch_row * pair_bytes, segment.rows * pair_bytes);
    }
    if (!work.weights.empty()) {
      std::memcpy(work.weights.data() + segment.first_row * pair_bytes,
                  weights + batch_row * pair_bytes, segment.rows * pair_bytes);
    }
    if (std::optional<uint32_t> row =
            FirstInvalidRow(batch, batch_row, segment.first_row, segment.rows)) {
      invalid_rows->emplace_back(&segment, *row);
    }
    batch_row += segment.rows;
  }
}

void Batcher::OnBatchDone(const Plan& plan, std::unique_ptr<Batch> batch,
                          const BatchOutcome& outcome) {
  const bool ok = outcome.status.ok() && batch != nullptr;
  // Lookup requests with a row whose weights are undefined, and the first such row of each.
  std::vector<std::pair<const Segment*, uint32_t>> invalid_rows;
  if (ok && plan.lookup.has_value()) {
    ScatterLookup(plan, *batch, &invalid_rows);
  } else if (ok) {
    // The one copy out: each request's rows from the staging into its response.
    const size_t value_bytes = plan.problem.out_value_bytes();
    const size_t slot_bytes = size_t{plan.problem.kk()} * sizeof(uint32_t);
    const std::byte* values = batch->values().data();
    const auto* slots = reinterpret_cast<const std::byte*>(batch->slots().data());
    for (const Segment& segment : plan.segments) {
      const Work& work = *segment.tracked->work;
      std::memcpy(work.values.data() + segment.first_row * value_bytes, values,
                  segment.rows * value_bytes);
      std::memcpy(work.slots.data() + segment.first_row * slot_bytes, slots,
                  segment.rows * slot_bytes);
      values += segment.rows * value_bytes;
      slots += segment.rows * slot_bytes;
    }
  }
  batch.reset();  // the staging goes back to the executor before it is counted free
  if (options_.observer != nullptr) options_.observer->BatchDone(plan.rows, outcome);

  std::vector<Answer> answers;
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    ++stats_.batches;
    if (ok) stats_.rows_computed += plan.rows;
    for (const Segment& segment : plan.segments) {
      Tracked& tracked = *segment.tracked;
      tracked.rows_left -= segment.rows;
      tracked.compute += outcome.compute_time;
      tracked.batch_rows = std::max<uint32_t>(tracked.batch_rows, plan.rows);
      if (!ok && tracked.status.ok()) {
        tracked.status = outcome.status.ok() ? absl::InternalError("the executor returned no batch")
                                             : outcome.status;
      }
      for (const auto& [invalid, row] : invalid_rows) {
        if (invalid != &segment || !tracked.status.ok()) continue;
        tracked.status = absl::InvalidArgumentError(
            absl::StrCat("scores row ", row,
                         ": its selected scores have no finite maximum (+inf, or all -inf "
                         "or NaN), so its softmax weights are undefined"));
      }
      if (tracked.rows_left == 0) answers.push_back(FinishLocked(tracked));
    }
    wake_.Signal();
  }
  Deliver(std::move(answers));
}

}  // namespace pkserve
