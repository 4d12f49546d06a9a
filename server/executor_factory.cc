#include "server/executor_factory.h"

#include <utility>

#include "server/cpu_executor.h"
#include "spdlog/spdlog.h"

namespace pkserve {
namespace {

std::unique_ptr<Executor> MakeCpuExecutor(const ServerConfig& config) {
  CpuExecutor::Options options;
  options.threads = config.ResolvedThreads();
  return std::make_unique<CpuExecutor>(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(const ServerConfig& config) {
  switch (config.backend) {
    case Backend::kCpu:
      return MakeCpuExecutor(config);
    case Backend::kCuda:
#if defined(PK_HAVE_CUDA)
      return MakeCudaExecutor(config);
#else
      return absl::FailedPreconditionError(
          "--backend=cuda: cuda backend not built (this pkserve was built without the CUDA "
          "toolkit); use --backend=cpu or auto");
#endif
    case Backend::kAuto:
      break;
  }
#if defined(PK_HAVE_CUDA)
  absl::StatusOr<std::unique_ptr<Executor>> cuda = MakeCudaExecutor(config);
  if (cuda.ok()) {
    spdlog::info("backend auto: using cuda");
    return cuda;
  }
  spdlog::warn("backend auto: cuda unusable ({}); falling back to cpu", cuda.status().ToString());
#else
  spdlog::info("backend auto: using cpu (cuda backend not built)");
#endif
  return MakeCpuExecutor(config);
}

}  // namespace pkserve
