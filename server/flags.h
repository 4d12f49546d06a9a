// pkserve's command-line flags (abseil flags) and their translation into a ServerConfig.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/config.h"

namespace pkserve {

// Makes --help list pkserve's flags (they live in this module, not in main.cc) and sets the usage
// and --version text. Call before ParseFlagsOrExit (server/flag_usage.h).
void SetUpFlagsUsage();

// Takes every --memory=VALUE (or --memory VALUE) out of argv, in order, and returns the values:
// --memory repeats, which abseil's flags do not. Call before absl::ParseCommandLine; `argc`
// shrinks to match.
std::vector<std::string> TakeMemoryFlags(int& argc, char** argv);

// The config the parsed flags describe (with the --memory values TakeMemoryFlags took),
// validated; errors name the flag and its allowed range.
absl::StatusOr<ServerConfig> ConfigFromFlags(const std::vector<std::string>& memory_flags = {});

}  // namespace pkserve
