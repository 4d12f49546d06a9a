// pk-bench-cpu: rows/s of the CPU top-k beside a straightforward implementation and a memcpy of
// the same input bytes, measured in the same run.
//
//   pk-bench-cpu [--seconds S] [--repeats N] [--threads 1,2] [--config NAME]
//
// Each figure is the median of N timed passes of about S seconds each, over a pool of fresh
// random normal rows larger than the last-level cache (rotated, so no pass re-reads a warm row).
// Prints a table, then one JSON line per configuration.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bench/naive_topk.h"
#include "kernels/cpu/parallel_topk.h"
#include "kernels/cpu/topk_cpu.h"
#include "kernels/problem.h"
#include "kernels/testing/random_rows.h"

namespace {

struct Config {
  std::string name;
  std::vector<uint32_t> widths;
  uint32_t k;
  pk::DType dtype;
};

const std::vector<Config>& Configs() {
  using pk::DType;
  static const std::vector<Config> configs = {
      {"1024x1024_k32_bf16", {1024, 1024}, 32, DType::kBFloat16},
      {"1024x1024_k64_bf16", {1024, 1024}, 64, DType::kBFloat16},
      {"1024x1024_k128_bf16", {1024, 1024}, 128, DType::kBFloat16},
      {"1024x1024_k256_bf16", {1024, 1024}, 256, DType::kBFloat16},
      {"1024x1024_k64_f32", {1024, 1024}, 64, DType::kFloat32},
      {"256x256_k64_bf16", {256, 256}, 64, DType::kBFloat16},
      {"4096x4096_k64_bf16", {4096, 4096}, 64, DType::kBFloat16},
      {"64x64x64_k64_bf16", {64, 64, 64}, 64, DType::kBFloat16},
      {"32x32x32x32_k64_bf16", {32, 32, 32, 32}, 64, DType::kBFloat16},
      {"16x16x16x16_k32_f32", {16, 16, 16, 16}, 32, DType::kFloat32},
  };
  return configs;
}

// Median rows/s of `repeats` passes; each pass runs `batch`-row calls over the pool, rotating,
// until `seconds` have passed.
double MeasureRowsPerSecond(size_t pool_rows, size_t batch, double seconds, int repeats,
                            const std::function<void(size_t first_row, size_t rows)>& run) {
  using Clock = std::chrono::steady_clock;
  run(0, std::min(batch, pool_rows));  // warm-up
  std::vector<double> rates;
  size_t next = 0;
  for (int r = 0; r < repeats; ++r) {
    size_t done = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      const size_t rows = std::min(batch, pool_rows - next);
      run(next, rows);
      done += rows;
      next = (next + rows) % pool_rows;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds);
    rates.push_back(static_cast<double>(done) / elapsed);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

std::string Rate(double rows_per_second) {
  char text[32];
  if (rows_per_second >= 1e6) {
    std::snprintf(text, sizeof text, "%.2fM", rows_per_second / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.1fk", rows_per_second / 1e3);
  }
  return text;
}

std::vector<int> ParseList(const char* text) {
  std::vector<int> values;
  for (const char* p = text; *p;) {
    values.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.3;
  int repeats = 5;
  std::vector<int> thread_counts = {1, 2};
  std::string only;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--seconds" && has_value) {
      seconds = std::atof(argv[++a]);
    } else if (arg == "--repeats" && has_value) {
      repeats = std::max(1, std::atoi(argv[++a]));
    } else if (arg == "--threads" && has_value) {
      thread_counts = ParseList(argv[++a]);
    } else if (arg == "--config" && has_value) {
      only = argv[++a];
    } else {
      std::fprintf(stderr,
                   "usage: pk-bench-cpu [--seconds S] [--repeats N] [--threads 1,2] "
                   "[--config NAME]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  if (thread_counts.empty() || thread_counts[0] < 1) thread_counts = {1};

  std::printf("pk-bench-cpu: CPU path %s, %u hardware threads, median of %d x %.2f s\n",
              pk::cpu::CpuPathName(), std::thread::hardware_concurrency(), repeats, seconds);
  std::printf("%-22s", "config");
  for (int t : thread_counts) std::printf(" %10s", (std::to_string(t) + "T rows/s").c_str());
  std::printf(" %11s %9s %12s %9s\n", "naive rows/s", "vs naive", "memcpy rows/s", "/memcpy");
  std::vector<std::string> json;
  for (const Config& config : Configs()) {
    if (!only.empty() && config.name != only) continue;
    const pk::Problem problem = pk::ValidateProblem(config.widths, config.k, config.dtype).value();
    // At least 64 MiB of input and 4096 rows: larger than the caches, many rows per pass.
    const size_t pool_rows = std::max<size_t>(4096, (size_t{64} << 20) / problem.row_bytes());
    std::mt19937_64 engine(0x5eed + config.k);
    const std::vector<std::byte> pool =
        pk::testing::RandomRows(problem, pool_rows, pk::testing::Distribution::kNormal, engine);
    const uint32_t kk = problem.kk();
    std::vector<std::byte> values(pool_rows * problem.out_value_bytes());
    std::vector<uint32_t> slots(pool_rows * kk);
    const size_t batch = 256;

    std::vector<double> ours;
    for (int threads : thread_counts) {
      pk::cpu::ParallelTopK runner(threads, 1);
      ours.push_back(MeasureRowsPerSecond(pool_rows, batch, seconds, repeats, [&](size_t first, size_t rows) {
        runner.Run(problem, pool.data() + first * problem.row_bytes(), rows,
                   values.data() + first * problem.out_value_bytes(), slots.data() + first * kk);
      }));
    }
    pk::bench::NaiveTopK naive;
    const double naive_rate =
        MeasureRowsPerSecond(pool_rows, batch, seconds, repeats, [&](size_t first, size_t rows) {
          naive.Run(problem, pool.data() + first * problem.row_bytes(), rows,
                    values.data() + first * problem.out_value_bytes(), slots.data() + first * kk);
        });
    std::vector<std::byte> copy(pool.size());
    const double memcpy_rate =
        MeasureRowsPerSecond(pool_rows, batch, seconds, repeats, [&](size_t first, size_t rows) {
          std::memcpy(copy.data() + first * problem.row_bytes(),
                      pool.data() + first * problem.row_bytes(), rows * problem.row_bytes());
        });

    std::printf("%-22s", config.name.c_str());
    for (double rate : ours) std::printf(" %10s", Rate(rate).c_str());
    std::printf(" %11s %8.1fx %12s %8.3f\n", Rate(naive_rate).c_str(), ours[0] / naive_rate,
                Rate(memcpy_rate).c_str(), ours[0] / memcpy_rate);
    std::string line = "{\"config\":\"" + config.name + "\",\"cpu_path\":\"" +
                       pk::cpu::CpuPathName() + "\"";
    for (size_t t = 0; t < thread_counts.size(); ++t) {
      line += ",\"rows_per_s_" + std::to_string(thread_counts[t]) + "t\":" +
              std::to_string(static_cast<long long>(ours[t]));
    }
    line += ",\"naive_rows_per_s\":" + std::to_string(static_cast<long long>(naive_rate)) +
            ",\"memcpy_rows_per_s\":" + std::to_string(static_cast<long long>(memcpy_rate)) +
            ",\"speedup_vs_naive\":" + std::to_string(ours[0] / naive_rate) +
            ",\"fraction_of_memcpy\":" + std::to_string(ours[0] / memcpy_rate);
    if (thread_counts.size() > 1) {
      line += ",\"scaling_" + std::to_string(thread_counts[1]) + "t\":" + std::to_string(ours[1] / ours[0]);
    }
    json.push_back(line + "}");
  }
  for (const std::string& line : json) std::printf("%s\n", line.c_str());
  return 0;
}
