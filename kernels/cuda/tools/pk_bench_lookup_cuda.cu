// pk-bench-lookup-cuda [--quick] [--repeats N]
//
// Benchmark of the CUDA memory lookup (lookup_launch.h) on issue 16's shapes: a 1024 x 1024-slot
// table of bfloat16 (and float32) values, heads 4, k 32, 4096 outputs a launch, dims 1024 and
// 4096. For each: the weighted sum alone and the whole lookup (the top-k by TopKLauncher, then
// LaunchLookup), timed by CUDA events (median of N launches after warm-up) over fresh random
// score batches (kernels/testing/random_rows.h) rotated among several buffers, as value bytes
// read per second (outputs x heads x kk x dim x value size / time) and as a fraction of the
// device-to-device cudaMemcpy bandwidth measured in the same run (bytes read + written / time,
// as pk-bench-cuda reports it). Then the latency of a 1-output lookup (heads rows, top-k
// included). The table's values are hashed on the device, never zero. Prints a table line and
// one JSON line per result.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/lookup_launch.h"
#include "kernels/lookup/lookup.h"
#include "kernels/numeric.h"
#include "kernels/testing/random_rows.h"

namespace {

#define CUDA_OK(call)                                                                     \
  do {                                                                                    \
    const cudaError_t error_ = (call);                                                    \
    if (error_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "pk-bench-lookup-cuda: %s failed: %s\n", #call,               \
                   cudaGetErrorString(error_));                                           \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

__device__ uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fills a table with values in (-2, 2), never zero, from a hashed counter.
__global__ void FillTable(uint8_t* out, size_t count, int element_bytes, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const float x = (static_cast<float>(Mix(seed + 0x9e3779b97f4a7c15ull * (i + 1)) >> 40) -
                     8388608.0f + 0.5f) * 0x1p-22f;
    if (element_bytes == 4) {
      reinterpret_cast<float*>(out)[i] = x;
    } else {
      reinterpret_cast<uint16_t*>(out)[i] = pk::FloatToBf16(x);
    }
  }
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Device-to-device copy bandwidth, bytes read + written per second.
double CopyBandwidth(int repeats, cudaEvent_t start, cudaEvent_t stop) {
  const size_t bytes = size_t{1} << 30;
  void* from = nullptr;
  void* to = nullptr;
  CUDA_OK(cudaMalloc(&from, bytes));
  CUDA_OK(cudaMalloc(&to, bytes));
  CUDA_OK(cudaMemset(from, 1, bytes));
  std::vector<double> ms;
  for (int r = 0; r < repeats + 3; ++r) {
    CUDA_OK(cudaEventRecord(start));
    CUDA_OK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice));
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, start, stop));
    if (r >= 3) ms.push_back(t);
  }
  CUDA_OK(cudaFree(from));
  CUDA_OK(cudaFree(to));
  return 2.0 * bytes / (Median(ms) * 1e-3);
}

// Several batches of score rows, their top-k slots, and room for the lookup's results.
struct Batches {
  std::vector<void*> scores;
  std::vector<uint32_t*> slots;
  void* topk_values = nullptr;
  float* weights = nullptr;
  uint8_t* row_valid = nullptr;
  std::byte* outputs = nullptr;
};

Batches MakeBatches(const pk::LookupProblem& p, size_t rows, int count, uint64_t seed) {
  Batches b;
  std::mt19937_64 engine(seed);
  const size_t kk = p.topk.kk();
  for (int i = 0; i < count; ++i) {
    const auto host = pk::testing::RandomRows(p.topk, rows, pk::testing::Distribution::kNormal, engine);
    void* scores = nullptr;
    uint32_t* slots = nullptr;
    CUDA_OK(cudaMalloc(&scores, host.size()));
    CUDA_OK(cudaMemcpy(scores, host.data(), host.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&slots), rows * kk * 4));
    b.scores.push_back(scores);
    b.slots.push_back(slots);
  }
  CUDA_OK(cudaMalloc(&b.topk_values, rows * p.topk.out_value_bytes()));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&b.weights), rows * kk * 4));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&b.row_valid), rows));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&b.outputs), rows / p.heads * p.output_row_bytes()));
  return b;
}

void FreeBatches(Batches& b) {
  for (void* s : b.scores) CUDA_OK(cudaFree(s));
  for (uint32_t* s : b.slots) CUDA_OK(cudaFree(s));
  CUDA_OK(cudaFree(b.topk_values));
  CUDA_OK(cudaFree(b.weights));
  CUDA_OK(cudaFree(b.row_valid));
  CUDA_OK(cudaFree(b.outputs));
}

// Median milliseconds of `launch(i)` for batch i (rotating), after three warm-up launches.
template <class Launch>
double TimeMs(int repeats, int batches, cudaEvent_t start, cudaEvent_t stop, Launch launch) {
  std::vector<double> ms;
  for (int r = 0; r < repeats + 3; ++r) {
    CUDA_OK(cudaEventRecord(start));
    launch(r % batches);
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, start, stop));
    if (r >= 3) ms.push_back(t);
  }
  return Median(ms);
}

const char* Name(pk::DType dtype) { return dtype == pk::DType::kFloat32 ? "f32" : "bf16"; }

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int repeats = 20;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      quick = true;
      repeats = 5;
    } else if (arg == "--repeats" && a + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++a]));
    } else {
      std::fprintf(stderr, "usage: pk-bench-lookup-cuda [--quick] [--repeats N]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("pk-bench-lookup-cuda: skipped: no CUDA device\n");
    return 77;
  }
  auto created = pk::cuda::TopKLauncher::Create(0);
  if (!created.ok()) {
    std::fprintf(stderr, "pk-bench-lookup-cuda: %s\n", created.error().message.c_str());
    return 2;
  }
  const pk::cuda::TopKLauncher& launcher = created.value();
  cudaDeviceProp properties{};
  CUDA_OK(cudaGetDeviceProperties(&properties, 0));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  const double copy = CopyBandwidth(repeats, start, stop);
  std::printf("device: %s, %d SMs; device-to-device copy %.0f GB/s (read + write)\n",
              properties.name, properties.multiProcessorCount, copy * 1e-9);
  std::printf("{\"bench\":\"d2d_copy\",\"bytes_per_s\":%.4g}\n", copy);

  struct Config {
    uint32_t dim;
    pk::DType values;
  };
  const std::vector<Config> configs = {{1024, pk::DType::kBFloat16}, {4096, pk::DType::kBFloat16},
                                       {1024, pk::DType::kFloat32}, {4096, pk::DType::kFloat32}};
  const uint32_t heads = 4, k = 32;
  const size_t outputs = quick ? 1024 : 4096;
  const int batches = quick ? 2 : 4;
  std::printf("\n%-28s %8s %12s %12s %10s %8s\n", "config", "outputs", "part", "median us",
              "value GB/s", "of copy");
  for (const Config& config : configs) {
    const uint32_t widths[] = {1024, 1024};
    const pk::Problem topk = pk::ValidateProblem(widths, k, pk::DType::kBFloat16).value();
    const pk::LookupProblem p =
        pk::ValidateLookup(topk, heads, config.dim, config.values, config.values).value();
    const uint64_t slots = 1024 * 1024;
    void* table = nullptr;
    const size_t table_elements = slots * config.dim;
    CUDA_OK(cudaMalloc(&table, table_elements * pk::ElementBytes(config.values)));
    FillTable<<<4096, 256>>>(static_cast<uint8_t*>(table), table_elements,
                             static_cast<int>(pk::ElementBytes(config.values)), config.dim);
    CUDA_OK(cudaGetLastError());
    const pk::ValuesView view{static_cast<const std::byte*>(table), slots, config.dim, config.values};
    const std::string name = "1024x1024 h4 k32 d" + std::to_string(config.dim) + " " +
                             Name(config.values);
    for (size_t count : {outputs, size_t{1}}) {
      const size_t rows = count * heads;
      Batches b = MakeBatches(p, rows, batches, 16 + count);
      for (int i = 0; i < batches; ++i) {
        CUDA_OK(launcher.Launch(topk, b.scores[i], rows, b.topk_values, b.slots[i], nullptr));
      }
      CUDA_OK(cudaDeviceSynchronize());
      const double value_bytes = double(count) * p.pairs_per_output() * p.value_row_bytes();
      auto report = [&](const char* part, double ms) {
        const double bw = value_bytes / (ms * 1e-3);
        std::printf("%-28s %8zu %12s %12.1f %10.0f %7.1f%%\n", name.c_str(), count, part,
                    ms * 1e3, bw * 1e-9, 100.0 * bw / copy);
        std::printf("{\"bench\":\"lookup\",\"config\":\"%s\",\"outputs\":%zu,\"part\":\"%s\","
                    "\"median_us\":%.2f,\"value_bytes_per_s\":%.4g,\"of_copy\":%.4f}\n",
                    name.c_str(), count, part, ms * 1e3, bw, bw / copy);
      };
      // Weights of each batch once, so that the weighted sum alone sums real weights.
      for (int i = 0; i < batches; ++i) {
        CUDA_OK(pk::cuda::LaunchLookupWeights(topk, static_cast<const std::byte*>(b.scores[i]),
                                              b.slots[i], rows, b.weights, b.row_valid, nullptr));
      }
      report("sum", TimeMs(repeats, batches, start, stop, [&](int i) {
               CUDA_OK(pk::cuda::LaunchWeightedSum(p, view, b.slots[i], b.weights, count,
                                                   b.outputs, nullptr));
             }));
      report("weights", TimeMs(repeats, batches, start, stop, [&](int i) {
               CUDA_OK(pk::cuda::LaunchLookupWeights(topk,
                                                     static_cast<const std::byte*>(b.scores[i]),
                                                     b.slots[i], rows, b.weights, b.row_valid,
                                                     nullptr));
             }));
      report("whole+topk", TimeMs(repeats, batches, start, stop, [&](int i) {
               CUDA_OK(launcher.Launch(topk, b.scores[i], rows, b.topk_values, b.slots[i],
                                       nullptr));
               CUDA_OK(pk::cuda::LaunchLookup(p, view, static_cast<const std::byte*>(b.scores[i]),
                                              b.slots[i], rows, b.weights, b.row_valid, b.outputs,
                                              nullptr));
             }));
      FreeBatches(b);
    }
    CUDA_OK(cudaFree(table));
  }
  std::printf("(value GB/s: value-row bytes the weighted sum reads / time, for every part; "
              "of copy: against the d2d copy's read + write GB/s)\n");
  return 0;
}
