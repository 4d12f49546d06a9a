// Picks and builds the executor that --backend asks for. The one place a new backend plugs in.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/config.h"
#include "server/executor.h"

namespace pkserve {

// cpu:  the CPU executor with config.ResolvedThreads() threads.
// cuda: the CUDA executor on config.devices with config.streams streams each; without a build
//       that has it (PK_HAVE_CUDA), FAILED_PRECONDITION "cuda backend not built".
// auto: cuda when it is built and a device is usable, else cpu; the choice and the reason are
//       logged, and a CUDA failure at start falls back to cpu with a warning.
absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(const ServerConfig& config);

}  // namespace pkserve
