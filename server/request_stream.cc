#include "server/request_stream.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/grpc_status.h"

namespace pkserve {

template <typename Call>
StreamReactor<Call>* StreamReactor<Call>::Start(grpc::CallbackServerContext* context,
                                                Admission& admission, StreamRegistry& registry,
                                                ServerMetrics& metrics) {
  auto stream = std::make_shared<StreamReactor>(context, admission, registry, metrics);
  stream->self_ = stream;
  if (!registry.Add(stream)) {
    {
      absl::MutexLock lock(&stream->mu_);
      stream->finished_ = true;
    }
    stream->Finish(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("too many open streams: the server holds ", registry.limits().max_open_streams,
                     " (--max_open_streams); close idle streams or retry later")));
    return stream.get();
  }
  Actions actions;
  {
    absl::MutexLock lock(&stream->mu_);
    stream->draining_ = registry.draining();
    actions = stream->NextActionsLocked();
  }
  stream->Run(std::move(actions));
  return stream.get();
}

template <typename Call>
StreamReactor<Call>::StreamReactor(grpc::CallbackServerContext* context, Admission& admission,
                                   StreamRegistry& registry, ServerMetrics& metrics)
    : context_(context),
      peer_(context->peer()),
      admission_(admission),
      registry_(registry),
      metrics_(metrics) {}

template <typename Call>
void StreamReactor<Call>::Drain() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    actions = NextActionsLocked();
  }
  Run(std::move(actions));
}

template <typename Call>
void StreamReactor<Call>::OnReadDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    read_pending_ = false;
    std::unique_ptr<Item> item = std::move(reading_);
    if (!ok) {
      reads_done_ = true;
    } else if (!finished_ && !cancelled_) {
      AdmitLocked(std::move(item));
    }
    actions = NextActionsLocked();
  }
  Run(std::move(actions));
}

template <typename Call>
void StreamReactor<Call>::AdmitLocked(std::unique_ptr<Item> item) {
  Item* admitted = item.get();
  admitted->arrived = metrics_.RequestArrived();
  if (context_->IsCancelled()) {
    // The client is gone: the request is not judged, only counted, and no answer is queued.
    metrics_.RequestAnswered(Call::kRpc, absl::StatusCode::kCancelled, 0, admitted->arrived);
    return;
  }
  admitted->bytes = admitted->message.Length();
  pending_bytes_ += admitted->bytes;
  items_.push_back(std::move(item));
  absl::Status parsed = Call::Parse(admitted->message, &admitted->received);
  admitted->message.Clear();
  if (!parsed.ok()) {
    AnswerLocked(admitted, parsed);
    return;
  }
  // Under the mutex is safe: Submit never calls back into this stream before it returns.
  absl::Status status = Call::Submit(
      admission_, peer_, admitted->received, admitted->response.mutable_result(),
      CallDeadline(*context_),
      [context = context_] { return context->IsCancelled(); },
      [this, admitted](absl::Status done_status) { OnAnswered(admitted, done_status); });
  if (!status.ok()) AnswerLocked(admitted, status);
}

template <typename Call>
void StreamReactor<Call>::AnswerLocked(Item* item, const absl::Status& status) {
  metrics_.RequestAnswered(Call::kRpc, status.code(), item->received.request.rows(),
                           item->arrived);
  item->response.set_request_id(item->received.request.request_id());
  const auto set_error = [item](const absl::Status& error_status) {
    v1::StreamError* error = item->response.mutable_error();  // replaces the result
    error->set_code(static_cast<int32_t>(error_status.code()));
    error->set_message(std::string(error_status.message()));
  };
  if (!status.ok()) set_error(status);
  if (absl::Status serialized = SerializeMessage(item->response, &item->reply); !serialized.ok()) {
    set_error(serialized);
    SerializeMessage(item->response, &item->reply).IgnoreError();  // an error always serializes
  }
  // Only the reply is needed from now on.
  item->received.Clear();
  item->response = typename Call::StreamResponse();
  pending_bytes_ -= item->bytes;
  item->bytes = item->reply.Length();
  pending_bytes_ += item->bytes;
  item->answered = true;
}

template <typename Call>
void StreamReactor<Call>::OnAnswered(Item* item, const absl::Status& status) {
  Actions actions;
  absl::Duration pause;
  {
    absl::MutexLock lock(&mu_);
    AnswerLocked(item, status);
    actions = NextActionsLocked();
    pause = registry_.limits().answer_pause;
  }
  if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
  // gRPC holds the call only through its own callbacks; this one comes from the batcher. With
  // nothing decided here, another thread may finish the stream as soon as the mutex is free, and
  // gRPC free it: then not even a call to Run may touch it. (Decided operations hold off the
  // finish through starting_.)
  if (actions.any()) Run(std::move(actions));
}

template <typename Call>
void StreamReactor<Call>::OnWriteDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    write_pending_ = false;
    if (ok) {
      pending_bytes_ -= items_.front()->bytes;
      items_.pop_front();
    } else {
      write_failed_ = true;
    }
    actions = NextActionsLocked();
  }
  Run(std::move(actions));
}

template <typename Call>
void StreamReactor<Call>::OnCancel() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    actions = NextActionsLocked();
  }
  Run(std::move(actions));
}

template <typename Call>
void StreamReactor<Call>::OnDone() {
  registry_.Remove(this);
  std::shared_ptr<StreamReactor> last = std::move(self_);  // may destroy this on return
}

template <typename Call>
typename StreamReactor<Call>::Actions StreamReactor<Call>::NextActionsLocked() {
  Actions actions;
  if (finished_) return actions;
  const bool broken = write_failed_ || cancelled_;
  if (broken) {
    // Nobody will read the answers: forget answered items (not one being written), keep the rest
    // until the batcher is done with them.
    const Item* writing = write_pending_ ? items_.front().get() : nullptr;
    std::erase_if(items_, [this, writing](const std::unique_ptr<Item>& item) {
      if (!item->answered || item.get() == writing) return false;
      pending_bytes_ -= item->bytes;
      return true;
    });
  } else if (!write_pending_ && !items_.empty() && items_.front()->answered) {
    write_pending_ = true;
    actions.write = &items_.front()->reply;
  }
  if (items_.empty() && !write_pending_ && starting_ == 0) {
    if (broken) {
      actions.finish = grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled");
    } else if (draining_) {
      actions.finish = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "the server is draining; every accepted request of this "
                                    "stream was answered; reconnect to another replica");
    } else if (reads_done_) {
      actions.finish = grpc::Status::OK;
    }
    if (actions.finish.has_value()) {
      finished_ = true;
      ++starting_;
      return actions;
    }
  }
  const StreamLimits& limits = registry_.limits();
  const bool room = items_.empty() || (items_.size() < limits.max_pending_requests &&
                                       pending_bytes_ < limits.max_pending_bytes);
  if (!broken && !draining_ && !read_pending_ && !reads_done_ && room) {
    read_pending_ = true;
    reading_ = std::make_unique<Item>();
    actions.read = &reading_->message;
  }
  if (actions.any()) ++starting_;
  return actions;
}

template <typename Call>
void StreamReactor<Call>::Run(Actions actions) {
  while (actions.any()) {
    const bool finishing = actions.finish.has_value();
    Perform(actions);
    if (finishing) return;  // the stream may be gone already
    absl::MutexLock lock(&mu_);
    --starting_;
    actions = NextActionsLocked();
  }
}

template <typename Call>
void StreamReactor<Call>::Perform(const Actions& actions) {
  if (actions.read != nullptr) StartRead(actions.read);
  if (actions.write != nullptr) StartWrite(actions.write);
  if (actions.finish.has_value()) Finish(*actions.finish);
}

template class StreamReactor<TopKCall>;
template class StreamReactor<LookupCall>;

bool StreamRegistry::Add(const std::shared_ptr<OpenStream>& stream) {
  absl::MutexLock lock(&mu_);
  if (streams_.size() >= limits_.max_open_streams) return false;
  streams_.emplace(stream.get(), stream);
  return true;
}

void StreamRegistry::Remove(OpenStream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

void StreamRegistry::DrainAll() {
  std::vector<std::shared_ptr<OpenStream>> open;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (const auto& [pointer, weak] : streams_) {
      if (std::shared_ptr<OpenStream> stream = weak.lock()) open.push_back(stream);
    }
  }
  for (const auto& stream : open) stream->Drain();
}

bool StreamRegistry::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

}  // namespace pkserve
