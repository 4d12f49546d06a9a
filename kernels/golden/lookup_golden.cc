#include "kernels/golden/lookup_golden.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "kernels/lookup/weights.h"
#include "kernels/numeric.h"

namespace pk::golden {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float Element(const std::byte* data, size_t index, DType dtype) {
  if (dtype == DType::kFloat32) {
    float x;
    std::memcpy(&x, data + index * 4, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, data + index * 2, 2);
  return Bf16ToFloat(bits);
}

std::string Hex(float x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g (0x%08x)", x, FloatBits(x));
  return text;
}

class Reader {
 public:
  explicit Reader(const std::vector<char>& bytes) : bytes_(bytes) {}
  bool Take(void* out, size_t count) {
    if (bytes_.size() - position_ < count) return false;
    std::memcpy(out, bytes_.data() + position_, count);
    position_ += count;
    return true;
  }
  template <typename T>
  bool Take(T& out) {
    return Take(&out, sizeof out);
  }
  template <typename T>
  bool TakeVector(std::vector<T>& out, uint64_t count) {
    if ((bytes_.size() - position_) / sizeof(T) < count) return false;
    out.resize(count);
    return Take(out.data(), count * sizeof(T));
  }
  bool AtEnd() const { return position_ == bytes_.size(); }

 private:
  const std::vector<char>& bytes_;
  size_t position_ = 0;
};

template <typename T>
void Put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

uint64_t LookupCase::table_slots() const {
  uint64_t product = 1;
  for (int f = 0; f < problem.topk.factors; ++f) product *= problem.topk.widths[f];
  return product;
}

std::vector<std::byte> TableFromSeed(uint64_t seed, uint64_t slots, uint32_t dim, DType dtype) {
  const uint64_t count = slots * dim;
  std::vector<std::byte> table(count * ElementBytes(dtype));
  for (uint64_t e = 0; e < count; ++e) {
    const double u = static_cast<double>(SplitMix64(seed + e) >> 40);
    const float x = static_cast<float>((u - 8388608.0 + 0.5) / 4194304.0);
    if (dtype == DType::kFloat32) {
      std::memcpy(table.data() + e * 4, &x, 4);
    } else {
      const uint16_t bits = FloatToBf16(x);
      std::memcpy(table.data() + e * 2, &bits, 2);
    }
  }
  return table;
}

Result<std::vector<LookupCase>> ReadLookupFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{"file", path + ": cannot open"};
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  Reader reader(bytes);
  char magic[4];
  uint32_t version = 0, count = 0;
  if (!reader.Take(magic, 4) || std::memcmp(magic, "PKLK", 4) != 0) {
    return Error{"file", path + ": not a golden lookup file (magic \"PKLK\" missing)"};
  }
  if (!reader.Take(version) || version != 1) {
    return Error{"file", path + ": unsupported version " + std::to_string(version) + ", expected 1"};
  }
  if (!reader.Take(count)) return Error{"file", path + ": truncated header"};
  std::vector<LookupCase> cases;
  for (uint32_t index = 0; index < count; ++index) {
    const std::string where = path + ": case " + std::to_string(index);
    uint8_t codes[4];
    uint32_t k = 0, heads = 0, rows = 0, dim = 0, widths[4] = {}, kk = 0, name_length = 0;
    uint64_t seed = 0;
    if (!reader.Take(codes, 4) || !reader.Take(k) || !reader.Take(heads) || !reader.Take(rows) ||
        !reader.Take(dim) || !reader.Take(widths, sizeof widths) || !reader.Take(kk) ||
        !reader.Take(seed) || !reader.Take(name_length) || name_length > 4096) {
      return Error{"file", where + ": truncated or malformed case header"};
    }
    LookupCase c;
    c.name.resize(name_length);
    if (!reader.Take(c.name.data(), name_length)) return Error{"file", where + ": truncated name"};
    if (codes[0] > 1 || codes[2] > 1 || codes[3] > 1) {
      return Error{"file", where + " (" + c.name + "): unknown dtype code"};
    }
    auto topk = ValidateProblem(std::span<const uint32_t>(widths, codes[1]), k,
                                static_cast<DType>(codes[0]));
    if (!topk.ok()) return Error{"file", where + " (" + c.name + "): " + topk.error().message};
    auto problem = ValidateLookup(topk.value(), heads, dim, static_cast<DType>(codes[2]),
                                  static_cast<DType>(codes[3]));
    if (!problem.ok()) {
      return Error{"file", where + " (" + c.name + "): " + problem.error().message};
    }
    if (problem.value().topk.kk() != kk || rows == 0 || rows % heads != 0) {
      return Error{"file", where + " (" + c.name + "): kk or rows inconsistent with the shape"};
    }
    c.problem = problem.value();
    c.rows = rows;
    c.table_seed = seed;
    const uint64_t pairs = uint64_t{rows} * kk;
    const uint64_t outputs = uint64_t{rows / heads} * dim;
    if (!reader.TakeVector(c.scores, uint64_t{rows} * c.problem.topk.row_bytes()) ||
        !reader.TakeVector(c.slots, pairs) || !reader.TakeVector(c.weights, pairs) ||
        !reader.TakeVector(c.row_valid, rows) ||
        !reader.TakeVector(c.outputs, outputs * ElementBytes(c.problem.output_dtype))) {
      return Error{"file", where + " (" + c.name + "): truncated data"};
    }
    cases.push_back(std::move(c));
  }
  if (!reader.AtEnd()) return Error{"file", path + ": bytes after the last case"};
  return cases;
}

std::string WriteLookupFile(const std::string& path, const std::vector<LookupCase>& cases) {
  std::string out = "PKLK";
  Put(out, uint32_t{1});
  Put(out, static_cast<uint32_t>(cases.size()));
  for (const LookupCase& c : cases) {
    const LookupProblem& p = c.problem;
    const uint8_t codes[4] = {static_cast<uint8_t>(p.topk.dtype), static_cast<uint8_t>(p.topk.factors),
                              static_cast<uint8_t>(p.value_dtype),
                              static_cast<uint8_t>(p.output_dtype)};
    out.append(reinterpret_cast<const char*>(codes), 4);
    Put(out, p.topk.k);
    Put(out, p.heads);
    Put(out, c.rows);
    Put(out, p.dim);
    for (int f = 0; f < kMaxFactors; ++f) Put(out, p.topk.widths[f]);
    Put(out, p.topk.kk());
    Put(out, c.table_seed);
    Put(out, static_cast<uint32_t>(c.name.size()));
    out += c.name;
    out.append(reinterpret_cast<const char*>(c.scores.data()), c.scores.size());
    out.append(reinterpret_cast<const char*>(c.slots.data()), c.slots.size() * 4);
    out.append(reinterpret_cast<const char*>(c.weights.data()), c.weights.size() * 4);
    out.append(reinterpret_cast<const char*>(c.row_valid.data()), c.row_valid.size());
    out.append(reinterpret_cast<const char*>(c.outputs.data()), c.outputs.size());
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return path + ": cannot create";
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.close();
  if (!file) return path + ": write failed";
  return "";
}

std::optional<std::string> CompareLookup(const LookupCase& expected,
                                         std::span<const uint32_t> slots,
                                         std::span<const float> weights,
                                         std::span<const uint8_t> row_valid,
                                         std::span<const std::byte> outputs) {
  const uint32_t kk = expected.problem.topk.kk();
  for (uint32_t r = 0; r < expected.rows; ++r) {
    if (row_valid[r] != expected.row_valid[r]) {
      return "row " + std::to_string(r) + ": expected row_valid " +
             std::to_string(expected.row_valid[r]) + ", got " + std::to_string(row_valid[r]);
    }
    for (uint32_t i = 0; i < kk; ++i) {
      const size_t e = size_t{r} * kk + i;
      if (slots[e] != expected.slots[e] || FloatBits(weights[e]) != FloatBits(expected.weights[e])) {
        return "row " + std::to_string(r) + ", position " + std::to_string(i) + ": expected slot " +
               std::to_string(expected.slots[e]) + " weight " + Hex(expected.weights[e]) +
               ", got slot " + std::to_string(slots[e]) + " weight " + Hex(weights[e]);
      }
    }
  }
  const LookupProblem& p = expected.problem;
  const size_t element = ElementBytes(p.output_dtype);
  for (size_t e = 0; e < size_t{expected.outputs_count()} * p.dim; ++e) {
    if (std::memcmp(outputs.data() + e * element, expected.outputs.data() + e * element,
                    element) != 0) {
      return "output " + std::to_string(e / p.dim) + ", column " + std::to_string(e % p.dim) +
             ": expected " + Hex(Element(expected.outputs.data(), e, p.output_dtype)) + ", got " +
             Hex(Element(outputs.data(), e, p.output_dtype));
    }
  }
  return std::nullopt;
}

std::optional<std::string> CheckAgainstFloat64(const LookupCase& c,
                                               std::span<const std::byte> table) {
  const LookupProblem& p = c.problem;
  const ScoreShape shape = MakeScoreShape(p.topk);
  const uint32_t kk = shape.kk;
  const double unit = p.output_dtype == DType::kFloat32 ? 0x1p-24 : 0x1p-8;
  const double pairs = p.pairs_per_output();
  for (uint32_t o = 0; o < c.outputs_count(); ++o) {
    std::vector<double> ref(p.dim, 0.0), allowed_error(p.dim, 0.0);
    for (uint32_t h = 0; h < p.heads; ++h) {
      const size_t r = size_t{o} * p.heads + h;
      const std::byte* row = c.scores.data() + r * p.topk.row_bytes();
      std::vector<double> e(kk);
      double m = -INFINITY;
      for (uint32_t i = 0; i < kk; ++i) {
        e[i] = SlotScore(shape, row, c.slots[r * kk + i]);
        if (e[i] > m) m = e[i];
      }
      const bool valid = std::isfinite(m);
      if (valid != (c.row_valid[r] == 1)) {
        return "row " + std::to_string(r) + ": row_valid " + std::to_string(c.row_valid[r]) +
               " but the float64 maximum is " + std::to_string(m);
      }
      if (!valid) continue;
      double z = 0;
      for (uint32_t i = 0; i < kk; ++i) {
        e[i] = std::isnan(e[i]) || e[i] == -INFINITY ? 0.0 : std::exp(e[i] - m);
        z += e[i];
      }
      for (uint32_t i = 0; i < kk; ++i) {
        const double w = e[i] / z;
        // The weight's relative error: Exp's 2^-21, fl32(s - m)'s rounding carried through the
        // exponential (|s - m| 2^-24), Z's in-order float32 sum (kk 2^-24), the division 2^-24.
        const double x = std::fabs(SlotScore(shape, row, c.slots[r * kk + i]) - m);
        const double relative = 0x1p-21 + (std::isfinite(x) ? x : 0.0) * 0x1p-24 +
                                (kk + 1) * 0x1p-24;
        const float got = c.weights[r * kk + i];
        if (!(std::fabs(got - w) <= w * relative + 0x1p-126)) {
          return "row " + std::to_string(r) + ", position " + std::to_string(i) + ": weight " +
                 Hex(got) + ", float64 " + std::to_string(w);
        }
        const uint64_t slot = c.slots[r * kk + i];
        for (uint32_t d = 0; d < p.dim; ++d) {
          const double v = Element(table.data(), slot * p.dim + d, p.value_dtype);
          ref[d] += w * v;
          allowed_error[d] += std::fabs(w * v) * (relative + pairs * 0x1p-24);
        }
      }
    }
    for (uint32_t d = 0; d < p.dim; ++d) {
      const double got = Element(c.outputs.data(), size_t{o} * p.dim + d, p.output_dtype);
      const double allowed = unit * std::fabs(ref[d]) + allowed_error[d] + 0x1p-126;
      if (!(std::fabs(got - ref[d]) <= allowed)) {
        return "output " + std::to_string(o) + ", column " + std::to_string(d) + ": " +
               std::to_string(got) + ", float64 " + std::to_string(ref[d]) + ", allowed error " +
               std::to_string(allowed);
      }
    }
  }
  return std::nullopt;
}

}  // namespace pk::golden
