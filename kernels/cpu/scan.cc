#include "kernels/cpu/scan.h"

#include <algorithm>
#include <cstring>

#include "kernels/numeric.h"

#if PK_X86_DISPATCH
#include <immintrin.h>
#endif

namespace pk::cpu {

#if PK_X86_DISPATCH
bool HostHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}

bool HostHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

namespace {

#if PK_X86_DISPATCH

// AVX-512 compaction: compare 16 keys, pack the passing lanes, store a full vector and advance
// by the count (hence kCompressSlack).
template <bool kIndices>
__attribute__((target("avx512f,avx512bw,avx512vl"))) uint32_t CompressAvx512(
    const uint32_t* keys, uint32_t count, uint32_t threshold, uint32_t* out) {
  const __m512i limit = _mm512_set1_epi32(static_cast<int>(threshold));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  uint32_t written = 0;
  uint32_t c = 0;
  for (; c < count; c += 16) {
    const __mmask16 in_range =
        count - c >= 16 ? static_cast<__mmask16>(0xffff)
                        : static_cast<__mmask16>((1u << (count - c)) - 1);
    const __m512i key = _mm512_maskz_loadu_epi32(in_range, keys + c);
    const __mmask16 pass = _mm512_mask_cmpge_epu32_mask(in_range, key, limit);
    const __m512i payload =
        kIndices ? _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(c))) : key;
    _mm512_storeu_si512(out + written, _mm512_maskz_compress_epi32(pass, payload));
    written += static_cast<uint32_t>(__builtin_popcount(pass));
  }
  return written;
}

// CompressBf16KeysAtLeast on AVX-512: 16 keys made in vector lanes, then compressed as above.
__attribute__((target("avx512f,avx512bw,avx512vl"))) uint32_t CompressBf16KeysAvx512(
    const std::byte* x, uint32_t count, uint32_t threshold, uint32_t* out) {
  const __m512i limit = _mm512_set1_epi32(static_cast<int>(threshold));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i magnitude = _mm512_set1_epi32(0x7fff);
  const __m512i infinity = _mm512_set1_epi32(0x7f80);
  const __m512i negative_infinity = _mm512_set1_epi32(0xff80);
  const __m512i sign = _mm512_set1_epi32(0x8000);
  const __m512i low_half = _mm512_set1_epi32(0xffff);
  uint32_t written = 0;
  if (threshold >= 0x80000000u) {
    // A threshold at or above +0's key: only patterns from +0 to +inf can reach it (compared
    // unsigned, negative patterns and NaN lie above +inf), and for those the ordered key is the
    // pattern with the sign bit set, so the key needs no ordering step.
    const __m512i highest = _mm512_set1_epi32(0x7f80);
    const __m512i column_bits =
        _mm512_or_si512(lane, _mm512_set1_epi32(static_cast<int>(0x80000000u)));
    for (uint32_t c = 0; c < count; c += 16) {
      const __mmask16 in_range =
          count - c >= 16 ? static_cast<__mmask16>(0xffff)
                          : static_cast<__mmask16>((1u << (count - c)) - 1);
      const __m512i bits = _mm512_maskz_cvtepu16_epi32(
          in_range, _mm256_maskz_loadu_epi16(in_range, x + 2 * size_t{c}));
      const __m512i column = _mm512_add_epi32(column_bits, _mm512_set1_epi32(static_cast<int>(c)));
      const __m512i key = _mm512_or_si512(_mm512_maskz_slli_epi32(in_range, bits, 16), column);
      const __mmask16 pass = _mm512_mask_cmpge_epu32_mask(
          _mm512_mask_cmple_epu32_mask(in_range, bits, highest), key, limit);
      _mm512_storeu_si512(out + written, _mm512_maskz_compress_epi32(pass, key));
      written += static_cast<uint32_t>(__builtin_popcount(pass));
    }
    return written;
  }
  for (uint32_t c = 0; c < count; c += 16) {
    const __mmask16 in_range =
        count - c >= 16 ? static_cast<__mmask16>(0xffff)
                        : static_cast<__mmask16>((1u << (count - c)) - 1);
    // The maskz forms: GCC 12 warns on the unmasked ones' undefined-value idiom at -O3.
    __m512i bits = _mm512_maskz_cvtepu16_epi32(
        in_range, _mm256_maskz_loadu_epi16(in_range, x + 2 * size_t{c}));
    // OrderedKeyBf16: NaN ranks as -inf; negative patterns invert, the others gain the sign bit.
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude), infinity);
    bits = _mm512_mask_mov_epi32(bits, nan, negative_infinity);
    const __mmask16 negative = _mm512_test_epi32_mask(bits, sign);
    const __m512i ordered = _mm512_mask_xor_epi32(_mm512_or_si512(bits, sign), negative, bits,
                                                  low_half);
    const __m512i column = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(c)));
    const __m512i key = _mm512_or_si512(_mm512_maskz_slli_epi32(in_range, ordered, 16), column);
    const __mmask16 pass = _mm512_mask_cmpge_epu32_mask(in_range, key, limit);
    _mm512_storeu_si512(out + written, _mm512_maskz_compress_epi32(pass, key));
    written += static_cast<uint32_t>(__builtin_popcount(pass));
  }
  return written;
}

// table[index[l]] for 16 lanes, from a table held in kVectors registers (32 to 128 floats): each
// pair of registers answers the low five bits of an index (one two-source permute), then the
// higher bits pick among the pairs' answers.
template <int kVectors>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 LookUp(
    const __m512* table, __m512i index) {
  __m512 found[kVectors / 2];
  for (int p = 0; p < kVectors / 2; ++p) {
    found[p] = _mm512_permutex2var_ps(table[2 * p], index, table[2 * p + 1]);
  }
  for (int bit = 5, span = 1; span < kVectors / 2; ++bit, span *= 2) {
    const __mmask16 upper = _mm512_test_epi32_mask(index, _mm512_set1_epi32(1 << bit));
    for (int p = 0; p + span < kVectors / 2; p += 2 * span) {
      found[p] = _mm512_mask_blend_ps(upper, found[p], found[p + span]);
    }
  }
  return found[0];
}

// ScorePairsAtLeast on AVX-512: both tables in registers, the values found by permutes (no
// gathers, which cost more than the scalar loads here), added and keyed in vector lanes
// (OrderedKey lane by lane), then the passing positions and keys compressed as above.
template <int kVectors>
__attribute__((target("avx512f,avx512bw,avx512vl"))) uint32_t ScorePairsAvx512(
    const float* a, const uint32_t* ia, const float* b, const uint32_t* ib, uint32_t count,
    uint32_t threshold, uint32_t* keys, uint32_t* positions, uint32_t* passing_keys) {
  __m512 table_a[kVectors];
  __m512 table_b[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    table_a[v] = _mm512_loadu_ps(a + 16 * v);
    table_b[v] = _mm512_loadu_ps(b + 16 * v);
  }
  const __m512i limit = _mm512_set1_epi32(static_cast<int>(threshold));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i infinity = _mm512_set1_epi32(0x7f800000);
  const __m512i negative_infinity = _mm512_set1_epi32(static_cast<int>(0xff800000u));
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i all_ones = _mm512_set1_epi32(-1);
  uint32_t written = 0;
  for (uint32_t e = 0; e < count; e += 16) {
    const __mmask16 in_range =
        count - e >= 16 ? static_cast<__mmask16>(0xffff)
                        : static_cast<__mmask16>((1u << (count - e)) - 1);
    const __m512 value_a = LookUp<kVectors>(table_a, _mm512_maskz_loadu_epi32(in_range, ia + e));
    const __m512 value_b = LookUp<kVectors>(table_b, _mm512_maskz_loadu_epi32(in_range, ib + e));
    __m512i bits = _mm512_castps_si512(_mm512_add_ps(value_a, value_b));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude), infinity);
    bits = _mm512_mask_mov_epi32(bits, nan, negative_infinity);
    const __mmask16 negative = _mm512_test_epi32_mask(bits, sign);
    const __m512i key =
        _mm512_mask_xor_epi32(_mm512_or_si512(bits, sign), negative, bits, all_ones);
    _mm512_mask_storeu_epi32(keys + e, in_range, key);
    const __mmask16 pass = _mm512_mask_cmpge_epu32_mask(in_range, key, limit);
    const __m512i position = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(e)));
    _mm512_storeu_si512(positions + written, _mm512_maskz_compress_epi32(pass, position));
    _mm512_storeu_si512(passing_keys + written, _mm512_maskz_compress_epi32(pass, key));
    written += static_cast<uint32_t>(__builtin_popcount(pass));
  }
  return written;
}
#endif

inline uint32_t Bf16Key(const std::byte* x, uint32_t c) {
  uint16_t bits;
  std::memcpy(&bits, x + 2 * size_t{c}, sizeof bits);
  return (uint32_t{OrderedKeyBf16(bits)} << 16) | c;
}

template <bool kIndices>
uint32_t CompressGeneric(const uint32_t* keys, uint32_t count, uint32_t threshold, uint32_t* out) {
  uint32_t written = 0;
  for (uint32_t c = 0; c < count; ++c) {
    out[written] = kIndices ? c : keys[c];
    written += keys[c] >= threshold ? 1 : 0;
  }
  return written;
}

}  // namespace

PK_VECTOR_CLONES void Bf16ColumnKeys(const std::byte* x, uint32_t count, uint32_t* keys) {
  for (uint32_t c = 0; c < count; ++c) keys[c] = Bf16Key(x, c);
}

PK_VECTOR_CLONES void Bf16StridedGroupMaxima(const std::byte* x, uint32_t count, uint32_t groups,
                                             uint16_t* maxima) {
  // In 16 bits: twice the lanes of a 32-bit key. Indices are size_t, each group row gets its own
  // pointer, and the maxima build in a local array that nothing else can alias, so that the loops
  // vectorize without run-time checks.
  uint16_t most[kMaxGroups];
  const auto key = [](const std::byte* element) {
    uint16_t bits;
    std::memcpy(&bits, element, sizeof bits);
    return OrderedKeyBf16(bits);
  };
  const size_t width = groups;
  for (size_t g = 0; g < width; ++g) most[g] = key(x + 2 * g);
  size_t start = width;
  for (; start + width <= count; start += width) {
    const std::byte* group_row = x + 2 * start;
    for (size_t g = 0; g < width; ++g) most[g] = std::max(most[g], key(group_row + 2 * g));
  }
  const std::byte* tail = x + 2 * start;
  for (size_t g = 0; start + g < count; ++g) most[g] = std::max(most[g], key(tail + 2 * g));
  std::memcpy(maxima, most, width * sizeof most[0]);
}

uint32_t CompressBf16KeysAtLeast(const std::byte* x, uint32_t count, uint32_t threshold,
                                 uint32_t* out) {
#if PK_X86_DISPATCH
  if (HostHasAvx512()) return CompressBf16KeysAvx512(x, count, threshold, out);
#endif
  // Keys a block at a time with the vector unit, then the branch-free scalar compaction; a block
  // starting at column `start` adds it to the keys' column part (columns stay below 65 536).
  constexpr uint32_t kBlock = 256;
  uint32_t keys[kBlock];
  uint32_t written = 0;
  for (uint32_t start = 0; start < count; start += kBlock) {
    const uint32_t block = std::min(kBlock, count - start);
    Bf16ColumnKeys(x + 2 * size_t{start}, block, keys);
    for (uint32_t c = 0; c < block; ++c) {
      const uint32_t key = keys[c] + start;
      out[written] = key;
      written += key >= threshold ? 1 : 0;
    }
  }
  return written;
}

PK_VECTOR_CLONES void Float32Keys(const std::byte* x, uint32_t count, uint32_t* keys) {
  for (uint32_t c = 0; c < count; ++c) {
    uint32_t bits;
    std::memcpy(&bits, x + 4 * size_t{c}, sizeof bits);
    keys[c] = OrderedKey(BitsToFloat(bits));
  }
}

PK_VECTOR_CLONES void StridedGroupMaxima(const uint32_t* keys, uint32_t count, uint32_t groups,
                                         uint32_t* maxima) {
  std::memcpy(maxima, keys, groups * sizeof(uint32_t));
  uint32_t start = groups;
  for (; start + groups <= count; start += groups) {
    const uint32_t* group_row = keys + start;
    for (uint32_t g = 0; g < groups; ++g) maxima[g] = std::max(maxima[g], group_row[g]);
  }
  for (uint32_t g = 0; start + g < count; ++g) maxima[g] = std::max(maxima[g], keys[start + g]);
}

uint32_t CompressAtLeast(const uint32_t* keys, uint32_t count, uint32_t threshold, uint32_t* out) {
#if PK_X86_DISPATCH
  if (HostHasAvx512()) return CompressAvx512<false>(keys, count, threshold, out);
#endif
  return CompressGeneric<false>(keys, count, threshold, out);
}

uint32_t CompressIndicesAtLeast(const uint32_t* keys, uint32_t count, uint32_t threshold,
                                uint32_t* out) {
#if PK_X86_DISPATCH
  if (HostHasAvx512()) return CompressAvx512<true>(keys, count, threshold, out);
#endif
  return CompressGeneric<true>(keys, count, threshold, out);
}

uint32_t ScorePairsAtLeast(const float* a, const uint32_t* ia, const float* b, const uint32_t* ib,
                           uint32_t entries, uint32_t count, uint32_t threshold, uint32_t* keys,
                           uint32_t* positions, uint32_t* passing_keys) {
#if PK_X86_DISPATCH
  // Up to 128 entries the two tables take 16 of the 32 vector registers; larger ones would spill
  // them, and the loop below measured 25 % slower a row at 256 entries.
  if (HostHasAvx512() && entries <= 128) {
    const auto score = entries <= 32   ? ScorePairsAvx512<2>
                       : entries <= 64 ? ScorePairsAvx512<4>
                                       : ScorePairsAvx512<8>;
    return score(a, ia, b, ib, count, threshold, keys, positions, passing_keys);
  }
#endif
  for (uint32_t e = 0; e < count; ++e) keys[e] = OrderedKey(a[ia[e]] + b[ib[e]]);
  const uint32_t passing = CompressIndicesAtLeast(keys, count, threshold, positions);
  for (uint32_t s = 0; s < passing; ++s) passing_keys[s] = keys[positions[s]];
  return passing;
}

const char* ScanPathName() {
#if PK_X86_DISPATCH
  if (HostHasAvx512()) return "avx512";
  if (HostHasAvx2()) return "avx2";
#endif
  return "generic";
}

}  // namespace pk::cpu
