#include "server/executor_factory.h"

#include <utility>

#include "server/cpu_executor.h"
#include "spdlog/spdlog.h"
#if defined(PK_HAVE_CUDA)
#include "server/cuda_executor.h"
#endif

namespace pkserve {
namespace {

std::unique_ptr<Executor> MakeCpuExecutor(const ServerConfig& config) {
  CpuExecutor::Options options;
  options.threads = config.ResolvedThreads();
  return std::make_unique<CpuExecutor>(options);
}

#if defined(PK_HAVE_CUDA)
absl::StatusOr<std::unique_ptr<Executor>> MakeCudaExecutor(const ServerConfig& config) {
  CudaExecutor::Options options;
  options.devices = config.devices;
  options.streams = config.streams;
  auto executor = CudaExecutor::Create(options);
  if (!executor.ok()) return executor.status();
  return std::unique_ptr<Executor>(std::move(executor).value());
}
#endif

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
