// Hostile callers against the real pkserve binary (a child process on loopback): random bytes as
// the message, well-formed requests with hostile shapes (huge declared rows with a tiny payload),
// messages at and just over the size limit, streams that send and never read, malformed HTTP/2
// frames, and callers that cancel or drop the connection halfway through a request.
//
// Throughout, a well-behaved caller (Probe) keeps sending valid requests and must get every
// answer right, bit for bit; afterwards the server must still be SERVING, drain on SIGTERM and
// exit 0 with nothing from a sanitizer in its log.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "server/validation.h"
#include "tests/reliability/probe.h"
#include "tests/reliability/raw_http2.h"
#include "tests/server/pkserve_process.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::CheckResponse;
using testing::ChildServer;
using testing::MakeProblem;
using testing::Probe;
using testing::RandomRequest;

constexpr int64_t kMaxMessageBytes = 1 << 20;
constexpr uint32_t kMaxRowsPerRequest = 1024;
constexpr char kTopKMethod[] = "/pkserve.v1.SparseMemory/TopK";
constexpr char kTopKStreamMethod[] = "/pkserve.v1.SparseMemory/TopKStream";

std::shared_ptr<grpc::Channel> NewChannel(const std::string& target) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  // A channel of its own each time: abuse on one connection must not ride on the probe's.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
}

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

std::string RandomBytes(std::mt19937_64& engine, size_t size) {
  std::string bytes(size, '\0');
  for (char& byte : bytes) byte = static_cast<char>(engine() & 0xff);
  return bytes;
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));  // the same numbers
}

class AbuseTest : public ::testing::Test {
 protected:
  void StartServer(const std::vector<std::string>& extra_flags = {}) {
    std::vector<std::string> flags = {"--backend=cpu",
                                      "--threads=2",
                                      "--drain_timeout_s=5",
                                      absl::StrCat("--max_message_bytes=", kMaxMessageBytes),
                                      absl::StrCat("--max_rows_per_request=", kMaxRowsPerRequest),
                                      "--max_queued_rows=16384"};
    flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
    server_ = std::make_unique<ChildServer>(PKSERVE_BINARY, flags);
    ASSERT_GT(server_->port(), 0);
    probe_ = std::make_unique<Probe>(NewChannel(server_->target()));
    ASSERT_TRUE(probe_->WaitForMore(5, absl::Seconds(20))) << "no answers before the abuse";
  }

  // After the abuse: the probe got only exact answers (and some more since), the server is
  // SERVING, drains on SIGTERM and exits 0, and no sanitizer reported anything.
  void ExpectUnharmed() {
    ASSERT_NE(server_, nullptr);
    EXPECT_TRUE(probe_->WaitForMore(5, absl::Seconds(20)))
        << "the server stopped answering correct requests; log:\n"
        << server_->log();
    probe_->Stop();
    for (const std::string& failure : probe_->failures()) {
      ADD_FAILURE() << "a correct request went wrong during the abuse: " << failure;
    }
    ASSERT_TRUE(server_->running()) << "pkserve died; log:\n" << server_->log();

    auto health = grpc::health::v1::Health::NewStub(NewChannel(server_->target()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health->Check(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

    server_->Signal(SIGTERM);
    const std::optional<int> exit = server_->WaitExit(absl::Seconds(5 + 15));
    ASSERT_TRUE(exit.has_value()) << "pkserve did not exit after SIGTERM; log:\n" << server_->log();
    EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0)
        << "wait status " << *exit << "; log:\n"
        << server_->log();
    const std::string log = server_->log();
    for (const char* report : {"Sanitizer", "runtime error:"}) {
      EXPECT_EQ(log.find(report), std::string::npos) << "a sanitizer spoke; log:\n" << log;
    }
  }

  std::unique_ptr<ChildServer> server_;
  std::unique_ptr<Probe> probe_;
  std::mt19937_64 engine_{2024};
};

// A unary call with raw bytes as the message, waited for at most 20 s.
grpc::Status CallWithBytes(grpc::GenericStub& stub, const std::string& method,
                           const std::string& bytes, grpc::ByteBuffer* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  const grpc::ByteBuffer request = ToByteBuffer(bytes);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  return done.get_future().get();
}

TEST_F(AbuseTest, RandomBytesAndMutatedRequestsAreRefusedOrAnsweredExactly) {
  StartServer();
  // Parsing noise here makes protobuf log each string field that is not UTF-8: quiet.
  google::protobuf::LogSilencer quiet;
  grpc::GenericStub stub(NewChannel(server_->target()));
  std::map<std::string, int> codes;
  // Pure noise, of every length up to a few KiB.
  for (int i = 0; i < 300; ++i) {
    const size_t size = i % 3 == 0 ? engine_() % 16 : engine_() % 4096;
    const std::string bytes = RandomBytes(engine_, size);
    grpc::ByteBuffer response;
    const grpc::Status status = CallWithBytes(stub, kTopKMethod, bytes, &response);
    ++codes[CodeName(status.error_code())];
    v1::TopKRequest parsed;
    const bool valid =
        parsed.ParseFromString(bytes) && ValidateTopKRequest(parsed, kMaxRowsPerRequest).ok();
    if (!valid) {
      // INVALID_ARGUMENT, from validation or, for bytes that are not a TopKRequest at all, from
      // the service's own parsing, with a message that says which.
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << "noise of " << size << " bytes: " << CodeName(status.error_code()) << " '"
          << status.error_message() << "'";
      EXPECT_FALSE(status.error_message().empty()) << "noise of " << size << " bytes";
      if (!parsed.ParseFromString(bytes)) {
        EXPECT_NE(status.error_message().find("not a pkserve.v1.TopKRequest"), std::string::npos)
            << status.error_message();
      }
    }
  }
  // Valid requests with a few bytes flipped, cut short or extended: whatever still parses and
  // validates must be answered exactly; the rest refused.
  const std::vector<pk::Problem> shapes = {MakeProblem({64, 64}, 8, pk::DType::kFloat32),
                                           MakeProblem({32, 16, 8}, 4, pk::DType::kBFloat16)};
  int answered = 0;
  for (int i = 0; i < 400; ++i) {
    std::string bytes;
    ASSERT_TRUE(RandomRequest(shapes[i % 2], 1 + engine_() % 3, engine_, "mutant")
                    .SerializeToString(&bytes));
    switch (engine_() % 4) {
      case 0:
      case 1:
        for (int flips = 1 + engine_() % 4; flips > 0; --flips) {
          bytes[engine_() % bytes.size()] ^= static_cast<char>(1 + engine_() % 255);
        }
        break;
      case 2:
        bytes.resize(engine_() % bytes.size());
        break;
      default:
        bytes += RandomBytes(engine_, 1 + engine_() % 32);
        break;
    }
    grpc::ByteBuffer response_bytes;
    const grpc::Status status = CallWithBytes(stub, kTopKMethod, bytes, &response_bytes);
    ++codes[CodeName(status.error_code())];
    v1::TopKRequest parsed;
    if (parsed.ParseFromString(bytes) && ValidateTopKRequest(parsed, kMaxRowsPerRequest).ok()) {
      ASSERT_TRUE(status.ok()) << "a valid (mutated) request failed: " << status.error_message();
      std::vector<grpc::Slice> slices;
      ASSERT_TRUE(response_bytes.Dump(&slices).ok());
      std::string flat;
      for (const grpc::Slice& slice : slices) {
        flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
      v1::TopKResponse response;
      ASSERT_TRUE(response.ParseFromString(flat));
      EXPECT_EQ(CheckResponse(parsed, response), "");
      ++answered;
    } else {
      EXPECT_FALSE(status.ok()) << "an invalid request was answered OK";
    }
  }
  std::string histogram;
  for (const auto& [code, count] : codes) absl::StrAppend(&histogram, " ", code, "=", count);
  std::cout << "status codes over 700 hostile messages:" << histogram << "; " << answered
            << " mutated requests were still valid and answered exactly\n";
  ExpectUnharmed();
}

// A TopKStream call with raw bytes as its messages: writes them in order, half-closes, and keeps
// every answer until the server ends the stream.
class RawStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawStream(grpc::GenericStub& stub, std::vector<std::string> messages)
      : messages_(std::move(messages)) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    stub.PrepareBidiStreamingCall(&context_, kTopKStreamMethod, grpc::StubOptions(), this);
    StartRead(&incoming_);
    WriteNext();
    StartCall();
  }
  // The stream's status and the answers, once it has ended.
  grpc::Status Await(std::vector<v1::TopKStreamResponse>* answers) {
    done_.get_future().wait();
    *answers = answers_;
    return status_;
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::vector<grpc::Slice> slices;
    std::string flat;
    if (incoming_.Dump(&slices).ok()) {
      for (const grpc::Slice& slice : slices) {
        flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
    }
    answers_.emplace_back();
    answers_.back().ParseFromString(flat);
    StartRead(&incoming_);
  }
  void OnDone(const grpc::Status& status) override {
    status_ = status;
    done_.set_value();
  }

 private:
  void WriteNext() {
    if (next_ == messages_.size()) {
      StartWritesDone();
      return;
    }
    outgoing_ = ToByteBuffer(messages_[next_++]);
    StartWrite(&outgoing_);
  }

  grpc::ClientContext context_;
  std::vector<std::string> messages_;
  size_t next_ = 0;
  grpc::ByteBuffer outgoing_;
  grpc::ByteBuffer incoming_;
  std::vector<v1::TopKStreamResponse> answers_;
  grpc::Status status_;
  std::promise<void> done_;
};

// Bytes that do not parse, sent on a TopKStream between two good requests. The service reads raw
// bytes and parses them itself, so the noise gets its own answer, a StreamError INVALID_ARGUMENT
// in its place in the stream, and the stream goes on: the requests before and after it are
// answered exactly and the stream ends OK. Returns what each round's noise was answered with
// (nullopt when it was not answered at all).
std::vector<std::optional<v1::StreamError>> StreamsWithNoise(const std::string& target,
                                                             std::mt19937_64& engine, int rounds) {
  google::protobuf::LogSilencer quiet;
  grpc::GenericStub stub(NewChannel(target));
  const pk::Problem problem = MakeProblem({128, 128}, 8, pk::DType::kFloat32);
  const v1::TopKRequest first = RandomRequest(problem, 2, engine, "first");
  const v1::TopKRequest after = RandomRequest(problem, 2, engine, "after");
  std::string first_bytes, after_bytes;
  EXPECT_TRUE(first.SerializeToString(&first_bytes));
  EXPECT_TRUE(after.SerializeToString(&after_bytes));
  // Noise that does not parse: a field 1 length prefix running past the end.
  const std::string noise = "\x0a\xff\xff\x03" + RandomBytes(engine, 40);
  v1::TopKRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(noise));
  std::vector<std::optional<v1::StreamError>> noise_answers;
  for (int round = 0; round < rounds; ++round) {
    RawStream stream(stub, {first_bytes, noise, after_bytes});
    std::vector<v1::TopKStreamResponse> answers;
    const grpc::Status status = stream.Await(&answers);
    EXPECT_TRUE(status.ok()) << "the stream ended " << CodeName(status.error_code()) << " '"
                             << status.error_message() << "'";
    if (answers.empty() || !answers[0].has_result()) {
      ADD_FAILURE() << "the request before the noise was not answered";
      noise_answers.push_back(std::nullopt);
      continue;
    }
    EXPECT_EQ(CheckResponse(first, answers[0].result()), "");
    noise_answers.push_back(answers.size() > 1 && answers[1].has_error()
                                ? std::optional(answers[1].error())
                                : std::nullopt);
    if (answers.size() != 3) {
      ADD_FAILURE() << "3 answers expected (request, noise, request), got " << answers.size();
      continue;
    }
    if (!answers[2].has_result()) {
      ADD_FAILURE() << "the request after the noise failed: " << answers[2].error().message();
      continue;
    }
    EXPECT_EQ(answers[2].request_id(), "after");
    EXPECT_EQ(CheckResponse(after, answers[2].result()), "");
  }
  return noise_answers;
}

TEST_F(AbuseTest, NoiseOnAStreamIsAnsweredInPlaceAndTheStreamGoesOn) {
  StartServer();
  const std::vector<std::optional<v1::StreamError>> noise_answers =
      StreamsWithNoise(server_->target(), engine_, 20);
  if (noise_answers[0].has_value()) {
    std::cout << "noise on a stream is answered " << noise_answers[0]->code() << " '"
              << noise_answers[0]->message() << "'\n";
  }
  ExpectUnharmed();
}

// Before the service parsed messages itself, gRPC reported noise on a stream to the service as
// the caller's half-close: the stream ended OK and the noise, and every request after it, went
// unanswered.
TEST_F(AbuseTest, NoiseOnAStreamIsNotReportedAsSuccess) {
  StartServer();
  for (const std::optional<v1::StreamError>& error :
       StreamsWithNoise(server_->target(), engine_, 3)) {
    ASSERT_TRUE(error.has_value()) << "the noise got no StreamError";
    EXPECT_EQ(error->code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_NE(error->message().find("not a pkserve.v1.TopKRequest"), std::string::npos)
        << error->message();
  }
  ExpectUnharmed();
}

TEST_F(AbuseTest, HostileShapesAreRefusedAtOnceOnCallsAndOnStreams) {
  StartServer();
  const auto make = [](std::vector<uint32_t> widths, uint32_t k, int dtype, uint32_t rows,
                       size_t payload_bytes) {
    v1::TopKRequest request;
    for (uint32_t width : widths) request.add_factor_widths(width);
    request.set_k(k);
    request.set_dtype(static_cast<v1::DType>(dtype));
    request.set_rows(rows);
    request.set_scores(std::string(payload_bytes, '\x3f'));
    return request;
  };
  const std::vector<uint32_t> many_widths(1000, 2);
  const std::vector<v1::TopKRequest> hostile = {
      make({256, 256}, 8, v1::DTYPE_FLOAT32, kMaxRowsPerRequest, 8),  // huge rows, tiny payload
      make({256, 256}, 8, v1::DTYPE_FLOAT32, kMaxRowsPerRequest + 1, 8),
      make({256, 256}, 8, v1::DTYPE_FLOAT32, 0xffffffffu, 8),
      make({256, 256}, 8, v1::DTYPE_FLOAT32, 0x80000000u, 0),
      make({256, 256}, 8, v1::DTYPE_FLOAT32, 0, 0),
      make({65535, 65535}, 256, v1::DTYPE_FLOAT32, 1, 4),   // 32 slot bits: valid shape, no payload
      make({65535, 65535, 2}, 8, v1::DTYPE_FLOAT32, 1, 4),  // 33 slot bits
      make(many_widths, 8, v1::DTYPE_FLOAT32, 1, 8000),
      make({}, 8, v1::DTYPE_FLOAT32, 1, 0),
      make({0, 16}, 8, v1::DTYPE_FLOAT32, 1, 64),
      make({16, 16}, 0, v1::DTYPE_FLOAT32, 1, 128),
      make({16, 16}, 257, v1::DTYPE_FLOAT32, 1, 128),
      make({16, 16}, 0xffffffffu, v1::DTYPE_FLOAT32, 1, 128),
      make({16, 16}, 8, 0, 1, 128),
      make({16, 16}, 8, 99, 1, 128),
      make({16, 16}, 8, -5, 1, 128),
      make({16, 16}, 8, v1::DTYPE_BFLOAT16, 1, 128),  // float32's length for bfloat16
  };
  auto stub = v1::SparseMemory::NewStub(NewChannel(server_->target()));
  for (size_t i = 0; i < hostile.size(); ++i) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::TopKResponse response;
    const absl::Time start = absl::Now();
    const grpc::Status status = stub->TopK(&context, hostile[i], &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << "hostile request " << i << ": " << CodeName(status.error_code()) << " "
        << status.error_message();
    EXPECT_FALSE(status.error_message().empty()) << "hostile request " << i;
    EXPECT_LT(absl::Now() - start, absl::Seconds(testing::Sanitized() ? 5 : 1))
        << "hostile request " << i << " was not refused at once";
  }

  // The same on one stream, followed by a valid request: one StreamError each, in order, and the
  // stream goes on to answer the valid one.
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  auto stream = stub->TopKStream(&context);
  for (size_t i = 0; i < hostile.size(); ++i) {
    v1::TopKRequest request = hostile[i];
    request.set_request_id(absl::StrCat("hostile-", i));
    ASSERT_TRUE(stream->Write(request));
  }
  const v1::TopKRequest valid =
      RandomRequest(MakeProblem({128, 128}, 16, pk::DType::kFloat32), 3, engine_, "valid");
  ASSERT_TRUE(stream->Write(valid));
  stream->WritesDone();
  v1::TopKStreamResponse answer;
  for (size_t i = 0; i < hostile.size(); ++i) {
    ASSERT_TRUE(stream->Read(&answer)) << "the stream ended after " << i << " answers";
    EXPECT_EQ(answer.request_id(), absl::StrCat("hostile-", i));
    ASSERT_TRUE(answer.has_error()) << "hostile request " << i << " was answered with a result";
    EXPECT_EQ(answer.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT))
        << answer.error().message();
  }
  ASSERT_TRUE(stream->Read(&answer));
  ASSERT_TRUE(answer.has_result()) << answer.error().message();
  EXPECT_EQ(CheckResponse(valid, answer.result()), "");
  EXPECT_FALSE(stream->Read(&answer));
  const grpc::Status finished = stream->Finish();
  EXPECT_TRUE(finished.ok()) << finished.error_message();
  ExpectUnharmed();
}

// A valid request whose serialized size is exactly `bytes`: rows of 256 + 256 float32 scores, then
// a request_id long enough to make up the rest.
v1::TopKRequest RequestOfSize(size_t bytes, std::mt19937_64& engine) {
  const pk::Problem problem = MakeProblem({256, 256}, 16, pk::DType::kFloat32);
  const uint32_t rows = static_cast<uint32_t>((bytes - 64) / problem.row_bytes());
  v1::TopKRequest request = RandomRequest(problem, rows, engine);
  size_t id_length = bytes - request.ByteSizeLong() - 3;
  while (true) {
    request.set_request_id(std::string(id_length, 'x'));
    const size_t size = request.ByteSizeLong();
    if (size == bytes) return request;
    if (size > bytes) {
      --id_length;
    } else {
      ++id_length;
    }
  }
}

TEST_F(AbuseTest, MessagesAtTheSizeLimitPassAndJustOverAreResourceExhausted) {
  StartServer();
  auto stub = v1::SparseMemory::NewStub(NewChannel(server_->target()));
  const auto call = [&stub](const v1::TopKRequest& request, v1::TopKResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return stub->TopK(&context, request, response);
  };
  const v1::TopKRequest at_limit = RequestOfSize(kMaxMessageBytes, engine_);
  ASSERT_EQ(at_limit.ByteSizeLong(), static_cast<size_t>(kMaxMessageBytes));
  v1::TopKResponse response;
  grpc::Status status = call(at_limit, &response);
  ASSERT_TRUE(status.ok()) << "a message of exactly --max_message_bytes failed: "
                           << status.error_message();
  EXPECT_EQ(CheckResponse(at_limit, response), "");

  for (const size_t over : {size_t{1}, size_t{7}, size_t{3 * kMaxMessageBytes}}) {
    const v1::TopKRequest too_large = RequestOfSize(kMaxMessageBytes + over, engine_);
    status = call(too_large, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << kMaxMessageBytes << " + " << over << " bytes: " << CodeName(status.error_code()) << " "
        << status.error_message();
  }

  // On a stream: the message at the limit is answered, the one past it ends the stream with
  // RESOURCE_EXHAUSTED (gRPC refuses it before the service sees it).
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  auto stream = stub->TopKStream(&context);
  ASSERT_TRUE(stream->Write(at_limit));
  v1::TopKStreamResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  ASSERT_TRUE(answer.has_result()) << answer.error().message();
  EXPECT_EQ(CheckResponse(at_limit, answer.result()), "");
  stream->Write(RequestOfSize(kMaxMessageBytes + 1, engine_));
  stream->WritesDone();
  while (stream->Read(&answer)) {
    ADD_FAILURE() << "an answer to the over-limit message: " << answer.ShortDebugString();
  }
  status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << CodeName(status.error_code()) << " " << status.error_message();
  ExpectUnharmed();
}

// Streams that send and never read, each on a connection of its own: the server must stop reading
// them and hold a bounded amount for each, whatever they go on writing. What it may hold: per
// stream, --max_stream_pending_bytes of requests and answers above the transport, plus the
// transport's HTTP/2 windows, which stay at 64 KiB a stream with --http2_bdp_probe off (with it on,
// gRPC widened a fast stream's window to tens of MiB: about 90 MiB of RSS a stream, measured).
// PK_NEVER_READ_FLAGS (space-separated pkserve flags) overrides the server's bounds, to measure
// without them.
TEST_F(AbuseTest, StreamsThatSendAndNeverReadArePushedBackAndCostBoundedMemory) {
  constexpr int64_t kPendingBytes = 2 << 20;
  std::vector<std::string> flags = {absl::StrCat("--max_stream_pending_bytes=", kPendingBytes)};
  if (const char* override_flags = std::getenv("PK_NEVER_READ_FLAGS")) {
    flags = absl::StrSplit(override_flags, ' ', absl::SkipEmpty());
  }
  StartServer(flags);
  constexpr int kStreams = 8;
  constexpr int kMaxWrites = 100000;
  // Requests of 64 KiB each (4 rows of 2048 + 2048 float32): 32 of them reach a stream's pending
  // bytes, a sixteenth of the queue at most, so the probe is not starved of queue room.
  const pk::Problem problem = MakeProblem({2048, 2048}, 16, pk::DType::kFloat32);
  std::vector<v1::TopKRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(RandomRequest(problem, 4, engine_));
  const int64_t rss_before_kib = server_->RssKib();

  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::atomic<int64_t>> writes(kStreams);
  std::vector<std::thread> writers;
  for (int s = 0; s < kStreams; ++s) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    writers.emplace_back([&, s, context = contexts.back().get()] {
      auto stub = v1::SparseMemory::NewStub(NewChannel(server_->target()));
      auto stream = stub->TopKStream(context);
      // Writes until the server stops taking them (the write blocks) and the test cancels.
      for (int i = 0; i < kMaxWrites && stream->Write(requests[i % requests.size()]); ++i) {
        ++writes[s];
      }
      stream->Finish();
    });
  }
  // Wait until the writes stop: the server read what it may hold and pushes back.
  int64_t total = -1;
  for (int settled = 0; settled < 5;) {
    absl::SleepFor(absl::Milliseconds(200));
    int64_t now = 0;
    for (const auto& count : writes) now += count.load();
    settled = now == total ? settled + 1 : 0;
    total = now;
  }
  EXPECT_TRUE(probe_->WaitForMore(20, absl::Seconds(20)))
      << "correct requests stalled beside streams that never read";
  const int64_t peak_kib = server_->PeakRssKib();
  for (const auto& context : contexts) context->TryCancel();
  for (std::thread& writer : writers) writer.join();

  std::vector<int64_t> per_stream;
  for (const auto& count : writes) per_stream.push_back(count.load());
  const int64_t growth_kib = peak_kib - rss_before_kib;
  std::cout << kStreams << " streams that never read (flags: " << absl::StrJoin(flags, " ")
            << ") wrote " << absl::StrJoin(per_stream, ", ")
            << " requests of 64 KiB before the server pushed back; server RSS " << rss_before_kib
            << " KiB before, peak " << peak_kib << " KiB: " << growth_kib / kStreams
            << " KiB a stream\n";
  for (int s = 0; s < kStreams; ++s) {
    EXPECT_LT(per_stream[s], kMaxWrites) << "stream " << s << " was never pushed back";
  }
  // Per stream: its pending bytes, twice over for the copies on the way in (the transport's
  // slices, then the parsed request), 8 MiB for the transport, the answers and the allocator's
  // arenas (each stream's hundreds of MiB of requests go through them, spread over more arenas
  // when the host is busy: 5.9 MiB a stream measured on a quiet 2-core host, 12.4 in all on a
  // loaded one); 32 MiB for the probe.
  // Without the bounds a stream cost 67 to 104 MiB (README). Under a sanitizer, twice that plus
  // 512 MiB: ASan's quarantine (256 MiB) keeps the freed requests' memory resident.
  const int64_t plain_bound_kib = kStreams * (2 * kPendingBytes / 1024 + 8192) + 32 * 1024;
  const int64_t bound_kib =
      testing::Sanitized() ? 2 * plain_bound_kib + 512 * 1024 : plain_bound_kib;
  EXPECT_LT(growth_kib, bound_kib)
      << "RSS grew from " << rss_before_kib << " KiB to a peak of " << peak_kib << " KiB";
  ExpectUnharmed();
}

TEST_F(AbuseTest, MalformedFramesAndAbruptDisconnectsOverRawHttp2) {
  StartServer();
  namespace h2 = testing::http2;
  const std::string authority = server_->target();
  const std::string topk_headers = h2::GrpcRequestHeaders(kTopKMethod, authority);
  const std::string stream_headers = h2::GrpcRequestHeaders(kTopKStreamMethod, authority);
  std::string valid;
  ASSERT_TRUE(RandomRequest(MakeProblem({512, 512}, 32, pk::DType::kFloat32), 8, engine_)
                  .SerializeToString(&valid));
  std::map<std::string, int> closed_by_server;
  const int kRounds = testing::Sanitized() ? 8 : 20;
  for (int round = 0; round < kRounds; ++round) {
    // Each pattern on a fresh connection; `wait` is how long to listen for the server's answer.
    struct Pattern {
      std::string name;
      std::string bytes;
      bool reset = false;  // drop the connection with a TCP reset instead of a FIN
    };
    std::vector<Pattern> patterns;
    const std::string preface = h2::ClientPreface();
    const std::string headers = h2::Frame(h2::kHeaders, h2::kEndHeaders, 1, topk_headers);
    patterns.push_back({"garbage instead of the preface", RandomBytes(engine_, 64)});
    patterns.push_back({"half a preface", preface.substr(0, 10)});
    patterns.push_back({"noise after the preface", preface + RandomBytes(engine_, 512)});
    patterns.push_back({"half a frame header", preface + headers.substr(0, 5)});
    patterns.push_back({"a DATA frame on a stream never opened",
                        preface + h2::Frame(h2::kData, h2::kEndStream, 7, h2::GrpcMessage(valid))});
    patterns.push_back(
        {"a frame longer than SETTINGS_MAX_FRAME_SIZE",
         preface + headers + h2::Frame(h2::kData, 0, 1, RandomBytes(engine_, 16384 + 100))});
    patterns.push_back({"a HEADERS block of noise",
                        preface + h2::Frame(h2::kHeaders, h2::kEndHeaders | h2::kEndStream, 1,
                                            RandomBytes(engine_, 200))});
    patterns.push_back(
        {"a gRPC length prefix of 4 GiB with 10 bytes behind it",
         preface + headers +
             h2::Frame(h2::kData, h2::kEndStream, 1, h2::GrpcMessage("0123456789", 0xffffffffu))});
    patterns.push_back({"a gRPC message cut short, then the connection dropped",
                        preface + headers +
                            h2::Frame(h2::kData, 0, 1,
                                      h2::GrpcMessage(valid.substr(0, valid.size() / 3),
                                                      static_cast<uint32_t>(valid.size())))});
    patterns.push_back(
        {"a gRPC message cut short, then a reset",
         preface + headers +
             h2::Frame(h2::kData, 0, 1,
                       h2::GrpcMessage(valid.substr(0, 100), static_cast<uint32_t>(valid.size()))),
         /*reset=*/true});
    patterns.push_back({"a compressed-flag message with no compression",
                        preface + headers +
                            h2::Frame(h2::kData, h2::kEndStream, 1,
                                      std::string(1, '\x01') + h2::GrpcMessage(valid).substr(1))});
    patterns.push_back(
        {"random bytes as a stream message",
         preface + h2::Frame(h2::kHeaders, h2::kEndHeaders, 1, stream_headers) +
             h2::Frame(h2::kData, 0, 1, h2::GrpcMessage(RandomBytes(engine_, 300)))});
    patterns.push_back(
        {"a whole valid request, then the caller vanishes",
         preface + headers + h2::Frame(h2::kData, h2::kEndStream, 1, h2::GrpcMessage(valid)),
         /*reset=*/true});
    std::string many_streams = preface;
    for (uint32_t id = 1; id < 400; id += 2) {
      many_streams += h2::Frame(h2::kHeaders, h2::kEndHeaders, id, topk_headers);
      many_streams += h2::Frame(h2::kData, 0, id, h2::GrpcMessage(valid.substr(0, 50), 4096));
    }
    patterns.push_back({"200 streams each with a partial message, then dropped", many_streams});
    for (const Pattern& pattern : patterns) {
      std::unique_ptr<h2::Connection> connection = h2::Connection::Open(server_->port());
      ASSERT_NE(connection, nullptr);
      connection->Send(pattern.bytes);
      connection->ReadFor(absl::Milliseconds(round == 0 ? 300 : 20));
      if (connection->closed_by_peer()) ++closed_by_server[pattern.name];
      if (pattern.reset) connection->Reset();
    }
  }
  for (const auto& [name, count] : closed_by_server) {
    std::cout << "server closed the connection: " << name << " (" << count << "/" << kRounds
              << ")\n";
  }
  EXPECT_GT(closed_by_server["garbage instead of the preface"], 0)
      << "the server kept a connection that did not speak HTTP/2";
  ExpectUnharmed();
}

// Cancels a TopKStream call, reads whatever answers are left and ends it.
void CancelAndEnd(grpc::ClientContext& context,
                  grpc::ClientReaderWriter<v1::TopKRequest, v1::TopKStreamResponse>& stream) {
  context.TryCancel();
  v1::TopKStreamResponse answer;
  while (stream.Read(&answer)) {
  }
  stream.Finish();
}

TEST_F(AbuseTest, CallersThatCancelOrHangUpMidRequestLeaveNoTrace) {
  StartServer();
  const pk::Problem problem = MakeProblem({1024, 1024}, 64, pk::DType::kBFloat16);
  std::vector<v1::TopKRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(RandomRequest(problem, 256, engine_));
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> completed_ok{0};
  std::atomic<int64_t> wrong{0};
  const absl::Time until = absl::Now() + absl::Seconds(testing::Sanitized() ? 6 : 3);
  std::vector<std::thread> callers;
  for (int t = 0; t < 6; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 engine(t);
      std::shared_ptr<grpc::Channel> channel;
      std::unique_ptr<v1::SparseMemory::Stub> stub;
      while (absl::Now() < until) {
        if (stub == nullptr || engine() % 4 == 0) {  // often a new connection
          channel = NewChannel(server_->target());
          stub = v1::SparseMemory::NewStub(channel);
        }
        const v1::TopKRequest& request = requests[engine() % requests.size()];
        if (engine() % 3 != 0) {
          // A unary call cancelled after 0 to 4 ms.
          grpc::ClientContext context;
          v1::TopKResponse response;
          std::promise<grpc::Status> done;
          stub->async()->TopK(&context, &request, &response,
                              [&done](grpc::Status status) { done.set_value(status); });
          absl::SleepFor(absl::Microseconds(engine() % 4000));
          context.TryCancel();
          const grpc::Status status = done.get_future().get();
          if (status.ok()) {
            ++completed_ok;
            if (!CheckResponse(request, response).empty()) ++wrong;
          }
        } else {
          // A stream: a few requests, one answer read, then cancelled with the rest in flight.
          grpc::ClientContext context;
          auto stream = stub->TopKStream(&context);
          for (int i = 0; i < 5; ++i) stream->Write(requests[i % requests.size()]);
          v1::TopKStreamResponse answer;
          stream->Read(&answer);
          CancelAndEnd(context, *stream);
        }
        // Sometimes drop the connection with the call's successor already racing it.
        if (engine() % 8 == 0) {
          stub.reset();
          channel.reset();
        }
        ++calls;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  std::cout << calls.load() << " calls cancelled or hung up mid-request (" << completed_ok.load()
            << " finished first)\n";
  EXPECT_EQ(wrong.load(), 0) << "calls that finished before their cancel got wrong answers";
  EXPECT_GT(calls.load(), 50);
  ExpectUnharmed();
  const std::string log = server_->log();
  if (const size_t at = log.find("drained:"); at != std::string::npos) {
    std::cout << "server: " << log.substr(at, log.find('\n', at) - at) << "\n";
  }
}

// Streams cancelled while their answers come back from the batcher, so that an answer and the
// cancel (or the write before it) race to finish the stream. The server pauses 2 ms after each
// stream answer (a test-only flag), with its stream lock free, so that the race is run in that
// gap: an answer that touched the stream after the other side had finished it, and gRPC had
// freed it, is what the sanitizer builds catch here (StreamReactor::OnAnswered once did).
TEST_F(AbuseTest, StreamsCancelledWhileTheirAnswersArriveLeaveNoTrace) {
  StartServer({"--inject_stream_answer_pause_us=2000"});
  const pk::Problem problem = MakeProblem({64, 64}, 32, pk::DType::kFloat32);
  std::vector<v1::TopKRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(RandomRequest(problem, 8 << i, engine_));
  std::atomic<int64_t> streams{0};
  std::atomic<int64_t> answers{0};
  std::atomic<int64_t> wrong{0};
  const absl::Time until = absl::Now() + absl::Seconds(testing::Sanitized() ? 6 : 3);
  std::vector<std::thread> callers;
  for (int t = 0; t < 6; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 engine(100 + t);
      auto stub = v1::SparseMemory::NewStub(NewChannel(server_->target()));
      while (absl::Now() < until) {
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
        auto stream = stub->TopKStream(&context);
        const int sent = 1 + static_cast<int>(engine() % 6);
        for (int i = 0; i < sent; ++i) stream->Write(requests[i % requests.size()]);
        const int read = static_cast<int>(engine() % sent);
        v1::TopKStreamResponse answer;
        for (int i = 0; i < read && stream->Read(&answer); ++i) {
          ++answers;
          if (!answer.has_result() ||
              !CheckResponse(requests[i % requests.size()], answer.result()).empty()) {
            ++wrong;
          }
        }
        CancelAndEnd(context, *stream);
        ++streams;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  std::cout << streams.load() << " streams cancelled with answers on their way (" << answers.load()
            << " answers read first)\n";
  EXPECT_EQ(wrong.load(), 0) << "answers read before the cancel were wrong";
  EXPECT_GT(streams.load(), 100);
  ExpectUnharmed();
}

}  // namespace
}  // namespace pkserve
