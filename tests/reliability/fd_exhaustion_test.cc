// Descriptor exhaustion (issue 23, item 4): pkserve started with the usual soft limit of 1 024 open
// files (through prlimit, the hard limit left as it is) and 1 100 idle HTTP/2 connections held
// open for the attack, beside the good caller (attack.h's bounds). pkserve raises its soft limit
// to the hard one at start, so its listener never meets EMFILE (with which gRPC 1.51 stops
// accepting for good), and a new connection after the attack is served.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

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

constexpr int kConnections = 1100;
constexpr rlim_t kServerSoftLimit = 1024;
constexpr char kPrlimit[] = "/usr/bin/prlimit";

// A TopK on a connection of its own, made now.
grpc::Status CallOnANewConnection(const std::string& target) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::SparseMemory::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments));
  std::mt19937_64 engine(9);
  const v1::TopKRequest request =
      testing::RandomRequest(testing::MakeProblem({256, 256}, 8, pk::DType::kFloat32), 2, engine);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::TopKResponse response;
  grpc::Status status = stub->TopK(&context, request, &response);
  if (status.ok() && !testing::CheckResponse(request, response).empty()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "wrong answer");
  }
  return status;
}

TEST(FdExhaustionTest, IdleConnectionsPastTheUsualSoftLimitLeaveTheServerAccepting) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 2 * kConnections + 512 || access(kPrlimit, X_OK) != 0) {
    GTEST_SKIP() << "needs a hard open-files limit of " << 2 * kConnections + 512 << " (have "
                 << limit.rlim_max << ") and " << kPrlimit;
  }
  limit.rlim_cur = limit.rlim_max;  // this test holds the attacker's end of each connection
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  testing::AttackHarness harness(
      {}, {kPrlimit, absl::StrCat("--nofile=", kServerSoftLimit, ":", limit.rlim_max), "--"});
  EXPECT_NE(harness.server().log().find(absl::StrCat("open files: soft limit ", limit.rlim_max,
                                                     " (was ", kServerSoftLimit, ")")),
            std::string::npos)
      << harness.server().log();
  const int port = harness.server().port();
  const std::string target = harness.server().target();
  std::atomic<int> opened{0};
  harness.RunAndCheck(
      "1100 idle connections", 2,
      [&](const std::atomic<bool>& stop) {
        std::vector<std::unique_ptr<h2::Connection>> held;
        while (!stop && held.size() < kConnections / 2) {
          std::unique_ptr<h2::Connection> connection = h2::Connection::TryOpen(port);
          if (connection == nullptr) break;
          connection->Send(h2::ClientPreface());
          held.push_back(std::move(connection));
          ++opened;
        }
        while (!stop) absl::SleepFor(absl::Milliseconds(20));
      },
      [&] {
        std::cout << opened.load() << " connections were held open\n";
        const grpc::Status status = CallOnANewConnection(target);
        EXPECT_TRUE(status.ok()) << "a new connection after the attack: " << status.error_code()
                                 << " " << status.error_message() << "; log:\n"
                                 << harness.server().log().substr(0, 4000);
      });
  EXPECT_GE(opened.load(), kConnections);
}

}  // namespace
}  // namespace pkserve
