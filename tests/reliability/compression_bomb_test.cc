// Compression bombs (issue 23, item 2): a gzip message of about 1 MiB that inflates to 1 GiB,
// sent over raw HTTP/2 again and again on two connections beside a good caller (attack.h's
// bounds: RSS, the good caller's answers, SIGTERM under attack). pkserve enables no compression
// algorithm and no decompression, so a compressed call is refused from its headers, before any of
// its message is inflated; a real gRPC client that compresses is told so.
#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "pkserve/v1/pkserve.grpc.pb.h"
#include "tests/reliability/attack.h"
#include "tests/reliability/raw_http2.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

namespace h2 = testing::http2;

// `inflated` zero bytes as one gzip member (about inflated / 1030 bytes).
std::string GzipOfZeros(int64_t inflated) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  char buffer[1 << 16];
  for (int64_t fed = 0; fed < inflated || stream.avail_in > 0;) {
    int flush = Z_NO_FLUSH;
    if (stream.avail_in == 0) {
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      stream.avail_in = static_cast<uInt>(std::min<int64_t>(zeros.size(), inflated - fed));
      fed += stream.avail_in;
    }
    if (fed >= inflated) flush = Z_FINISH;
    int result = Z_OK;
    do {
      stream.next_out = reinterpret_cast<Bytef*>(buffer);
      stream.avail_out = sizeof buffer;
      result = deflate(&stream, flush);
      out.append(buffer, sizeof buffer - stream.avail_out);
    } while (stream.avail_out == 0);
    if (result == Z_STREAM_END) break;
  }
  deflateEnd(&stream);
  return out;
}

// A gRPC length-prefixed message with the compressed flag set.
std::string CompressedGrpcMessage(const std::string& compressed) {
  std::string message = h2::GrpcMessage(compressed);
  message[0] = '\1';
  return message;
}

TEST(CompressionBombTest, GzipBombsAreRefusedBeforeTheyAreInflated) {
  testing::AttackHarness harness({"--max_message_bytes=4194304"});
  const std::string bomb = CompressedGrpcMessage(GzipOfZeros(int64_t{1} << 30));
  std::cout << "bomb: " << bomb.size() << " bytes inflating to 1 GiB\n";
  const int port = harness.server().port();
  const std::string headers = h2::GrpcRequestHeaders(
      "/pkserve.v1.SparseMemory/TopK", harness.server().target(), {{"grpc-encoding", "gzip"}});
  std::atomic<int64_t> bombs{0};
  std::atomic<int64_t> taken_whole{0};  // bombs whose every byte the server let through
  std::atomic<int64_t> answered{0};     // ... and answered with a message: must stay 0
  harness.RunAndCheck("gzip bomb", 2, [&](const std::atomic<bool>& stop) {
    while (!stop) {
      std::unique_ptr<h2::Connection> connection = h2::Connection::TryOpen(port);
      if (connection == nullptr) {
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      if (!connection->Send(h2::ClientPreface() +
                            h2::Frame(h2::kHeaders, h2::kEndHeaders, 1, headers))) {
        continue;
      }
      std::vector<h2::ParsedFrame> seen;
      const int64_t sent = connection->SendStreamData(1, bomb, absl::Seconds(5), seen);
      ++bombs;
      if (sent == static_cast<int64_t>(bomb.size())) ++taken_whole;
      for (const h2::ParsedFrame& frame : seen) {
        if (frame.stream_id == 1 && frame.type == h2::kData) ++answered;
      }
    }
  });
  std::cout << bombs.load() << " bombs sent, " << taken_whole.load() << " let through whole, "
            << answered.load() << " answered with a message\n";
  EXPECT_GT(bombs.load(), 0);
  EXPECT_EQ(answered.load(), 0);
  EXPECT_EQ(taken_whole.load(), 0) << "the server took in whole compressed messages";
}

TEST(CompressionBombTest, AClientThatCompressesIsToldCompressionIsOff) {
  testing::ChildServer server(PKSERVE_BINARY, {"--backend=cpu", "--threads=1"});
  ASSERT_GT(server.port(), 0);
  auto stub = v1::SparseMemory::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  std::mt19937_64 engine(3);
  const v1::TopKRequest request =
      testing::RandomRequest(testing::MakeProblem({256, 256}, 8, pk::DType::kFloat32), 64, engine);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  v1::TopKResponse response;
  const grpc::Status status = stub->TopK(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
  EXPECT_NE(status.error_message().find("gzip"), std::string::npos) << status.error_message();

  grpc::ClientContext plain;
  plain.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  const grpc::Status uncompressed = stub->TopK(&plain, request, &response);
  EXPECT_TRUE(uncompressed.ok()) << uncompressed.error_message();
  EXPECT_EQ(testing::CheckResponse(request, response), "");
}

}  // namespace
}  // namespace pkserve
