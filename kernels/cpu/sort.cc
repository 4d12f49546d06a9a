#include "kernels/cpu/sort.h"

#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/scan.h"

namespace pk::cpu {
namespace {

// A vector of kLanes keys of type T. The network is written once for any width and instantiated
// at each target's own (64 bytes for AVX-512, 32 for AVX2, 16 otherwise): a vector wider than the
// hardware's would be split by the compiler, and its permutes taken apart lane by lane.
template <typename T, int kLanes>
struct Vectors {
  typedef T Keys __attribute__((vector_size(sizeof(T) * kLanes)));
  typedef std::make_signed_t<T> Mask __attribute__((vector_size(sizeof(T) * kLanes)));
};
template <typename T, int kLanes>
using Vec = typename Vectors<T, kLanes>::Keys;
template <typename T, int kLanes>
using Mask = typename Vectors<T, kLanes>::Mask;

template <typename T, int kLanes, size_t... kLane>
__attribute__((always_inline)) inline void LaneIndices(Vec<T, kLanes>& out,
                                                       std::index_sequence<kLane...>) {
  out = Vec<T, kLanes>{static_cast<T>(kLane)...};
}

// out[l] = x[l ^ kPartner]: a permutation fixed at compile time (GCC and Clang both take
// __builtin_shufflevector).
template <typename T, int kLanes, int kPartner, size_t... kLane>
__attribute__((always_inline)) inline void PermuteXor(const Vec<T, kLanes>& x, Vec<T, kLanes>& out,
                                                      std::index_sequence<kLane...>) {
  out = __builtin_shufflevector(x, x, static_cast<int>(kLane ^ kPartner)...);
}

template <typename T, int kLanes, int kPartner>
__attribute__((always_inline)) inline void PermuteXor(const Vec<T, kLanes>& x,
                                                      Vec<T, kLanes>& out) {
  PermuteXor<T, kLanes, kPartner>(x, out, std::make_index_sequence<kLanes>());
}

// One compare-exchange step inside a vector: lane l meets lane l ^ kPartner, and of each pair the
// lane without bit kLowerBit (the lower index) keeps the larger key.
template <typename T, int kLanes, int kPartner, int kLowerBit>
__attribute__((always_inline)) inline void InVector(Vec<T, kLanes>& x) {
  Vec<T, kLanes> lanes;
  LaneIndices<T, kLanes>(lanes, std::make_index_sequence<kLanes>());
  Vec<T, kLanes> other;
  PermuteXor<T, kLanes, kPartner>(x, other);
  const Vec<T, kLanes> larger = x > other ? x : other;
  const Vec<T, kLanes> smaller = x > other ? other : x;
  const Mask<T, kLanes> upper = (lanes & kLowerBit) != 0;
  x = upper ? smaller : larger;
}

// Half-cleaners at distances kDistance, kDistance / 2, ..., 1 inside a vector.
template <typename T, int kLanes, int kDistance>
__attribute__((always_inline)) inline void Clean(Vec<T, kLanes>& x) {
  if constexpr (kDistance >= 1) {
    InVector<T, kLanes, kDistance, kDistance>(x);
    Clean<T, kLanes, kDistance / 2>(x);
  }
}

// Half-cleaners across vectors at distances kDistance, kDistance / 2, ..., 1 vectors.
template <typename T, int kLanes, int kVectors, int kDistance>
__attribute__((always_inline)) inline void CleanAcross(Vec<T, kLanes>* x) {
  if constexpr (kDistance >= 1) {
#pragma GCC unroll 32
    for (int r = 0; r < kVectors; ++r) {
      if ((r & kDistance) != 0) continue;
      const Vec<T, kLanes> a = x[r];
      const Vec<T, kLanes> b = x[r + kDistance];
      x[r] = a > b ? a : b;
      x[r + kDistance] = a > b ? b : a;
    }
    CleanAcross<T, kLanes, kVectors, kDistance / 2>(x);
  }
}

// Sorts the blocks of kBlock lanes of a vector (the blocks of kBlock / 2 sorted first): a flip
// (lane i of the block against its mirror image), then half-cleaners.
template <typename T, int kLanes, int kBlock>
__attribute__((always_inline)) inline void SortBlocks(Vec<T, kLanes>& x) {
  if constexpr (kBlock > 1) {
    SortBlocks<T, kLanes, kBlock / 2>(x);
    InVector<T, kLanes, kBlock - 1, kBlock / 2>(x);
    Clean<T, kLanes, kBlock / 4>(x);
  }
}

// Merges the sorted halves of each block of kBlock vectors, then of blocks twice as large, up to
// kLargest: a flip of each block (key i against its mirror image), then half-cleaners across
// vectors and inside them. Every block of a size is merged in the same loop, so that the
// dependent chains of the steps inside a vector interleave.
template <typename T, int kLanes, int kVectors, int kBlock, int kLargest = kVectors>
__attribute__((always_inline)) inline void MergeBlocks(Vec<T, kLanes>* x) {
  if constexpr (kBlock <= kLargest) {
#pragma GCC unroll 32
    for (int base = 0; base < kVectors; base += kBlock) {
#pragma GCC unroll 16
      for (int r = 0; r < kBlock / 2; ++r) {
        Vec<T, kLanes>& a = x[base + r];
        Vec<T, kLanes>& b = x[base + kBlock - 1 - r];
        Vec<T, kLanes> mirrored;
        PermuteXor<T, kLanes, kLanes - 1>(b, mirrored);
        const Vec<T, kLanes> larger = a > mirrored ? a : mirrored;
        const Vec<T, kLanes> smaller = a > mirrored ? mirrored : a;
        a = larger;
        PermuteXor<T, kLanes, kLanes - 1>(smaller, b);
      }
    }
    CleanAcross<T, kLanes, kVectors, kBlock / 4>(x);
#pragma GCC unroll 32
    for (int r = 0; r < kVectors; ++r) Clean<T, kLanes, kLanes / 2>(x[r]);
    MergeBlocks<T, kLanes, kVectors, kBlock * 2, kLargest>(x);
  }
}

// x holds sorted blocks of kKept vectors; pairs of blocks are merged down to one, of which each
// merge keeps only its better half: its flip's larger keys (the best kKept vectors, bitonic), then
// the half-cleaners of that half. The pairs of a round are merged in the same loops.
template <typename T, int kLanes, int kVectors, int kKept>
__attribute__((always_inline)) inline void KeepBestBlock(Vec<T, kLanes>* x) {
  if constexpr (kVectors > kKept) {
    constexpr int kPairs = kVectors / (2 * kKept);
#pragma GCC unroll 16
    for (int p = 0; p < kPairs; ++p) {
      // Writes land below the pair's own reads (p * kKept + kKept <= 2 * p * kKept for p >= 1).
#pragma GCC unroll 16
      for (int r = 0; r < kKept; ++r) {
        const Vec<T, kLanes> a = x[2 * p * kKept + r];
        Vec<T, kLanes> mirrored;
        PermuteXor<T, kLanes, kLanes - 1>(x[(2 * p + 1) * kKept + kKept - 1 - r], mirrored);
        x[p * kKept + r] = a > mirrored ? a : mirrored;
      }
    }
    CleanAcross<T, kLanes, kVectors / 2, kKept / 2>(x);
#pragma GCC unroll 32
    for (int r = 0; r < kVectors / 2; ++r) Clean<T, kLanes, kLanes / 2>(x[r]);
    KeepBestBlock<T, kLanes, kVectors / 2, kKept>(x);
  }
}

// Sorts the kKept * kLanes largest of the kVectors * kLanes keys of x into x[0..kKept), descending
// (x[0] lane 0 first; all of them when kKept == kVectors): blocks of kKept vectors are sorted
// whole, then only the best block of each merge is kept, which saves about half of each trimmed
// merge's steps. kKept: a power of two.
template <typename T, int kLanes, int kVectors, int kKept>
__attribute__((always_inline)) inline void SortTop(Vec<T, kLanes>* x) {
#pragma GCC unroll 32
  for (int r = 0; r < kVectors; ++r) SortBlocks<T, kLanes, kLanes>(x[r]);
  MergeBlocks<T, kLanes, kVectors, 2, kKept>(x);
  KeepBestBlock<T, kLanes, kVectors, kKept>(x);
}

// Pre: as SortTopDescending (keys zero-padded to whole vectors). Writes the best kKept vectors
// (those of them that hold keys).
template <typename T, int kLanes, int kVectors, int kKept>
__attribute__((always_inline)) inline void SortIn(const T* keys, int n, T* out) {
  const int filled = (n + kLanes - 1) / kLanes;
  Vec<T, kLanes> x[kVectors];
#pragma GCC unroll 32
  for (int r = 0; r < kVectors; ++r) {
    if (r < filled) {
      std::memcpy(&x[r], keys + kLanes * r, sizeof(Vec<T, kLanes>));
    } else {
      x[r] = Vec<T, kLanes>{};
    }
  }
  SortTop<T, kLanes, kVectors, kKept>(x);
#pragma GCC unroll 32
  for (int r = 0; r < kKept; ++r) {
    if (r < filled) std::memcpy(out + kLanes * r, &x[r], sizeof(Vec<T, kLanes>));
  }
}

// The best `need` keys: the whole sort, or only its better half or quarter when that holds them
// (one or two trimmed merges). Each trim is another unrolled network, so the narrower widths get
// fewer: two for 64-byte vectors, one for 32, none for 16 (the fallback for hosts without AVX2).
// That keeps this file's compile time within 2x of the untrimmed networks' (6.6 s against 3.7 s
// with GCC -O3 here; sanitizer builds compile it too).
template <typename T, int kLanes, int kVectors>
__attribute__((always_inline)) inline void SortKept(const T* keys, int n, int need, T* out) {
  constexpr int kTrims = sizeof(T) * kLanes == 64 ? 2 : sizeof(T) * kLanes == 32 ? 1 : 0;
  if constexpr (kTrims >= 2 && kVectors >= 4) {
    if (need <= kLanes * kVectors / 4) {
      return SortIn<T, kLanes, kVectors, kVectors / 4>(keys, n, out);
    }
  }
  if constexpr (kTrims >= 1 && kVectors >= 2) {
    if (need <= kLanes * kVectors / 2) {
      return SortIn<T, kLanes, kVectors, kVectors / 2>(keys, n, out);
    }
  }
  SortIn<T, kLanes, kVectors, kVectors>(keys, n, out);
}

// The smallest network is one 64-byte vector's keys (the padding unit), the largest kMost keys.
template <typename T, int kLanes, int kMost = kMaxNetworkSort>
__attribute__((always_inline)) inline void SortAt(const T* keys, int n, int need, T* out) {
  constexpr int kSmallest = static_cast<int>(64 / sizeof(T));
  static_assert(kMost / kLanes >= 4 && kSmallest % kLanes == 0);
  if (n <= kSmallest) return SortKept<T, kLanes, kSmallest / kLanes>(keys, n, need, out);
  if constexpr (kSmallest < 32) {
    if (n <= 32) return SortKept<T, kLanes, 32 / kLanes>(keys, n, need, out);
  }
  if constexpr (kMost > 64) {
    if (n <= 64) return SortKept<T, kLanes, 64 / kLanes>(keys, n, need, out);
  }
  if constexpr (kMost > 128) {
    if (n <= 128) return SortKept<T, kLanes, 128 / kLanes>(keys, n, need, out);
  }
  return SortKept<T, kLanes, kMost / kLanes>(keys, n, need, out);
}

#if PK_X86_DISPATCH
__attribute__((target("avx512f,avx512bw,avx512vl"))) void SortAvx512(const uint32_t* keys, int n,
                                                                     int need, uint32_t* out) {
  SortAt<uint32_t, 16>(keys, n, need, out);
}

__attribute__((target("avx2"))) void SortAvx2(const uint32_t* keys, int n, int need,
                                               uint32_t* out) {
  SortAt<uint32_t, 8>(keys, n, need, out);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void Sort16Avx512(const uint16_t* keys, int n,
                                                                       int need, uint16_t* out) {
  SortAt<uint16_t, 32, kMaxNetworkSort16>(keys, n, need, out);
}
#endif

// The vector width, in bytes, SortTopDescending takes on this host.
int HostVectorBytes() {
#if PK_X86_DISPATCH
  return HostHasAvx512() ? 64 : HostHasAvx2() ? 32 : 16;
#elif defined(__AVX512F__) && defined(__AVX512BW__)
  return 64;
#elif defined(__AVX2__)
  return 32;
#else
  return 16;
#endif
}

}  // namespace

bool SortTopDescendingAtWidth(int vector_bytes, const uint32_t* keys, int n, int need,
                              uint32_t* out) {
  switch (vector_bytes) {
    case 16:
      SortAt<uint32_t, 4>(keys, n, need, out);
      return true;
    case 32:
#if PK_X86_DISPATCH
      if (!HostHasAvx2()) return false;
      SortAvx2(keys, n, need, out);
      return true;
#elif defined(__AVX2__)
      SortAt<uint32_t, 8>(keys, n, need, out);
      return true;
#else
      return false;
#endif
    case 64:
#if PK_X86_DISPATCH
      if (!HostHasAvx512()) return false;
      SortAvx512(keys, n, need, out);
      return true;
#elif defined(__AVX512F__) && defined(__AVX512BW__)
      SortAt<uint32_t, 16>(keys, n, need, out);
      return true;
#else
      return false;
#endif
    default:
      return false;
  }
}

void SortTopDescending(const uint32_t* keys, int n, int need, uint32_t* out) {
  static const int vector_bytes = HostVectorBytes();
  SortTopDescendingAtWidth(vector_bytes, keys, n, need, out);
}

bool SortTopDescending16(const uint16_t* keys, int n, int need, uint16_t* out) {
#if PK_X86_DISPATCH
  if (!HostHasAvx512()) return false;
  Sort16Avx512(keys, n, need, out);
  return true;
#elif defined(__AVX512F__) && defined(__AVX512BW__)
  SortAt<uint16_t, 32, kMaxNetworkSort16>(keys, n, need, out);
  return true;
#else
  (void)keys, (void)n, (void)need, (void)out;
  return false;
#endif
}

}  // namespace pk::cpu
