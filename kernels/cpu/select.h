// Selection primitives of the CPU top-k, over arrays of distinct unsigned keys.
//
// TopDescending finds the `need` largest keys by a most-significant-digit radix select (each pass
// histograms one byte of the keys still undecided, keeps those above the threshold byte and
// narrows to those on it), then orders the chosen few by rank counting: each key's position is
// the number of keys above it. Rank counting is n^2 compares but branch-free and vectorizes, which
// beats a comparison sort for the n <= 256 keys it ever sees. Nothing here allocates.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace pk::cpu {

// out[r] = the key of rank r (descending) among keys[0..n); keys distinct; out has room for n.
template <typename Key>
inline void RankSortDescending(const Key* keys, int n, Key* out) {
  static_assert(std::is_unsigned_v<Key>);
  for (int a = 0; a < n; ++a) {
    const Key x = keys[a];
    int rank = 0;
    for (int b = 0; b < n; ++b) rank += keys[b] > x ? 1 : 0;
    out[rank] = x;
  }
}

// Moves the `need` largest of keys[0..count) into chosen[0..need), in no particular order.
// Pre: the keys are distinct, 1 <= need <= count; `keys` is clobbered; `chosen` has room for
// `need` keys and does not alias `keys`.
template <typename Key>
inline void SelectTop(Key* keys, int count, int need, Key* chosen) {
  static_assert(std::is_unsigned_v<Key>);
  int taken = 0;          // keys known to be among the top, in chosen[0..taken)
  int undecided = count;  // keys[0..undecided) share every byte above `shift`
  int wanted = need;      // how many of the undecided still belong to the top
  uint32_t histogram[256];
  for (int shift = 8 * (sizeof(Key) - 1); shift >= 0 && wanted < undecided; shift -= 8) {
    std::memset(histogram, 0, sizeof histogram);
    for (int i = 0; i < undecided; ++i) ++histogram[(keys[i] >> shift) & 0xff];
    int bin = 255;
    int above = 0;
    while (above + static_cast<int>(histogram[bin]) < wanted) above += histogram[bin--];
    int kept = 0;
    for (int i = 0; i < undecided; ++i) {
      const Key key = keys[i];
      const int digit = static_cast<int>((key >> shift) & 0xff);
      if (digit > bin) chosen[taken++] = key;
      keys[kept] = key;  // branch-free compaction: advance only for keys on the bin
      kept += digit == bin ? 1 : 0;
    }
    undecided = kept;
    wanted -= above;
  }
  // The keys still undecided all belong (distinct keys leave exactly `wanted` of them).
  for (int i = 0; i < undecided; ++i) chosen[taken++] = keys[i];
}

}  // namespace pk::cpu
