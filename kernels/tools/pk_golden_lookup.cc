// pk-golden-lookup FILE [--backend cpu|cuda|all] [--threads N]
//
// Checks every golden memory lookup case of FILE (tests/data/lookup_cases.bin; format:
// tests/data/README.md) against the chosen backends, bit for bit: slots, weights, row_valid and
// outputs. Prints one line per failing case and backend, then "N passed, N failed". Exit status:
// 0 when every check passed, 1 when one failed, 2 for a usage error, an unreadable file or an
// unusable backend.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/parallel_topk.h"
#include "kernels/tools/golden_args.h"
#include "kernels/golden/lookup_golden.h"
#if PK_HAVE_CUDA
#include "kernels/cuda/lookup_cuda.h"
#include "kernels/cuda/topk_cuda.h"
#endif

namespace {

struct Outputs {
  std::vector<uint32_t> slots;
  std::vector<float> weights;
  std::vector<uint8_t> row_valid;
  std::vector<std::byte> outputs;
};

// Runs one backend on a whole case; returns an error message when the backend itself failed.
using RunBackend = std::function<std::string(const pk::golden::LookupCase&,
                                             std::span<const std::byte> table, Outputs&)>;

struct Backend {
  std::string name;
  RunBackend run;
};

}  // namespace

int main(int argc, char** argv) {
  pk::tools::GoldenArgs args;
  if (const int exit = pk::tools::ParseGoldenArgs(argc, argv, "pk-golden-lookup", "checks every golden lookup case against the chosen backends", &args);
      exit >= 0) {
    return exit;
  }
  const std::string& path = args.path;
  const std::string& backend_choice = args.backend;
  const int threads = args.threads;

  std::vector<Backend> backends;
  pk::cpu::ParallelTopK cpu(threads, 1);
  if (backend_choice != "cuda") {
    backends.push_back({"cpu", [&](const pk::golden::LookupCase& c,
                                   std::span<const std::byte> table, Outputs& out) {
                          const std::span<const std::byte> input(c.scores);
                          const pk::ValuesView view{table.data(), c.table_slots(), c.problem.dim,
                                                    c.problem.value_dtype};
                          cpu.RunLookup(c.problem, view, std::span(&input, 1), out.slots.data(),
                                        out.weights.data(), out.row_valid.data(),
                                        out.outputs.data());
                          return std::string();
                        }});
  }
  if (backend_choice != "cpu") {
#if PK_HAVE_CUDA
    std::string why;
    if (pk::cuda::DeviceAvailable(&why)) {
      backends.push_back({"cuda", [](const pk::golden::LookupCase& c,
                                     std::span<const std::byte> table, Outputs& out) {
                            return pk::cuda::LookupHost(c.problem, table.data(), c.table_slots(),
                                                        c.scores.data(), c.rows, out.slots.data(),
                                                        out.weights.data(), out.row_valid.data(),
                                                        out.outputs.data());
                          }});
    } else if (backend_choice == "cuda") {
      std::fprintf(stderr, "pk-golden-lookup: cuda backend unusable: %s\n", why.c_str());
      return 2;
    } else {
      std::printf("cuda: skipped (%s)\n", why.c_str());
    }
#else
    if (backend_choice == "cuda") {
      std::fprintf(stderr, "pk-golden-lookup: cuda backend not built (no CUDA toolkit at build time)\n");
      return 2;
    }
    std::printf("cuda: skipped (not built: no CUDA toolkit at build time)\n");
#endif
  }

  auto cases = pk::golden::ReadLookupFile(path);
  if (!cases.ok()) {
    std::fprintf(stderr, "pk-golden-lookup: %s\n", cases.error().message.c_str());
    return 2;
  }
  int passed = 0;
  int failed = 0;
  for (const pk::golden::LookupCase& c : cases.value()) {
    const auto table = pk::golden::TableFromSeed(c.table_seed, c.table_slots(), c.problem.dim,
                                                 c.problem.value_dtype);
    for (const Backend& backend : backends) {
      const size_t pairs = size_t{c.rows} * c.problem.topk.kk();
      Outputs out;
      out.slots.assign(pairs, 0xdeadbeefu);
      out.weights.assign(pairs, -1.0f);
      out.row_valid.assign(c.rows, 0xa5);
      out.outputs.assign(c.outputs.size(), std::byte{0xa5});
      const std::string error = backend.run(c, table, out);
      if (!error.empty()) {
        std::printf("FAIL %s [%s]: backend error: %s\n", c.name.c_str(), backend.name.c_str(),
                    error.c_str());
        ++failed;
        continue;
      }
      if (auto difference =
              pk::golden::CompareLookup(c, out.slots, out.weights, out.row_valid, out.outputs)) {
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
