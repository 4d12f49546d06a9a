// The pkserve binary's command line, as a user meets it: --help and --version exit 0, and --help
// lists pkserve's flags under the repository's path of their file (never the build's "../");
// every usage error (unknown flag, unparsable value, value out of range, stray argument) exits 2
// with a message, and starts no server.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "tests/server/pkserve_process.h"

namespace pkserve {
namespace {

using ProcessRun = testing::CommandRun;

ProcessRun RunPkserve(const std::string& arguments) {
  return testing::RunCommand(absl::StrCat(PKSERVE_BINARY, " ", arguments));
}

TEST(PkserveUsage, HelpExitsZeroAndNamesTheFlagsFileAsTheRepositoryDoes) {
  for (const char* help : {"--help", "--helpshort", "--helpfull"}) {
    const ProcessRun run = RunPkserve(help);
    EXPECT_EQ(run.exit_code, 0) << help << "\n" << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "Usage: pkserve")) << help << "\n" << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "Flags from server/flags.cc:")) << help << "\n"
                                                                              << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, "--max_message_bytes")) << help;
    EXPECT_FALSE(absl::StrContains(run.output, "../server/")) << help << "\n" << run.output;
  }
  const ProcessRun version = RunPkserve("--version");
  EXPECT_EQ(version.exit_code, 0) << version.output;
  EXPECT_TRUE(absl::StrContains(version.output, "pkserve ")) << version.output;
}

TEST(PkserveUsage, EveryUsageErrorExitsTwoWithAMessage) {
  for (const char* arguments : {"--no_such_flag", "--threads=abc", "--threads=-1", "--k_typo=3",
                                "--log_level=loud", "stray_argument", "--max_batch_rows=0"}) {
    const ProcessRun run =
        RunPkserve(absl::StrCat(arguments, " --address=127.0.0.1:0 --metrics_address="));
    EXPECT_EQ(run.exit_code, 2) << arguments << "\n" << run.output;
    EXPECT_FALSE(run.output.empty()) << arguments;
    EXPECT_FALSE(absl::StrContains(run.output, "listening on")) << arguments << "\n" << run.output;
  }
}

}  // namespace
}  // namespace pkserve
