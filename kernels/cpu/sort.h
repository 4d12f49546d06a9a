// Sorting networks for the CPU top-k's small sorts (up to 256 keys of 32 or 16 bits): a bitonic
// network over keys held in vectors (GCC vector extensions) as wide as the host's (64 bytes with
// AVX-512, 32 with AVX2, else 16; picked at run time like the scans, scan.h), so a vector is one
// register and each compare-exchange step is a permute, a max, a min and a blend; every width
// gives the same bits. Every comparator puts the larger key at the lower index: a merge starts
// with a "flip" (element i of a block against its mirror image), after which every half-cleaner
// has the same direction, so no step needs a per-lane direction.
//
// Counting-loop arrays share one padding convention (PaddedCount): whole vectors, zeros past the
// keys. A zero key sorts last and has score 0, so padding never displaces or counts as a key.
#pragma once

#include <cstdint>

namespace pk::cpu {

// Rounds a count of keys up to whole vectors. Arrays that the counting loops and the sorts read
// have room for the rounded count, with zeros past the keys (PadWithZeros). Whole vectors spare
// the loops a scalar epilogue, which for the ~100-entry sets seen here costs more than the vectors.
inline int PaddedCount(int count) { return (count + 15) & ~15; }

inline void PadWithZeros(uint32_t* keys, int count) {
  for (int e = count; e < PaddedCount(count); ++e) keys[e] = 0;
}

// The largest count SortTopDescending takes.
inline constexpr int kMaxNetworkSort = 256;

// out[0..need) = the `need` largest of keys[0..n), in descending order. Pre: 1 <= need <= n <=
// kMaxNetworkSort; keys zero-padded to PaddedCount(n); out: room for PaddedCount(n) keys, of
// which those past `need` are left unspecified (some written, some not).
void SortTopDescending(const uint32_t* keys, int n, int need, uint32_t* out);

// The same for up to kMaxNetworkSort16 16-bit keys on hosts whose vectors hold 32 of them
// (AVX-512), where it takes half the vectors of 32-bit keys; false, writing nothing, on others
// (their 16-bit permutes cost more than they save). Pre: as SortTopDescending, but keys
// zero-padded to PaddedCount16(n) and out with room for as many.
inline constexpr int kMaxNetworkSort16 = 128;
inline int PaddedCount16(int count) { return (count + 31) & ~31; }
bool SortTopDescending16(const uint16_t* keys, int n, int need, uint16_t* out);

// out[0..n) = keys[0..n) in descending order; as SortTopDescending.
inline void SortDescending(const uint32_t* keys, int n, uint32_t* out) {
  SortTopDescending(keys, n, n, out);
}

// SortTopDescending at a vector width of its own choosing (16, 32 or 64 bytes), for tests of
// every width a host can run; false, writing nothing, where this host or build cannot.
bool SortTopDescendingAtWidth(int vector_bytes, const uint32_t* keys, int n, int need,
                              uint32_t* out);

}  // namespace pk::cpu
