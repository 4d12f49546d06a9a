#include "client/bench/echo_server.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"

namespace pkserve::bench {
namespace {

// Larger answers than this are refused: no real request asks for them, and a fuzzed one must not
// make the baseline allocate gigabytes.
constexpr uint64_t kMaxEchoResponseBytes = uint64_t{1} << 30;

// Finishes unary reactors once their delay has passed, on its own thread ("echo-delay").
class Delayer {
 public:
  Delayer() : thread_([this] { Loop(); }) {}
  ~Delayer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  void FinishAt(std::chrono::steady_clock::time_point due, grpc::ServerUnaryReactor* reactor) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push({due, reactor});
    }
    wake_.notify_one();
  }

 private:
  struct Pending {
    std::chrono::steady_clock::time_point due;
    grpc::ServerUnaryReactor* reactor;
    bool operator>(const Pending& other) const { return due > other.due; }
  };

  // Finishes every reactor when due; when stopping, all that are left at once.
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (pending_.empty()) {
        if (stopping_) return;
        wake_.wait(lock);
        continue;
      }
      const Pending next = pending_.top();
      if (!stopping_ && std::chrono::steady_clock::now() < next.due) {
        wake_.wait_until(lock, next.due);
        continue;
      }
      pending_.pop();
      lock.unlock();
      next.reactor->Finish(grpc::Status::OK);
      lock.lock();
    }
  }

  std::mutex mu_;  // guards pending_ and stopping_
  std::condition_variable wake_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

// Fills a stream's answer to one request (pkserve's answer shape, or its error).
absl::Status FillStreamAnswer(const v1::TopKRequest& request,
                              const std::vector<v1::MemoryInfo>& /*memories*/,
                              v1::TopKResponse* response) {
  return FillEchoResponse(request, response);
}
absl::Status FillStreamAnswer(const v1::LookupRequest& request,
                              const std::vector<v1::MemoryInfo>& memories,
                              v1::LookupResponse* response) {
  return FillEchoLookupResponse(request, memories, response);
}

// Answers each request of a TopKStream (or LookupStream) in order, one at a time, as the echo
// does a unary call.
template <typename Request, typename StreamResponse>
class EchoStream final : public grpc::ServerBidiReactor<Request, StreamResponse> {
 public:
  explicit EchoStream(const std::vector<v1::MemoryInfo>& memories) : memories_(memories) {
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      this->Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    absl::Status filled = FillStreamAnswer(request_, memories_, response_.mutable_result());
    if (!filled.ok()) {
      response_.mutable_error()->set_code(static_cast<int>(filled.code()));
      response_.mutable_error()->set_message(std::string(filled.message()));
    }
    response_.set_request_id(request_.request_id());
    this->StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke while answering"));
      return;
    }
    this->StartRead(&request_);
  }

  void OnDone() override { delete this; }  // the reactor owns itself, as gRPC's API expects

 private:
  const std::vector<v1::MemoryInfo>& memories_;  // the service's, which outlives its streams
  Request request_;
  StreamResponse response_;
};

class EchoService final : public v1::SparseMemory::CallbackService {
 public:
  EchoService(absl::Duration delay, std::vector<v1::MemoryInfo> memories)
      : delay_(delay), memories_(std::move(memories)) {}

  grpc::ServerUnaryReactor* TopK(grpc::CallbackServerContext* context,
                                 const v1::TopKRequest* request,
                                 v1::TopKResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    absl::Status filled = FillEchoResponse(*request, response);
    if (!filled.ok()) {
      reactor->Finish(grpc::Status(static_cast<grpc::StatusCode>(filled.code()),
                                   std::string(filled.message())));
    } else if (delay_ > absl::ZeroDuration()) {
      delayer_.FinishAt(std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(delay_),
                        reactor);
    } else {
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

  grpc::ServerBidiReactor<v1::TopKRequest, v1::TopKStreamResponse>* TopKStream(
      grpc::CallbackServerContext* /*context*/) override {
    // Deletes itself in OnDone.
    return new EchoStream<v1::TopKRequest, v1::TopKStreamResponse>(memories_);
  }

  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const v1::LookupRequest* request,
                                   v1::LookupResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    absl::Status filled = FillEchoLookupResponse(*request, memories_, response);
    if (!filled.ok()) {
      reactor->Finish(grpc::Status(static_cast<grpc::StatusCode>(filled.code()),
                                   std::string(filled.message())));
    } else if (delay_ > absl::ZeroDuration()) {
      delayer_.FinishAt(std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(delay_),
                        reactor);
    } else {
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

  grpc::ServerBidiReactor<v1::LookupRequest, v1::LookupStreamResponse>* LookupStream(
      grpc::CallbackServerContext* /*context*/) override {
    // Deletes itself in OnDone.
    return new EchoStream<v1::LookupRequest, v1::LookupStreamResponse>(memories_);
  }

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::ServerInfoRequest* /*request*/,
                                          v1::ServerInfo* response) override {
    response->set_version("echo");
    response->set_backend("echo");
    response->add_devices("echo: no top-k, answers of pkserve's size");
    for (const v1::MemoryInfo& memory : memories_) *response->add_memories() = memory;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const absl::Duration delay_;
  const std::vector<v1::MemoryInfo> memories_;
  Delayer delayer_;
};

class EchoServerImpl final : public EchoServer {
 public:
  explicit EchoServerImpl(const EchoOptions& options) : service_(options.delay, options.memories) {}
  ~EchoServerImpl() override {
    // Cancels what is still open; delayed answers finish from the delayer, destroyed after.
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  absl::Status Start(const std::string& address) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    builder.SetMaxReceiveMessageSize(-1);
    builder.SetMaxSendMessageSize(-1);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) {
      return absl::UnavailableError(
          absl::StrCat("the echo baseline server cannot listen on ", address));
    }
    address_ = absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
    return absl::OkStatus();
  }

  const std::string& address() const override { return address_; }

 private:
  EchoService service_;  // outlives server_ (declared first, destroyed last)
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace

absl::Status FillEchoResponse(const v1::TopKRequest& request, v1::TopKResponse* response) {
  uint64_t product = 1;
  for (uint32_t width : request.factor_widths()) {
    product = std::min<uint64_t>(product * std::max<uint32_t>(width, 1), uint64_t{1} << 40);
  }
  const uint64_t kk = std::min<uint64_t>(request.k(), product);
  const uint64_t element_bytes = request.dtype() == v1::DTYPE_BFLOAT16 ? 2 : 4;
  const uint64_t pairs = uint64_t{request.rows()} * kk;
  if (pairs * (element_bytes + 4) > kMaxEchoResponseBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the echo answers at most ", kMaxEchoResponseBytes,
                     " bytes; rows x kk = ", pairs, " pairs is more"));
  }
  response->set_rows(request.rows());
  response->set_kk(static_cast<uint32_t>(kk));
  response->set_dtype(request.dtype());
  response->mutable_values()->resize(pairs * element_bytes);
  response->mutable_slots()->resize(pairs * 4);
  response->set_request_id(request.request_id());
  response->mutable_timing()->set_batch_rows(request.rows());
  return absl::OkStatus();
}

absl::Status FillEchoLookupResponse(const v1::LookupRequest& request,
                                    const std::vector<v1::MemoryInfo>& memories,
                                    v1::LookupResponse* response) {
  const v1::MemoryInfo* memory = nullptr;
  std::vector<std::string> names;
  for (const v1::MemoryInfo& held : memories) {
    if (held.name() == request.memory()) memory = &held;
    names.push_back(held.name());
  }
  if (memory == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "memory '", request.memory(),
        "' is not held; the echo holds: ", names.empty() ? "none" : absl::StrJoin(names, ", ")));
  }
  const uint32_t heads = std::max<uint32_t>(request.heads(), 1);
  if (request.rows() == 0 || request.rows() % heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rows must be a positive multiple of heads (",
                                                   heads, "), got ", request.rows()));
  }
  const uint64_t outputs = request.rows() / heads;
  const v1::DType dtype =
      request.output_dtype() == v1::DTYPE_UNSPECIFIED ? memory->dtype() : request.output_dtype();
  const uint64_t element_bytes = dtype == v1::DTYPE_BFLOAT16 ? 2 : 4;
  const uint64_t kk = std::min<uint64_t>(request.k(), memory->slots());
  const uint64_t pairs = request.return_slots() ? uint64_t{request.rows()} * kk : 0;
  const uint64_t bytes = outputs * memory->dim() * element_bytes + pairs * 8;
  if (bytes > kMaxEchoResponseBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the echo answers at most ",
                                                   kMaxEchoResponseBytes, " bytes; this lookup's ",
                                                   bytes, " is more"));
  }
  response->set_outputs(static_cast<uint32_t>(outputs));
  response->set_dim(memory->dim());
  response->set_dtype(dtype);
  response->mutable_values()->resize(outputs * memory->dim() * element_bytes);
  if (request.return_slots()) {
    response->set_kk(static_cast<uint32_t>(kk));
    response->mutable_slots()->resize(pairs * 4);
    response->mutable_weights()->resize(pairs * 4);
  }
  response->set_request_id(request.request_id());
  response->mutable_timing()->set_batch_rows(request.rows());
  response->set_memory_version(memory->version());
  return absl::OkStatus();
}

std::string EchoMemoryFlag(const v1::MemoryInfo& memory) {
  return absl::StrCat(memory.name(), ":", absl::StrJoin(memory.factor_widths(), "x"), ":",
                      memory.dim(), ":", static_cast<int>(memory.dtype()));
}

absl::StatusOr<v1::MemoryInfo> ParseEchoMemory(absl::string_view text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  const auto bad = [text](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--echo_memory must be NAME:W0xW1[x...]:DIM:DTYPE, got '", text, "' (", what, ")"));
  };
  if (parts.size() != 4 || parts[0].empty()) return bad("four fields, a name first");
  v1::MemoryInfo memory;
  memory.set_name(parts[0]);
  uint64_t slots = 1;
  for (absl::string_view width : absl::StrSplit(parts[1], 'x')) {
    uint32_t value = 0;
    if (!absl::SimpleAtoi(width, &value) || value == 0) return bad("a width");
    memory.add_factor_widths(value);
    slots *= value;
  }
  uint32_t dim = 0;
  int dtype = 0;
  if (!absl::SimpleAtoi(parts[2], &dim) || dim == 0) return bad("dim");
  if (!absl::SimpleAtoi(parts[3], &dtype) || !v1::DType_IsValid(dtype)) return bad("dtype");
  memory.set_slots(slots);
  memory.set_dim(dim);
  memory.set_dtype(static_cast<v1::DType>(dtype));
  memory.set_version(1);
  return memory;
}

absl::StatusOr<std::unique_ptr<EchoServer>> EchoServer::Start(const EchoOptions& options) {
  auto server = std::make_unique<EchoServerImpl>(options);
  if (absl::Status started = server->Start(options.address); !started.ok()) return started;
  return server;
}

}  // namespace pkserve::bench
