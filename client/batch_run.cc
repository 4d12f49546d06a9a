#include "client/batch_run.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace pkserve::client {
namespace {

// The chunks not yet answered, and the run's first failure; shared by every stream worker.
class ChunkQueue {
 public:
  ChunkQueue(std::vector<BatchChunk> chunks, const std::atomic<bool>& stop)
      : pending_(chunks.begin(), chunks.end()), stop_(stop) {}

  // The next chunk to send; none once the queue is empty, the run failed, or stop is set.
  std::optional<BatchChunk> Take() {
    absl::MutexLock lock(&mutex_);
    if (pending_.empty() || failed_ || stop_.load()) return std::nullopt;
    const BatchChunk chunk = pending_.front();
    pending_.pop_front();
    return chunk;
  }
  // A chunk sent but not answered, to send again (first, to keep the output's order roughly).
  void Requeue(const BatchChunk& chunk) {
    absl::MutexLock lock(&mutex_);
    pending_.push_front(chunk);
  }
  // Whether a worker whose stream ended should open another.
  bool HasWork() {
    absl::MutexLock lock(&mutex_);
    return !pending_.empty() && !failed_ && !stop_.load();
  }
  bool failed() {
    absl::MutexLock lock(&mutex_);
    return failed_;
  }
  // Records the run's failure (the first one wins) and stops every worker's sending.
  void Fail(const BatchChunk& chunk, absl::Status status) {
    absl::MutexLock lock(&mutex_);
    if (failed_) return;
    failed_ = true;
    outcome_.status = std::move(status);
    outcome_.failed = chunk;
  }
  BatchOutcome Outcome() {
    absl::MutexLock lock(&mutex_);
    BatchOutcome outcome = outcome_;
    outcome.interrupted = !failed_ && !pending_.empty() && stop_.load();
    return outcome;
  }

 private:
  absl::Mutex mutex_;
  std::deque<BatchChunk> pending_ ABSL_GUARDED_BY(mutex_);
  bool failed_ ABSL_GUARDED_BY(mutex_) = false;
  BatchOutcome outcome_ ABSL_GUARDED_BY(mutex_);
  const std::atomic<bool>& stop_;
};

std::string RowRange(const BatchChunk& chunk) {
  return absl::StrCat("rows ", chunk.first_row, "..", chunk.first_row + chunk.rows - 1);
}

// One stream worker: opens a stream, keeps up to max_in_flight chunks of the queue on it (a
// sender thread), takes their answers in order (this thread), and opens a new stream when one
// fails with UNAVAILABLE.
class StreamWorker {
 public:
  StreamWorker(BatchCommand& command, Client& client, ChunkQueue& queue,
               const BatchOptions& options, ResumeLog* log, const std::atomic<bool>& stop,
               BatchCounters& counters)
      : command_(command), client_(client), queue_(queue), options_(options), log_(log),
        stop_(stop), counters_(counters) {}

  void Run() {
    int attempts_in_a_row = 0;
    absl::Duration backoff = absl::Milliseconds(50);
    while (true) {
      const StreamEnd end = RunOneStream(&attempts_in_a_row);
      if (end.kind == StreamEnd::kDone) {
        if (!queue_.HasWork()) return;  // chunks another worker put back come to this one too
        continue;
      }
      if (end.kind == StreamEnd::kFailed) return;
      // The stream broke: its unanswered chunks are back in the queue.
      if (end.status.code() != absl::StatusCode::kUnavailable) {
        queue_.Fail(end.first_unanswered, absl::Status(end.status.code(),
                                                       absl::StrCat(RowRange(end.first_unanswered),
                                                                    ": ", end.status.message())));
        return;
      }
      if (++attempts_in_a_row >= options_.max_attempts) {
        queue_.Fail(end.first_unanswered,
                    absl::Status(end.status.code(),
                                 absl::StrCat(RowRange(end.first_unanswered), ": ",
                                              end.status.message(), " (", attempts_in_a_row,
                                              " attempts)")));
        return;
      }
      const absl::Time resume_at = absl::Now() + backoff;
      backoff = std::min(backoff * 2, absl::Seconds(1));
      while (absl::Now() < resume_at && !stop_.load() && !queue_.failed()) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      if (!queue_.HasWork()) return;
    }
  }

 private:
  struct StreamEnd {
    enum Kind { kDone, kBroken, kFailed } kind = kDone;
    absl::Status status;          // kBroken: the stream's status
    BatchChunk first_unanswered;  // kBroken: the oldest chunk it left unanswered
  };

  StreamEnd RunOneStream(int* attempts_in_a_row) {
    std::unique_ptr<BatchStream> stream = command_.Open(client_);
    // The sender and this thread share these; `changed` is signalled on every change.
    absl::Mutex mutex;
    absl::CondVar changed;
    std::deque<BatchChunk> in_flight;  // sent, not yet answered, oldest first
    bool sender_done = false;
    bool stop_sending = false;
    std::thread sender([&] {
      while (true) {
        // The next request is built before its slot frees up, while the ones in flight are
        // answered (with one in flight, the copy would otherwise add to every round trip).
        const std::optional<BatchChunk> chunk = queue_.Take();
        if (!chunk.has_value()) break;
        stream->Prepare(*chunk);
        {
          absl::MutexLock lock(&mutex);
          while (!stop_sending && static_cast<int>(in_flight.size()) >= options_.max_in_flight) {
            changed.Wait(&mutex);
          }
          if (stop_sending) {
            queue_.Requeue(*chunk);  // prepared, never sent
            break;
          }
          in_flight.push_back(*chunk);
          changed.SignalAll();
        }
        // A failed Send leaves the chunk in flight: the receiver sees the stream end.
        if (!stream->Send()) break;
      }
      stream->CloseSend();
      absl::MutexLock lock(&mutex);
      sender_done = true;
      changed.SignalAll();
    });

    StreamEnd end;
    bool broken = false;
    while (true) {
      BatchChunk chunk;
      {
        absl::MutexLock lock(&mutex);
        while (in_flight.empty() && !sender_done) changed.Wait(&mutex);
        if (in_flight.empty()) break;  // the sender is done and every answer is in
        chunk = in_flight.front();
      }
      absl::Status outcome;
      const bool received = stream->Receive(chunk, &outcome, [&] {
        absl::MutexLock lock(&mutex);
        in_flight.pop_front();
        changed.SignalAll();
      });
      if (!received) {
        broken = true;
        break;
      }
      if (outcome.ok() && log_ != nullptr) outcome = log_->MarkDone(chunk.first_row, chunk.rows);
      if (outcome.ok()) {
        counters_.rows_done += chunk.rows;
        ++counters_.requests_done;
        *attempts_in_a_row = 0;
      } else if (outcome.code() == absl::StatusCode::kUnavailable) {
        queue_.Requeue(chunk);
        ++counters_.retries;
      } else {
        queue_.Fail(chunk, outcome);
        end.kind = StreamEnd::kFailed;
        break;
      }
    }
    {
      absl::MutexLock lock(&mutex);
      stop_sending = true;
      changed.SignalAll();
    }
    if (end.kind == StreamEnd::kFailed) stream->Cancel();
    sender.join();
    const absl::Status status = stream->Finish();
    if (end.kind == StreamEnd::kFailed) return end;
    if (!broken) {
      if (!status.ok() && !in_flight.empty()) broken = true;
      if (!broken) return end;
    }
    end.kind = StreamEnd::kBroken;
    end.status = status.ok() ? absl::UnavailableError("the stream ended before every answer came")
                             : status;
    end.first_unanswered = in_flight.front();
    for (auto it = in_flight.rbegin(); it != in_flight.rend(); ++it) {
      queue_.Requeue(*it);
      ++counters_.retries;
    }
    return end;
  }

  BatchCommand& command_;
  Client& client_;
  ChunkQueue& queue_;
  const BatchOptions& options_;
  ResumeLog* const log_;
  const std::atomic<bool>& stop_;
  BatchCounters& counters_;
};

}  // namespace

BatchOutcome RunBatch(BatchCommand& command, std::span<Client* const> clients,
                      std::vector<BatchChunk> chunks, const BatchOptions& options,
                      ResumeLog* log, const std::atomic<bool>& stop, BatchCounters& counters) {
  ChunkQueue queue(std::move(chunks), stop);
  std::vector<std::thread> workers;
  for (int i = 0; i < options.streams; ++i) {
    workers.emplace_back([&, i] {
      StreamWorker(command, *clients[static_cast<size_t>(i) % clients.size()], queue, options, log,
                   stop, counters)
          .Run();
    });
  }
  for (std::thread& worker : workers) worker.join();
  return queue.Outcome();
}

}  // namespace pkserve::client
