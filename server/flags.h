// pkserve's command-line flags (abseil flags) and their translation into a ServerConfig.
#pragma once

#include "absl/status/statusor.h"
#include "server/config.h"

namespace pkserve {

// Makes --help list pkserve's flags (they live in this module, not in main.cc) and sets the usage
// and --version text. Call before ParseFlagsOrExit (server/flag_usage.h).
void SetUpFlagsUsage();

// The config the parsed flags describe, validated; errors name the flag and its allowed range.
absl::StatusOr<ServerConfig> ConfigFromFlags();

}  // namespace pkserve
