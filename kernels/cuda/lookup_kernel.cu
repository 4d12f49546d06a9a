// The CUDA kernels of the memory lookup and their launches (contract: lookup_launch.h).
// Compiled by nvcc for the GPU and, through emulation/lookup_kernel_emulated.cc, as C++ for the
// CPU emulator: no static __shared__ arrays (the block's dynamic shared memory only) and 1-D grids.
// Bit-exactness with the CPU needs subnormals kept (weights can be as small as e^-87.3, their
// products with values subnormal): this file must not be built with -ftz=true or
// --use_fast_math, which flush them in every float instruction, the _rn intrinsics included; nor
// may the CPU side run with FTZ/DAZ set in MXCSR.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/lookup_launch.h"
#include "kernels/lookup/weights.h"
#include "kernels/numeric.h"

namespace pk::cuda {
namespace {

constexpr unsigned kAllLanes = 0xffffffffu;
constexpr int kWeightWarps = 4;            // score rows (a warp each) per block of the weights
constexpr uint32_t kPairChunk = 256;       // (slot, weight) pairs staged in shared memory at once
constexpr uint32_t kMaxSumThreads = 512;   // threads of a weighted-sum block
constexpr uint32_t kMinSumThreads = 64;
constexpr size_t kGridLimit = 0x7fffffffu; // blocks of a 1-D grid

__device__ __forceinline__ uint8_t* LookupShared() {
#if defined(PK_CUDA_EMULATION)
  return pk::emu::DynamicShared();
#else
  extern __shared__ __align__(16) uint8_t lookup_shared[];
  return lookup_shared;
#endif
}

struct WeightsParams {
  ScoreShape shape;
  const std::byte* scores;
  const uint32_t* slots;
  float* weights;
  uint8_t* row_valid;
  size_t rows;
  size_t row_bytes;
};

// One row's weights by one warp (every lane calls it): lanes recompute the scores and their
// terms (strided) into `terms` (kk floats of the warp's shared scratch), the maximum is a
// butterfly of MaxScore (exact whatever the order; lane 0's is used), lane 0 sums Z in order,
// and the kk weights go to `weights` (global or shared memory). Returns whether the row's
// maximum is finite (in every lane); when it is not, the weights are 0.
__device__ __forceinline__ bool WarpRowWeights(const ScoreShape& shape, const std::byte* scores,
                                               const uint32_t* slots, float* terms,
                                               float* weights, unsigned lane) {
  const uint32_t kk = shape.kk;
  float m = NegativeInfinity();
  for (uint32_t i = lane; i < kk; i += 32) {
    const float s = SlotScore(shape, scores, slots[i]);
    terms[i] = s;
    m = MaxScore(m, s);
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    m = MaxScore(m, __shfl_xor_sync(kAllLanes, m, offset));
  }
  m = __shfl_sync(kAllLanes, m, 0);
  if (!IsFiniteFloat(m)) {
    for (uint32_t i = lane; i < kk; i += 32) weights[i] = 0.0f;
    return false;
  }
  for (uint32_t i = lane; i < kk; i += 32) terms[i] = WeightTerm(terms[i], m);
  __syncwarp();
  float z = 0.0f;
  if (lane == 0) {
    for (uint32_t i = 0; i < kk; ++i) z = Add(z, terms[i]);
  }
  z = __shfl_sync(kAllLanes, z, 0);
  for (uint32_t i = lane; i < kk; i += 32) weights[i] = Div(terms[i], z);
  return true;
}

// A warp per row (WarpRowWeights).
__global__ void __launch_bounds__(32 * kWeightWarps) LookupWeightsKernel(
    const __grid_constant__ WeightsParams p) {
  const unsigned warp = threadIdx.x >> 5;
  const unsigned lane = threadIdx.x & 31u;
  const size_t row = size_t{blockIdx.x} * kWeightWarps + warp;
  if (row >= p.rows) return;  // the whole warp
  float* terms = reinterpret_cast<float*>(LookupShared()) + warp * kMaxK;
  const uint32_t kk = p.shape.kk;
  const bool valid = WarpRowWeights(p.shape, p.scores + row * p.row_bytes, p.slots + row * kk,
                                    terms, p.weights + row * kk, lane);
  if (lane == 0) p.row_valid[row] = valid ? 1 : 0;
}

struct SumParams {
  const std::byte* values;
  const uint32_t* slots;
  const float* weights;
  std::byte* out;
  uint32_t pairs;  // per output
  uint32_t dim;
  uint32_t tiles;  // column tiles per output (blocks per output)
};

// Grids of the streaming kernel below this many blocks a multiprocessor go to the staged kernel
// instead (a small batch: too few warps for the loads a warp keeps in flight by unrolling to cover
// the memory latency).
constexpr size_t kStagedBelowBlocksPerSm = 4;
constexpr int kUnroll = 8;  // pairs whose loads are issued before their fmas

// The staged kernel: a block per (output, 32-column tile); all its threads load a chunk of the
// output's value-row pieces into shared memory at once (every load independent, so one memory
// latency a chunk instead of one per kUnroll pairs), then one warp runs the tile's 32 column
// chains from shared memory.
constexpr uint32_t kStagedColumns = 32;   // a warp's chains
constexpr uint32_t kStagedThreads = 256;  // threads that load a chunk
constexpr uint32_t kStagedPairs = 128;    // pairs a chunk: 128 x 32 floats = 16 KiB of shared

template <class V>
__device__ __forceinline__ float Widen(V x) {
  if constexpr (sizeof(V) == 2) {
    return Bf16ToFloat(x);
  } else {
    return x;
  }
}

// kVec consecutive values of a row (V: float, or uint16_t bfloat16 patterns), by one 16-byte
// load when kVec * sizeof(V) == 16 (the address is then 16-byte aligned).
template <class V, int kVec>
__device__ __forceinline__ void LoadValues(const V* at, float (&v)[kVec]) {
  if constexpr (kVec * sizeof(V) == 16) {
    const uint4 bits = __ldg(reinterpret_cast<const uint4*>(at));
    const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
    if constexpr (sizeof(V) == 4) {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = BitsToFloat(words[e]);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[2 * e] = BitsToFloat(words[e] << 16);
        v[2 * e + 1] = BitsToFloat(words[e] & 0xffff0000u);
      }
    }
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = Widen(__ldg(at + e));
  }
}

template <class O>
__device__ __forceinline__ void StoreOutput(O* at, float acc) {
  if constexpr (sizeof(O) == 2) {
    *at = FloatToBf16(acc);
  } else {
    *at = acc;
  }
}

// A block per (output, column tile): the output's pairs staged kPairChunk at a time; thread t of
// tile g owns columns [(g * blockDim.x + t) * kVec, + kVec); per column acc = fma(w, v, acc)
// over the pairs in order. kUnroll pairs' loads are issued before their fmas (more in flight).
template <class V, class O, int kVec>
__global__ void __launch_bounds__(kMaxSumThreads) WeightedSumKernel(
    const __grid_constant__ SumParams p) {
  uint32_t* chunk_slots = reinterpret_cast<uint32_t*>(LookupShared());
  float* chunk_weights = reinterpret_cast<float*>(chunk_slots + kPairChunk);
  const size_t output = blockIdx.x / p.tiles;
  const uint32_t tile = blockIdx.x % p.tiles;
  const uint32_t column = (tile * blockDim.x + threadIdx.x) * kVec;
  const bool active = column < p.dim;  // kVec > 1 only where dim % kVec == 0
  const V* values = reinterpret_cast<const V*>(p.values) + column;
  const uint32_t* slots = p.slots + output * p.pairs;
  const float* weights = p.weights + output * p.pairs;
  float acc[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc[e] = 0.0f;
  for (uint32_t first = 0; first < p.pairs; first += kPairChunk) {
    const uint32_t count = p.pairs - first < kPairChunk ? p.pairs - first : kPairChunk;
    __syncthreads();  // the previous chunk is read by every thread
    for (uint32_t j = threadIdx.x; j < count; j += blockDim.x) {
      chunk_slots[j] = slots[first + j];
      chunk_weights[j] = weights[first + j];
    }
    __syncthreads();
    if (!active) continue;
    uint32_t j = 0;
    for (; j + kUnroll <= count; j += kUnroll) {
      float v[kUnroll][kVec];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        LoadValues<V, kVec>(values + size_t{chunk_slots[j + u]} * p.dim, v[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float w = chunk_weights[j + u];
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[e] = Fma(w, v[u][e], acc[e]);
      }
    }
    for (; j < count; ++j) {
      float v[kVec];
      LoadValues<V, kVec>(values + size_t{chunk_slots[j]} * p.dim, v);
      const float w = chunk_weights[j];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] = Fma(w, v[e], acc[e]);
    }
  }
  if (!active) return;
  O* out = reinterpret_cast<O*>(p.out) + output * p.dim + column;
#pragma unroll
  for (int e = 0; e < kVec; ++e) StoreOutput(out + e, acc[e]);
}

// One block of the staged and fused kernels (an output, a tile of kStagedColumns columns): per
// chunk of kStagedPairs pairs, every thread loads value-row pieces into `staged`
// ([kStagedPairs][kStagedColumns] floats of shared memory) and `stage_weight(first, j)` runs once
// per pair j of the chunk (first + j of the output) meanwhile; then threads below the tile's
// columns each run one column's fma chain with `weight(first, j)`, the same order as
// WeightedSumKernel, so the same bits. kVec: values a load reads (kVec > 1 only where
// dim % kVec == 0 and the table is 16-byte aligned, so a load never crosses the tile's end).
template <class V, class O, int kVec, class StageWeight, class Weight>
__device__ __forceinline__ void StagedBlockSum(const SumParams& p, size_t output, uint32_t tile,
                                               float* staged, StageWeight stage_weight,
                                               Weight weight) {
  const uint32_t first_column = tile * kStagedColumns;
  const uint32_t columns =
      p.dim - first_column < kStagedColumns ? p.dim - first_column : kStagedColumns;
  const uint32_t* slots = p.slots + output * p.pairs;
  const V* values = reinterpret_cast<const V*>(p.values) + first_column;
  constexpr uint32_t kPieces = kStagedColumns / kVec;  // loads a staged row
  const uint32_t column = threadIdx.x;                 // the chain this thread runs, if < columns
  float acc = 0.0f;
  for (uint32_t first = 0; first < p.pairs; first += kStagedPairs) {
    const uint32_t count = p.pairs - first < kStagedPairs ? p.pairs - first : kStagedPairs;
    __syncthreads();  // the previous chunk is read by every chain (and what came before is done)
    for (uint32_t i = threadIdx.x; i < count * kPieces; i += blockDim.x) {
      const uint32_t j = i / kPieces;
      const uint32_t piece_column = (i % kPieces) * kVec;
      if (piece_column == 0) stage_weight(first, j);
      if (piece_column >= columns) continue;
      float v[kVec];
      LoadValues<V, kVec>(values + size_t{slots[first + j]} * p.dim + piece_column, v);
#pragma unroll
      for (int e = 0; e < kVec; ++e) staged[j * kStagedColumns + piece_column + e] = v[e];
    }
    __syncthreads();
    if (column >= columns) continue;
#pragma unroll 8
    for (uint32_t j = 0; j < count; ++j) {
      acc = Fma(weight(first, j), staged[j * kStagedColumns + column], acc);
    }
  }
  if (column < columns) {
    StoreOutput(reinterpret_cast<O*>(p.out) + output * p.dim + first_column + column, acc);
  }
}

// The staged kernel: StagedBlockSum with each chunk's weights copied to shared memory beside it.
template <class V, class O, int kVec>
__global__ void __launch_bounds__(kStagedThreads) StagedSumKernel(
    const __grid_constant__ SumParams p) {
  float* staged = reinterpret_cast<float*>(LookupShared());
  float* chunk_weights = staged + kStagedPairs * kStagedColumns;  // [kStagedPairs]
  const size_t output = blockIdx.x / p.tiles;
  const float* weights = p.weights + output * p.pairs;
  StagedBlockSum<V, O, kVec>(
      p, output, blockIdx.x % p.tiles, staged,
      [&](uint32_t first, uint32_t j) { chunk_weights[j] = weights[first + j]; },
      [&](uint32_t /*first*/, uint32_t j) { return chunk_weights[j]; });
}

// The fused kernel of small batches: the staged kernel's blocks (an output and 32 columns) each
// first compute their output's weights into shared memory, a warp a row (the weights kernel's
// WarpRowWeights, so the same bits), the first tile of each output also writing them and the
// rows' validity out; then the staged sum reads them from there. One launch instead of two, for
// outputs of at most kFusedMaxPairs pairs.
constexpr uint32_t kFusedMaxPairs = 2048;
constexpr uint32_t kFusedWarps = kStagedThreads / 32;

struct FusedParams {
  SumParams sum;
  WeightsParams weights;  // .rows unused; .weights and .row_valid written by each first tile
  uint32_t heads;
};

template <class V, class O, int kVec>
__global__ void __launch_bounds__(kStagedThreads) FusedLookupKernel(
    const __grid_constant__ FusedParams p) {
  float* staged = reinterpret_cast<float*>(LookupShared());  // [kStagedPairs][kStagedColumns]
  float* pair_weights = staged + kStagedPairs * kStagedColumns;  // [kFusedMaxPairs]
  float* terms = pair_weights + kFusedMaxPairs;                  // [kFusedWarps][kMaxK]
  const SumParams& s = p.sum;
  const size_t output = blockIdx.x / s.tiles;
  const uint32_t tile = blockIdx.x % s.tiles;
  const unsigned warp = threadIdx.x >> 5;
  const unsigned lane = threadIdx.x & 31u;
  const uint32_t kk = p.weights.shape.kk;
  for (uint32_t head = warp; head < p.heads; head += kFusedWarps) {
    const size_t row = output * p.heads + head;
    const bool valid = WarpRowWeights(p.weights.shape, p.weights.scores + row * p.weights.row_bytes,
                                      p.weights.slots + row * kk, terms + warp * kMaxK,
                                      pair_weights + head * kk, lane);
    if (tile == 0) {
      for (uint32_t i = lane; i < kk; i += 32) {
        p.weights.weights[row * kk + i] = pair_weights[head * kk + i];
      }
      if (lane == 0) p.weights.row_valid[row] = valid ? 1 : 0;
    }
  }
  // The weights are in shared memory before the first chunk (StagedBlockSum syncs first).
  StagedBlockSum<V, O, kVec>(
      s, output, tile, staged, [](uint32_t /*first*/, uint32_t /*j*/) {},
      [&](uint32_t first, uint32_t j) { return pair_weights[first + j]; });
}

// Multiprocessors of the device current at the first launch (the hosts have one GPU model).
int Multiprocessors() {
  static const int count = [] {
    int device = 0;
#if !defined(PK_CUDA_EMULATION)
    if (cudaGetDevice(&device) != cudaSuccess) return 132;
#endif
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) return 132;
    return properties.multiProcessorCount;
  }();
  return count;
}

// Which weighted-sum kernel a launch takes: by the grid's size, unless the environment forces one
// for tests (PK_LOOKUP_SUM_KERNEL=streaming or staged; read once), so that the differential tests
// cover both kernels on every shape.
enum class SumKernel { kBySize, kStreaming, kStaged, kFused };
SumKernel ForcedSumKernel() {
  static const SumKernel forced = [] {
    const char* name = std::getenv("PK_LOOKUP_SUM_KERNEL");
    if (name != nullptr && std::strcmp(name, "streaming") == 0) return SumKernel::kStreaming;
    if (name != nullptr && std::strcmp(name, "staged") == 0) return SumKernel::kStaged;
    if (name != nullptr && std::strcmp(name, "fused") == 0) return SumKernel::kFused;
    return SumKernel::kBySize;
  }();
  return forced;
}

// Whether the streaming kernel's grid for `outputs` outputs of `dim` columns (threads as
// LaunchSum picks them) is too small to cover the memory latency: a small batch.
template <int kVec>
bool SmallBatch(uint32_t dim, size_t outputs);

// The streaming kernel's block for `outputs` outputs: threads to cover a row, then halved while
// the grid would leave multiprocessors idle (small batches: more, narrower tiles per output).
template <int kVec>
uint32_t StreamingThreads(uint32_t dim, size_t outputs) {
  const uint32_t needed = (dim + kVec - 1) / kVec;
  uint32_t threads = kMaxSumThreads;
  while (threads > kMinSumThreads && threads / 2 >= needed) threads /= 2;
  auto blocks = [&](uint32_t t) { return outputs * ((needed + t - 1) / t); };
  while (threads > kMinSumThreads && blocks(threads) < 2 * size_t(Multiprocessors())) threads /= 2;
  return threads;
}

template <int kVec>
bool SmallBatch(uint32_t dim, size_t outputs) {
  const uint32_t needed = (dim + kVec - 1) / kVec;
  const uint32_t threads = StreamingThreads<kVec>(dim, outputs);
  return outputs * ((needed + threads - 1) / threads) <
         kStagedBelowBlocksPerSm * size_t(Multiprocessors());
}

template <class V, class O, int kVec>
cudaError_t LaunchSum(SumParams params, size_t outputs, cudaStream_t stream) {
  const uint32_t needed = (params.dim + kVec - 1) / kVec;
  const uint32_t threads = StreamingThreads<kVec>(params.dim, outputs);
  params.tiles = (needed + threads - 1) / threads;
  size_t grid = outputs * params.tiles;
  void* arguments[] = {&params};
  const SumKernel forced = ForcedSumKernel();
  const bool staged = forced == SumKernel::kBySize || forced == SumKernel::kFused
                          ? SmallBatch<kVec>(params.dim, outputs)
                          : forced == SumKernel::kStaged;
  if (staged) {
    params.tiles = (params.dim + kStagedColumns - 1) / kStagedColumns;
    grid = outputs * params.tiles;
    if (grid > kGridLimit) return cudaErrorInvalidConfiguration;
    return cudaLaunchKernel(StagedSumKernel<V, O, kVec>, dim3(static_cast<unsigned>(grid)),
                            dim3(kStagedThreads), arguments,
                            (kStagedPairs * kStagedColumns + kStagedPairs) * sizeof(float),
                            stream);
  }
  if (grid > kGridLimit) return cudaErrorInvalidConfiguration;
  return cudaLaunchKernel(WeightedSumKernel<V, O, kVec>, dim3(static_cast<unsigned>(grid)),
                          dim3(threads), arguments, kPairChunk * 8, stream);
}

template <class V, class O>
cudaError_t LaunchSumFor(const SumParams& params, size_t outputs, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(V);
  const bool aligned = reinterpret_cast<uintptr_t>(params.values) % 16 == 0 &&
                       params.dim % kWide == 0;
  if (aligned) return LaunchSum<V, O, kWide>(params, outputs, stream);
  return LaunchSum<V, O, 1>(params, outputs, stream);
}

template <class V, class O, int kVec>
cudaError_t LaunchFused(FusedParams params, size_t outputs, cudaStream_t stream) {
  params.sum.tiles = (params.sum.dim + kStagedColumns - 1) / kStagedColumns;
  const size_t grid = outputs * params.sum.tiles;
  if (grid > kGridLimit) return cudaErrorInvalidConfiguration;
  void* arguments[] = {&params};
  constexpr size_t kShared =
      (kStagedPairs * kStagedColumns + kFusedMaxPairs + kFusedWarps * kMaxK) * sizeof(float);
  return cudaLaunchKernel(FusedLookupKernel<V, O, kVec>, dim3(static_cast<unsigned>(grid)),
                          dim3(kStagedThreads), arguments, kShared, stream);
}

// The fused kernel when the batch is small and an output's pairs fit its shared memory (or the
// environment forces it); false (nothing launched) otherwise.
template <class V, class O>
bool MaybeLaunchFused(const FusedParams& params, size_t outputs, cudaStream_t stream,
                      cudaError_t* error) {
  constexpr int kWide = 16 / sizeof(V);
  const bool aligned = reinterpret_cast<uintptr_t>(params.sum.values) % 16 == 0 &&
                       params.sum.dim % kWide == 0;
  const SumKernel forced = ForcedSumKernel();
  const bool small = aligned ? SmallBatch<kWide>(params.sum.dim, outputs)
                             : SmallBatch<1>(params.sum.dim, outputs);
  const bool fits = params.sum.pairs <= kFusedMaxPairs;
  if (!fits || !(forced == SumKernel::kFused || (forced == SumKernel::kBySize && small))) {
    return false;
  }
  *error = aligned ? LaunchFused<V, O, kWide>(params, outputs, stream)
                   : LaunchFused<V, O, 1>(params, outputs, stream);
  return true;
}

}  // namespace

cudaError_t LaunchLookupWeights(const Problem& topk, const std::byte* scores, const uint32_t* slots,
                                size_t rows, float* weights, uint8_t* row_valid,
                                cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  WeightsParams params{MakeScoreShape(topk), scores, slots, weights, row_valid, rows,
                       topk.row_bytes()};
  const size_t blocks = (rows + kWeightWarps - 1) / kWeightWarps;
  if (blocks > kGridLimit) return cudaErrorInvalidConfiguration;
  void* arguments[] = {&params};
  return cudaLaunchKernel(LookupWeightsKernel, dim3(static_cast<unsigned>(blocks)),
                          dim3(32 * kWeightWarps), arguments, kWeightWarps * kMaxK * sizeof(float),
                          stream);
}

cudaError_t LaunchWeightedSum(const LookupProblem& problem, const ValuesView& device_values,
                              const uint32_t* slots, const float* weights, size_t outputs,
                              std::byte* out, cudaStream_t stream) {
  if (outputs == 0) return cudaSuccess;
  SumParams params{device_values.data, slots, weights, out, problem.pairs_per_output(),
                   problem.dim, 1};
  const bool bf16_values = problem.value_dtype == DType::kBFloat16;
  const bool bf16_out = problem.output_dtype == DType::kBFloat16;
  if (bf16_values) {
    return bf16_out ? LaunchSumFor<uint16_t, uint16_t>(params, outputs, stream)
                    : LaunchSumFor<uint16_t, float>(params, outputs, stream);
  }
  return bf16_out ? LaunchSumFor<float, uint16_t>(params, outputs, stream)
                  : LaunchSumFor<float, float>(params, outputs, stream);
}

cudaError_t LaunchLookup(const LookupProblem& problem, const ValuesView& device_values,
                         const std::byte* scores, const uint32_t* slots, size_t rows,
                         float* weights, uint8_t* row_valid, std::byte* outputs,
                         cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const size_t output_count = rows / problem.heads;
  FusedParams fused{SumParams{device_values.data, slots, weights, outputs,
                              problem.pairs_per_output(), problem.dim, 1},
                    WeightsParams{MakeScoreShape(problem.topk), scores, slots, weights, row_valid,
                                  rows, problem.topk.row_bytes()},
                    problem.heads};
  cudaError_t fused_error = cudaSuccess;
  const bool bf16_values = problem.value_dtype == DType::kBFloat16;
  const bool bf16_out = problem.output_dtype == DType::kBFloat16;
  const bool launched =
      bf16_values ? (bf16_out ? MaybeLaunchFused<uint16_t, uint16_t>(fused, output_count, stream,
                                                                     &fused_error)
                              : MaybeLaunchFused<uint16_t, float>(fused, output_count, stream,
                                                                  &fused_error))
                  : (bf16_out ? MaybeLaunchFused<float, uint16_t>(fused, output_count, stream,
                                                                  &fused_error)
                              : MaybeLaunchFused<float, float>(fused, output_count, stream,
                                                               &fused_error));
  if (launched) return fused_error;
  const cudaError_t error =
      LaunchLookupWeights(problem.topk, scores, slots, rows, weights, row_valid, stream);
  if (error != cudaSuccess) return error;
  return LaunchWeightedSum(problem, device_values, slots, weights, rows / problem.heads, outputs,
                           stream);
}

}  // namespace pk::cuda
