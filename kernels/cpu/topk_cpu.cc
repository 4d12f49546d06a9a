#include "kernels/cpu/topk_cpu.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/scan.h"
#include "kernels/cpu/select.h"
#include "kernels/numeric.h"

namespace pk::cpu {

namespace {

constexpr int kMaxColumns = static_cast<int>(kMaxWidth) + 1;
constexpr int kMaxList = static_cast<int>(kMaxK);
// sum over i = 1..256 of floor(256 / i) = 1 563 bounds every staircase; round up.
constexpr int kMaxCandidates = 2048 + kCompressSlack;
// The bits an index below `count` needs (0 for a count of 1).
inline int IndexBits(size_t count) {
  int bits = 0;
  while ((size_t{1} << bits) < count) ++bits;
  return bits;
}

// Survivor counts up to which a factor's survivors are ordered whole rather than selected first.
constexpr uint32_t kRankAllSurvivors = kMaxNetworkSort;

// One pairing stage of a shape: its candidate rank pairs, listed in SPEC.md's tie order (i + j
// ascending, then i ascending, so that a later candidate wins a tie), and two sets of corners
// whose scores bound the n-th best candidate from below: the full n-pair rectangles (each corner
// scores at most every pair of its rectangle), and the smallest hyperbolic staircase
// {(i+1)(j+1) <= m} holding n candidates (every pair of it scores at least its worst corner).
// Rounding is monotone and NaN keys as -inf, so a pair never scores below a corner it dominates.
struct StagePlan {
  int previous = 0;  // n[f-1]: entries of the running list
  int factor = 0;    // kf[f]: entries of factor f's list
  int kept = 0;      // n[f] = min(k, previous * factor)
  std::vector<uint32_t> pair_i;  // candidate e is the pair (pair_i[e], pair_j[e])
  std::vector<uint32_t> pair_j;
  std::vector<std::pair<uint8_t, uint8_t>> corners;  // (a-1, b-1) with a * b == kept
  std::vector<std::pair<uint8_t, uint8_t>> stair;    // the staircase's corners; empty: none
  int index_bits = 0;  // bits of the largest candidate index

  void Prepare(int previous_entries, int factor_entries, uint32_t k) {
    previous = previous_entries;
    factor = factor_entries;
    kept = static_cast<int>(std::min<uint64_t>(k, uint64_t(previous) * uint64_t(factor)));
    pair_i.clear();
    pair_j.clear();
    for (int diagonal = 0; diagonal < previous + factor - 1; ++diagonal) {
      for (int i = std::max(0, diagonal - factor + 1); i <= std::min(diagonal, previous - 1); ++i) {
        const int j = diagonal - i;
        if ((i + 1) * (j + 1) > kept) continue;
        pair_i.push_back(static_cast<uint32_t>(i));
        pair_j.push_back(static_cast<uint32_t>(j));
      }
    }
    corners.clear();
    for (int a = 1; a <= previous; ++a) {
      if (kept % a != 0) continue;
      const int b = kept / a;
      if (b <= factor) corners.emplace_back(a - 1, b - 1);
    }
    PrepareStaircase();
    index_bits = IndexBits(pair_i.size());
  }

  // The staircase follows the level lines of a sum of two sorted lists (for smooth tails they are
  // close to hyperbolas), so its worst corner scores near the n-th best and only about 1.3 n
  // candidates reach it, against nearly all of them for the best rectangle corner.
  void PrepareStaircase() {
    stair.clear();
    const auto length = [&](int m, int i) { return std::min(factor, m / (i + 1)); };
    const auto pairs = [&](int m) {
      int count = 0;
      for (int i = 0; i < std::min(previous, m); ++i) count += length(m, i);
      return count;
    };
    int m = 1;
    while (m < kept && pairs(m) < kept) ++m;
    if (pairs(m) < kept) return;  // m <= kept keeps every staircase pair a candidate
    const int last = std::min(previous, m) - 1;
    for (int i = 0; i <= last; ++i) {
      // A run of rows of one length has its corner on its last row.
      if (i < last && length(m, i + 1) == length(m, i)) continue;
      stair.emplace_back(i, length(m, i) - 1);
    }
  }
};

struct Plan {
  int factors = 0;
  std::array<uint32_t, kMaxFactors> widths{};
  uint32_t k = 0;
  std::array<int, kMaxFactors> factor_kept{};  // kf[f] = min(k, w[f])
  std::array<StagePlan, kMaxFactors> stages;   // stages[1..F-1]

  bool Matches(const Problem& problem) const {
    return factors == problem.factors && widths == problem.widths && k == problem.k;
  }

  void Prepare(const Problem& problem) {
    factors = problem.factors;
    widths = problem.widths;
    k = problem.k;
    for (int f = 0; f < factors; ++f) {
      factor_kept[f] = static_cast<int>(std::min(k, widths[f]));
    }
    int previous = factor_kept[0];
    for (int f = 1; f < factors; ++f) {
      stages[f].Prepare(previous, factor_kept[f], k);
      previous = stages[f].kept;
    }
    // Whether every final key slot << bits(kk - 1) | index fits 32 bits.
    index_bits = IndexBits(static_cast<size_t>(previous));
    uint64_t slots = 1;
    for (int f = 0; f < factors; ++f) slots *= widths[f];
    slot_keys_fit = slots <= (uint64_t{1} << (32 - index_bits));
  }

  int index_bits = 0;          // bits(kk - 1)
  bool slot_keys_fit = false;  // the final order can sort 32-bit keys slot << index_bits | index
};

// A factor's ranked list, or the running list of product-space tuples.
struct RankedList {
  std::array<float, kMaxList> value{};     // NaN replaced by -inf in factor lists
  std::array<uint32_t, kMaxList> column{}; // factor lists: the column
  std::array<uint32_t, kMaxList> slot{};   // running list: the mixed-radix slot so far
  std::array<uint64_t, kMaxList> columns{};// running list: 16 bits per factor
};

}  // namespace

struct WorkspaceBuffers {
  Plan plan;
  std::vector<uint32_t> keys = std::vector<uint32_t>(kMaxColumns + kCompressSlack);
  std::vector<uint32_t> survivors = std::vector<uint32_t>(kMaxColumns + kCompressSlack);
  std::vector<uint32_t> survivor_keys = std::vector<uint32_t>(kMaxColumns + kCompressSlack);
  std::vector<uint32_t> best = std::vector<uint32_t>(kMaxColumns + kCompressSlack);
  std::vector<uint32_t> scratch_positions = std::vector<uint32_t>(kMaxColumns + kCompressSlack);
  std::vector<uint32_t> scratch_indices = std::vector<uint32_t>(kMaxColumns + kCompressSlack);
  std::vector<uint32_t> scratch_keys = std::vector<uint32_t>(kMaxColumns + kCompressSlack);
  SelectScratch select_scratch() {
    return {scratch_positions.data(), scratch_indices.data(), scratch_keys.data()};
  }
  std::array<uint32_t, kMaxList> narrow_chosen{};
  std::array<uint32_t, kMaxList> narrow_ordered{};
  std::array<uint64_t, kMaxList> wide_chosen{};
  std::array<uint64_t, kMaxList> ordered{};
  std::array<uint32_t, kMaxList> chosen{};  // a stage's chosen candidates
  std::array<uint32_t, kMaxList> final_keys{};
  std::array<uint32_t, kMaxList> final_order{};
  std::array<uint32_t, kMaxGroups> group_maxima{};
  std::array<uint16_t, kMaxGroups> group_scores{};
  std::array<uint16_t, kMaxGroups> sorted_scores{};
  std::array<uint32_t, kMaxCandidates> stage_positions{};
  std::array<uint32_t, kMaxCandidates> stage_keys{};
  std::array<uint32_t, kMaxCandidates> candidate_keys{};
  std::array<RankedList, kMaxFactors> factor_lists;
  std::array<RankedList, 2> running;
};

Workspace::Workspace() : buffers_(std::make_unique<WorkspaceBuffers>()) {}
Workspace::~Workspace() = default;

namespace {

template <DType kType>
struct Element;

template <>
struct Element<DType::kFloat32> {
  static float Load(const std::byte* row, uint32_t index) {
    float x;
    std::memcpy(&x, row + 4 * size_t{index}, sizeof x);
    return x;
  }
  static float Round(float x) { return x; }
  static void Store(std::byte* out, uint32_t index, float x) {
    std::memcpy(out + 4 * size_t{index}, &x, sizeof x);
  }
};

template <>
struct Element<DType::kBFloat16> {
  static float Load(const std::byte* row, uint32_t index) {
    uint16_t bits;
    std::memcpy(&bits, row + 2 * size_t{index}, sizeof bits);
    return Bf16ToFloat(bits);
  }
  static float Round(float x) { return RoundToBf16(x); }
  static void Store(std::byte* out, uint32_t index, float x) {
    const uint16_t bits = FloatToBf16(x);
    std::memcpy(out + 2 * size_t{index}, &bits, sizeof bits);
  }
};

inline uint32_t MaxOf(const uint32_t* keys, uint32_t count) {
  uint32_t most = 0;
  for (uint32_t e = 0; e < count; ++e) most = std::max(most, keys[e]);
  return most;
}

// A lower bound that at least `kept` of a factor's `width` keys reach (kept < width), from the
// maxima of strided groups, any n of which are n distinct keys. With eight or more keys in each of
// about 2 kept groups it is the kept-th largest maximum, which on unstructured data only about
// 1.2 kept keys reach: up to kNetworkBoundGroups maxima found by the sorting network (keeping
// only the best `kept`; for 16-bit maxima, where the host has the 16-bit network), else by a
// search on their top 16 bits. Else the least maximum of `kept` groups (at least 16, so that the
// maxima vectorize). maxima_of(groups, maxima) writes the strided group maxima, or lower bounds
// of them that are themselves keys' values: as 32-bit keys (Key = uint32_t), or as the top 16
// bits of keys whose lower half is zero (uint16_t, bfloat16 values: twice as many to a vector in
// the network). maxima, sorted: room for kMaxGroups entries; scores: for kMaxGroups (used with
// 32-bit maxima only).
constexpr uint32_t kNetworkBoundGroups = 128;
static_assert(kNetworkBoundGroups <= kMaxNetworkSort16);
template <typename Key, typename MaximaOf>
inline uint32_t FactorBound(uint32_t width, int kept, Key* maxima, Key* sorted, uint16_t* scores,
                            MaximaOf maxima_of) {
  constexpr int kShift = sizeof(Key) == 2 ? 16 : 0;  // from a maximum to its 32-bit key
  const auto wide_groups = static_cast<uint32_t>(PaddedCount(2 * kept));
  const bool tight = width >= 8 * wide_groups;
  const uint32_t groups =
      tight ? wide_groups : std::min(width, std::max(static_cast<uint32_t>(kept), 16u));
  maxima_of(groups, maxima);
  // The network and the search read zeros to whole vectors of 32 (16-bit) lanes: a zero is no
  // key's maximum and sorts last.
  const int padded = PaddedCount16(static_cast<int>(groups));
  if (tight) {
    std::fill(maxima + groups, maxima + padded, Key{0});
    if (groups <= kNetworkBoundGroups) {
      if constexpr (sizeof(Key) == 2) {
        if (SortTopDescending16(maxima, static_cast<int>(groups), kept, sorted)) {
          return uint32_t{sorted[kept - 1]} << kShift;
        }
      } else {
        SortTopDescending(maxima, static_cast<int>(groups), kept, sorted);
        return sorted[kept - 1];
      }
    }
  }
  Key least = maxima[0];
  Key most = maxima[0];
  for (uint32_t g = 1; g < groups; ++g) {
    least = std::min(least, maxima[g]);
    most = std::max(most, maxima[g]);
  }
  if (!tight) return uint32_t{least} << kShift;
  // Only the top 16 bits matter: count in 16-bit lanes. A zero reaches no score the search asks
  // about (above least's).
  const uint16_t* maxima16 = scores;
  if constexpr (sizeof(Key) == 2) {
    maxima16 = maxima;
  } else {
    for (int g = 0; g < padded; ++g) scores[g] = static_cast<uint16_t>(maxima[g] >> 16);
  }
  const int top = 16 - kShift;
  return uint32_t{ThresholdScore16(maxima16, padded, kept, static_cast<uint16_t>(least >> top),
                                   static_cast<uint16_t>(most >> top))}
         << 16;
}

// Factor f's top `kept` columns by (key desc, column desc), with their values (NaN -> -inf).
// x: the factor's `width` elements.
template <DType kType>
void RankFactor(const std::byte* x, uint32_t width, int kept, WorkspaceBuffers& b,
                RankedList& list) {
  uint32_t* keys = b.keys.data();
  const bool filter = static_cast<uint32_t>(kept) < width;
  if constexpr (kType == DType::kBFloat16) {
    // The 32-bit key (value key << 16 | column) is distinct and orders exactly as SPEC.md asks.
    // Behind a bound only the survivors' keys are made; the bound comes from the row itself.
    uint32_t count = width;
    uint32_t* candidates = keys;
    uint32_t lower = 0;
    if (filter) {
      lower = FactorBound(width, kept, b.group_scores.data(), b.sorted_scores.data(), nullptr,
                          [&](uint32_t groups, uint16_t* maxima) {
                            Bf16StridedGroupMaxima(x, width, groups, maxima);
                          });
      count = CompressBf16KeysAtLeast(x, width, lower, b.survivors.data());
      candidates = b.survivors.data();
    } else {
      Bf16ColumnKeys(x, width, keys);
    }
    if (count <= kRankAllSurvivors) {
      // Few survivors (the usual case behind the tight bound): ordering all of them costs less
      // than selecting the best first and ordering those.
      PadWithZeros(candidates, static_cast<int>(count));
      SortTopDescending(candidates, static_cast<int>(count), kept, b.narrow_ordered.data());
    } else {
      const uint32_t upper = MaxOf(candidates, count);
      SelectBest(candidates, static_cast<int>(count), kept, 16, lower >> 16, upper >> 16,
                 b.best.data(), b.select_scratch());
      for (int r = 0; r < kept; ++r) b.narrow_chosen[r] = candidates[b.best[r]];
      PadWithZeros(b.narrow_chosen.data(), kept);
      SortDescending(b.narrow_chosen.data(), kept, b.narrow_ordered.data());
    }
    // The value comes back from the key (NaN was keyed as -inf), with no reload from the row.
    for (int r = 0; r < kept; ++r) {
      const uint32_t key = b.narrow_ordered[r];
      list.column[r] = key & 0xffffu;
      list.value[r] = Bf16ToFloat(KeyToBf16(static_cast<uint16_t>(key >> 16)));
    }
  } else {
    // Float keys tie: select on the key with later columns winning ties, then order by the
    // distinct 64-bit key (value key << 32 | column).
    Float32Keys(x, width, keys);
    uint32_t* columns = b.survivors.data();
    uint32_t* survivor_keys = keys;
    uint32_t count = width;
    uint32_t lower = 0;
    if (filter) {
      lower = FactorBound(width, kept, b.group_maxima.data(), b.scratch_keys.data(),
                          b.group_scores.data(), [&](uint32_t groups, uint32_t* maxima) {
                            StridedGroupMaxima(keys, width, groups, maxima);
                          });
      count = CompressIndicesAtLeast(keys, width, lower, columns);
      survivor_keys = b.survivor_keys.data();
      for (uint32_t e = 0; e < count; ++e) survivor_keys[e] = keys[columns[e]];
    } else {
      for (uint32_t c = 0; c < width; ++c) columns[c] = c;
    }
    const uint32_t upper = MaxOf(survivor_keys, count);
    SelectBest(survivor_keys, static_cast<int>(count), kept, 0, lower, upper, b.best.data(),
               b.select_scratch());
    for (int r = 0; r < kept; ++r) {
      const uint32_t e = b.best[r];
      b.wide_chosen[r] = (uint64_t{survivor_keys[e]} << 32) | columns[e];
    }
    RankSortDescending(b.wide_chosen.data(), kept, b.ordered.data());
    for (int r = 0; r < kept; ++r) {
      list.column[r] = static_cast<uint32_t>(b.ordered[r] & 0xffffu);
      list.value[r] = KeyToFloat(static_cast<uint32_t>(b.ordered[r] >> 32));
    }
  }
}

// Selects the stage's `kept` best candidates into b.chosen (candidate indices); returns whether
// they are in order, best first. b.candidate_keys keeps every candidate's score key.
inline bool SelectStage(const StagePlan& stage, const RankedList& running,
                        const RankedList& factor, WorkspaceBuffers& b) {
  const int count = static_cast<int>(stage.pair_i.size());
  uint32_t lower = 0;
  for (const auto& [i, j] : stage.corners) {
    lower = std::max(lower, OrderedKey(running.value[i] + factor.value[j]));
  }
  if (!stage.stair.empty()) {
    uint32_t worst = UINT32_MAX;
    for (const auto& [i, j] : stage.stair) {
      worst = std::min(worst, OrderedKey(running.value[i] + factor.value[j]));
    }
    lower = std::max(lower, worst);
  }
  // The pair (0, 0) scores at least as high as any other.
  const uint32_t upper = OrderedKey(running.value[0] + factor.value[0]);
  // Only candidates at or above the bound can be chosen; they keep their order (the tie order).
  uint32_t* positions = b.stage_positions.data();
  uint32_t* passing_keys = b.stage_keys.data();
  const int passing = static_cast<int>(ScorePairsAtLeast(
      running.value.data(), stage.pair_i.data(), factor.value.data(), stage.pair_j.data(),
      static_cast<uint32_t>(std::max(stage.previous, stage.factor)), static_cast<uint32_t>(count),
      lower, b.candidate_keys.data(), positions, passing_keys));
  if (passing <= kMaxNetworkSort) {
    // One sort of distinct 32-bit keys (distance above the bound, candidate index) orders the
    // survivors by (score, tie order) when the distances, stripped of the trailing zero bits they
    // all share, fit beside the index: sums of bfloat16 values nearly always do.
    uint32_t shared = 0;
    uint32_t farthest = 0;
    for (int s = 0; s < passing; ++s) {
      const uint32_t distance = passing_keys[s] - lower;
      shared |= distance;
      farthest = std::max(farthest, distance);
    }
    const int zeros = shared == 0 ? 0 : __builtin_ctz(shared);
    if ((uint64_t{farthest >> zeros} << stage.index_bits) <= UINT32_MAX) {
      uint32_t* ranked = b.scratch_indices.data();
      for (int s = 0; s < passing; ++s) {
        ranked[s] = ((passing_keys[s] - lower) >> zeros << stage.index_bits) | positions[s];
      }
      PadWithZeros(ranked, passing);
      uint32_t* sorted = b.scratch_keys.data();
      SortTopDescending(ranked, passing, stage.kept, sorted);
      const uint32_t index_mask = (uint32_t{1} << stage.index_bits) - 1;
      for (int r = 0; r < stage.kept; ++r) b.chosen[r] = sorted[r] & index_mask;
      return true;
    }
  }
  SelectBest(passing_keys, passing, stage.kept, 0, lower, upper, b.best.data(),
             b.select_scratch());
  for (int r = 0; r < stage.kept; ++r) b.chosen[r] = positions[b.best[r]];
  return false;
}

// b.final_order[r] = the index of the r-th smallest of slots[0..n), n = kk; slots distinct.
inline void OrderBySlot(const Plan& plan, const uint32_t* slots, int n, WorkspaceBuffers& b) {
  uint32_t* keys = b.final_keys.data();
  if (!plan.slot_keys_fit) {
    for (int r = 0; r < n; ++r) keys[r] = ~slots[r];  // descending ~slot is ascending slot
    RankOrderDescending(keys, n, b.final_order.data());
    return;
  }
  const int bits = plan.index_bits;
  for (int r = 0; r < n; ++r) keys[r] = (slots[r] << bits) | static_cast<uint32_t>(r);
  PadWithZeros(keys, n);
  uint32_t* sorted = b.scratch_keys.data();
  SortDescending(keys, n, sorted);
  const uint32_t index_mask = (uint32_t{1} << bits) - 1;
  for (int r = 0; r < n; ++r) b.final_order[r] = sorted[n - 1 - r] & index_mask;
}

template <DType kType>
void TopKRow(const std::byte* row, std::byte* values, uint32_t* slots,
             WorkspaceBuffers& b) {
  using E = Element<kType>;
  const Plan& plan = b.plan;
  const size_t element_bytes = ElementBytes(kType);
  uint32_t offset = 0;
  for (int f = 0; f < plan.factors; ++f) {
    RankFactor<kType>(row + size_t{offset} * element_bytes, plan.widths[f], plan.factor_kept[f], b,
                      b.factor_lists[f]);
    offset += plan.widths[f];
  }
  RankedList* running = &b.factor_lists[0];
  for (int r = 0; r < plan.factor_kept[0]; ++r) {
    running->slot[r] = running->column[r];
    running->columns[r] = running->column[r];
  }
  int next_buffer = 0;
  const int last = plan.factors - 1;
  for (int f = 1; f < plan.factors; ++f) {
    const StagePlan& stage = plan.stages[f];
    const RankedList& factor = b.factor_lists[f];
    const bool in_order = SelectStage(stage, *running, factor, b);
    RankedList& next = b.running[next_buffer];
    next_buffer ^= 1;
    const int shift = 16 * f;
    if (f < last) {
      if (!in_order) {
        for (int r = 0; r < stage.kept; ++r) {
          const uint32_t e = b.chosen[r];
          b.wide_chosen[r] = (uint64_t{b.candidate_keys[e]} << 32) | e;
        }
        RankSortDescending(b.wide_chosen.data(), stage.kept, b.ordered.data());
        for (int r = 0; r < stage.kept; ++r) b.chosen[r] = static_cast<uint32_t>(b.ordered[r]);
      }
      for (int r = 0; r < stage.kept; ++r) {
        const uint32_t e = b.chosen[r];
        const int i = stage.pair_i[e];
        const int j = stage.pair_j[e];
        next.value[r] = E::Round(running->value[i] + factor.value[j]);
        next.slot[r] = running->slot[i] * plan.widths[f] + factor.column[j];
        next.columns[r] = running->columns[i] | (uint64_t{factor.column[j]} << shift);
      }
    } else {
      // Order the final pairs by slot.
      for (int r = 0; r < stage.kept; ++r) {
        const uint32_t e = b.chosen[r];
        const int i = stage.pair_i[e];
        const int j = stage.pair_j[e];
        next.value[r] = running->value[i] + factor.value[j];
        next.slot[r] = running->slot[i] * plan.widths[f] + factor.column[j];
        next.columns[r] = running->columns[i] | (uint64_t{factor.column[j]} << shift);
      }
      OrderBySlot(plan, next.slot.data(), stage.kept, b);
    }
    running = &next;
  }
  // SPEC.md's output value is recomputed from the raw row. The lists hold the raw values with
  // NaN as -inf, and their sums round as the recomputation does, so a sum is that value unless a
  // substituted -inf went into it; such a sum is -inf or NaN, and only then is the row read.
  const int kk = plan.stages[last].kept;
  for (int r = 0; r < kk; ++r) {
    const uint32_t index = b.final_order[r];
    slots[r] = running->slot[index];
    float v = running->value[index];
    if (!(v > -std::numeric_limits<float>::infinity())) {
      const uint64_t columns = running->columns[index];
      uint32_t factor_offset = 0;
      for (int f = 0; f < plan.factors; ++f) {
        const float x =
            E::Load(row, factor_offset + static_cast<uint32_t>((columns >> (16 * f)) & 0xffffu));
        v = f == 0 ? x : (f == 1 ? v + x : E::Round(v) + x);
        factor_offset += plan.widths[f];
      }
    }
    E::Store(values, static_cast<uint32_t>(r), v);
  }
}

template <DType kType>
void TopKRowsOf(const Problem& problem, const std::byte* scores, size_t rows, std::byte* values,
                uint32_t* slots, WorkspaceBuffers& b) {
  const size_t row_bytes = problem.row_bytes();
  const uint32_t kk = problem.kk();
  const size_t value_bytes = size_t{kk} * ElementBytes(kType);
  for (size_t row = 0; row < rows; ++row) {
    TopKRow<kType>(scores + row * row_bytes, values + row * value_bytes,
                   slots + row * kk, b);
  }
}

// The row kernels, compiled once per vector target and picked at load time (scan.h's
// PK_VECTOR_CLONES). `flatten` inlines the whole row kernel into each clone, so the rank counting
// and candidate loops vectorize for the clone's target while the out-of-line template copies stay
// at the baseline instruction set.
PK_VECTOR_CLONES __attribute__((flatten)) void TopKRowsBf16(const Problem& problem,
                                                            const std::byte* scores, size_t rows,
                                                            std::byte* values, uint32_t* slots,
                                                            WorkspaceBuffers& b) {
  TopKRowsOf<DType::kBFloat16>(problem, scores, rows, values, slots, b);
}

PK_VECTOR_CLONES __attribute__((flatten)) void TopKRowsFloat32(const Problem& problem,
                                                               const std::byte* scores, size_t rows,
                                                               std::byte* values, uint32_t* slots,
                                                               WorkspaceBuffers& b) {
  TopKRowsOf<DType::kFloat32>(problem, scores, rows, values, slots, b);
}

}  // namespace

void TopKRows(const Problem& problem, const std::byte* scores, size_t rows, std::byte* values,
              uint32_t* slots, Workspace& workspace) {
  WorkspaceBuffers& b = workspace.buffers();
  if (!b.plan.Matches(problem)) b.plan.Prepare(problem);
  if (problem.dtype == DType::kBFloat16) {
    TopKRowsBf16(problem, scores, rows, values, slots, b);
  } else {
    TopKRowsFloat32(problem, scores, rows, values, slots, b);
  }
}

const char* CpuPathName() { return ScanPathName(); }

}  // namespace pk::cpu
