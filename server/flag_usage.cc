#include "server/flag_usage.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pkserve {
namespace {

std::string& ProgramName() {
  static std::string* name = new std::string("pkserve");
  return *name;
}

// Abseil reports a flag it cannot parse and then calls std::exit(1) itself. While the flags are
// parsed, this handler (run by that exit) ends the process with kUsageError instead.
std::atomic<bool> parsing{false};

void ExitTwoIfParsing() {
  if (!parsing.load()) return;
  std::cout.flush();
  std::fprintf(stderr, "%s: bad usage (see --help)\n", ProgramName().c_str());
  std::fflush(nullptr);
  _exit(kUsageError);
}

// Abseil records the path the compiler was given ("../server/flags.cc" from a build folder, or
// the absolute path); --help names a file of this project as the repository does.
std::string RepositoryPath(absl::string_view file) {
  absl::ConsumePrefix(&file, PK_SOURCE_DIR "/");
  while (absl::ConsumePrefix(&file, "../")) {
  }
  return std::string(file);
}

}  // namespace

void SetUpProgramUsage(const ProgramUsage& usage) {
  ProgramName() = usage.name;
  absl::FlagsUsageConfig config;
  const std::string source = usage.flags_source;
  const auto ours = [source](absl::string_view file) { return absl::EndsWith(file, source); };
  config.contains_helpshort_flags = ours;
  config.contains_help_flags = ours;
  config.normalize_filename = RepositoryPath;
  const std::string version = usage.version;
  config.version_string = [version] { return absl::StrCat(version, "\n"); };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage.message);
}

std::vector<char*> ParseFlagsOrExit(int argc, char** argv) {
  static const bool registered = std::atexit(ExitTwoIfParsing) == 0;
  (void)registered;
  parsing.store(true);
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  parsing.store(false);
  // --help and the like: abseil would exit 1 after the text; asking for help is no error.
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(0);
  }
  return positional;
}

}  // namespace pkserve
