// pk-bench-lookup-cpu: value bytes read per second per core of the CPU weighted sum
// (WeightedSumRows, kernels/lookup/lookup_cpu.h) beside a memcpy on the same core, both measured
// in the same run.
//
//   pk-bench-lookup-cpu [--seconds S] [--repeats N]
//
// Shapes: a 256 x 256-slot table (larger than the last-level cache) of dim 1024 and 4096, bfloat16
// and float32 values and outputs, heads 4, k 32. The slots and weights are those of the lookup's
// phase 1 on fresh random normal score rows (a pool of outputs, rotated). Value bytes read =
// outputs x heads x kk x dim x value size. The memcpy copies 1 MiB blocks of a 256 MiB buffer
// (bytes read per second). Each figure is the median of N passes of about S seconds, one thread.
// Prints a table, then one JSON line per configuration.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/topk_cpu.h"
#include "kernels/lookup/lookup.h"
#include "kernels/lookup/lookup_cpu.h"
#include "kernels/numeric.h"
#include "kernels/testing/random_rows.h"

namespace {

// Median units/s of `repeats` passes of about `seconds`; run(i) does call i and returns its units.
double MedianRate(double seconds, int repeats, const std::function<double(size_t)>& run) {
  using Clock = std::chrono::steady_clock;
  run(0);  // warm-up
  std::vector<double> rates;
  size_t call = 1;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    double units = 0;
    double elapsed = 0;
    do {
      units += run(call++);
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds);
    rates.push_back(units / elapsed);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.5;
  int repeats = 5;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--seconds" && a + 1 < argc) {
      seconds = std::atof(argv[++a]);
    } else if (arg == "--repeats" && a + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++a]));
    } else {
      std::fprintf(stderr, "usage: pk-bench-lookup-cpu [--seconds S] [--repeats N]\n");
      return 2;
    }
  }
  std::printf("pk-bench-lookup-cpu: weighted-sum path %s, one thread, median of %d x %.2f s\n",
              pk::cpu::SumPathName(), repeats, seconds);

  // memcpy on this core: bytes read per second.
  const size_t copy_bytes = size_t{256} << 20, block = size_t{1} << 20;
  std::vector<std::byte> from(copy_bytes, std::byte{1}), to(copy_bytes);
  const double memcpy_rate = MedianRate(seconds, repeats, [&](size_t call) {
    const size_t offset = (call % (copy_bytes / block)) * block;
    std::memcpy(to.data() + offset, from.data() + offset, block);
    return static_cast<double>(block);
  });
  std::printf("memcpy: %.2f GB/s read\n\n%-24s %14s %10s\n", memcpy_rate * 1e-9, "config",
              "value GB/s", "/memcpy");

  const uint32_t widths[] = {256, 256};
  const uint64_t slots = 256 * 256;
  const uint32_t heads = 4, k = 32;
  const size_t pool_outputs = 512, batch = 8;
  std::vector<std::string> json;
  std::mt19937_64 engine(16);
  for (uint32_t dim : {1024u, 4096u}) {
    for (pk::DType dtype : {pk::DType::kBFloat16, pk::DType::kFloat32}) {
      const pk::Problem topk = pk::ValidateProblem(widths, k, pk::DType::kBFloat16).value();
      const pk::LookupProblem p = pk::ValidateLookup(topk, heads, dim, dtype, dtype).value();
      // The table: normals, never zero (a zero is replaced by 1).
      std::vector<std::byte> table(slots * p.value_row_bytes());
      std::normal_distribution<float> normal;
      for (uint64_t e = 0; e < slots * dim; ++e) {
        float x = normal(engine);
        if (x == 0.0f) x = 1.0f;
        if (dtype == pk::DType::kFloat32) {
          std::memcpy(table.data() + e * 4, &x, 4);
        } else {
          const uint16_t bits = pk::FloatToBf16(x);
          std::memcpy(table.data() + e * 2, &bits, 2);
        }
      }
      const size_t rows = pool_outputs * heads, kk = topk.kk();
      const auto scores =
          pk::testing::RandomRows(topk, rows, pk::testing::Distribution::kNormal, engine);
      std::vector<uint32_t> pair_slots(rows * kk);
      std::vector<float> weights(rows * kk);
      std::vector<uint8_t> valid(rows);
      pk::cpu::Workspace ws;
      pk::cpu::LookupWeightsRows(topk, scores.data(), rows, pair_slots.data(), weights.data(),
                                 valid.data(), ws);
      std::vector<std::byte> out(batch * p.output_row_bytes());
      const pk::ValuesView view{table.data(), slots, dim, dtype};
      const double bytes_per_output = double(p.pairs_per_output()) * p.value_row_bytes();
      const double rate = MedianRate(seconds, repeats, [&](size_t call) {
        const size_t first = (call * batch) % pool_outputs;
        const size_t pairs = p.pairs_per_output();
        pk::cpu::WeightedSumRows(p, view, pair_slots.data() + first * pairs,
                                 weights.data() + first * pairs, batch, out.data());
        return bytes_per_output * batch;
      });
      const std::string name = "256x256_h4_k32_d" + std::to_string(dim) + "_" +
                               (dtype == pk::DType::kFloat32 ? "f32" : "bf16");
      std::printf("%-24s %14.2f %10.3f\n", name.c_str(), rate * 1e-9, rate / memcpy_rate);
      json.push_back("{\"bench\":\"cpu_weighted_sum\",\"config\":\"" + name +
                     "\",\"path\":\"" + pk::cpu::SumPathName() +
                     "\",\"value_bytes_per_s\":" + std::to_string(rate) +
                     ",\"memcpy_bytes_per_s\":" + std::to_string(memcpy_rate) +
                     ",\"fraction_of_memcpy\":" + std::to_string(rate / memcpy_rate) + "}");
    }
  }
  for (const std::string& line : json) std::printf("%s\n", line.c_str());
  return 0;
}
