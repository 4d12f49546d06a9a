// Sorting networks for the CPU top-k's small sorts (up to 256 32-bit keys): a bitonic network over
// keys held in vectors (GCC vector extensions) as wide as the host's (16 lanes with AVX-512, 8 with
// AVX2, else 4; picked at run time like the scans, scan.h), so a vector is one register and each
// compare-exchange step is a permute, a max, a min and a blend; every width gives the same bits.
// Every comparator puts the larger key at the lower index: a merge starts with a "flip" (element i
// of a block against its mirror image), after which every half-cleaner has the same direction, so
// no step needs a per-lane direction.
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

// out[0..n) = keys[0..n) in descending order; as SortTopDescending.
inline void SortDescending(const uint32_t* keys, int n, uint32_t* out) {
  SortTopDescending(keys, n, n, out);
}

// SortTopDescending at a vector width of its own choosing (4, 8 or 16 lanes), for tests of every
// width a host can run; false, writing nothing, where this host or build cannot.
bool SortTopDescendingAtWidth(int lanes, const uint32_t* keys, int n, int need, uint32_t* out);

}  // namespace pk::cpu
