#include "client/batch_commands.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pkserve::client {
namespace {

std::string RowRange(const BatchChunk& chunk) {
  return absl::StrCat("rows ", chunk.first_row, "..", chunk.first_row + chunk.rows - 1);
}

std::span<const std::byte> AsBytes(const std::string& bytes) {
  return std::as_bytes(std::span<const char>(bytes.data(), bytes.size()));
}

// An answer of the wrong size would write over other rows: refused before any write.
absl::Status CheckSize(const BatchChunk& chunk, const char* field, size_t got, size_t want) {
  if (got == want) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(RowRange(chunk), ": the answer's ", field, " hold ", got,
                                          " bytes, ", want, " expected"));
}

absl::Status WriteIfAsked(NpyOutput* output, uint64_t offset, const std::string& bytes) {
  return output == nullptr ? absl::OkStatus() : output->Write(offset, AsBytes(bytes));
}

// StreamError codes are gRPC's; the message gets the rows it answered.
absl::Status FromStreamError(const BatchChunk& chunk, const v1::StreamError& error) {
  return absl::Status(static_cast<absl::StatusCode>(error.code()),
                      absl::StrCat(RowRange(chunk), ": ", error.message()));
}

class TopKStream final : public BatchStream {
 public:
  TopKStream(const TopKBatchSpec& spec, Client& client)
      : spec_(spec), session_(client.OpenStream()) {}

  void Prepare(const BatchChunk& chunk) override {
    const std::span<const std::byte> scores =
        spec_.scores.subspan(chunk.first_row * spec_.row_bytes, chunk.rows * spec_.row_bytes);
    request_ = MakeTopKRequest(spec_.factor_widths, spec_.k, spec_.dtype, chunk.rows, scores,
                               RowRange(chunk));
    spec_.input->DoneReading(scores);
  }
  bool Send() override { return session_->Send(request_); }
  void CloseSend() override { session_->CloseSend(); }
  bool Receive(const BatchChunk& chunk, absl::Status* outcome,
               absl::FunctionRef<void()> answered) override {
    v1::TopKStreamResponse answer;
    if (!session_->Receive(&answer)) return false;
    answered();
    if (answer.has_error()) {
      *outcome = FromStreamError(chunk, answer.error());
      return true;
    }
    const v1::TopKResponse& result = answer.result();
    const size_t cells = size_t{chunk.rows} * spec_.kk;
    *outcome = CheckSize(chunk, "values", result.values().size(), cells * DTypeBytes(spec_.dtype));
    if (outcome->ok()) *outcome = CheckSize(chunk, "slots", result.slots().size(), cells * 4);
    if (outcome->ok()) {
      const uint64_t first_cell = chunk.first_row * spec_.kk;
      *outcome = WriteIfAsked(spec_.values, first_cell * DTypeBytes(spec_.dtype), result.values());
      if (outcome->ok()) *outcome = WriteIfAsked(spec_.slots, first_cell * 4, result.slots());
    }
    return true;
  }
  void Cancel() override { session_->Cancel(); }
  absl::Status Finish() override { return session_->Finish(); }

 private:
  const TopKBatchSpec& spec_;
  std::unique_ptr<TopKStreamSession> session_;
  v1::TopKRequest request_;  // prepared for the next Send
};

class TopKBatch final : public BatchCommand {
 public:
  explicit TopKBatch(TopKBatchSpec spec) : spec_(std::move(spec)) {}
  std::unique_ptr<BatchStream> Open(Client& client) override {
    return std::make_unique<TopKStream>(spec_, client);
  }

 private:
  const TopKBatchSpec spec_;
};

class LookupStream final : public BatchStream {
 public:
  LookupStream(const LookupBatchSpec& spec, Client& client)
      : spec_(spec), session_(client.OpenLookupStream()) {}

  void Prepare(const BatchChunk& chunk) override {
    request_.set_memory(spec_.memory);
    request_.set_k(spec_.k);
    request_.set_dtype(spec_.dtype);
    request_.set_rows(chunk.rows);
    request_.set_heads(spec_.heads);
    const std::span<const std::byte> scores =
        spec_.scores.subspan(chunk.first_row * spec_.row_bytes, chunk.rows * spec_.row_bytes);
    request_.set_scores(reinterpret_cast<const char*>(scores.data()), scores.size());
    request_.set_output_dtype(spec_.output_dtype);
    request_.set_return_slots(spec_.slots != nullptr || spec_.weights != nullptr);
    request_.set_request_id(RowRange(chunk));
    spec_.input->DoneReading(scores);
  }
  bool Send() override { return session_->Send(request_); }
  void CloseSend() override { session_->CloseSend(); }
  bool Receive(const BatchChunk& chunk, absl::Status* outcome,
               absl::FunctionRef<void()> answered) override {
    v1::LookupStreamResponse answer;
    if (!session_->Receive(&answer)) return false;
    answered();
    if (answer.has_error()) {
      *outcome = FromStreamError(chunk, answer.error());
      return true;
    }
    const v1::LookupResponse& result = answer.result();
    const uint64_t first_output = chunk.first_row / spec_.heads;
    const size_t value_bytes = DTypeBytes(spec_.output_dtype) * spec_.dim;
    *outcome = CheckSize(chunk, "values", result.values().size(),
                         size_t{chunk.rows / spec_.heads} * value_bytes);
    const bool slots_asked = spec_.slots != nullptr || spec_.weights != nullptr;
    const size_t cells = size_t{chunk.rows} * spec_.kk;
    if (outcome->ok() && slots_asked) {
      *outcome = CheckSize(chunk, "slots", result.slots().size(), cells * 4);
      if (outcome->ok()) *outcome = CheckSize(chunk, "weights", result.weights().size(), cells * 4);
    }
    if (outcome->ok()) *outcome = WriteIfAsked(spec_.values, first_output * value_bytes, result.values());
    const uint64_t first_cell = chunk.first_row * spec_.kk;
    if (outcome->ok()) *outcome = WriteIfAsked(spec_.slots, first_cell * 4, result.slots());
    if (outcome->ok()) *outcome = WriteIfAsked(spec_.weights, first_cell * 4, result.weights());
    return true;
  }
  void Cancel() override { session_->Cancel(); }
  absl::Status Finish() override { return session_->Finish(); }

 private:
  const LookupBatchSpec& spec_;
  std::unique_ptr<LookupStreamSession> session_;
  v1::LookupRequest request_;  // prepared for the next Send
};

class LookupBatch final : public BatchCommand {
 public:
  explicit LookupBatch(LookupBatchSpec spec) : spec_(std::move(spec)) {}
  std::unique_ptr<BatchStream> Open(Client& client) override {
    return std::make_unique<LookupStream>(spec_, client);
  }

 private:
  const LookupBatchSpec spec_;
};

}  // namespace

size_t DTypeBytes(v1::DType dtype) { return dtype == v1::DTYPE_BFLOAT16 ? 2 : 4; }

std::unique_ptr<BatchCommand> MakeTopKBatch(TopKBatchSpec spec) {
  return std::make_unique<TopKBatch>(std::move(spec));
}

std::unique_ptr<BatchCommand> MakeLookupBatch(LookupBatchSpec spec) {
  return std::make_unique<LookupBatch>(std::move(spec));
}

}  // namespace pkserve::client
