// The seam between the batcher and whatever computes: an Executor takes batches of rows of one
// shape and computes the top-k of every row (SPEC.md), asynchronously.
//
// A batch's life: Executor::NewBatch hands out staging memory the executor owns (pageable for the
// CPU, pinned for CUDA) -> the batcher names where each request's rows are (set_sources) ->
// Executor::Submit -> the executor reads the rows (the CUDA executor copies them into scores(),
// the one copy in, GatherScores; the CPU executor computes from the sources where they are, and
// copies only rows split across two of them, WholeRows),
// fills values() and slots() and calls the completion on one of its threads -> the batcher
// scatters each request's rows out (the one copy out) and destroys the Batch, which hands the
// staging memory back. The copy in is the executor's so that it runs off the batcher's single
// thread: the CUDA executor does it on each stream's own thread, in chunks that overlap the
// transfer to the device.
//
// Capacity: an executor holds at most max_in_flight() batches at once (CPU: a couple, so the next
// batch is formed while one computes; CUDA: devices x streams), and computes up to
// concurrent_batches() of them at the same time (CPU: one; CUDA: one per lane). The batcher never
// asks for more than max_in_flight(); while fewer than concurrent_batches() are in flight, a
// request goes out at once, and only past that do rows wait to coalesce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/byte_pieces.h"
#include "kernels/lookup/lookup.h"
#include "kernels/problem.h"

namespace pkserve {

class HostedMemory;

// What a lookup batch computes beyond the top-k of its rows: the memory it reads and the shape of
// the read (heads, dim, the table's and the outputs' types).
struct LookupSpec {
  pk::LookupProblem problem;             // problem.topk is the batch's top-k problem
  const HostedMemory* memory = nullptr;  // outlives every batch
};

// Rows of one shape class, gathered from one or more requests, in the executor's staging memory.
// Executors subclass it to carry their own handle (buffer set, stream); destroying it returns the
// staging memory to its executor.
class Batch {
 public:
  virtual ~Batch() = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  const pk::Problem& problem() const { return problem_; }
  size_t rows() const { return rows_; }

  // rows x problem.row_bytes(): the rows to compute, filled by GatherScores (or, when no sources
  // were set, written directly by whoever submits the batch).
  std::span<std::byte> scores() const { return scores_; }
  // rows x problem.out_value_bytes(), each row in slot order: written by the executor.
  std::span<std::byte> values() const { return values_; }
  // rows x problem.kk() slots, ascending within each row: written by the executor.
  std::span<uint32_t> slots() const { return slots_; }

  // Where the rows come from: rows x problem.row_bytes() bytes in all, in batch order, in pieces
  // that need not hold whole rows (a request's bytes lie where gRPC received them). The memory must
  // stay valid until the batch completes. Set before Submit.
  void set_sources(pk::BytePieceList sources);
  // The rows as spans of whole rows, in batch order, for an executor that computes from them where
  // they are: each run of whole rows within one source is read in place, and each row split
  // across sources is first copied to its own place in scores() (pk::WholeRows). Without sources,
  // scores() whole.
  pk::BytePieceList WholeRows() const;
  // A lookup batch's spec, or null for a top-k batch. A lookup batch computes the top-k of each
  // row into slots(), then its weights(), row_valid() and the outputs() (SPEC.md, the memory
  // lookup contract); its values() is empty.
  const LookupSpec* lookup() const { return lookup_.has_value() ? &*lookup_ : nullptr; }
  // Lookup: rows x kk float32 weights, in slot order.
  std::span<float> weights() const { return weights_; }
  // Lookup: one byte a row, 1 when its weights are defined, 0 when its selected scores have no
  // finite maximum (its output is then not defined either).
  std::span<uint8_t> row_valid() const { return row_valid_; }
  // Lookup: rows / heads outputs of problem.output_row_bytes() each.
  std::span<std::byte> outputs() const { return outputs_; }

  // Copies bytes [begin, end) of the sources, taken back to back, to the same bytes of scores();
  // a no-op without sources. Executors whose device reads scores() (not this CPU) call it before
  // computing, whole or in chunks; its stores bypass the CPU's caches.
  void GatherScores(size_t begin, size_t end) const;
  void GatherScores() const { GatherScores(0, scores_.size()); }

 protected:
  // The spans must cover exactly the sizes above and stay valid until the Batch is destroyed.
  Batch(const pk::Problem& problem, size_t rows, std::span<std::byte> scores,
        std::span<std::byte> values, std::span<uint32_t> slots)
      : problem_(problem), rows_(rows), scores_(scores), values_(values), slots_(slots) {}
  // Makes this a lookup batch (see lookup()); the spans must cover the sizes above.
  void SetLookup(const LookupSpec& spec, std::span<float> weights, std::span<uint8_t> row_valid,
                 std::span<std::byte> outputs) {
    lookup_ = spec;
    weights_ = weights;
    row_valid_ = row_valid;
    outputs_ = outputs;
  }

 private:
  pk::Problem problem_;
  size_t rows_;
  std::span<std::byte> scores_;
  std::span<std::byte> values_;
  std::span<uint32_t> slots_;
  pk::BytePieceList sources_;
  std::optional<LookupSpec> lookup_;
  std::span<float> weights_;
  std::span<uint8_t> row_valid_;
  std::span<std::byte> outputs_;
};

// How a batch went.
struct BatchOutcome {
  // OK: values() and slots() hold every row's result. Otherwise no row's result is valid and the
  // status (UNAVAILABLE, INTERNAL) goes to every request in the batch.
  absl::Status status;
  // The executor's own time on the batch (for CUDA: copy in, kernel, copy out).
  absl::Duration compute_time;
  // Which of the executor's devices() ran the batch (its index), for per-device metrics.
  int device = 0;
};

// Called once per submitted batch, on an executor thread, with the batch back.
using BatchDone = absl::AnyInvocable<void(std::unique_ptr<Batch> batch, BatchOutcome outcome) &&>;

class Executor {
 public:
  // Destroy an executor only after every Batch it handed out is destroyed and every completion
  // has returned.
  virtual ~Executor() = default;

  // "cpu" or "cuda", for logs and ServerInfo.
  virtual std::string_view backend() const = 0;
  // What computes, one line per device (e.g. "cpu: 16 threads, avx512").
  virtual std::vector<std::string> devices() const = 0;

  // Batches that may be held at once, from NewBatch until destroyed; at least 1.
  virtual int max_in_flight() const = 0;
  // Batches computed at the same time, 1..max_in_flight(): the rest of max_in_flight() only holds
  // batches formed ahead, waiting their turn.
  virtual int concurrent_batches() const { return 1; }
  // Rows of `problem` that fit one batch's staging memory; at least 1.
  virtual size_t max_batch_rows(const pk::Problem& problem) const = 0;

  // Staging memory for a batch of `rows` rows, 1 <= rows <= max_batch_rows(problem). Fails only
  // when max_in_flight() batches are already held (a caller bug) or memory runs out.
  virtual absl::StatusOr<std::unique_ptr<Batch>> NewBatch(const pk::Problem& problem,
                                                          size_t rows) = 0;

  // False once the executor can no longer compute (e.g. every CUDA device failed); the server
  // then reports NOT_SERVING. Batches submitted meanwhile still complete, with an error status.
  virtual bool healthy() const { return true; }

  // Lookups. AddMemory readies `memory` for lookups before the server serves (CPU: reads its pages
  // in; CUDA: a copy on every device, after checking it fits) and is called once per memory; an
  // executor that does not compute lookups answers UNIMPLEMENTED, and the server does not start.
  virtual absl::Status AddMemory(const HostedMemory& memory);
  // Score rows of a lookup of `spec` that fit one batch: a multiple of spec.problem.heads, at
  // least heads.
  virtual size_t max_lookup_batch_rows(const LookupSpec& spec) const { return spec.problem.heads; }
  // Staging for a lookup batch of `rows` score rows (a multiple of heads, at most
  // max_lookup_batch_rows(spec)); fails as NewBatch does.
  virtual absl::StatusOr<std::unique_ptr<Batch>> NewLookupBatch(const LookupSpec& spec,
                                                                size_t rows);

  // Starts computing `batch` (one of this executor's, its scores filled) and returns at once.
  // Calls `done` exactly once, from an executor thread and never from inside Submit. Batches may
  // complete in any order.
  virtual void Submit(std::unique_ptr<Batch> batch, BatchDone done) = 0;
};

}  // namespace pkserve
