// pk-golden FILE [--backend cpu|cuda|all] [--threads N]
//
// Checks every case of a golden file against the chosen backends. Prints one line per failing
// case and backend, then "N passed, N failed". Exit status: 0 when every check passed, 1 when one
// failed, 2 for a usage error, an unreadable file or an unusable backend.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/parallel_topk.h"
#include "kernels/tools/golden_args.h"
#include "kernels/golden/golden.h"
#if PK_HAVE_CUDA
#include "kernels/cuda/topk_cuda.h"
#endif

namespace {

// Runs one backend on a whole case; returns an error message when the backend itself failed.
using RunBackend = std::function<std::string(const pk::golden::Case&, std::byte* values,
                                             uint32_t* slots)>;

struct Backend {
  std::string name;
  RunBackend run;
};

}  // namespace

int main(int argc, char** argv) {
  pk::tools::GoldenArgs args;
  if (const int exit = pk::tools::ParseGoldenArgs(argc, argv, "pk-golden", "checks every case of a golden file against the chosen backends", &args);
      exit >= 0) {
    return exit;
  }
  const std::string& path = args.path;
  const std::string& backend_choice = args.backend;
  const int threads = args.threads;

  std::vector<Backend> backends;
  pk::cpu::ParallelTopK cpu(threads);
  if (backend_choice != "cuda") {
    backends.push_back({"cpu", [&](const pk::golden::Case& c, std::byte* values, uint32_t* slots) {
                          cpu.Run(c.problem, c.scores.data(), c.rows, values, slots);
                          return std::string();
                        }});
  }
  if (backend_choice != "cpu") {
#if PK_HAVE_CUDA
    std::string why;
    if (pk::cuda::DeviceAvailable(&why)) {
      backends.push_back({"cuda", [](const pk::golden::Case& c, std::byte* values, uint32_t* slots) {
                            const auto done = pk::cuda::TopKHost(c.problem, c.scores.data(),
                                                                 c.rows, values, slots);
                            return done.ok() ? std::string() : done.error().message;
                          }});
    } else if (backend_choice == "cuda") {
      std::fprintf(stderr, "pk-golden: cuda backend unusable: %s\n", why.c_str());
      return 2;
    } else {
      std::printf("cuda: skipped (%s)\n", why.c_str());
    }
#else
    if (backend_choice == "cuda") {
      std::fprintf(stderr, "pk-golden: cuda backend not built (no CUDA toolkit at build time)\n");
      return 2;
    }
    std::printf("cuda: skipped (not built: no CUDA toolkit at build time)\n");
#endif
  }

  auto cases = pk::golden::ReadFile(path);
  if (!cases.ok()) {
    std::fprintf(stderr, "pk-golden: %s\n", cases.error().message.c_str());
    return 2;
  }
  int passed = 0;
  int failed = 0;
  for (const Backend& backend : backends) {
    for (const pk::golden::Case& c : cases.value()) {
      const size_t outputs = size_t{c.rows} * c.problem.kk();
      std::vector<std::byte> values(outputs * pk::ElementBytes(c.problem.dtype), std::byte{0xa5});
      std::vector<uint32_t> slots(outputs, 0xdeadbeefu);
      const std::string error = backend.run(c, values.data(), slots.data());
      if (!error.empty()) {
        std::printf("FAIL %s [%s]: backend error: %s\n", c.name.c_str(), backend.name.c_str(),
                    error.c_str());
        ++failed;
        continue;
      }
      if (auto difference = pk::golden::Compare(c, values, slots)) {
        std::printf("FAIL %s [%s]: %s\n", c.name.c_str(), backend.name.c_str(),
                    difference->c_str());
        ++failed;
      } else {
        ++passed;
      }
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
