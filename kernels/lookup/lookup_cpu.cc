#include "kernels/lookup/lookup_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/scan.h"
#include "kernels/lookup/weights.h"
#include "kernels/numeric.h"

#if PK_X86_DISPATCH
#include <immintrin.h>
#endif

namespace pk::cpu {

namespace {

// Rows whose top-k values one LookupWeightsRows step keeps on the stack (the top-k writes them;
// the lookup recomputes the float32 scores from the raw row instead).
constexpr size_t kRowsPerStep = 8;
// Columns of one output whose float32 accumulators stay in L1 while every pair is summed in.
constexpr uint32_t kColumnBlock = 1024;

// Writes `count` accumulators rounded to `dtype` (round_U) at `out` (any alignment).
void StoreRounded(const float* acc, uint32_t count, DType dtype, std::byte* out) {
  if (dtype == DType::kFloat32) {
    std::memcpy(out, acc, size_t{count} * 4);
    return;
  }
  for (uint32_t j = 0; j < count; ++j) {
    const uint16_t bits = FloatToBf16(acc[j]);
    std::memcpy(out + size_t{j} * 2, &bits, 2);
  }
}

float LoadValue(const std::byte* row, uint32_t j, DType dtype) {
  if (dtype == DType::kBFloat16) {
    uint16_t bits;
    std::memcpy(&bits, row + size_t{j} * 2, 2);
    return Bf16ToFloat(bits);
  }
  float x;
  std::memcpy(&x, row + size_t{j} * 4, 4);
  return x;
}

// acc[j] = fma(w, row[j], acc[j]) for j < count, one column at a time.
void AccumulateGeneric(float w, const std::byte* row, uint32_t count, DType dtype, float* acc) {
  for (uint32_t j = 0; j < count; ++j) acc[j] = std::fma(w, LoadValue(row, j, dtype), acc[j]);
}

#if PK_X86_DISPATCH

template <DType kDType>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void AccumulateAvx512(
    float w, const std::byte* row, uint32_t count, float* acc) {
  const __m512 weight = _mm512_set1_ps(w);
  uint32_t j = 0;
  for (; j < count; j += 16) {
    const __mmask16 mask =
        count - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (count - j)) - 1u);
    __m512 v;
    if constexpr (kDType == DType::kFloat32) {
      v = _mm512_maskz_loadu_ps(mask, row + size_t{j} * 4);
    } else {
      const __m256i bits = _mm256_maskz_loadu_epi16(mask, row + size_t{j} * 2);
      const __m512i wide = _mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), bits);
      v = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(__mmask16(0xffff), wide, 16));
    }
    const __m512 a = _mm512_maskz_loadu_ps(mask, acc + j);
    _mm512_mask_storeu_ps(acc + j, mask, _mm512_fmadd_ps(weight, v, a));
  }
}

template <DType kDType>
__attribute__((target("avx2,fma"))) void AccumulateAvx2(float w, const std::byte* row,
                                                        uint32_t count, float* acc) {
  const __m256 weight = _mm256_set1_ps(w);
  uint32_t j = 0;
  for (; j + 8 <= count; j += 8) {
    __m256 v;
    if constexpr (kDType == DType::kFloat32) {
      v = _mm256_loadu_ps(reinterpret_cast<const float*>(row + size_t{j} * 4));
    } else {
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + size_t{j} * 2));
      v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    }
    _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(weight, v, _mm256_loadu_ps(acc + j)));
  }
  for (; j < count; ++j) acc[j] = std::fma(w, LoadValue(row, j, kDType), acc[j]);
}

#endif  // PK_X86_DISPATCH

SumPath BestPath() {
#if PK_X86_DISPATCH
  if (HostHasAvx512()) return SumPath::kAvx512;
  if (HostHasAvx2()) return SumPath::kAvx2;
#endif
  return SumPath::kGeneric;
}

// One column block [begin, begin + count) of one output, every pair summed in order.
void SumBlock(SumPath path, const ValuesView& values,
              const uint32_t* slots, const float* weights, uint32_t pairs, uint32_t begin,
              uint32_t count, float* acc) {
  const size_t element = ElementBytes(values.dtype);
  const size_t row_bytes = size_t{values.dim} * element;
  const size_t block_bytes = size_t{count} * element;
  const auto row_of = [&](uint32_t p) {
    return values.data + slots[p] * row_bytes + size_t{begin} * element;
  };
  std::fill(acc, acc + count, 0.0f);
  for (uint32_t p = 0; p < pairs; ++p) {
    const std::byte* row = row_of(p);
    // The rows are scattered over the table: ask for the next pair's block while this one is
    // summed, so that its cache misses overlap this pair's work.
    if (p + 1 < pairs) {
      const std::byte* next = row_of(p + 1);
      for (size_t offset = 0; offset < block_bytes; offset += 64) {
        __builtin_prefetch(next + offset, 0, 0);
      }
    }
    const float w = weights[p];
    switch (path) {
#if PK_X86_DISPATCH
      case SumPath::kAvx512:
        if (values.dtype == DType::kFloat32) {
          AccumulateAvx512<DType::kFloat32>(w, row, count, acc);
        } else {
          AccumulateAvx512<DType::kBFloat16>(w, row, count, acc);
        }
        break;
      case SumPath::kAvx2:
        if (values.dtype == DType::kFloat32) {
          AccumulateAvx2<DType::kFloat32>(w, row, count, acc);
        } else {
          AccumulateAvx2<DType::kBFloat16>(w, row, count, acc);
        }
        break;
#endif
      default:
        AccumulateGeneric(w, row, count, values.dtype, acc);
        break;
    }
  }
}

}  // namespace

void LookupWeightsRows(const Problem& topk, const std::byte* scores, size_t rows,
                       uint32_t* slots, float* weights, uint8_t* row_valid, Workspace& ws) {
  const ScoreShape shape = MakeScoreShape(topk);
  const size_t kk = shape.kk;
  std::byte values[kRowsPerStep * kMaxK * 4];
  for (size_t first = 0; first < rows; first += kRowsPerStep) {
    const size_t step = std::min(kRowsPerStep, rows - first);
    TopKRows(topk, scores + first * topk.row_bytes(), step, values, slots + first * kk, ws);
    for (size_t r = first; r < first + step; ++r) {
      const bool valid =
          RowWeights(shape, scores + r * topk.row_bytes(), slots + r * kk, weights + r * kk);
      row_valid[r] = valid ? 1 : 0;
    }
  }
}

bool SumPathAvailable(SumPath path) {
  switch (path) {
    case SumPath::kAuto:
    case SumPath::kGeneric:
      return true;
#if PK_X86_DISPATCH
    case SumPath::kAvx2:
      return HostHasAvx2();
    case SumPath::kAvx512:
      return HostHasAvx512();
#endif
    default:
      return false;
  }
}

void WeightedSumRowsOn(SumPath path, const LookupProblem& problem, const ValuesView& values,
                       const uint32_t* slots, const float* weights, size_t outputs,
                       std::byte* out) {
  if (path == SumPath::kAuto) path = BestPath();
  const uint32_t pairs = problem.pairs_per_output();
  const size_t out_element = ElementBytes(problem.output_dtype);
  float acc[kColumnBlock];
  for (size_t o = 0; o < outputs; ++o) {
    const uint32_t* output_slots = slots + o * pairs;
    const float* output_weights = weights + o * pairs;
    std::byte* output = out + o * problem.output_row_bytes();
    for (uint32_t begin = 0; begin < problem.dim; begin += kColumnBlock) {
      const uint32_t count = std::min(kColumnBlock, problem.dim - begin);
      SumBlock(path, values, output_slots, output_weights, pairs, begin, count, acc);
      StoreRounded(acc, count, problem.output_dtype, output + size_t{begin} * out_element);
    }
  }
}

void WeightedSumRows(const LookupProblem& problem, const ValuesView& values,
                     const uint32_t* slots, const float* weights, size_t outputs,
                     std::byte* out) {
  WeightedSumRowsOn(SumPath::kAuto, problem, values, slots, weights, outputs, out);
}

const char* SumPathName() {
  switch (BestPath()) {
    case SumPath::kAvx512:
      return "avx512";
    case SumPath::kAvx2:
      return "avx2";
    default:
      return "generic";
  }
}

}  // namespace pk::cpu
