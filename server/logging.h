// The process's log: spdlog to stderr, as text for people or one JSON object a line for
// collectors (--log_format=json).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/config.h"

namespace pkserve {

// Makes the default spdlog logger write to stderr at `level` (trace|debug|info|warn|error|
// critical|off) in `format`. JSON lines carry time (UTC, ISO 8601), level, thread and msg.
absl::Status SetUpLogging(const std::string& level, LogFormat format);

}  // namespace pkserve
