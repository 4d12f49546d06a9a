// A batch run: the rows of a large input sent as many requests over several streams, each
// request's answer written to the outputs as it arrives, in any order (the outputs are addressed
// by row). The policy:
//   - The input is cut into chunks (BatchChunk) by the caller; each chunk is one request.
//   - `streams` stream workers, worker i on clients[i % clients.size()] (one client a
//     connection), each with at most `max_in_flight` requests sent and not yet answered and one
//     more prepared to go, so that memory holds at most streams x (max_in_flight + 1) requests
//     and their answers whatever the input size.
//   - A stream that fails with UNAVAILABLE (the server gone or draining), and a request answered
//     with an UNAVAILABLE StreamError, are retried: the unanswered chunks go back to the queue and
//     the worker opens a new stream, after a backoff of 50 ms doubling up to 1 s, at most
//     `max_attempts` times in a row without an answer in between. Any other failure stops the
//     whole run: no new requests; the outcome names the first failed chunk's rows.
//   - `stop` (Ctrl-C) stops sending; the answers already in flight are still taken and written.
// Every chunk answered is recorded in the ResumeLog (when given) after its outputs are written.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "client/client.h"
#include "client/resume_log.h"

namespace pkserve::client {

// One request of a batch run: rows [first_row, first_row + rows) of the input.
struct BatchChunk {
  uint64_t first_row = 0;
  uint32_t rows = 0;
};

// One open stream of a command (topk, lookup). Prepare and Send run on one thread, Receive on
// another; Cancel on either.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  // Builds the request of `chunk` (copies its rows of the input), to be sent by the next Send:
  // done while the requests in flight are answered, so that the copy is off the critical path.
  virtual void Prepare(const BatchChunk& chunk) = 0;
  // Sends the prepared request; false when the stream is broken.
  virtual bool Send() = 0;
  virtual void CloseSend() = 0;
  // Takes the answer of `chunk` (the oldest in flight), calls `answered` (its slot in flight is
  // free: the next request can go while this one's rows are written), and writes its rows to the
  // outputs. False when the stream ended first (Finish then says why; `answered` not called);
  // otherwise `*outcome` is OK once the rows are written, else the request's StreamError or the
  // write's error.
  virtual bool Receive(const BatchChunk& chunk, absl::Status* outcome,
                       absl::FunctionRef<void()> answered) = 0;
  virtual void Cancel() = 0;
  virtual absl::Status Finish() = 0;
};

// What a batch run computes: opens streams of its command on a client.
class BatchCommand {
 public:
  virtual ~BatchCommand() = default;
  virtual std::unique_ptr<BatchStream> Open(Client& client) = 0;
};

struct BatchOptions {
  int streams = 1;
  int max_in_flight = 2;  // per stream
  int max_attempts = 5;   // opens of a stream in a row without an answer, on UNAVAILABLE
};

// Counters a progress line reads while the run goes on.
struct BatchCounters {
  std::atomic<uint64_t> rows_done{0};
  std::atomic<uint64_t> requests_done{0};
  std::atomic<uint64_t> retries{0};  // chunks sent again after UNAVAILABLE
};

struct BatchOutcome {
  absl::Status status;        // OK, or the failure that stopped the run
  BatchChunk failed;          // the chunk of that failure
  bool interrupted = false;   // `stop` was set before every chunk was done
};

// Runs `chunks` to the end, to the first failure, or until `stop`. `clients` outlive the call.
BatchOutcome RunBatch(BatchCommand& command, std::span<Client* const> clients,
                      std::vector<BatchChunk> chunks, const BatchOptions& options,
                      ResumeLog* log, const std::atomic<bool>& stop, BatchCounters& counters);

}  // namespace pkserve::client
