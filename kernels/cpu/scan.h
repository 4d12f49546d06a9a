// The whole-row scans of the CPU top-k: the passes that touch every input element, and so the
// ones worth vectorizing. Each is chosen at run time for the host's vector unit (AVX-512, AVX2 or
// plain C++); shipped builds never assume more than the baseline instruction set.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PK_NO_SIMD_DISPATCH)
#define PK_X86_DISPATCH 1
// Compiled once per listed target; the loader picks the best for the host (GNU ifunc).
#define PK_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define PK_X86_DISPATCH 0
#define PK_VECTOR_CLONES
#endif

namespace pk::cpu {

#if PK_X86_DISPATCH
// What the host's vector unit has (checked once): AVX-512 F, BW and VL; AVX2.
bool HostHasAvx512();
bool HostHasAvx2();
#endif

// Slack, in elements, that the output buffers of the Compress* functions need past `count`.
inline constexpr int kCompressSlack = 16;

// keys[c] = OrderedKeyBf16(x[c]) << 16 | c for c < count (count <= 65536): distinct keys whose
// order is SPEC.md's factor order (value, then larger column). x: bfloat16 patterns, unaligned.
void Bf16ColumnKeys(const std::byte* x, uint32_t count, uint32_t* keys);

// keys[c] = OrderedKey(x[c]) for c < count. x: float32 elements, unaligned.
void Float32Keys(const std::byte* x, uint32_t count, uint32_t* keys);

// maxima[g] = the largest of the strided group {keys[g], keys[g + groups], keys[g + 2 groups], ...}
// for g < groups: any n of the maxima are n distinct keys. Pre: 1 <= groups <= count.
void StridedGroupMaxima(const uint32_t* keys, uint32_t count, uint32_t groups, uint32_t* maxima);

// The same maxima for the keys Bf16ColumnKeys would make of x[0..count), straight from the
// bfloat16 patterns, in 16 bits: maxima[g] = the largest OrderedKeyBf16 of the strided group (the
// top half of the group's largest key). Pre: 1 <= groups <= min(count, kMaxGroups).
inline constexpr uint32_t kMaxGroups = 512;
void Bf16StridedGroupMaxima(const std::byte* x, uint32_t count, uint32_t groups, uint16_t* maxima);

// Writes the keys >= threshold that Bf16ColumnKeys would make of x[0..count) to out (in column
// order) and returns how many there were, without making the others. out: room for count +
// kCompressSlack keys.
uint32_t CompressBf16KeysAtLeast(const std::byte* x, uint32_t count, uint32_t threshold,
                                 uint32_t* out);

// Writes the keys >= threshold to out (in order) and returns how many there were.
// out: room for count + kCompressSlack keys.
uint32_t CompressAtLeast(const uint32_t* keys, uint32_t count, uint32_t threshold, uint32_t* out);

// Writes the indices c with keys[c] >= threshold to out (ascending) and returns how many.
// out: room for count + kCompressSlack indices.
uint32_t CompressIndicesAtLeast(const uint32_t* keys, uint32_t count, uint32_t threshold,
                                uint32_t* out);

// A pairing stage's scan: keys[e] = OrderedKey(a[ia[e]] + b[ib[e]]) for e < count (the sum in
// float, as SPEC.md adds); writes the e with keys[e] >= threshold to positions (ascending) and
// their keys to passing_keys, and returns how many there were. Indices are below `entries`
// (<= kMaxPairTable); a and b may be read up to the next power of two from 32 entries
// (kMaxPairTable at most). positions, passing_keys: room for count + kCompressSlack entries.
inline constexpr uint32_t kMaxPairTable = 256;
uint32_t ScorePairsAtLeast(const float* a, const uint32_t* ia, const float* b, const uint32_t* ib,
                           uint32_t entries, uint32_t count, uint32_t threshold, uint32_t* keys,
                           uint32_t* positions, uint32_t* passing_keys);

// "avx512", "avx2" or "generic": the path the functions above take on this host.
const char* ScanPathName();

}  // namespace pk::cpu
