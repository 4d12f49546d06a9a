// Selection primitives of the CPU top-k.
//
// SelectBest picks the best `need` of a list of entries ranked by a score key (descending), ties
// going to the later entry. It bisects on the score for the threshold T, the largest value that
// at least `need` entries reach (each step is one branch-free counting pass, which vectorizes),
// then keeps every entry above T and the last of those on it. Callers lay their entries out so
// that "later" is SPEC.md's tie-break: factor columns ascending, stage candidates by (i + j, i)
// ascending. RankSortDescending orders the chosen few by rank counting: each key's position is
// the number of keys above it, n^2 branch-free compares that beat a comparison sort for the
// n <= 256 keys it ever sees. Nothing here allocates.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/scan.h"

namespace pk::cpu {

// rank[a] = the number of keys[0..n) above keys[a], for a < kSize. The loop runs over `a`
// innermost: broadcast-compare-accumulate, no horizontal sums; with the size fixed at compile
// time the ranks stay in vector registers.
template <int kSize, typename Key>
inline void RankDescendingFixed(const Key* keys, int n, uint32_t* rank) {
  uint32_t local[kSize] = {};
  for (int b = 0; b < n; ++b) {
    const Key other = keys[b];
    for (int a = 0; a < kSize; ++a) local[a] += other > keys[a] ? 1u : 0u;
  }
  for (int a = 0; a < kSize; ++a) rank[a] = local[a];
}

// rank[a] = the number of keys[0..n) above keys[a], for a < n.
// Pre: n <= 256; keys has room for the next power of two >= n (from 16), and is zero-padded
// up to it here (a zero key is above no key, so the padding changes no rank).
template <typename Key>
inline void RankDescending(Key* keys, int n, uint32_t* rank) {
  static_assert(std::is_unsigned_v<Key>);
  const int size = n <= 16 ? 16 : n <= 32 ? 32 : n <= 64 ? 64 : n <= 128 ? 128 : 256;
  for (int a = n; a < size; ++a) keys[a] = 0;
  switch (size) {
    case 16: return RankDescendingFixed<16>(keys, n, rank);
    case 32: return RankDescendingFixed<32>(keys, n, rank);
    case 64: return RankDescendingFixed<64>(keys, n, rank);
    case 128: return RankDescendingFixed<128>(keys, n, rank);
    default: return RankDescendingFixed<256>(keys, n, rank);
  }
}

// out[r] = the key of rank r (descending) among keys[0..n); keys distinct. See
// RankDescending for the room keys needs. rank: scratch for 256 entries; out: room for n keys.
template <typename Key>
inline void RankSortDescending(Key* keys, int n, uint32_t* rank, Key* out) {
  RankDescending(keys, n, rank);
  for (int a = 0; a < n; ++a) out[rank[a]] = keys[a];
}

// order[r] = the index of the key of rank r (descending) among keys[0..n); keys distinct.
// See RankDescending for the room keys needs. rank: scratch for 256 entries.
template <typename Key>
inline void RankOrderDescending(Key* keys, int n, uint32_t* rank, uint32_t* order) {
  RankDescending(keys, n, rank);
  for (int a = 0; a < n; ++a) order[rank[a]] = static_cast<uint32_t>(a);
}

// The number of keys whose score (key >> shift) is at least `score`.
inline int CountScoresAtLeast(const uint32_t* keys, int count, int shift, uint32_t score) {
  int at_least = 0;
  for (int e = 0; e < count; ++e) at_least += (keys[e] >> shift) >= score ? 1 : 0;
  return at_least;
}

// The largest score T in [lo, hi] that at least `need` entries reach, score(e) = keys[e] >> shift.
// Pre: at least `need` scores are >= lo; fewer than `need` exceed hi.
inline uint32_t ThresholdScore(const uint32_t* keys, int count, int need, int shift, uint32_t lo,
                               uint32_t hi) {
  while (lo < hi) {  // invariant: count(score >= lo) >= need, count(score > hi) < need
    const uint32_t mid = lo + (hi - lo) / 2 + 1;
    if (CountScoresAtLeast(keys, count, shift, mid) >= need) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Writes to out the indices of the `need` best entries by (score desc, index desc), in no
// particular order, where score(e) = keys[e] >> shift.
// Pre: 1 <= need <= count; at least `need` scores are >= lo; fewer than `need` exceed hi.
// out: room for count + kCompressSlack indices.
inline void SelectBest(const uint32_t* keys, int count, int need, int shift, uint32_t lo,
                       uint32_t hi, uint32_t* out) {
  const uint32_t threshold = ThresholdScore(keys, count, need, shift, lo, hi);
  // Every entry above the threshold: keys >= (threshold + 1) << shift, when that fits.
  const uint64_t first_above = (uint64_t{threshold} + 1) << shift;
  int written = first_above > UINT32_MAX
                    ? 0
                    : static_cast<int>(CompressIndicesAtLeast(
                          keys, static_cast<uint32_t>(count), static_cast<uint32_t>(first_above), out));
  // Then the latest entries on it, as many as are still wanted.
  for (int e = count - 1; written < need; --e) {
    if ((keys[e] >> shift) == threshold) out[written++] = static_cast<uint32_t>(e);
  }
}

// SelectBest for full 32-bit scores (shift 0), in two levels: the threshold of the high 16 bits
// first, over every entry; then the low 16 bits over only the entries at or above it.
// scratch_indices, scratch_keys: room for count + kCompressSlack entries each.
inline void SelectBestWide(const uint32_t* keys, int count, int need, uint32_t lo, uint32_t hi,
                           uint32_t* out, uint32_t* scratch_indices, uint32_t* scratch_keys) {
  const uint32_t high = ThresholdScore(keys, count, need, 16, lo >> 16, hi >> 16);
  const int reaching = static_cast<int>(
      CompressIndicesAtLeast(keys, static_cast<uint32_t>(count), high << 16, scratch_indices));
  for (int s = 0; s < reaching; ++s) scratch_keys[s] = keys[scratch_indices[s]];
  // Fewer than `need` entries exceed (high << 16) | 0xffff, by the choice of `high`.
  SelectBest(scratch_keys, reaching, need, 0, high << 16, (high << 16) | 0xffffu, out);
  for (int r = 0; r < need; ++r) out[r] = scratch_indices[out[r]];
}

}  // namespace pk::cpu
