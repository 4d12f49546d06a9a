#include "kernels/cpu/sort.h"

#include <cstring>
#include <utility>

#include "kernels/cpu/scan.h"

namespace pk::cpu {
namespace {

inline constexpr int kLanes = 16;
typedef uint32_t Vec __attribute__((vector_size(4 * kLanes)));
typedef int32_t Mask __attribute__((vector_size(4 * kLanes)));

constexpr Vec kLaneIndices = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// out[l] = x[l ^ kPartner]: a permutation fixed at compile time (GCC and Clang both take
// __builtin_shufflevector).
template <int kPartner, size_t... kLane>
__attribute__((always_inline)) inline void PermuteXor(const Vec& x, Vec& out,
                                                      std::index_sequence<kLane...>) {
  out = __builtin_shufflevector(x, x, static_cast<int>(kLane ^ kPartner)...);
}

template <int kPartner>
__attribute__((always_inline)) inline void PermuteXor(const Vec& x, Vec& out) {
  PermuteXor<kPartner>(x, out, std::make_index_sequence<kLanes>());
}

// One compare-exchange step inside every vector: lane l meets lane l ^ kPartner, and of each pair
// the lane without bit kLowerBit (the lower index) keeps the larger key.
template <int kPartner, int kLowerBit>
__attribute__((always_inline)) inline void InVector(Vec& x) {
  const Vec lanes = kLaneIndices;
  Vec other;
  PermuteXor<kPartner>(x, other);
  const Vec larger = x > other ? x : other;
  const Vec smaller = x > other ? other : x;
  const Mask upper = (lanes & kLowerBit) != 0;
  x = upper ? smaller : larger;
}

// Half-cleaners at distances 8, 4, 2, 1 inside each of the n vectors.
__attribute__((always_inline)) inline void CleanVectors(Vec* x, int n) {
  for (int r = 0; r < n; ++r) {
    InVector<8, 8>(x[r]);
    InVector<4, 4>(x[r]);
    InVector<2, 2>(x[r]);
    InVector<1, 1>(x[r]);
  }
}

// Sorts the kVectors * 16 keys of x descending (x[0] lane 0 first). kVectors: a power of two.
template <int kVectors>
__attribute__((always_inline)) inline void Sort(Vec* x) {
  // Blocks of 2, 4, 8 and 16 keys inside each vector.
#pragma GCC unroll 16
  for (int r = 0; r < kVectors; ++r) {
    InVector<1, 1>(x[r]);
    InVector<3, 2>(x[r]);
    InVector<1, 1>(x[r]);
    InVector<7, 4>(x[r]);
    InVector<2, 2>(x[r]);
    InVector<1, 1>(x[r]);
    InVector<15, 8>(x[r]);
    InVector<4, 4>(x[r]);
    InVector<2, 2>(x[r]);
    InVector<1, 1>(x[r]);
  }
  // Blocks of `block` vectors: merge the two sorted halves of each.
#pragma GCC unroll 4
  for (int block = 2; block <= kVectors; block *= 2) {
#pragma GCC unroll 16
    for (int base = 0; base < kVectors; base += block) {
      // Flip: key i of the block against key (16 block - 1 - i).
#pragma GCC unroll 8
      for (int r = 0; r < block / 2; ++r) {
        Vec& a = x[base + r];
        Vec& b = x[base + block - 1 - r];
        Vec mirrored;
        PermuteXor<15>(b, mirrored);
        const Vec larger = a > mirrored ? a : mirrored;
        const Vec smaller = a > mirrored ? mirrored : a;
        a = larger;
        PermuteXor<15>(smaller, b);
      }
    }
#pragma GCC unroll 4
    for (int distance = block / 4; distance >= 1; distance /= 2) {
#pragma GCC unroll 16
      for (int r = 0; r < kVectors; ++r) {
        if ((r & distance) != 0) continue;
        const Vec a = x[r];
        const Vec b = x[r + distance];
        x[r] = a > b ? a : b;
        x[r + distance] = a > b ? b : a;
      }
    }
    CleanVectors(x, kVectors);
  }
}

template <int kVectors>
__attribute__((always_inline)) inline void SortDescendingIn(const uint32_t* keys, int n,
                                                             uint32_t* out) {
  const int filled = PaddedCount(n) / kLanes;
  Vec x[kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kVectors; ++r) {
    if (r < filled) {
      std::memcpy(&x[r], keys + kLanes * r, sizeof(Vec));
    } else {
      x[r] = Vec{};
    }
  }
  Sort<kVectors>(x);
#pragma GCC unroll 16
  for (int r = 0; r < kVectors; ++r) {
    if (r < filled) std::memcpy(out + kLanes * r, &x[r], sizeof(Vec));
  }
}

}  // namespace

PK_VECTOR_CLONES void SortDescending(const uint32_t* keys, int n, uint32_t* out) {
  if (n <= 16) return SortDescendingIn<1>(keys, n, out);
  if (n <= 32) return SortDescendingIn<2>(keys, n, out);
  if (n <= 64) return SortDescendingIn<4>(keys, n, out);
  if (n <= 128) return SortDescendingIn<8>(keys, n, out);
  return SortDescendingIn<16>(keys, n, out);
}

}  // namespace pk::cpu
