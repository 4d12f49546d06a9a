// Selection primitives of the CPU top-k.
//
// SelectBest picks the best `need` of a list of entries ranked by a score key (descending), ties
// going to the later entry. It finds the threshold T, the largest score that at least `need`
// entries reach: for up to 256 entries as the need-th key of a sorted copy (sort.h), else by
// bisection on the score (each step one branch-free counting pass, which vectorizes), a byte at a
// time so that later bytes see only the entries still in play. It then keeps every entry above T
// and the last of those on it. Callers lay their entries out so
// that "later" is SPEC.md's tie-break: factor columns ascending, stage candidates by (i + j, i)
// ascending. RankSortDescending orders the chosen few by rank counting (each key's position is
// the number of keys above it: n^2 branch-free compares), for keys wider than the sorting
// network's 32 bits. Nothing here allocates.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/scan.h"
#include "kernels/cpu/sort.h"

namespace pk::cpu {

// For a < n: place(a, rank) with rank = the number of keys[0..n) above keys[a]. The loop runs
// over `a` innermost: broadcast-compare-accumulate, no horizontal sums; with the size fixed at
// compile time the ranks stay in vector registers.
template <int kSize, typename Key, typename Place>
inline void RankFixed(const Key* keys, int n, Place place) {
  uint32_t rank[kSize] = {};
  for (int b = 0; b < n; ++b) {
    const Key other = keys[b];
    for (int a = 0; a < kSize; ++a) rank[a] = other > keys[a] ? rank[a] + 1 : rank[a];
  }
  for (int a = 0; a < n; ++a) place(a, rank[a]);
}

// RankFixed for any n <= 256. keys needs room for the next power of two >= n (from 16) and is
// zero-padded up to it here: a zero key is above no key, so the padding changes no rank.
template <typename Key, typename Place>
inline void Rank(Key* keys, int n, Place place) {
  static_assert(std::is_unsigned_v<Key>);
  const int size = n <= 16 ? 16 : n <= 32 ? 32 : n <= 64 ? 64 : n <= 128 ? 128 : 256;
  for (int a = n; a < size; ++a) keys[a] = 0;
  switch (size) {
    case 16: return RankFixed<16>(keys, n, place);
    case 32: return RankFixed<32>(keys, n, place);
    case 64: return RankFixed<64>(keys, n, place);
    case 128: return RankFixed<128>(keys, n, place);
    default: return RankFixed<256>(keys, n, place);
  }
}

// out[r] = the key of rank r (descending) among keys[0..n); keys distinct, n <= 256, keys with
// room as Rank() says; out: room for n keys.
template <typename Key>
inline void RankSortDescending(Key* keys, int n, Key* out) {
  Rank(keys, n, [&](int a, uint32_t rank) { out[rank] = keys[a]; });
}

// order[r] = the index of the key of rank r (descending) among keys[0..n); as RankSortDescending.
template <typename Key>
inline void RankOrderDescending(Key* keys, int n, uint32_t* order) {
  Rank(keys, n, [&](int a, uint32_t rank) { order[rank] = static_cast<uint32_t>(a); });
}

// The number of keys whose score (key >> shift) is at least `score`.
// Pre: score >= 1; keys zero-padded to PaddedCount(count).
inline int CountScoresAtLeast(const uint32_t* keys, int count, int shift, uint32_t score) {
  int at_least = 0;
  const int padded = PaddedCount(count);
  for (int e = 0; e < padded; ++e) at_least += (keys[e] >> shift) >= score ? 1 : 0;
  return at_least;
}

// The largest score T in [lo, hi] that at least `need` of entries[0..n) reach, score_of(entry) a
// Score. Each pass counts against three pivots at once (a four-way search): the passes are short
// and each waits on the last, so fewer passes matter more than the compares within one. Score and
// Count set the lane width the counting loop vectorizes at.
// Pre: at least `need` scores are >= lo; fewer than `need` exceed hi.
template <typename Score, typename Count, typename Entry, typename ScoreOf>
inline uint32_t FourWaySearch(const Entry* entries, int n, int need, uint32_t lo, uint32_t hi,
                              ScoreOf score_of) {
  while (lo < hi) {  // invariant: count(score >= lo) >= need, count(score > hi) < need
    const uint64_t range = hi - lo;
    Score pivot[3];
    for (int p = 0; p < 3; ++p) pivot[p] = static_cast<Score>(lo + range * (p + 1) / 4 + 1);
    Count reaching[3] = {0, 0, 0};
    for (int e = 0; e < n; ++e) {
      const Score score = score_of(entries[e]);
      for (int p = 0; p < 3; ++p) {
        reaching[p] = static_cast<Count>(reaching[p] + (score >= pivot[p] ? 1 : 0));
      }
    }
    // Pivots ascend and their counts descend: keep the interval between the last pivot that
    // `need` entries reach and the first one they do not.
    uint32_t new_lo = lo;
    uint32_t new_hi = hi;
    for (int p = 2; p >= 0; --p) {
      if (static_cast<int>(reaching[p]) >= need) {
        new_lo = pivot[p];
        break;
      }
      new_hi = pivot[p] - 1u;
    }
    lo = new_lo;
    hi = new_hi;
  }
  return lo;
}

// The largest score T in [lo, hi] that at least `need` entries reach, score(e) = keys[e] >> shift.
// Pre: as FourWaySearch; keys zero-padded to PaddedCount(count).
inline uint32_t ThresholdScore(const uint32_t* keys, int count, int need, int shift, uint32_t lo,
                               uint32_t hi) {
  return FourWaySearch<uint32_t, int>(keys, PaddedCount(count), need, lo, hi,
                                      [shift](uint32_t key) { return key >> shift; });
}

// The same for 16-bit scores[0..n), n a multiple of 32 (whole vectors of twice a 32-bit pass's
// lanes). Pre: as FourWaySearch.
inline uint16_t ThresholdScore16(const uint16_t* scores, int n, int need, uint16_t lo,
                                 uint16_t hi) {
  return static_cast<uint16_t>(
      FourWaySearch<uint16_t, uint16_t>(scores, n, need, lo, hi, [](uint16_t s) { return s; }));
}

// Writes to out the indices of every entry whose score (keys[e] >> shift) is above `threshold`,
// then of the latest entries on it, `need` in all. Pre: at least `need` scores are >= threshold
// and fewer than `need` exceed it. out: room for count + kCompressSlack indices.
inline void TakeFromThreshold(const uint32_t* keys, int count, int need, int shift,
                              uint32_t threshold, uint32_t* out) {
  // Every entry above the threshold: keys >= (threshold + 1) << shift, when that fits.
  const uint64_t first_above = (uint64_t{threshold} + 1) << shift;
  int written = first_above > UINT32_MAX
                    ? 0
                    : static_cast<int>(CompressIndicesAtLeast(
                          keys, static_cast<uint32_t>(count), static_cast<uint32_t>(first_above), out));
  for (int e = count - 1; written < need; --e) {
    if ((keys[e] >> shift) == threshold) out[written++] = static_cast<uint32_t>(e);
  }
}

// Writes to out the indices of the `need` best entries by (score desc, index desc), in no
// particular order, where score(e) = keys[e] >> shift, by bisection over every entry.
// Pre: 1 <= need <= count; at least `need` scores are >= lo; fewer than `need` exceed hi; keys
// zero-padded to PaddedCount(count). out: room for count + kCompressSlack indices.
inline void SelectBestFlat(const uint32_t* keys, int count, int need, int shift, uint32_t lo,
                           uint32_t hi, uint32_t* out) {
  TakeFromThreshold(keys, count, need, shift, ThresholdScore(keys, count, need, shift, lo, hi),
                    out);
}

// Scratch for SelectBest: three arrays of count + kCompressSlack entries each.
struct SelectScratch {
  uint32_t* positions;
  uint32_t* indices;
  uint32_t* keys;
};

// SelectBestFlat's result, found a byte of the score at a time from the top: each level's
// threshold is found over the entries still in play, and only the entries at or above it go on
// to the next level, so the long bisections run over few entries.
// Pre: as SelectBestFlat, but keys need only room for PaddedCount(count): they are padded here.
inline void SelectBest(uint32_t* keys, int count, int need, int shift, uint32_t lo,
                       uint32_t hi, uint32_t* out, const SelectScratch& scratch) {
  PadWithZeros(keys, count);
  if (count <= kMaxNetworkSort) {
    // Few entries: the need-th largest key of a sorted copy has the threshold score, for fewer
    // instructions than the bisection's dependent passes.
    SortTopDescending(keys, count, need, scratch.keys);
    TakeFromThreshold(keys, count, need, shift, scratch.keys[need - 1] >> shift, out);
    return;
  }
  const uint32_t* set_keys = keys;  // the keys of the entries still in play
  bool narrowed = false;            // whether scratch.indices maps them to original entries
  for (int level = 24; level > shift; level -= 8) {
    const int below = level - shift;  // score bits under this level's byte
    const uint32_t level_lo = lo >> below;
    const uint32_t level_hi = hi >> below;
    if (level_lo == level_hi) continue;  // every possible threshold shares this byte
    const uint32_t threshold = ThresholdScore(set_keys, count, need, level, level_lo, level_hi);
    lo = std::max<uint32_t>(lo, threshold << below);
    hi = static_cast<uint32_t>(
        std::min<uint64_t>(hi, ((uint64_t{threshold} + 1) << below) - 1));
    const int kept = static_cast<int>(CompressIndicesAtLeast(
        set_keys, static_cast<uint32_t>(count), threshold << level, scratch.positions));
    // Compact in place: positions ascend, so each read is at or after its write.
    for (int s = 0; s < kept; ++s) {
      const uint32_t position = scratch.positions[s];
      scratch.indices[s] = narrowed ? scratch.indices[position] : position;
      scratch.keys[s] = set_keys[position];
    }
    PadWithZeros(scratch.keys, kept);
    set_keys = scratch.keys;
    narrowed = true;
    count = kept;
  }
  SelectBestFlat(set_keys, count, need, shift, lo, hi, out);
  if (narrowed) {
    for (int r = 0; r < need; ++r) out[r] = scratch.indices[out[r]];
  }
}

}  // namespace pk::cpu
