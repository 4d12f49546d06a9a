#include "kernels/cpu/sort.h"

#include <cstring>
#include <utility>

#include "kernels/cpu/scan.h"

namespace pk::cpu {
namespace {

// A vector of kLanes 32-bit keys. The network is written once for any width and instantiated at
// each target's own (16 lanes for AVX-512, 8 for AVX2, 4 otherwise): a vector wider than the
// hardware's would be split by the compiler, and its permutes taken apart lane by lane.
template <int kLanes>
struct Vectors;
template <>
struct Vectors<4> {
  typedef uint32_t Keys __attribute__((vector_size(16)));
  typedef int32_t Mask __attribute__((vector_size(16)));
};
template <>
struct Vectors<8> {
  typedef uint32_t Keys __attribute__((vector_size(32)));
  typedef int32_t Mask __attribute__((vector_size(32)));
};
template <>
struct Vectors<16> {
  typedef uint32_t Keys __attribute__((vector_size(64)));
  typedef int32_t Mask __attribute__((vector_size(64)));
};
template <int kLanes>
using Vec = typename Vectors<kLanes>::Keys;
template <int kLanes>
using Mask = typename Vectors<kLanes>::Mask;

template <int kLanes, size_t... kLane>
__attribute__((always_inline)) inline void LaneIndices(Vec<kLanes>& out,
                                                       std::index_sequence<kLane...>) {
  out = Vec<kLanes>{static_cast<uint32_t>(kLane)...};
}

// out[l] = x[l ^ kPartner]: a permutation fixed at compile time (GCC and Clang both take
// __builtin_shufflevector).
template <int kLanes, int kPartner, size_t... kLane>
__attribute__((always_inline)) inline void PermuteXor(const Vec<kLanes>& x, Vec<kLanes>& out,
                                                      std::index_sequence<kLane...>) {
  out = __builtin_shufflevector(x, x, static_cast<int>(kLane ^ kPartner)...);
}

template <int kLanes, int kPartner>
__attribute__((always_inline)) inline void PermuteXor(const Vec<kLanes>& x, Vec<kLanes>& out) {
  PermuteXor<kLanes, kPartner>(x, out, std::make_index_sequence<kLanes>());
}

// One compare-exchange step inside a vector: lane l meets lane l ^ kPartner, and of each pair the
// lane without bit kLowerBit (the lower index) keeps the larger key.
template <int kLanes, int kPartner, int kLowerBit>
__attribute__((always_inline)) inline void InVector(Vec<kLanes>& x) {
  Vec<kLanes> lanes;
  LaneIndices<kLanes>(lanes, std::make_index_sequence<kLanes>());
  Vec<kLanes> other;
  PermuteXor<kLanes, kPartner>(x, other);
  const Vec<kLanes> larger = x > other ? x : other;
  const Vec<kLanes> smaller = x > other ? other : x;
  const Mask<kLanes> upper = (lanes & kLowerBit) != 0;
  x = upper ? smaller : larger;
}

// Half-cleaners at distances kDistance, kDistance / 2, ..., 1 inside a vector.
template <int kLanes, int kDistance>
__attribute__((always_inline)) inline void Clean(Vec<kLanes>& x) {
  if constexpr (kDistance >= 1) {
    InVector<kLanes, kDistance, kDistance>(x);
    Clean<kLanes, kDistance / 2>(x);
  }
}

// Half-cleaners across vectors at distances kDistance, kDistance / 2, ..., 1 vectors.
template <int kLanes, int kVectors, int kDistance>
__attribute__((always_inline)) inline void CleanAcross(Vec<kLanes>* x) {
  if constexpr (kDistance >= 1) {
#pragma GCC unroll 32
    for (int r = 0; r < kVectors; ++r) {
      if ((r & kDistance) != 0) continue;
      const Vec<kLanes> a = x[r];
      const Vec<kLanes> b = x[r + kDistance];
      x[r] = a > b ? a : b;
      x[r + kDistance] = a > b ? b : a;
    }
    CleanAcross<kLanes, kVectors, kDistance / 2>(x);
  }
}

// Sorts the blocks of kBlock lanes of a vector (the blocks of kBlock / 2 sorted first): a flip
// (lane i of the block against its mirror image), then half-cleaners.
template <int kLanes, int kBlock>
__attribute__((always_inline)) inline void SortBlocks(Vec<kLanes>& x) {
  if constexpr (kBlock > 1) {
    SortBlocks<kLanes, kBlock / 2>(x);
    InVector<kLanes, kBlock - 1, kBlock / 2>(x);
    Clean<kLanes, kBlock / 4>(x);
  }
}

// Merges the sorted halves of each block of kBlock vectors, then of blocks twice as large, up to
// kLargest: a flip of each block (key i against its mirror image), then half-cleaners across
// vectors and inside them. Every block of a size is merged in the same loop, so that the
// dependent chains of the steps inside a vector interleave.
template <int kLanes, int kVectors, int kBlock, int kLargest = kVectors>
__attribute__((always_inline)) inline void MergeBlocks(Vec<kLanes>* x) {
  if constexpr (kBlock <= kLargest) {
#pragma GCC unroll 32
    for (int base = 0; base < kVectors; base += kBlock) {
#pragma GCC unroll 16
      for (int r = 0; r < kBlock / 2; ++r) {
        Vec<kLanes>& a = x[base + r];
        Vec<kLanes>& b = x[base + kBlock - 1 - r];
        Vec<kLanes> mirrored;
        PermuteXor<kLanes, kLanes - 1>(b, mirrored);
        const Vec<kLanes> larger = a > mirrored ? a : mirrored;
        const Vec<kLanes> smaller = a > mirrored ? mirrored : a;
        a = larger;
        PermuteXor<kLanes, kLanes - 1>(smaller, b);
      }
    }
    CleanAcross<kLanes, kVectors, kBlock / 4>(x);
#pragma GCC unroll 32
    for (int r = 0; r < kVectors; ++r) Clean<kLanes, kLanes / 2>(x[r]);
    MergeBlocks<kLanes, kVectors, kBlock * 2, kLargest>(x);
  }
}

// x holds sorted blocks of kKept vectors; pairs of blocks are merged down to one, of which each
// merge keeps only its better half: its flip's larger keys (the best kKept vectors, bitonic), then
// the half-cleaners of that half. The pairs of a round are merged in the same loops.
template <int kLanes, int kVectors, int kKept>
__attribute__((always_inline)) inline void KeepBestBlock(Vec<kLanes>* x) {
  if constexpr (kVectors > kKept) {
    constexpr int kPairs = kVectors / (2 * kKept);
#pragma GCC unroll 16
    for (int p = 0; p < kPairs; ++p) {
      // Writes land below the pair's own reads (p * kKept + kKept <= 2 * p * kKept for p >= 1).
#pragma GCC unroll 16
      for (int r = 0; r < kKept; ++r) {
        const Vec<kLanes> a = x[2 * p * kKept + r];
        Vec<kLanes> mirrored;
        PermuteXor<kLanes, kLanes - 1>(x[(2 * p + 1) * kKept + kKept - 1 - r], mirrored);
        x[p * kKept + r] = a > mirrored ? a : mirrored;
      }
    }
    CleanAcross<kLanes, kVectors / 2, kKept / 2>(x);
#pragma GCC unroll 32
    for (int r = 0; r < kVectors / 2; ++r) Clean<kLanes, kLanes / 2>(x[r]);
    KeepBestBlock<kLanes, kVectors / 2, kKept>(x);
  }
}

// Sorts the kKept * kLanes largest of the kVectors * kLanes keys of x into x[0..kKept), descending
// (x[0] lane 0 first; all of them when kKept == kVectors): blocks of kKept vectors are sorted
// whole, then only the best block of each merge is kept, which saves about half of each trimmed
// merge's steps. kKept: a power of two.
template <int kLanes, int kVectors, int kKept>
__attribute__((always_inline)) inline void SortTop(Vec<kLanes>* x) {
#pragma GCC unroll 32
  for (int r = 0; r < kVectors; ++r) SortBlocks<kLanes, kLanes>(x[r]);
  MergeBlocks<kLanes, kVectors, 2, kKept>(x);
  KeepBestBlock<kLanes, kVectors, kKept>(x);
}

// Pre: as SortTopDescending; 16 is a multiple of kLanes, so whole 16-key paddings are whole
// vectors. Writes the best kKept vectors (those of them that hold keys).
template <int kLanes, int kVectors, int kKept>
__attribute__((always_inline)) inline void SortIn(const uint32_t* keys, int n, uint32_t* out) {
  const int filled = PaddedCount(n) / kLanes;
  Vec<kLanes> x[kVectors];
#pragma GCC unroll 32
  for (int r = 0; r < kVectors; ++r) {
    if (r < filled) {
      std::memcpy(&x[r], keys + kLanes * r, sizeof(Vec<kLanes>));
    } else {
      x[r] = Vec<kLanes>{};
    }
  }
  SortTop<kLanes, kVectors, kKept>(x);
#pragma GCC unroll 32
  for (int r = 0; r < kKept; ++r) {
    if (r < filled) std::memcpy(out + kLanes * r, &x[r], sizeof(Vec<kLanes>));
  }
}

// The best `need` keys take the fewest whole vectors that hold them, rounded up to a power of two.
template <int kLanes, int kVectors, int kKept = kVectors>
__attribute__((always_inline)) inline void SortKept(const uint32_t* keys, int n, int need,
                                                    uint32_t* out) {
  if constexpr (kKept > 1) {
    if (need <= kLanes * kKept / 2) {
      return SortKept<kLanes, kVectors, kKept / 2>(keys, n, need, out);
    }
  }
  SortIn<kLanes, kVectors, kKept>(keys, n, out);
}

template <int kLanes>
__attribute__((always_inline)) inline void SortAt(const uint32_t* keys, int n, int need,
                                                  uint32_t* out) {
  constexpr int kMost = kMaxNetworkSort / kLanes;
  static_assert(kMost >= 4);
  if (n <= 16) return SortKept<kLanes, 16 / kLanes>(keys, n, need, out);
  if (n <= 32) return SortKept<kLanes, 32 / kLanes>(keys, n, need, out);
  if (n <= 64) return SortKept<kLanes, 64 / kLanes>(keys, n, need, out);
  if (n <= 128) return SortKept<kLanes, 128 / kLanes>(keys, n, need, out);
  return SortKept<kLanes, kMost>(keys, n, need, out);
}

#if PK_X86_DISPATCH
__attribute__((target("avx512f,avx512bw,avx512vl"))) void SortAvx512(const uint32_t* keys, int n,
                                                                     int need, uint32_t* out) {
  SortAt<16>(keys, n, need, out);
}

__attribute__((target("avx2"))) void SortAvx2(const uint32_t* keys, int n, int need,
                                               uint32_t* out) {
  SortAt<8>(keys, n, need, out);
}
#endif

// The width SortDescending takes on this host.
int HostLanes() {
#if PK_X86_DISPATCH
  return HostHasAvx512() ? 16 : HostHasAvx2() ? 8 : 4;
#elif defined(__AVX512F__)
  return 16;
#elif defined(__AVX2__)
  return 8;
#else
  return 4;
#endif
}

}  // namespace

bool SortTopDescendingAtWidth(int lanes, const uint32_t* keys, int n, int need, uint32_t* out) {
  switch (lanes) {
    case 4:
      SortAt<4>(keys, n, need, out);
      return true;
    case 8:
#if PK_X86_DISPATCH
      if (!HostHasAvx2()) return false;
      SortAvx2(keys, n, need, out);
      return true;
#elif defined(__AVX2__)
      SortAt<8>(keys, n, need, out);
      return true;
#else
      return false;
#endif
    case 16:
#if PK_X86_DISPATCH
      if (!HostHasAvx512()) return false;
      SortAvx512(keys, n, need, out);
      return true;
#elif defined(__AVX512F__)
      SortAt<16>(keys, n, need, out);
      return true;
#else
      return false;
#endif
    default:
      return false;
  }
}

void SortTopDescending(const uint32_t* keys, int n, int need, uint32_t* out) {
  static const int lanes = HostLanes();
  SortTopDescendingAtWidth(lanes, keys, n, need, out);
}

}  // namespace pk::cpu
