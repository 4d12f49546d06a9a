// A second pkserve on a port that a first one serves must refuse to start, with a message that
// says the port is in use, and leave the first one serving alone (gRPC's default SO_REUSEPORT let
// both bind it and share its callers). The same for the metrics port. Loopback only.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/server/pkserve_process.h"

namespace pkserve {
namespace {

using testing::ChildServer;
using testing::PkserveProcess;

// The second process's exit status, or a failure when it still runs after 20 s.
void ExpectRefusedToStart(PkserveProcess& second, const std::string& expected_flag) {
  const std::optional<int> exit = second.WaitExit(absl::Seconds(20));
  ASSERT_TRUE(exit.has_value()) << "the second pkserve runs on a port in use; log:\n"
                                << second.log();
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) != 0) << "wait status " << *exit;
  const std::string log = second.log();
  EXPECT_NE(log.find(expected_flag), std::string::npos) << log;
  EXPECT_NE(log.find("in use"), std::string::npos) << log;
  EXPECT_EQ(log.find("listening on"), std::string::npos) << log;
}

TEST(PortInUseTest, ASecondServerOnAServedGrpcPortFailsToStartAndSaysSo) {
  ChildServer first(PKSERVE_BINARY, {"--backend=cpu", "--threads=1"});
  ASSERT_GT(first.port(), 0);
  PkserveProcess second(PKSERVE_BINARY,
                        {"--backend=cpu", "--threads=1", absl::StrCat("--address=", first.target()),
                         "--metrics_address="});
  ExpectRefusedToStart(second, absl::StrCat("--address=", first.target()));
  EXPECT_TRUE(first.running()) << first.log();
}

TEST(PortInUseTest, ASecondServerOnAServedMetricsPortFailsToStartAndSaysSo) {
  ChildServer first(PKSERVE_BINARY,
                    {"--backend=cpu", "--threads=1", "--metrics_address=127.0.0.1:0"});
  ASSERT_TRUE(first.WaitServing(absl::Seconds(20), /*metrics=*/true)) << first.log();
  const std::string metrics = absl::StrCat("127.0.0.1:", first.metrics_port());
  PkserveProcess second(PKSERVE_BINARY, {"--backend=cpu", "--threads=1", "--address=127.0.0.1:0",
                                         absl::StrCat("--metrics_address=", metrics)});
  ExpectRefusedToStart(second, absl::StrCat("--metrics_address=", metrics));
  EXPECT_TRUE(first.running()) << first.log();
}

}  // namespace
}  // namespace pkserve
