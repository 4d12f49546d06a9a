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
constexpr int kMaxCandidates = 2048;

// One pairing stage of a shape: which rank pairs are candidates, and the full n-pair rectangles
// on the staircase whose corner scores bound the n-th best candidate from below.
struct StagePlan {
  int previous = 0;  // n[f-1]: entries of the running list
  int factor = 0;    // kf[f]: entries of factor f's list
  int kept = 0;      // n[f] = min(k, previous * factor)
  int rows = 0;      // running-list ranks i that have candidates
  std::array<uint16_t, kMaxList> row_length{};  // candidates (i, 0..row_length[i]-1)
  std::vector<std::pair<uint16_t, uint16_t>> corners;  // (a-1, b-1) with a * b == kept
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
      StagePlan& stage = stages[f];
      stage.previous = previous;
      stage.factor = factor_kept[f];
      stage.kept = static_cast<int>(
          std::min<uint64_t>(k, uint64_t(stage.previous) * uint64_t(stage.factor)));
      stage.rows = std::min(stage.previous, stage.kept);
      for (int i = 0; i < stage.rows; ++i) {
        stage.row_length[i] = static_cast<uint16_t>(std::min(stage.factor, stage.kept / (i + 1)));
      }
      stage.corners.clear();
      for (int a = 1; a <= stage.previous; ++a) {
        if (stage.kept % a != 0) continue;
        const int b = stage.kept / a;
        if (b <= stage.factor) stage.corners.emplace_back(a - 1, b - 1);
      }
      previous = stage.kept;
    }
  }
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
  std::vector<uint64_t> wide_keys = std::vector<uint64_t>(kMaxColumns);
  std::array<uint32_t, kMaxList> narrow_chosen{};
  std::array<uint64_t, kMaxList> wide_chosen{};
  std::array<uint64_t, kMaxList> ordered{};
  std::array<uint32_t, kMaxList> narrow_ordered{};
  std::array<uint32_t, kMaxList> group_scratch{};
  std::array<uint64_t, kMaxCandidates> candidates{};
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

// Factor f's top `kept` columns by (key desc, column desc), with their values (NaN -> -inf).
// x: the factor's `width` elements.
template <DType kType>
void RankFactor(const std::byte* x, uint32_t width, int kept, WorkspaceBuffers& b,
                RankedList& list) {
  uint32_t* keys = b.keys.data();
  if constexpr (kType == DType::kBFloat16) {
    // The 32-bit key (value key << 16 | column) is distinct and orders exactly as SPEC.md asks.
    Bf16ColumnKeys(x, width, keys);
    uint32_t count = width;
    uint32_t* candidates = keys;
    if (static_cast<uint32_t>(kept) < width) {
      const uint32_t bound =
          StridedGroupMaxBound(keys, width, static_cast<uint32_t>(kept), b.group_scratch.data());
      count = CompressAtLeast(keys, width, bound, b.survivors.data());
      candidates = b.survivors.data();
    }
    SelectTop(candidates, static_cast<int>(count), kept, b.narrow_chosen.data());
    RankSortDescending(b.narrow_chosen.data(), kept, b.narrow_ordered.data());
    for (int r = 0; r < kept; ++r) list.column[r] = b.narrow_ordered[r] & 0xffffu;
  } else {
    // Float keys tie, so the distinct key is 64 bits: value key << 32 | column.
    Float32Keys(x, width, keys);
    uint32_t* columns = b.survivors.data();
    uint32_t count;
    if (static_cast<uint32_t>(kept) < width) {
      const uint32_t bound =
          StridedGroupMaxBound(keys, width, static_cast<uint32_t>(kept), b.group_scratch.data());
      count = CompressIndicesAtLeast(keys, width, bound, columns);
    } else {
      count = width;
      for (uint32_t c = 0; c < width; ++c) columns[c] = c;
    }
    uint64_t* wide = b.wide_keys.data();
    for (uint32_t s = 0; s < count; ++s) wide[s] = (uint64_t{keys[columns[s]]} << 32) | columns[s];
    SelectTop(wide, static_cast<int>(count), kept, b.wide_chosen.data());
    RankSortDescending(b.wide_chosen.data(), kept, b.ordered.data());
    for (int r = 0; r < kept; ++r) list.column[r] = static_cast<uint32_t>(b.ordered[r] & 0xffffu);
  }
  for (int r = 0; r < kept; ++r) {
    const float v = Element<kType>::Load(x, list.column[r]);
    list.value[r] = v != v ? -std::numeric_limits<float>::infinity() : v;
  }
}

// A stage candidate's distinct sort key: score key, then i + j, then i (all descending).
inline uint64_t CandidateKey(uint32_t score_key, int i, int j) {
  return (uint64_t{score_key} << 32) | (uint64_t(i + j) << 8) | uint64_t(i);
}

// Selects the stage's `kept` best rank pairs; returns their keys in b.wide_chosen (unordered).
inline void SelectStage(const StagePlan& stage, const RankedList& running,
                        const RankedList& factor, WorkspaceBuffers& b) {
  uint32_t bound = 0;
  for (const auto& [i, j] : stage.corners) {
    bound = std::max(bound, OrderedKey(running.value[i] + factor.value[j]));
  }
  uint64_t* candidates = b.candidates.data();
  int count = 0;
  for (int i = 0; i < stage.rows; ++i) {
    const float base = running.value[i];
    const int length = stage.row_length[i];
    for (int j = 0; j < length; ++j) {
      const uint32_t key = OrderedKey(base + factor.value[j]);
      candidates[count] = CandidateKey(key, i, j);
      count += key >= bound ? 1 : 0;
    }
  }
  SelectTop(candidates, count, stage.kept, b.wide_chosen.data());
}

inline int PairRow(uint64_t key) { return static_cast<int>(key & 0xffu); }
inline int PairColumn(uint64_t key) { return static_cast<int>((key >> 8) & 0x3ffu) - PairRow(key); }

template <DType kType>
void TopKRow(const Problem& problem, const std::byte* row, std::byte* values, uint32_t* slots,
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
    SelectStage(stage, *running, factor, b);
    RankedList& next = b.running[next_buffer];
    next_buffer ^= 1;
    const int shift = 16 * f;
    if (f < last) {
      RankSortDescending(b.wide_chosen.data(), stage.kept, b.ordered.data());
      for (int r = 0; r < stage.kept; ++r) {
        const int i = PairRow(b.ordered[r]);
        const int j = PairColumn(b.ordered[r]);
        next.value[r] = E::Round(running->value[i] + factor.value[j]);
        next.slot[r] = running->slot[i] * plan.widths[f] + factor.column[j];
        next.columns[r] = running->columns[i] | (uint64_t{factor.column[j]} << shift);
      }
    } else {
      // Order the final pairs by slot: rank-sort (~slot << 32 | pair index) descending.
      for (int r = 0; r < stage.kept; ++r) {
        const int i = PairRow(b.wide_chosen[r]);
        const int j = PairColumn(b.wide_chosen[r]);
        next.slot[r] = running->slot[i] * plan.widths[f] + factor.column[j];
        next.columns[r] = running->columns[i] | (uint64_t{factor.column[j]} << shift);
        b.candidates[r] = (uint64_t{~next.slot[r]} << 32) | uint64_t(r);
      }
      RankSortDescending(b.candidates.data(), stage.kept, b.ordered.data());
    }
    running = &next;
  }
  // Recompute each selected slot's value from the raw row, as SPEC.md's Output says.
  const int kk = plan.stages[last].kept;
  for (int r = 0; r < kk; ++r) {
    const int index = static_cast<int>(b.ordered[r] & 0xffffffffu);
    const uint64_t columns = running->columns[index];
    slots[r] = running->slot[index];
    uint32_t factor_offset = 0;
    float v = 0.0f;
    for (int f = 0; f < plan.factors; ++f) {
      const float x = E::Load(row, factor_offset + static_cast<uint32_t>((columns >> (16 * f)) & 0xffffu));
      v = f == 0 ? x : (f == 1 ? v + x : E::Round(v) + x);
      factor_offset += plan.widths[f];
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
    TopKRow<kType>(problem, scores + row * row_bytes, values + row * value_bytes,
                   slots + row * kk, b);
  }
}

}  // namespace

void TopKRows(const Problem& problem, const std::byte* scores, size_t rows, std::byte* values,
              uint32_t* slots, Workspace& workspace) {
  WorkspaceBuffers& b = workspace.buffers();
  if (!b.plan.Matches(problem)) b.plan.Prepare(problem);
  if (problem.dtype == DType::kBFloat16) {
    TopKRowsOf<DType::kBFloat16>(problem, scores, rows, values, slots, b);
  } else {
    TopKRowsOf<DType::kFloat32>(problem, scores, rows, values, slots, b);
  }
}

const char* CpuPathName() { return ScanPathName(); }

}  // namespace pk::cpu
