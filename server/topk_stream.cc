#include "server/topk_stream.h"

#include <string>
#include <utility>
#include <vector>

#include "server/grpc_status.h"

namespace pkserve {

TopKStreamReactor* TopKStreamReactor::Start(grpc::CallbackServerContext* context,
                                            Admission& admission, TopKStreamRegistry& registry,
                                            ServerMetrics& metrics) {
  auto stream = std::make_shared<TopKStreamReactor>(context, admission, registry, metrics);
  stream->self_ = stream;
  registry.Add(stream);
  Actions actions;
  {
    absl::MutexLock lock(&stream->mu_);
    stream->draining_ = registry.draining();
    actions = stream->NextActionsLocked();
  }
  stream->Perform(actions);
  return stream.get();
}

TopKStreamReactor::TopKStreamReactor(grpc::CallbackServerContext* context, Admission& admission,
                                     TopKStreamRegistry& registry, ServerMetrics& metrics)
    : context_(context), admission_(admission), registry_(registry), metrics_(metrics) {}

void TopKStreamReactor::Drain() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    actions = NextActionsLocked();
  }
  Perform(actions);
}

void TopKStreamReactor::OnReadDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    read_pending_ = false;
    std::unique_ptr<Item> item = std::move(reading_);
    if (!ok) {
      reads_done_ = true;
    } else if (!finished_ && !cancelled_) {
      Item* admitted = item.get();
      admitted->arrived = metrics_.RequestArrived();
      items_.push_back(std::move(item));
      // Under the mutex is safe: Submit never calls back into this stream before it returns.
      absl::Status status = admission_.Submit(
          admitted->request, admitted->response.mutable_result(), CallDeadline(*context_),
          [context = context_] { return context->IsCancelled(); },
          [this, admitted](absl::Status done_status) { OnAnswered(admitted, done_status); });
      if (!status.ok()) AnswerLocked(admitted, status);
    }
    actions = NextActionsLocked();
  }
  Perform(actions);
}

void TopKStreamReactor::AnswerLocked(Item* item, const absl::Status& status) {
  metrics_.RequestAnswered(Rpc::kTopKStream, status.code(), item->request.rows(), item->arrived);
  item->response.set_request_id(item->request.request_id());
  if (!status.ok()) {
    v1::StreamError* error = item->response.mutable_error();  // replaces the result
    error->set_code(static_cast<int32_t>(status.code()));
    error->set_message(std::string(status.message()));
  }
  item->answered = true;
}

void TopKStreamReactor::OnAnswered(Item* item, const absl::Status& status) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    AnswerLocked(item, status);
    actions = NextActionsLocked();
  }
  Perform(actions);
}

void TopKStreamReactor::OnWriteDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    write_pending_ = false;
    if (ok) {
      items_.pop_front();
    } else {
      write_failed_ = true;
    }
    actions = NextActionsLocked();
  }
  Perform(actions);
}

void TopKStreamReactor::OnCancel() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    actions = NextActionsLocked();
  }
  Perform(actions);
}

void TopKStreamReactor::OnDone() {
  registry_.Remove(this);
  std::shared_ptr<TopKStreamReactor> last = std::move(self_);  // may destroy this on return
}

TopKStreamReactor::Actions TopKStreamReactor::NextActionsLocked() {
  Actions actions;
  if (finished_) return actions;
  const bool broken = write_failed_ || cancelled_;
  if (broken) {
    // Nobody will read the answers: forget answered items (not one being written), keep the rest
    // until the batcher is done with them.
    const Item* writing = write_pending_ ? items_.front().get() : nullptr;
    std::erase_if(items_, [writing](const std::unique_ptr<Item>& item) {
      return item->answered && item.get() != writing;
    });
  } else if (!write_pending_ && !items_.empty() && items_.front()->answered) {
    write_pending_ = true;
    actions.write = &items_.front()->response;
  }
  if (items_.empty() && !write_pending_) {
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
      return actions;
    }
  }
  if (!broken && !draining_ && !read_pending_ && !reads_done_ &&
      items_.size() < kMaxPendingPerStream) {
    read_pending_ = true;
    reading_ = std::make_unique<Item>();
    actions.read = &reading_->request;
  }
  return actions;
}

void TopKStreamReactor::Perform(const Actions& actions) {
  if (actions.read != nullptr) StartRead(actions.read);
  if (actions.write != nullptr) StartWrite(actions.write);
  if (actions.finish.has_value()) Finish(*actions.finish);
}

void TopKStreamRegistry::Add(const std::shared_ptr<TopKStreamReactor>& stream) {
  absl::MutexLock lock(&mu_);
  streams_.emplace(stream.get(), stream);
}

void TopKStreamRegistry::Remove(TopKStreamReactor* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

void TopKStreamRegistry::DrainAll() {
  std::vector<std::shared_ptr<TopKStreamReactor>> open;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (const auto& [pointer, weak] : streams_) {
      if (std::shared_ptr<TopKStreamReactor> stream = weak.lock()) open.push_back(stream);
    }
  }
  for (const auto& stream : open) stream->Drain();
}

bool TopKStreamRegistry::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

}  // namespace pkserve
