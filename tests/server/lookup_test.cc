// Hosted memories through a real gRPC server on loopback: ServerInfo lists them; Lookup and
// LookupStream give the bits of the one-thread CPU lookup whatever the batching (concurrent
// callers on two memories, requests split across batches, heads); each error of the lookup API
// with its code and message; SIGTERM-style drain with lookups in flight.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/lookup/lookup_cpu.h"
#include "kernels/numeric.h"
#include "kernels/testing/random_rows.h"
#include "server/memory_file.h"
#include "server/validation.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::LoopbackConfig;
using testing::StartServer;

// A memory file of random values in a temporary directory, removed with the object.
class MemoryFile {
 public:
  MemoryFile(const std::vector<uint32_t>& widths, uint32_t dim, pk::DType dtype, uint64_t seed) {
    char directory[] = "/tmp/pk-lookup-test-XXXXXX";
    directory_ = mkdtemp(directory);
    path_ = directory_ + "/memory.safetensors";
    uint64_t slots = 1;
    for (uint32_t width : widths) slots *= width;
    std::string bytes = SafetensorsHeader(widths, slots, dim, dtype);
    data_offset_ = bytes.size();
    std::mt19937_64 engine(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (uint64_t i = 0; i < slots * dim; ++i) {
      const float value = uniform(engine);
      if (dtype == pk::DType::kFloat32) {
        bytes.append(reinterpret_cast<const char*>(&value), 4);
      } else {
        const uint16_t bits = pk::FloatToBf16(value);
        bytes.append(reinterpret_cast<const char*>(&bits), 2);
      }
    }
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
    table_.assign(reinterpret_cast<const std::byte*>(bytes.data()) + data_offset_,
                  reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
    widths_ = widths;
    dim_ = dim;
    dtype_ = dtype;
  }
  ~MemoryFile() {
    std::remove(path_.c_str());
    rmdir(directory_.c_str());
  }

  const std::string& path() const { return path_; }
  pk::ValuesView values() const {
    uint64_t slots = 1;
    for (uint32_t width : widths_) slots *= width;
    return pk::ValuesView{table_.data(), slots, dim_, dtype_};
  }
  const std::vector<uint32_t>& widths() const { return widths_; }

 private:
  std::string directory_;
  std::string path_;
  size_t data_offset_ = 0;
  std::vector<std::byte> table_;
  std::vector<uint32_t> widths_;
  uint32_t dim_ = 0;
  pk::DType dtype_ = pk::DType::kFloat32;
};

// What the one-thread CPU implementation gives for a request alone.
struct Expected {
  std::vector<std::byte> outputs;
  std::vector<uint32_t> slots;
  std::vector<float> weights;
  std::vector<uint8_t> row_valid;
};

Expected Reference(const MemoryFile& memory, const v1::LookupRequest& request) {
  const pk::DType dtype = *DTypeFromWire(request.dtype());
  const pk::Problem topk = pk::ValidateProblem(memory.widths(), request.k(), dtype).value();
  const pk::DType output_dtype = request.output_dtype() == v1::DTYPE_UNSPECIFIED
                                     ? memory.values().dtype
                                     : *DTypeFromWire(request.output_dtype());
  const uint32_t heads = request.heads() == 0 ? 1 : request.heads();
  const pk::LookupProblem lookup =
      pk::ValidateLookup(topk, heads, memory.values().dim, memory.values().dtype, output_dtype)
          .value();
  Expected expected;
  const size_t rows = request.rows();
  expected.slots.resize(rows * topk.kk());
  expected.weights.resize(rows * topk.kk());
  expected.row_valid.resize(rows);
  expected.outputs.resize(rows / heads * lookup.output_row_bytes());
  pk::cpu::Workspace workspace;
  pk::cpu::LookupWeightsRows(topk, reinterpret_cast<const std::byte*>(request.scores().data()),
                             rows, expected.slots.data(), expected.weights.data(),
                             expected.row_valid.data(), workspace);
  pk::cpu::WeightedSumRows(lookup, memory.values(), expected.slots.data(), expected.weights.data(),
                           rows / heads, expected.outputs.data());
  return expected;
}

v1::LookupRequest RandomLookup(const std::string& memory, const std::vector<uint32_t>& widths,
                               uint32_t k, pk::DType dtype, uint32_t rows, uint32_t heads,
                               std::mt19937_64& engine) {
  const pk::Problem topk = pk::ValidateProblem(widths, k, dtype).value();
  const std::vector<std::byte> scores =
      pk::testing::RandomRows(topk, rows, pk::testing::Distribution::kNormal, engine);
  v1::LookupRequest request;
  request.set_memory(memory);
  request.set_k(k);
  request.set_dtype(DTypeToWire(dtype));
  request.set_rows(rows);
  request.set_heads(heads);
  request.set_scores(reinterpret_cast<const char*>(scores.data()), scores.size());
  return request;
}

// "" when `response` holds the reference bits for `request`, else the first difference.
std::string Compare(const MemoryFile& memory, const v1::LookupRequest& request,
                    const v1::LookupResponse& response) {
  const Expected expected = Reference(memory, request);
  const uint32_t heads = request.heads() == 0 ? 1 : request.heads();
  if (response.outputs() != request.rows() / heads || response.dim() != memory.values().dim) {
    return absl::StrCat("expected ", request.rows() / heads, " outputs of dim ",
                        memory.values().dim, ", got ", response.outputs(), " of dim ",
                        response.dim());
  }
  if (response.values().size() != expected.outputs.size() ||
      std::memcmp(response.values().data(), expected.outputs.data(), expected.outputs.size()) !=
          0) {
    return absl::StrCat("the outputs differ from the CPU reference (", response.values().size(),
                        " bytes against ", expected.outputs.size(), ")");
  }
  if (request.return_slots()) {
    if (response.slots().size() != expected.slots.size() * 4 ||
        std::memcmp(response.slots().data(), expected.slots.data(), response.slots().size()) != 0) {
      return "the slots differ from the CPU reference";
    }
    if (response.weights().size() != expected.weights.size() * 4 ||
        std::memcmp(response.weights().data(), expected.weights.data(),
                    response.weights().size()) != 0) {
      return "the weights differ from the CPU reference";
    }
  } else if (!response.slots().empty() || !response.weights().empty()) {
    return "slots or weights came back unasked";
  }
  return "";
}

class LookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = testing::TestBackendUnavailable(); !why.empty()) GTEST_SKIP() << why;
  }

  std::unique_ptr<Server> Start(ServerConfig config) {
    config.memories = {MemorySpec{"wide", wide_.path(), {}},
                       MemorySpec{"small", small_.path(), {}}};
    return StartServer(config);
  }

  MemoryFile wide_{{64, 64}, 160, pk::DType::kBFloat16, 11};
  MemoryFile small_{{8, 16, 4}, 33, pk::DType::kFloat32, 12};
};

TEST_F(LookupTest, ServerInfoListsTheMemories) {
  std::unique_ptr<Server> server = Start(LoopbackConfig());
  auto stub = testing::NewStub(*server);
  grpc::ClientContext context;
  v1::ServerInfo info;
  ASSERT_TRUE(stub->GetServerInfo(&context, v1::ServerInfoRequest(), &info).ok());
  ASSERT_EQ(info.memories_size(), 2);
  EXPECT_EQ(info.memories(0).name(), "wide");
  EXPECT_EQ(info.memories(0).slots(), 4096u);
  EXPECT_EQ(info.memories(0).dim(), 160u);
  EXPECT_EQ(info.memories(0).dtype(), v1::DTYPE_BFLOAT16);
  EXPECT_EQ(info.memories(0).version(), 1u);
  EXPECT_EQ(info.memories(1).name(), "small");
  ASSERT_EQ(info.memories(1).factor_widths_size(), 3);
  EXPECT_EQ(info.memories(1).factor_widths(2), 4u);
  EXPECT_EQ(info.memories(1).slots(), 512u);
}

TEST_F(LookupTest, UnaryLookupsGiveTheCpuReferenceBits) {
  std::unique_ptr<Server> server = Start(LoopbackConfig());
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(1);
  struct Shape {
    std::string memory;
    uint32_t k;
    pk::DType dtype;
    uint32_t rows;
    uint32_t heads;
    v1::DType output;
    bool return_slots;
  };
  const std::vector<Shape> shapes = {
      {"wide", 32, pk::DType::kBFloat16, 8, 4, v1::DTYPE_UNSPECIFIED, false},
      {"wide", 1, pk::DType::kFloat32, 3, 1, v1::DTYPE_FLOAT32, true},
      {"wide", 256, pk::DType::kBFloat16, 2, 2, v1::DTYPE_BFLOAT16, true},
      {"small", 64, pk::DType::kFloat32, 6, 3, v1::DTYPE_UNSPECIFIED, true},
      {"small", 7, pk::DType::kBFloat16, 64, 64, v1::DTYPE_BFLOAT16, false},
  };
  for (const Shape& shape : shapes) {
    const MemoryFile& memory = shape.memory == "wide" ? wide_ : small_;
    v1::LookupRequest request = RandomLookup(shape.memory, memory.widths(), shape.k, shape.dtype,
                                             shape.rows, shape.heads, engine);
    request.set_output_dtype(shape.output);
    request.set_return_slots(shape.return_slots);
    request.set_request_id("id-" + shape.memory);
    grpc::ClientContext context;
    v1::LookupResponse response;
    const grpc::Status status = stub->Lookup(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(Compare(memory, request, response), "")
        << shape.memory << " k=" << shape.k << " heads=" << shape.heads;
    EXPECT_EQ(response.request_id(), "id-" + shape.memory);
    EXPECT_EQ(response.memory_version(), 1u);
  }
}

TEST_F(LookupTest, RequestsSplitAcrossBatchesAndConcurrentCallersGetTheSameBits) {
  ServerConfig config = LoopbackConfig();
  config.max_batch_rows = 12;  // a 40-row request of heads 4 spans four batches of 12, 12, 12, 4
  std::unique_ptr<Server> server = Start(config);
  std::vector<std::future<std::string>> callers;
  for (int caller = 0; caller < 8; ++caller) {
    callers.push_back(std::async(std::launch::async, [&, caller] {
      auto stub = testing::NewStub(*server);
      std::mt19937_64 engine(100 + caller);
      for (int i = 0; i < 10; ++i) {
        const bool wide = (caller + i) % 2 == 0;
        const MemoryFile& memory = wide ? wide_ : small_;
        const uint32_t heads = wide ? 4 : 2;
        v1::LookupRequest request =
            RandomLookup(wide ? "wide" : "small", memory.widths(), wide ? 16 : 5,
                         i % 3 == 0 ? pk::DType::kFloat32 : pk::DType::kBFloat16,
                         heads * (1 + (caller * 7 + i) % 10), heads, engine);
        request.set_return_slots(i % 2 == 0);
        grpc::ClientContext context;
        v1::LookupResponse response;
        const grpc::Status status = stub->Lookup(&context, request, &response);
        if (!status.ok()) return absl::StrCat("caller ", caller, ": ", status.error_message());
        if (std::string diff = Compare(memory, request, response); !diff.empty()) {
          return absl::StrCat("caller ", caller, " request ", i, ": ", diff);
        }
      }
      return std::string();
    }));
  }
  for (auto& caller : callers) EXPECT_EQ(caller.get(), "");
}

TEST_F(LookupTest, MetricsCountOutputsAndValueBytesByMemory) {
  std::unique_ptr<Server> server = Start(LoopbackConfig());
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(7);
  for (int i = 0; i < 3; ++i) {  // 3 x 8 rows of heads 4: 6 outputs, 24 rows x 16 slots read
    const v1::LookupRequest request =
        RandomLookup("wide", wide_.widths(), 16, pk::DType::kBFloat16, 8, 4, engine);
    grpc::ClientContext context;
    v1::LookupResponse response;
    ASSERT_TRUE(stub->Lookup(&context, request, &response).ok());
  }
  const std::string text = server->RenderMetrics();
  const auto has = [&text](const std::string& line) {
    return absl::StrContains(text, line + "\n");
  };
  EXPECT_TRUE(has("pkserve_lookup_outputs_total{memory=\"wide\"} 6")) << text;
  EXPECT_TRUE(has("pkserve_lookup_outputs_total{memory=\"small\"} 0")) << text;
  // 24 rows x 16 slots x 160 values x 2 bytes.
  EXPECT_TRUE(has("pkserve_memory_value_bytes_read_total{memory=\"wide\"} 122880")) << text;
  EXPECT_TRUE(has("pkserve_memory_bytes{memory=\"wide\"} 1310720")) << text;
  EXPECT_TRUE(has("pkserve_requests_total{rpc=\"Lookup\",code=\"OK\"} 3")) << text;
  EXPECT_TRUE(absl::StrContains(text, "pkserve_memory_load_seconds{memory=\"small\"} ")) << text;
}

TEST_F(LookupTest, LookupStreamAnswersInOrderWithAnErrorInItsPlace) {
  std::unique_ptr<Server> server = Start(LoopbackConfig());
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(3);
  std::vector<v1::LookupRequest> requests;
  for (int i = 0; i < 6; ++i) {
    requests.push_back(
        RandomLookup("wide", wide_.widths(), 8, pk::DType::kBFloat16, 4 * (i + 1), 4, engine));
    requests.back().set_request_id(absl::StrCat("r", i));
  }
  requests[2].set_memory("absent");
  grpc::ClientContext context;
  auto stream = stub->LookupStream(&context);
  for (const auto& request : requests) ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  for (size_t i = 0; i < requests.size(); ++i) {
    v1::LookupStreamResponse response;
    ASSERT_TRUE(stream->Read(&response)) << "answer " << i;
    EXPECT_EQ(response.request_id(), absl::StrCat("r", i));
    if (i == 2) {
      ASSERT_TRUE(response.has_error());
      EXPECT_EQ(response.error().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
      continue;
    }
    ASSERT_TRUE(response.has_result()) << response.error().message();
    EXPECT_EQ(Compare(wide_, requests[i], response.result()), "") << "answer " << i;
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(LookupTest, EachErrorHasItsCodeAndNamesTheField) {
  std::unique_ptr<Server> server = Start(LoopbackConfig());
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(4);
  struct Case {
    std::string what;
    std::function<void(v1::LookupRequest&)> change;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"unknown memory", [](v1::LookupRequest& r) { r.set_memory("nope"); },
       grpc::StatusCode::NOT_FOUND,
       "memory 'nope' is not held by this server; it holds 'wide', 'small'"},
      {"k 0", [](v1::LookupRequest& r) { r.set_k(0); }, grpc::StatusCode::INVALID_ARGUMENT,
       "k must be in [1, 256], got 0"},
      {"heads 65", [](v1::LookupRequest& r) { r.set_heads(65); },
       grpc::StatusCode::INVALID_ARGUMENT, "heads must be in [1, 64], got 65"},
      {"rows not a multiple of heads", [](v1::LookupRequest& r) { r.set_heads(3); },
       grpc::StatusCode::INVALID_ARGUMENT, "rows"},
      {"unspecified dtype", [](v1::LookupRequest& r) { r.set_dtype(v1::DTYPE_UNSPECIFIED); },
       grpc::StatusCode::INVALID_ARGUMENT, "dtype must be"},
      {"unknown output dtype",
       [](v1::LookupRequest& r) { r.set_output_dtype(static_cast<v1::DType>(7)); },
       grpc::StatusCode::INVALID_ARGUMENT, "output_dtype must be"},
      {"short scores", [](v1::LookupRequest& r) { r.mutable_scores()->pop_back(); },
       grpc::StatusCode::INVALID_ARGUMENT, "scores"},
  };
  for (const Case& c : cases) {
    v1::LookupRequest request =
        RandomLookup("wide", wide_.widths(), 4, pk::DType::kFloat32, 4, 2, engine);
    c.change(request);
    grpc::ClientContext context;
    v1::LookupResponse response;
    const grpc::Status status = stub->Lookup(&context, request, &response);
    EXPECT_EQ(status.error_code(), c.code) << c.what << ": " << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), c.message))
        << c.what << ": " << status.error_message();
  }
}

TEST_F(LookupTest, ARowWithoutAFiniteMaximumIsRefusedNamingItAndSparesItsBatchmates) {
  std::unique_ptr<Server> server = Start(LoopbackConfig());
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(5);
  v1::LookupRequest bad =
      RandomLookup("wide", wide_.widths(), 4, pk::DType::kFloat32, 6, 2, engine);
  // Row 3: factor 0 all NaN, so every selected score is NaN.
  float* row3 = reinterpret_cast<float*>(bad.mutable_scores()->data()) + 3 * 128;
  for (int c = 0; c < 64; ++c) row3[c] = std::numeric_limits<float>::quiet_NaN();
  const v1::LookupRequest good =
      RandomLookup("wide", wide_.widths(), 4, pk::DType::kFloat32, 6, 2, engine);
  grpc::ClientContext bad_context;
  grpc::ClientContext good_context;
  v1::LookupResponse bad_response;
  v1::LookupResponse good_response;
  std::promise<grpc::Status> bad_done;
  std::promise<grpc::Status> good_done;
  stub->async()->Lookup(&bad_context, &bad, &bad_response,
                        [&](grpc::Status s) { bad_done.set_value(s); });
  stub->async()->Lookup(&good_context, &good, &good_response,
                        [&](grpc::Status s) { good_done.set_value(s); });
  const grpc::Status bad_status = bad_done.get_future().get();
  const grpc::Status good_status = good_done.get_future().get();
  EXPECT_EQ(bad_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(bad_status.error_message(), "scores row 3"))
      << bad_status.error_message();
  ASSERT_TRUE(good_status.ok()) << good_status.error_message();
  EXPECT_EQ(Compare(wide_, good, good_response), "");
}

TEST_F(LookupTest, DrainAnswersEveryAcceptedLookup) {
  std::unique_ptr<Server> server = Start(LoopbackConfig());
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(6);
  std::vector<v1::LookupRequest> requests;
  for (int i = 0; i < 32; ++i) {
    requests.push_back(
        RandomLookup("wide", wide_.widths(), 32, pk::DType::kBFloat16, 256, 4, engine));
  }
  std::vector<grpc::ClientContext> contexts(requests.size());
  std::vector<v1::LookupResponse> responses(requests.size());
  std::vector<std::promise<grpc::Status>> done(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    stub->async()->Lookup(&contexts[i], &requests[i], &responses[i],
                          [&done, i](grpc::Status s) { done[i].set_value(s); });
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (server->batcher_stats().requests_accepted == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  server->Drain(absl::Seconds(20));
  int ok = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const grpc::Status status = done[i].get_future().get();
    if (status.ok()) {
      ++ok;
      EXPECT_EQ(Compare(wide_, requests[i], responses[i]), "") << "request " << i;
    } else {
      // Not accepted before the drain began: refused as a whole, never half computed.
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    }
  }
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace pkserve
