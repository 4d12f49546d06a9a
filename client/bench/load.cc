#include "client/bench/load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "pkserve/v1/pkserve.grpc.pb.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace pkserve::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Calls go through the generic stub: requests leave as the pool's pre-serialized bytes.
constexpr char kTopKMethod[] = "/pkserve.v1.SparseMemory/TopK";
constexpr char kTopKStreamMethod[] = "/pkserve.v1.SparseMemory/TopKStream";
constexpr char kLookupMethod[] = "/pkserve.v1.SparseMemory/Lookup";
constexpr char kLookupStreamMethod[] = "/pkserve.v1.SparseMemory/LookupStream";

// Payload bytes an answer brings back.
size_t AnswerBytes(const v1::TopKResponse& response) {
  return response.values().size() + response.slots().size();
}
size_t AnswerBytes(const v1::LookupResponse& response) {
  return response.values().size() + response.slots().size() + response.weights().size();
}
void KeepAnswer(Sample& sample, v1::TopKResponse&& response) {
  sample.response = std::move(response);
}
void KeepAnswer(Sample& sample, v1::LookupResponse&& response) {
  sample.lookup = std::move(response);
}

// Parses an answer; false when it is not a valid message.
template <typename Message>
bool ParseAnswer(grpc::ByteBuffer& buffer, Message* message) {
  return grpc::SerializationTraits<Message>::Deserialize(&buffer, message).ok();
}

uint64_t Nanoseconds(Clock::duration duration) {
  return static_cast<uint64_t>(
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count()));
}

double Seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

// User and system CPU time of the whole process so far.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// User and system CPU time of another local process (/proc/PID/stat); -1 when it cannot be read.
double OtherProcessCpuSeconds(int pid) {
  if (pid <= 0) return -1;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces), from its closing parenthesis: state
  // is field 3, utime 14 and stime 15.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index >= 14) ticks += std::strtod(field.c_str(), nullptr);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A completion-queue tag: the object whose operation completed.
class Tag {
 public:
  virtual void Done(bool ok) = 0;

 protected:
  ~Tag() = default;
};

class LevelRun;

// A worker thread and its completion queue. `stats`, `rng` and the sampling count are touched only
// by that thread (every operation it polls completes there); the counters are for the progress
// line.
struct Worker {
  grpc::CompletionQueue cq;
  std::thread thread;
  LevelStats stats;
  uint64_t sampled_from = 0;  // successful answers offered to the reservoir
  std::mt19937_64 rng;
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> failed{0};
};

// One unary TopK. The completion queue holds it from Start() until its tag comes back.
class UnaryCall final : public Tag {
 public:
  UnaryCall(LevelRun& run, int worker, int channel, const PooledRequest& request,
            Clock::time_point scheduled)
      : run_(run), worker_(worker), channel_(channel), request_(request), scheduled_(scheduled) {}

  void Start(grpc::GenericStub& stub, grpc::CompletionQueue& cq, absl::Duration deadline,
             bool lookup) {
    lookup_ = lookup;
    context_.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(deadline));
    reader_ = stub.PrepareUnaryCall(&context_, lookup ? kLookupMethod : kTopKMethod,
                                    request_.buffer, &cq);
    reader_->StartCall();
    reader_->Finish(&answer_, &status_, this);
  }

  void Done(bool ok) override;

 private:
  LevelRun& run_;
  const int worker_;
  const int channel_;
  const PooledRequest& request_;
  const Clock::time_point scheduled_;
  bool lookup_ = false;
  grpc::ClientContext context_;
  grpc::ByteBuffer answer_;
  grpc::Status status_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> reader_;
};

// One TopKStream: requests queue for the single write slot, answers come back in order, one Read
// always outstanding. Closes (WritesDone, then Finish) once asked to and nothing is in flight.
// Its operations complete on one worker's queue; Enqueue and Close may come from other threads.
class StreamCall {
 public:
  StreamCall(LevelRun& run, int worker, int channel)
      : run_(run), worker_(worker), channel_(channel) {}

  void Open(grpc::GenericStub& stub, grpc::CompletionQueue& cq, Clock::time_point deadline,
            bool lookup);
  // False once the stream has closed its writes or is finishing (the request was not taken).
  bool Enqueue(const PooledRequest& request, Clock::time_point scheduled);
  void Close();
  int worker() const { return worker_; }

 private:
  enum class Op { kStart, kWrite, kRead, kWritesDone, kFinish };
  struct OpTag final : Tag {
    OpTag(StreamCall& stream, Op op) : stream(stream), op(op) {}
    void Done(bool ok) override { stream.OnDone(op, ok); }
    StreamCall& stream;
    const Op op;
  };
  struct Pending {
    const PooledRequest* request;
    Clock::time_point scheduled;
  };

  void OnDone(Op op, bool ok);
  // Parses the answer just read into `response` and hands it to the run.
  template <typename StreamResponse>
  void Deliver(StreamResponse& response, const Pending& answered);
  void StartWriteLocked();
  void MaybeCloseOrFinishLocked();

  LevelRun& run_;
  const int worker_;
  const int channel_;
  OpTag start_tag_{*this, Op::kStart};
  OpTag write_tag_{*this, Op::kWrite};
  OpTag read_tag_{*this, Op::kRead};
  OpTag writes_done_tag_{*this, Op::kWritesDone};
  OpTag finish_tag_{*this, Op::kFinish};
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> stream_;
  grpc::ByteBuffer answer_;  // the outstanding Read's
  bool lookup_ = false;
  v1::TopKStreamResponse response_;
  v1::LookupStreamResponse lookup_response_;
  grpc::Status status_;  // Finish's

  std::mutex mu_;                  // guards everything below
  std::deque<Pending> to_send_;    // waiting for the write slot
  std::deque<Pending> in_flight_;  // written (or being written), answers due in this order
  bool started_ = false;
  bool broken_ = false;  // start, a write or a read failed: no more writes
  bool writing_ = false;
  bool reading_ = false;
  bool closing_ = false;
  bool writes_done_sent_ = false;
  bool writes_done_pending_ = false;
  bool finishing_ = false;
};

// The state of one level: its clock, workers, calls and streams.
class LevelRun {
 public:
  LevelRun(const BenchOptions& options, const RequestPool& pool,
           const std::vector<std::shared_ptr<grpc::Channel>>& channels, const LevelSpec& spec)
      : options_(options), pool_(pool), spec_(spec) {
    for (const std::shared_ptr<grpc::Channel>& channel : channels) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    }
    // Closed loop: slot i runs on thread i % threads, so threads past the concurrency would only
    // poll (and steal wake-ups from the ones that work).
    const int threads = spec.rate > 0 ? options.ResolvedThreads()
                                      : std::min(options.ResolvedThreads(), spec.concurrency);
    for (int i = 0; i < threads; ++i) {
      workers_.push_back(std::make_unique<Worker>());
      workers_.back()->rng.seed(options.seed * 7919 + static_cast<uint64_t>(i));
    }
  }

  absl::StatusOr<LevelStats> Run(const std::function<void(const Progress&)>& on_progress);

  // Called on worker threads as calls complete.
  template <typename Response>
  void OnUnaryDone(int worker, int channel, const PooledRequest& request,
                   Clock::time_point scheduled, const grpc::Status& status, Response& response);
  // A stream's answer (or its failure: `response` null, `code` non-zero).
  template <typename Response>
  void OnStreamAnswer(int worker, const PooledRequest& request, Clock::time_point scheduled,
                      int code, Response* response, absl::string_view message = "");
  // Closed loop: what a stream slot sends next, or null once the window is over.
  const PooledRequest* NextForClosedStream(int worker);
  void StreamFinished() { live_.fetch_sub(1); }
  bool open_loop() const { return spec_.rate > 0; }
  absl::Duration answer_pause() const { return options_.answer_pause; }
  bool lookup() const { return options_.workload.lookup.has_value(); }

 private:
  void StartUnary(int worker, int channel, const PooledRequest& request,
                  Clock::time_point scheduled);
  template <typename Response>
  void Record(Worker& worker, const PooledRequest& request, Clock::time_point scheduled,
              Clock::time_point answered, int code, Response* response, absl::string_view message);
  const PooledRequest& Pick(std::mt19937_64& rng) const {
    return pool_[std::uniform_int_distribution<size_t>(0, pool_.size() - 1)(rng)];
  }
  void Schedule();  // the open-loop scheduler thread
  void ReportProgress(const std::function<void(const Progress&)>& on_progress,
                      const char* phase) const;
  void TrimSamples();

  const BenchOptions& options_;
  const RequestPool& pool_;
  const LevelSpec spec_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::unique_ptr<StreamCall>> streams_;
  LevelStats scheduler_stats_;  // the scheduler thread's: send lags, refused stream sends

  Clock::time_point start_;
  Clock::time_point measure_start_;
  Clock::time_point measure_end_;
  std::atomic<int64_t> live_{0};       // unary calls and streams not yet done
  std::atomic<int64_t> in_flight_{0};  // requests sent and not yet answered or failed
};

void UnaryCall::Done(bool /*ok*/) {
  std::unique_ptr<UnaryCall> self(this);  // the queue hands the call back: it ends here
  const auto deliver = [this](auto& response) {
    if (status_.ok() && !ParseAnswer(answer_, &response)) {
      status_ = grpc::Status(grpc::StatusCode::INTERNAL, "the answer does not parse");
    }
    run_.OnUnaryDone(worker_, channel_, request_, scheduled_, status_, response);
  };
  if (lookup_) {
    v1::LookupResponse response;
    deliver(response);
  } else {
    v1::TopKResponse response;
    deliver(response);
  }
}

void StreamCall::Open(grpc::GenericStub& stub, grpc::CompletionQueue& cq,
                      Clock::time_point deadline, bool lookup) {
  lookup_ = lookup;
  context_.set_deadline(std::chrono::system_clock::now() + (deadline - Clock::now()));
  std::lock_guard<std::mutex> lock(mu_);
  stream_ = stub.PrepareCall(&context_, lookup ? kLookupStreamMethod : kTopKStreamMethod, &cq);
  stream_->StartCall(&start_tag_);
}

bool StreamCall::Enqueue(const PooledRequest& request, Clock::time_point scheduled) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finishing_ || writes_done_sent_) return false;
  to_send_.push_back({&request, scheduled});
  if (started_ && !broken_ && !writing_) StartWriteLocked();
  return true;
}

void StreamCall::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closing_ = true;
  MaybeCloseOrFinishLocked();
}

void StreamCall::StartWriteLocked() {
  in_flight_.push_back(to_send_.front());
  to_send_.pop_front();
  writing_ = true;
  stream_->Write(in_flight_.back().request->buffer, &write_tag_);
}

void StreamCall::MaybeCloseOrFinishLocked() {
  if (!started_ || finishing_) return;
  if (closing_ && !broken_ && !writes_done_sent_ && !writing_ && to_send_.empty() &&
      in_flight_.empty()) {
    writes_done_sent_ = true;
    writes_done_pending_ = true;
    stream_->WritesDone(&writes_done_tag_);
    return;
  }
  // Finish once no more answers can come (the Read failed) and no write is outstanding.
  if (!reading_ && !writing_ && !writes_done_pending_) {
    finishing_ = true;
    stream_->Finish(&status_, &finish_tag_);
  }
}

void StreamCall::OnDone(Op op, bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  switch (op) {
    case Op::kStart:
      started_ = true;
      if (!ok) {
        broken_ = true;
      } else {
        reading_ = true;
        stream_->Read(&answer_, &read_tag_);
        if (!writing_ && !to_send_.empty()) StartWriteLocked();
      }
      break;
    case Op::kWrite:
      writing_ = false;
      if (!ok) broken_ = true;
      if (!broken_ && !to_send_.empty()) StartWriteLocked();
      break;
    case Op::kWritesDone:
      writes_done_pending_ = false;
      break;
    case Op::kRead: {
      if (!ok) {
        reading_ = false;
        broken_ = true;
        break;
      }
      if (in_flight_.empty()) {  // an answer to nothing: the server broke the protocol
        reading_ = false;
        broken_ = true;
        context_.TryCancel();
        break;
      }
      const Pending answered = in_flight_.front();
      in_flight_.pop_front();
      lock.unlock();
      if (lookup_) {
        Deliver(lookup_response_, answered);
      } else {
        Deliver(response_, answered);
      }
      if (run_.answer_pause() > absl::ZeroDuration()) absl::SleepFor(run_.answer_pause());
      lock.lock();
      // Closed loop: the slot sends its next request on this stream, unless the window is over or
      // Close sent WritesDone while the lock was free (a write after it is API misuse). Decided
      // under the lock, so a later Close waits for this request's answer.
      if (!run_.open_loop()) {
        const PooledRequest* next = writes_done_sent_ ? nullptr : run_.NextForClosedStream(worker_);
        if (next != nullptr) {
          to_send_.push_back({next, Clock::now()});
          if (!broken_ && !writing_) StartWriteLocked();
        } else {
          closing_ = true;
        }
      }
      stream_->Read(&answer_, &read_tag_);
      break;
    }
    case Op::kFinish: {
      // Whatever was not answered failed with the stream's status.
      const int code = status_.ok() ? static_cast<int>(grpc::StatusCode::UNKNOWN)
                                    : static_cast<int>(status_.error_code());
      std::deque<Pending> unanswered;
      unanswered.swap(in_flight_);
      unanswered.insert(unanswered.end(), to_send_.begin(), to_send_.end());
      to_send_.clear();
      lock.unlock();
      for (const Pending& pending : unanswered) {
        // A failure: the answer type does not matter.
        run_.OnStreamAnswer(worker_, *pending.request, pending.scheduled, code,
                            static_cast<v1::TopKResponse*>(nullptr), status_.error_message());
      }
      run_.StreamFinished();  // last: the level may end right after
      return;
    }
  }
  MaybeCloseOrFinishLocked();
}

template <typename StreamResponse>
void StreamCall::Deliver(StreamResponse& response, const Pending& answered) {
  response.Clear();
  if (!ParseAnswer(answer_, &response)) {
    response.mutable_error()->set_code(static_cast<int>(grpc::StatusCode::INTERNAL));
  }
  if (response.has_result()) {
    run_.OnStreamAnswer(worker_, *answered.request, answered.scheduled, 0,
                        response.mutable_result());
  } else {
    const int code = response.has_error() ? response.error().code()
                                          : static_cast<int>(grpc::StatusCode::UNKNOWN);
    run_.OnStreamAnswer(worker_, *answered.request, answered.scheduled, code == 0 ? 2 : code,
                        decltype(response.mutable_result())(nullptr), response.error().message());
  }
}

void LevelRun::StartUnary(int worker, int channel, const PooledRequest& request,
                          Clock::time_point scheduled) {
  live_.fetch_add(1);
  in_flight_.fetch_add(1);
  auto call = std::make_unique<UnaryCall>(*this, worker, channel, request, scheduled);
  call->Start(*stubs_[channel], workers_[worker]->cq, options_.deadline, lookup());
  call.release();  // owned by the completion queue until UnaryCall::Done
}

template <typename Response>
void LevelRun::OnUnaryDone(int worker, int channel, const PooledRequest& request,
                           Clock::time_point scheduled, const grpc::Status& status,
                           Response& response) {
  const Clock::time_point now = Clock::now();
  Worker& self = *workers_[worker];
  Record(self, request, scheduled, now, static_cast<int>(status.error_code()),
         status.ok() ? &response : nullptr, status.error_message());
  // Closed loop: the slot sends again at once, until the window ends. The new call counts as
  // live before this one stops counting, so live_ reaches 0 only when the level is done.
  if (!open_loop() && now < measure_end_) StartUnary(worker, channel, Pick(self.rng), now);
  in_flight_.fetch_sub(1);
  live_.fetch_sub(1);
}

template <typename Response>
void LevelRun::OnStreamAnswer(int worker, const PooledRequest& request, Clock::time_point scheduled,
                              int code, Response* response, absl::string_view message) {
  Record(*workers_[worker], request, scheduled, Clock::now(), code, response, message);
  in_flight_.fetch_sub(1);
}

const PooledRequest* LevelRun::NextForClosedStream(int worker) {
  if (Clock::now() >= measure_end_) return nullptr;
  in_flight_.fetch_add(1);
  return &Pick(workers_[worker]->rng);
}

template <typename Response>
void LevelRun::Record(Worker& worker, const PooledRequest& request, Clock::time_point scheduled,
                      Clock::time_point answered, int code, Response* response,
                      absl::string_view message) {
  (code == 0 ? worker.answered : worker.failed).fetch_add(1, std::memory_order_relaxed);
  if (scheduled < measure_start_ || scheduled >= measure_end_) return;
  LevelStats& stats = worker.stats;
  if (code != 0) {
    if (++stats.errors[code] == 1) stats.first_messages[code] = std::string(message);
    return;
  }
  ++stats.ok;
  stats.rows += request.rows;
  stats.payload_bytes += request.scores_bytes + AnswerBytes(*response);
  stats.outputs += request.outputs;
  stats.table_bytes += request.table_bytes;
  stats.latency_ns.Record(Nanoseconds(answered - scheduled));
  const v1::Timing& timing = response->timing();
  if (timing.batch_rows() > 0) {
    stats.batch_rows.Record(timing.batch_rows());
    stats.queue_us.Record(timing.queue_us());
    stats.compute_us.Record(timing.compute_us());
    stats.executor_seconds +=
        1e-6 * static_cast<double>(timing.compute_us()) *
        std::min(1.0, static_cast<double>(request.rows) / timing.batch_rows());
  }
  // Reservoir sampling: every successful answer of the window is kept with equal probability.
  const auto wanted = static_cast<uint64_t>(options_.verify);
  if (wanted == 0) return;
  const uint64_t index = worker.sampled_from++;
  if (index < wanted) {
    stats.samples.emplace_back();
    stats.samples.back().request = &request;
    KeepAnswer(stats.samples.back(), std::move(*response));
  } else if (const uint64_t slot = std::uniform_int_distribution<uint64_t>(0, index)(worker.rng);
             slot < wanted) {
    stats.samples[slot] = Sample();
    stats.samples[slot].request = &request;
    KeepAnswer(stats.samples[slot], std::move(*response));
  }
}

void LevelRun::Schedule() {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake on time (the default slack is 50 us)
#endif
  std::mt19937_64 rng(options_.seed * 104729 + 17);
  std::exponential_distribution<double> gap(spec_.rate);
  const int threads = static_cast<int>(workers_.size());
  const int channels = static_cast<int>(stubs_.size());
  double offset_s = 0;  // of the next send from start_; accumulated in double, no drift
  for (uint64_t i = 0;; ++i) {
    const Clock::time_point scheduled = start_ + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(offset_s));
    if (scheduled >= measure_end_) break;
    offset_s += options_.arrivals == Arrivals::kPoisson ? gap(rng) : 1.0 / spec_.rate;
    std::this_thread::sleep_until(scheduled);
    while (in_flight_.load() >= options_.max_outstanding && Clock::now() < measure_end_) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const Clock::time_point now = Clock::now();
    if (scheduled >= measure_start_)
      scheduler_stats_.send_lag_ns.Record(Nanoseconds(now - scheduled));
    const PooledRequest& request = Pick(rng);
    if (streams_.empty()) {
      StartUnary(static_cast<int>(i % threads), static_cast<int>(i % channels), request, scheduled);
      continue;
    }
    StreamCall& stream = *streams_[i % streams_.size()];
    in_flight_.fetch_add(1);
    if (!stream.Enqueue(request, scheduled)) {
      in_flight_.fetch_sub(1);
      if (scheduled >= measure_start_) {
        ++scheduler_stats_.errors[static_cast<int>(grpc::StatusCode::UNAVAILABLE)];
      }
    }
  }
}

void LevelRun::ReportProgress(const std::function<void(const Progress&)>& on_progress,
                              const char* phase) const {
  if (!on_progress) return;
  Progress progress;
  progress.phase = phase;
  progress.elapsed_s = Seconds(Clock::now() - start_);
  progress.total_s = Seconds(measure_end_ - start_);
  for (const std::unique_ptr<Worker>& worker : workers_) {
    progress.answered += worker->answered.load(std::memory_order_relaxed);
    progress.failed += worker->failed.load(std::memory_order_relaxed);
  }
  progress.in_flight = in_flight_.load();
  on_progress(progress);
}

void LevelRun::TrimSamples() {
  // Each worker kept a uniform sample of its own answers; take from each in proportion to how many
  // answers it saw, so the union is (close to) a uniform sample of all.
  uint64_t total = 0;
  for (const std::unique_ptr<Worker>& worker : workers_) total += worker->sampled_from;
  const auto wanted = static_cast<uint64_t>(options_.verify);
  for (const std::unique_ptr<Worker>& worker : workers_) {
    if (total == 0) break;
    const uint64_t share =
        std::min<uint64_t>(worker->stats.samples.size(),
                           (wanted * worker->sampled_from + total - 1) / total);  // rounded up
    std::vector<Sample>& samples = worker->stats.samples;
    samples.resize(std::min<uint64_t>(samples.size(), share));
  }
}

absl::StatusOr<LevelStats> LevelRun::Run(const std::function<void(const Progress&)>& on_progress) {
  for (std::unique_ptr<Worker>& worker : workers_) {
    Worker* self = worker.get();
    self->thread = std::thread([self] {
      void* tag = nullptr;
      bool ok = false;
      while (self->cq.Next(&tag, &ok)) static_cast<Tag*>(tag)->Done(ok);
    });
  }
  start_ = Clock::now();
  measure_start_ = start_ + absl::ToChronoNanoseconds(options_.warmup);
  measure_end_ = measure_start_ + absl::ToChronoNanoseconds(options_.duration);
  const int threads = static_cast<int>(workers_.size());
  const int channels = static_cast<int>(stubs_.size());
  const bool stream_mode = options_.workload.mode == CallMode::kStream;
  // Streams outlive their calls by the deadline; past it they end with DEADLINE_EXCEEDED.
  const Clock::time_point stream_deadline =
      measure_end_ + absl::ToChronoNanoseconds(options_.deadline);

  std::thread scheduler;
  if (stream_mode) {
    const int streams = open_loop() ? std::max(channels, threads) : spec_.concurrency;
    for (int i = 0; i < streams; ++i) {
      streams_.push_back(std::make_unique<StreamCall>(*this, i % threads, i % channels));
      live_.fetch_add(1);
      streams_.back()->Open(*stubs_[i % channels], workers_[i % threads]->cq, stream_deadline,
                            lookup());
    }
  }
  if (open_loop()) {
    scheduler = std::thread([this] { Schedule(); });
  } else {
    std::mt19937_64 rng(options_.seed);
    for (int slot = 0; slot < spec_.concurrency; ++slot) {
      if (stream_mode) {
        in_flight_.fetch_add(1);
        streams_[slot]->Enqueue(Pick(rng), start_);
      } else {
        StartUnary(slot % threads, slot % channels, Pick(rng), start_);
      }
    }
  }

  // Warm-up and window: report progress until the window ends; the process's CPU time is read
  // at both ends of the window.
  double cpu_at_start = -1;
  double cpu_at_end = 0;
  double server_cpu_at_start = -1;
  double server_cpu_at_end = -1;
  while (true) {
    const Clock::time_point now = Clock::now();
    if (cpu_at_start < 0 && now >= measure_start_) {
      cpu_at_start = ProcessCpuSeconds();
      server_cpu_at_start = OtherProcessCpuSeconds(options_.server_pid);
    }
    if (now >= measure_end_) {
      cpu_at_end = ProcessCpuSeconds();
      server_cpu_at_end = OtherProcessCpuSeconds(options_.server_pid);
      break;
    }
    const Clock::time_point edge = now < measure_start_ ? measure_start_ : measure_end_;
    std::this_thread::sleep_until(std::min(edge, now + std::chrono::milliseconds(200)));
    ReportProgress(on_progress, Clock::now() < measure_start_ ? "warm-up" : "measure");
  }
  if (scheduler.joinable()) scheduler.join();
  for (std::unique_ptr<StreamCall>& stream : streams_) stream->Close();

  // Drain: every call ends by its deadline; allow that and a margin before calling it stuck.
  const Clock::time_point give_up =
      Clock::now() + absl::ToChronoNanoseconds(options_.deadline) + std::chrono::seconds(10);
  absl::Status drained = absl::OkStatus();
  while (live_.load() > 0) {
    if (Clock::now() > give_up) {
      drained = absl::DeadlineExceededError(
          absl::StrCat(live_.load(), " calls or streams still open ",
                       absl::FormatDuration(options_.deadline + absl::Seconds(10)),
                       " after the level ended, past their deadlines"));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ReportProgress(on_progress, "drain");
  }
  if (!drained.ok()) {
    // Calls that never complete keep their queues from draining; leave the threads (the process
    // is about to exit with this error).
    for (std::unique_ptr<Worker>& worker : workers_) worker->thread.detach();
    return drained;
  }
  for (std::unique_ptr<Worker>& worker : workers_) worker->cq.Shutdown();
  for (std::unique_ptr<Worker>& worker : workers_) worker->thread.join();

  TrimSamples();
  LevelStats merged;
  for (std::unique_ptr<Worker>& worker : workers_) merged.Merge(std::move(worker->stats));
  merged.Merge(std::move(scheduler_stats_));
  if (merged.samples.size() > static_cast<size_t>(options_.verify)) {
    merged.samples.resize(options_.verify);
  }
  merged.seconds = absl::ToDoubleSeconds(options_.duration);
  merged.lookup = lookup();
  merged.cpu_seconds = cpu_at_end - cpu_at_start;
  merged.server_cpu_seconds = server_cpu_at_start >= 0 && server_cpu_at_end >= 0
                                  ? server_cpu_at_end - server_cpu_at_start
                                  : -1;
  return merged;
}

}  // namespace

void LevelStats::Merge(LevelStats&& other) {
  seconds = std::max(seconds, other.seconds);
  cpu_seconds += other.cpu_seconds;
  ok += other.ok;
  rows += other.rows;
  payload_bytes += other.payload_bytes;
  lookup = lookup || other.lookup;
  outputs += other.outputs;
  table_bytes += other.table_bytes;
  for (const auto& [code, count] : other.errors) errors[code] += count;
  first_messages.merge(other.first_messages);  // keeps this one's where both have a code
  latency_ns.Merge(other.latency_ns);
  batch_rows.Merge(other.batch_rows);
  queue_us.Merge(other.queue_us);
  compute_us.Merge(other.compute_us);
  executor_seconds += other.executor_seconds;
  send_lag_ns.Merge(other.send_lag_ns);
  for (Sample& sample : other.samples) samples.push_back(std::move(sample));
}

uint64_t LevelStats::error_count() const {
  uint64_t count = 0;
  for (const auto& [code, n] : errors) count += n;
  return count;
}

std::string StatusCodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

LoadGenerator::LoadGenerator(const BenchOptions& options, const RequestPool& pool,
                             std::vector<std::shared_ptr<grpc::Channel>> channels)
    : options_(options), pool_(pool), channels_(std::move(channels)) {}

absl::StatusOr<LevelStats> LoadGenerator::Run(
    const LevelSpec& level, const std::function<void(const Progress&)>& on_progress) {
  // On failure the run (and calls that may still reference it) must stay alive: leak it then.
  auto run = std::make_unique<LevelRun>(options_, pool_, channels_, level);
  absl::StatusOr<LevelStats> stats = run->Run(on_progress);
  if (!stats.ok()) run.release();
  return stats;
}

}  // namespace pkserve::bench
