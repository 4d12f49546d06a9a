// A grpc-timeout of 2 080 000 hours or more (how some clients spell "no deadline": gRPC's
// chrono conversion overflows there) is treated as no deadline: the call is answered, not
// refused as already expired. Sent over raw HTTP/2, since a gRPC C++ client cannot express such a
// deadline. Loopback only, against the pkserve binary.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tests/reliability/raw_http2.h"
#include "tests/server/pkserve_process.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

namespace h2 = testing::http2;

// Sends one TopK request with `grpc_timeout` (none when empty) on a fresh connection and returns
// whether a response message (a DATA frame on its stream) came back within 10 s; a refused call
// is answered with trailers only.
bool AnsweredWithAMessage(int port, const std::string& authority, const std::string& grpc_timeout) {
  std::mt19937_64 engine(5);
  std::string request;
  EXPECT_TRUE(
      testing::RandomRequest(testing::MakeProblem({256, 256}, 8, pk::DType::kFloat32), 2, engine)
          .SerializeToString(&request));
  std::vector<std::pair<std::string, std::string>> extra;
  if (!grpc_timeout.empty()) extra.emplace_back("grpc-timeout", grpc_timeout);
  const std::string headers =
      h2::GrpcRequestHeaders("/pkserve.v1.SparseMemory/TopK", authority, extra);
  std::unique_ptr<h2::Connection> connection = h2::Connection::Open(port);
  if (connection == nullptr) return false;
  connection->Send(h2::ClientPreface() + h2::Frame(h2::kSettings, h2::kAck, 0, "") +
                   h2::Frame(h2::kHeaders, h2::kEndHeaders, 1, headers) +
                   h2::Frame(h2::kData, h2::kEndStream, 1, h2::GrpcMessage(request)));
  std::string received;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up && !connection->closed_by_peer()) {
    received += connection->ReadFor(absl::Milliseconds(50));
    for (const h2::ParsedFrame& frame : h2::ParseFrames(received)) {
      if (frame.stream_id != 1) continue;
      if (frame.type == h2::kData && frame.payload.size() > 5) return true;
      if (frame.type == h2::kHeaders && (frame.flags & h2::kEndStream) != 0) return false;
      if (frame.type == h2::kRstStream) return false;
    }
  }
  return false;
}

TEST(HugeDeadlineTest, AHugeGrpcTimeoutIsNoDeadline) {
  testing::ChildServer server(PKSERVE_BINARY, {"--backend=cpu", "--threads=1"});
  ASSERT_GT(server.port(), 0);
  // The ordinary cases first, which show that an answer is seen when there is one.
  EXPECT_TRUE(AnsweredWithAMessage(server.port(), server.target(), ""));
  EXPECT_TRUE(AnsweredWithAMessage(server.port(), server.target(), "20S"));
  for (const char* huge : {"2080000H", "9999999H", "99999999H", "99999999S"}) {
    EXPECT_TRUE(AnsweredWithAMessage(server.port(), server.target(), huge))
        << "grpc-timeout " << huge << "; log:\n"
        << server.log();
  }
}

}  // namespace
}  // namespace pkserve
