// pk-bench-cuda [--quick] [--repeats N] [--only I] [--variants] [--part NAME] [--extra]
//               [--latency]
//
// Kernel benchmark of the CUDA top-k. For each configuration of issue 4's table: rows/s by CUDA
// events (median of N timed launches after warm-up), over fresh random normal inputs rotated among
// several buffers that together exceed the L2 cache, and the fraction of the device-to-device copy
// bandwidth (measured in the same run, bytes read + written) that the kernel's input reads reach.
// Then the latency table of 1024x1024 bf16 k=64: kernel time, and pinned copy-in + kernel +
// copy-out time, for batches of 1 to 65 536 rows (a short spin kernel ahead of each timed region
// keeps host enqueueing out of the GPU times). With --variants, each configuration is also timed
// with each of the kernel's alternative paths (testing/kernel_paths.h's KernelPaths) turned off and
// on in turn, to choose the defaults by measurement (--part NAME: that part alone), and the
// latency table is repeated with a block per row off and with the latency kernel off. --extra
// times other shapes instead (two factors of width <= 256 at other k and widths, shapes whose
// widths are all <= 64, wide factors with k <= 32; no reference, no latency table); --latency
// times the latency table alone. Prints a table and one JSON line per result.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/phase_timing.h"
#include "kernels/cuda/testing/kernel_paths.h"
#include "kernels/cuda/testing/launch_with_paths.h"
#include "kernels/cuda/tools/exit_on_error.h"
#include "kernels/numeric.h"

namespace {

__device__ uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fills `count` elements with standard normal values (Box-Muller on a hashed counter).
__global__ void FillNormal(uint8_t* out, size_t count, int element_bytes, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t bits = Mix(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    const float u1 = (static_cast<float>(bits >> 40) + 1.0f) * 0x1.0p-24f;
    const float u2 = static_cast<float>((bits >> 16) & 0xffffffu) * 0x1.0p-24f;
    const float normal = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (element_bytes == 4) {
      reinterpret_cast<float*>(out)[i] = normal;
    } else {
      reinterpret_cast<uint16_t*>(out)[i] = pk::FloatToBf16(normal);
    }
  }
}

// Keeps the stream busy for about `cycles` clocks, so that events recorded after it time the GPU
// alone, not the host's enqueueing.
__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Does nothing: timed like the top-k launches, the floor that launch and events alone put under
// any kernel time of the latency table.
__global__ void Empty() {}

// Does nothing with the top-k kernels' parameters: the floor with their parameter block's copy.
__global__ void EmptyWithParameters(const __grid_constant__ pk::cuda::KernelParams) {}

struct Config {
  std::vector<uint32_t> widths;
  uint32_t k;
  pk::DType dtype;
  double reference;  // million rows/s of the training library's kernel (issue 4)
};

std::string Name(const Config& c) {
  std::string text;
  for (size_t f = 0; f < c.widths.size(); ++f) text += (f ? "x" : "") + std::to_string(c.widths[f]);
  return text + " k=" + std::to_string(c.k) + " " + (c.dtype == pk::DType::kFloat32 ? "f32" : "bf16");
}

float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device buffers of random inputs, several, rotated so that a launch rarely finds its input in L2.
struct Inputs {
  std::vector<pk::cuda::DeviceBuffer> buffers;
  size_t bytes = 0;
};

void MakeInputs(Inputs& inputs, int count, size_t bytes, int element_bytes, uint64_t seed) {
  inputs.bytes = bytes;
  for (int i = 0; i < count; ++i) {
    pk::cuda::DeviceBuffer buffer = pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(bytes));
    FillNormal<<<1024, 256>>>(reinterpret_cast<uint8_t*>(buffer.data()), bytes / element_bytes,
                              element_bytes, seed * 1315423911ull + static_cast<uint64_t>(i));
    CUDA_OK(cudaGetLastError());
    inputs.buffers.push_back(std::move(buffer));
  }
  CUDA_OK(cudaDeviceSynchronize());
}

// Device-to-device copy bandwidth, bytes read + written per second.
double CopyBandwidth(int repeats) {
  const size_t bytes = size_t{1} << 31;
  const pk::cuda::DeviceBuffer a = pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(bytes));
  const pk::cuda::DeviceBuffer b = pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(bytes));
  CUDA_OK(cudaMemset(a.data(), 1, bytes));
  const pk::cuda::Event start = pk::cuda::ValueOrExit(pk::cuda::CreateEvent());
  const pk::cuda::Event stop = pk::cuda::ValueOrExit(pk::cuda::CreateEvent());
  std::vector<float> times;
  for (int r = 0; r < repeats + 3; ++r) {
    CUDA_OK(cudaEventRecord(start.get()));
    CUDA_OK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));
    CUDA_OK(cudaEventRecord(stop.get()));
    CUDA_OK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (r >= 3) times.push_back(ms);
  }
  return 2.0 * bytes / (Median(times) * 1e-3);
}

}  // namespace

// Median milliseconds of `repeats` launches (after 3 warm-ups), inputs rotated.
float TimeLaunches(const pk::cuda::TopKLauncher& launcher, const pk::Problem& problem,
                   const Inputs& inputs, size_t rows, void* values, void* slots, int repeats,
                   const pk::cuda::KernelPaths& paths, cudaEvent_t start, cudaEvent_t stop) {
  std::vector<float> times;
  for (int r = 0; r < repeats + 3; ++r) {
    const void* input = inputs.buffers[r % inputs.buffers.size()].data();
    CUDA_OK(cudaEventRecord(start));
    CUDA_OK(pk::cuda::LaunchWithPaths(launcher, problem, input, rows, values,
                                      static_cast<uint32_t*>(slots), nullptr, paths));
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    CUDA_OK(cudaGetLastError());
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 3) times.push_back(ms);
  }
  return Median(times);
}

int main(int argc, char** argv) {
  bool quick = false;
  bool variants = false;
  int repeats = 15;
  int only = -1;  // run only the I-th throughput configuration, and no latency table
  bool extra = false;  // other shapes than the issue's (no reference), and no latency table
  std::string part;    // with --variants: time only this part (its name in the table), else all
  bool latency_only = false;  // the latency table alone
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--repeats" && a + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++a]));
    } else if (arg == "--only" && a + 1 < argc) {
      only = std::atoi(argv[++a]);
    } else if (arg == "--variants") {
      variants = true;
    } else if (arg == "--extra") {
      extra = true;
    } else if (arg == "--part" && a + 1 < argc) {
      part = argv[++a];
    } else if (arg == "--latency") {
      latency_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: pk-bench-cuda [--quick] [--repeats N] [--only I] [--variants] "
                   "[--part NAME] [--extra] [--latency]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("pk-bench-cuda: skipped: no CUDA device\n");
    return 77;
  }
  auto created = pk::cuda::TopKLauncher::Create(0);
  if (!created.ok()) {
    std::fprintf(stderr, "pk-bench-cuda: %s\n", created.error().message.c_str());
    return 2;
  }
  const pk::cuda::TopKLauncher& launcher = created.value();
  cudaDeviceProp properties{};
  CUDA_OK(cudaGetDeviceProperties(&properties, 0));
  const double copy = CopyBandwidth(repeats);
  std::printf("device: %s, %d SMs, L2 %d MiB; device-to-device copy %.0f GB/s (read + write)\n",
              properties.name, properties.multiProcessorCount, properties.l2CacheSize >> 20,
              copy * 1e-9);
  std::printf("{\"bench\":\"d2d_copy\",\"bytes_per_s\":%.4g}\n", copy);

  const std::vector<Config> issue_configs = {
      {{1024, 1024}, 32, pk::DType::kBFloat16, 113.7},  {{1024, 1024}, 64, pk::DType::kBFloat16, 76.2},
      {{1024, 1024}, 128, pk::DType::kBFloat16, 50.0},  {{1024, 1024}, 256, pk::DType::kBFloat16, 27.6},
      {{1024, 1024}, 64, pk::DType::kFloat32, 31.2},    {{256, 256}, 64, pk::DType::kBFloat16, 285.8},
      {{4096, 4096}, 64, pk::DType::kBFloat16, 23.3},   {{64, 64, 64}, 64, pk::DType::kBFloat16, 94.4},
      {{32, 32, 32, 32}, 64, pk::DType::kBFloat16, 169.2}, {{16, 16, 16, 16}, 32, pk::DType::kFloat32, 355.1},
  };
  // Shapes beside the issue's that take paths of their own (two factors of width <= 256).
  const std::vector<Config> extra_configs = {
      {{256, 256}, 32, pk::DType::kBFloat16, 0},  {{256, 256}, 128, pk::DType::kBFloat16, 0},
      {{256, 256}, 256, pk::DType::kBFloat16, 0}, {{128, 128}, 64, pk::DType::kBFloat16, 0},
      {{200, 100}, 64, pk::DType::kBFloat16, 0},
      // Every width <= 64: the small-factor kernel where shared memory lets its blocks in.
      {{64, 64}, 64, pk::DType::kBFloat16, 0},
      {{32, 32, 32}, 64, pk::DType::kBFloat16, 0},
      {{16, 16, 16, 16}, 32, pk::DType::kBFloat16, 0},
      {{32, 32, 32, 32}, 32, pk::DType::kFloat32, 0},
      {{64, 64, 64}, 32, pk::DType::kBFloat16, 0},
      {{8, 8, 8, 8}, 16, pk::DType::kFloat32, 0},
      // Wide bfloat16 factors with short lists (k <= 32): the streamed kernel where every factor
      // is one chunk wide, the high-occupancy kernel beyond (4096, 65535).
      {{1024, 1024}, 16, pk::DType::kBFloat16, 0},
      {{1024, 1024}, 4, pk::DType::kBFloat16, 0},
      {{4096, 4096}, 32, pk::DType::kBFloat16, 0},
      {{512, 512}, 32, pk::DType::kBFloat16, 0},
      {{128, 128, 128}, 32, pk::DType::kBFloat16, 0},
      {{65535, 65535}, 32, pk::DType::kBFloat16, 0},
      // Float32 with short lists: the high-occupancy kernel.
      {{1024, 1024}, 32, pk::DType::kFloat32, 0},
      {{1024, 1024}, 8, pk::DType::kFloat32, 0},
      {{128, 128, 128}, 32, pk::DType::kFloat32, 0},
  };
  const std::vector<Config>& configs = extra ? extra_configs : issue_configs;
  const size_t batch_bytes = quick ? (size_t{64} << 20) : (size_t{512} << 20);
  const int buffers = quick ? 2 : 3;
  const pk::cuda::Event start_event = pk::cuda::ValueOrExit(pk::cuda::CreateEvent());
  const pk::cuda::Event stop_event = pk::cuda::ValueOrExit(pk::cuda::CreateEvent());
  const cudaEvent_t start = start_event.get();
  const cudaEvent_t stop = stop_event.get();
  std::printf("\n%-26s %12s %10s %10s %10s %8s\n", "config", "rows/launch", "Mrows/s", "reference",
              "input GB/s", "of copy");
  for (size_t index = 0; index < configs.size(); ++index) {
    const Config& config = configs[index];
    if (only >= 0 && static_cast<int>(index) != only) continue;
    if (latency_only) break;
    const pk::Problem problem =
        pk::ValidateProblem(config.widths, config.k, config.dtype).value();
    const size_t rows = batch_bytes / problem.row_bytes();
    Inputs inputs;
    MakeInputs(inputs, buffers, rows * problem.row_bytes(), static_cast<int>(pk::ElementBytes(config.dtype)), 11);
    const pk::cuda::DeviceBuffer values_buffer =
        pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(rows * problem.out_value_bytes()));
    const pk::cuda::DeviceBuffer slots_buffer =
        pk::cuda::ValueOrExit(pk::cuda::AllocateDevice(rows * size_t{problem.kk()} * 4));
    void* const values = values_buffer.data();
    void* const slots = slots_buffer.data();
    const double seconds =
        TimeLaunches(launcher, problem, inputs, rows, values, slots, repeats, {}, start, stop) * 1e-3;
    const double rows_per_s = rows / seconds;
    const double input_bw = rows * double(problem.row_bytes()) / seconds;
    std::printf("%-26s %12zu %10.1f %10.1f %10.0f %7.1f%%\n", Name(config).c_str(), rows,
                rows_per_s * 1e-6, config.reference, input_bw * 1e-9, 100.0 * input_bw / copy);
    std::printf("{\"bench\":\"throughput\",\"config\":\"%s\",\"rows\":%zu,\"median_ms\":%.4f,"
                "\"rows_per_s\":%.4g,\"reference_rows_per_s\":%.4g,\"input_bytes_per_s\":%.4g,"
                "\"fraction_of_copy\":%.4f}\n",
                Name(config).c_str(), rows, seconds * 1e3, rows_per_s, config.reference * 1e6,
                input_bw, input_bw / copy);
#if defined(PK_PHASE_TIMING)
    {
      static const char* names[] = {"factors", "stage 1", "stage 2", "stage 3", "running",
                                    "slot sort", "output", "block wait"};
      uint64_t cycles[8];
      CUDA_OK(pk::cuda::ReadPhaseCycles(cycles, true));
      CUDA_OK(launcher.Launch(problem, inputs.buffers[0].data(), rows, values,
                              static_cast<uint32_t*>(slots), nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(pk::cuda::ReadPhaseCycles(cycles, true));
      uint64_t total = 0;
      for (uint64_t c : cycles) total += c;
      std::printf("  phases (warp cycles a row):");
      for (int q = 0; q < 8; ++q) {
        if (cycles[q] > 0) std::printf(" %s %.0f (%.0f%%)", names[q], double(cycles[q]) / rows, 100.0 * cycles[q] / total);
      }
      std::printf("\n");
    }
#endif
    if (variants) {
      using Choice = pk::cuda::KernelPaths::Choice;
      const std::pair<const char*, Choice pk::cuda::KernelPaths::*> parts[] = {
          {"small_factors", &pk::cuda::KernelPaths::small_factors},
          {"lean_stages", &pk::cuda::KernelPaths::lean_stages},
          {"bisect_maxima", &pk::cuda::KernelPaths::bisect_maxima},
          {"slot_key32", &pk::cuda::KernelPaths::slot_key32},
          {"occupancy", &pk::cuda::KernelPaths::high_occupancy},
          {"latency", &pk::cuda::KernelPaths::latency_kernel},
          {"paired", &pk::cuda::KernelPaths::paired_factors},
          {"halves", &pk::cuda::KernelPaths::half_selection},
          {"small", &pk::cuda::KernelPaths::small_kernel},
          {"paired_sort", &pk::cuda::KernelPaths::paired_sort},
          {"prefetch", &pk::cuda::KernelPaths::prefetch_rows},
          {"stream", &pk::cuda::KernelPaths::stream_kernel},
          {"narrow", &pk::cuda::KernelPaths::narrow_maxima},
          {"unrolled_out", &pk::cuda::KernelPaths::unrolled_output},
          {"slant", &pk::cuda::KernelPaths::slant_bounds}};
      for (const auto& [name, member] : parts) {
        if (!part.empty() && part != name) continue;
        for (Choice choice : {Choice::kOff, Choice::kOn}) {
          pk::cuda::KernelPaths paths;
          paths.*member = choice;
          const double variant_seconds =
              TimeLaunches(launcher, problem, inputs, rows, values, slots, repeats, paths, start,
                           stop) * 1e-3;
          std::printf("  %-13s %-3s %10.1f Mrows/s (%+.1f%% vs default)\n", name,
                      choice == Choice::kOff ? "off" : "on", rows / variant_seconds * 1e-6,
                      100.0 * (seconds / variant_seconds - 1.0));
          std::printf("{\"bench\":\"variant\",\"config\":\"%s\",\"part\":\"%s\",\"choice\":\"%s\","
                      "\"rows_per_s\":%.4g}\n",
                      Name(config).c_str(), name, choice == Choice::kOff ? "off" : "on",
                      rows / variant_seconds);
        }
      }
    }
  }

  if (only >= 0 || extra) return 0;
  // Latency of small batches, 1024x1024 bf16 k=64.
  const uint32_t widths[] = {1024, 1024};
  const pk::Problem problem = pk::ValidateProblem(widths, 64, pk::DType::kBFloat16).value();
  const std::vector<size_t> batch_rows = {1, 16, 64, 256, 1024, 4096, 16384, 65536};
  const size_t max_rows = batch_rows.back();
  Inputs inputs;
  const size_t pool_rows = 4 * max_rows;  // 1 GiB: each launch reads rows no recent launch read
  MakeInputs(inputs, 1, pool_rows * problem.row_bytes(), 2, 23);
  using pk::cuda::AllocateDevice;
  using pk::cuda::AllocatePinned;
  using pk::cuda::ValueOrExit;
  const size_t in_bytes = max_rows * problem.row_bytes();
  const size_t value_bytes = max_rows * problem.out_value_bytes();
  const size_t slot_bytes = max_rows * size_t{problem.kk()} * 4;
  const pk::cuda::PinnedBuffer host_in_buffer = ValueOrExit(AllocatePinned(in_bytes));
  const pk::cuda::PinnedBuffer host_values_buffer = ValueOrExit(AllocatePinned(value_bytes));
  const pk::cuda::PinnedBuffer host_slots_buffer = ValueOrExit(AllocatePinned(slot_bytes));
  const pk::cuda::DeviceBuffer device_in_buffer = ValueOrExit(AllocateDevice(in_bytes));
  const pk::cuda::DeviceBuffer values_buffer = ValueOrExit(AllocateDevice(value_bytes));
  const pk::cuda::DeviceBuffer slots_buffer = ValueOrExit(AllocateDevice(slot_bytes));
  const pk::cuda::Stream stream_owner = ValueOrExit(pk::cuda::CreateStream());
  void* const host_in = host_in_buffer.data();
  void* const host_values = host_values_buffer.data();
  void* const host_slots = host_slots_buffer.data();
  void* const device_in = device_in_buffer.data();
  void* const values = values_buffer.data();
  void* const slots = slots_buffer.data();
  const cudaStream_t stream = stream_owner.get();
  CUDA_OK(cudaMemcpy(host_in, inputs.buffers[0].data(), in_bytes, cudaMemcpyDeviceToHost));
  const int latency_repeats = std::max(repeats, 31);
  // The table for the default paths; with --variants also with the small-batch paths off (a block
  // per row, the latency kernel), each launch as the default's.
  using Choice = pk::cuda::KernelPaths::Choice;
  std::vector<std::pair<std::string, pk::cuda::KernelPaths>> tables = {{"", {}}};
  if (variants) {
    pk::cuda::KernelPaths no_block_per_row;
    no_block_per_row.block_per_row = Choice::kOff;
    pk::cuda::KernelPaths no_latency_kernel;
    no_latency_kernel.latency_kernel = Choice::kOff;
    tables.push_back({"block_per_row off", no_block_per_row});
    tables.push_back({"latency off", no_latency_kernel});
  }
  for (const auto& [label, paths] : tables) {
    std::printf("\nlatency, 1024x1024 k=64 bf16%s%s\n%10s %14s %22s %12s\n", label.empty() ? "" : ", ",
                label.c_str(), "rows", "kernel us", "copy+kernel+copy us", "Mrows/s");
    for (size_t rows : batch_rows) {
      std::vector<float> kernel_ms, round_ms;
      size_t cursor = 0;
      for (int r = 0; r < latency_repeats + 5; ++r) {
        cursor = (cursor + rows) % (pool_rows - rows + 1);
        const std::byte* input = inputs.buffers[0].data() + cursor * problem.row_bytes();
        Spin<<<1, 1, 0, stream>>>(100000);
        CUDA_OK(cudaEventRecord(start, stream));
        CUDA_OK(pk::cuda::LaunchWithPaths(launcher, problem, input, rows, values,
                                          static_cast<uint32_t*>(slots), stream, paths));
        CUDA_OK(cudaEventRecord(stop, stream));
        CUDA_OK(cudaEventSynchronize(stop));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
        if (r >= 5) kernel_ms.push_back(ms);
        Spin<<<1, 1, 0, stream>>>(100000);
        CUDA_OK(cudaEventRecord(start, stream));
        CUDA_OK(cudaMemcpyAsync(device_in, host_in, rows * problem.row_bytes(), cudaMemcpyHostToDevice, stream));
        CUDA_OK(pk::cuda::LaunchWithPaths(launcher, problem, device_in, rows, values,
                                          static_cast<uint32_t*>(slots), stream, paths));
        CUDA_OK(cudaMemcpyAsync(host_values, values, rows * problem.out_value_bytes(), cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaMemcpyAsync(host_slots, slots, rows * size_t{problem.kk()} * 4, cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaEventRecord(stop, stream));
        CUDA_OK(cudaEventSynchronize(stop));
        CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
        if (r >= 5) round_ms.push_back(ms);
      }
      CUDA_OK(cudaGetLastError());
#if defined(PK_PHASE_TIMING)
      {
        uint64_t cycles[8];
        CUDA_OK(pk::cuda::ReadPhaseCycles(cycles, true));
        CUDA_OK(pk::cuda::LaunchWithPaths(launcher, problem, inputs.buffers[0].data(), rows, values,
                                          static_cast<uint32_t*>(slots), stream, paths));
        CUDA_OK(cudaStreamSynchronize(stream));
        CUDA_OK(pk::cuda::ReadPhaseCycles(cycles, true));
        std::printf("   %zu rows, warp cycles a row: factors %.0f stages %.0f %.0f %.0f running %.0f slot sort %.0f output %.0f wait %.0f\n",
                    rows, double(cycles[0]) / rows, double(cycles[1]) / rows, double(cycles[2]) / rows,
                    double(cycles[3]) / rows, double(cycles[4]) / rows, double(cycles[5]) / rows,
                    double(cycles[6]) / rows, double(cycles[7]) / rows);
      }
#endif
      const double kernel_us = Median(kernel_ms) * 1e3;
      const double round_us = Median(round_ms) * 1e3;
      std::printf("%10zu %14.1f %22.1f %12.1f\n", rows, kernel_us, round_us, rows / kernel_us);
      std::printf("{\"bench\":\"latency\",\"config\":\"1024x1024 k=64 bf16\",\"paths\":\"%s\","
                  "\"rows\":%zu,\"kernel_us\":%.2f,\"copy_kernel_copy_us\":%.2f}\n",
                  label.empty() ? "default" : label.c_str(), rows, kernel_us, round_us);
    }
  }
  // The floors: an empty kernel; one that takes the top-k kernels' parameter block (its size is
  // part of every launch); and that one with the one-row launch's block and dynamic shared
  // memory, which the Spin kernel between launches does not use (the multiprocessor may have to
  // change its shared-memory carveout for each launch).
  const pk::cuda::KernelParams parameters{};
  const pk::cuda::LaunchPlan one_row =
      ValueOrExit(pk::cuda::PlanLaunch(problem, 1, launcher.limits(), pk::cuda::KernelPaths{}));
  CUDA_OK(cudaFuncSetAttribute(EmptyWithParameters, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(launcher.limits().shared_per_block)));
  struct Floor {
    std::string what;
    const char* name;  // its JSON line's "bench"
    bool parameters;   // EmptyWithParameters (else Empty)
    unsigned threads;
    size_t shared_bytes;
  };
  const Floor floors[] = {
      {"an empty kernel, same events", "latency_floor", false, 64, 0},
      {"the same with the top-k's " + std::to_string(sizeof(pk::cuda::KernelParams)) +
           "-byte parameter block",
       "latency_floor_parameters", true, 64, 0},
      {"and the one-row launch's " + std::to_string(one_row.threads) + " threads and " +
           std::to_string(one_row.shared_bytes) + " bytes of shared memory",
       "latency_floor_one_row_launch", true, one_row.threads, one_row.shared_bytes}};
  for (const Floor& floor : floors) {
    std::vector<float> empty_ms;
    for (int r = 0; r < latency_repeats + 5; ++r) {
      Spin<<<1, 1, 0, stream>>>(100000);
      CUDA_OK(cudaEventRecord(start, stream));
      if (floor.parameters) {
        EmptyWithParameters<<<1, floor.threads, floor.shared_bytes, stream>>>(parameters);
      } else {
        Empty<<<1, floor.threads, floor.shared_bytes, stream>>>();
      }
      CUDA_OK(cudaEventRecord(stop, stream));
      CUDA_OK(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
      if (r >= 5) empty_ms.push_back(ms);
    }
    CUDA_OK(cudaGetLastError());
    const double us = Median(empty_ms) * 1e3;
    std::printf("%10s %14.1f   (%s)\n", "floor", us, floor.what.c_str());
    std::printf("{\"bench\":\"%s\",\"kernel_us\":%.2f,\"parameter_bytes\":%zu,\"threads\":%u,"
                "\"shared_bytes\":%zu}\n",
                floor.name, us, floor.parameters ? sizeof(pk::cuda::KernelParams) : size_t{0},
                floor.threads, floor.shared_bytes);
  }
  return 0;
}
