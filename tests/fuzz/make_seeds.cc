// Writes the seed corpus of topk_request_fuzzer (tests/fuzz/corpus/): valid requests of several
// shapes (2 to 4 factors, both dtypes, k at its limits, one and several rows, edge values) and a
// few malformed ones, lookups of the fuzzer's two memories, and memory files. Deterministic; the files are committed, this is how to make them again:
//   build-fuzz/pk_request_fuzzer_seeds tests/fuzz/corpus
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pkserve/v1/pkserve.pb.h"

namespace {

using pkserve::v1::TopKRequest;

TopKRequest Make(const std::vector<uint32_t>& widths, uint32_t k, pkserve::v1::DType dtype,
                 uint32_t rows, std::mt19937& engine, int pattern) {
  TopKRequest request;
  uint32_t row_width = 0;
  for (uint32_t width : widths) {
    request.add_factor_widths(width);
    row_width += width;
  }
  request.set_k(k);
  request.set_dtype(dtype);
  request.set_rows(rows);
  std::normal_distribution<float> normal;
  std::string scores;
  for (uint64_t i = 0; i < uint64_t{rows} * row_width; ++i) {
    float value = normal(engine);
    if (pattern == 1) value = std::round(value * 2) / 2;  // many ties
    if (pattern == 2 && i % 7 == 0) value = std::numeric_limits<float>::quiet_NaN();
    if (pattern == 2 && i % 11 == 0) value = -std::numeric_limits<float>::infinity();
    if (pattern == 2 && i % 13 == 0) value = -0.0f;
    if (pattern == 3) value = 1.0f;  // all equal
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    if (dtype == pkserve::v1::DTYPE_BFLOAT16) {
      const uint16_t half = static_cast<uint16_t>(bits >> 16);
      scores.append(reinterpret_cast<const char*>(&half), sizeof half);
    } else {
      scores.append(reinterpret_cast<const char*>(&bits), sizeof bits);
    }
  }
  request.set_scores(scores);
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::mt19937 engine(20261201);
  std::vector<std::pair<std::string, std::string>> seeds;
  const auto add = [&seeds](const std::string& name, const TopKRequest& request) {
    std::string bytes;
    request.SerializeToString(&bytes);
    seeds.emplace_back(name, bytes);
  };
  const auto f32 = pkserve::v1::DTYPE_FLOAT32;
  const auto bf16 = pkserve::v1::DTYPE_BFLOAT16;
  add("valid_2f_f32", Make({16, 16}, 8, f32, 2, engine, 0));
  add("valid_2f_bf16_ties", Make({32, 8}, 16, bf16, 3, engine, 1));
  add("valid_3f_f32_special", Make({8, 4, 6}, 32, f32, 2, engine, 2));
  add("valid_4f_bf16", Make({4, 3, 5, 2}, 256, bf16, 1, engine, 0));
  add("valid_kk_below_k", Make({2, 3}, 256, f32, 4, engine, 0));
  add("valid_k1_equal", Make({64, 64}, 1, bf16, 1, engine, 3));
  add("valid_width1", Make({1, 40}, 5, f32, 2, engine, 1));
  add("valid_wide", Make({300, 2}, 64, f32, 1, engine, 2));
  TopKRequest with_id = Make({10, 10}, 10, f32, 1, engine, 0);
  with_id.set_request_id("seed-request");
  add("valid_with_id", with_id);
  // Malformed: each breaks one rule.
  TopKRequest short_payload = Make({16, 16}, 8, f32, 2, engine, 0);
  short_payload.mutable_scores()->pop_back();
  add("bad_short_payload", short_payload);
  TopKRequest huge_rows = Make({16, 16}, 8, f32, 1, engine, 0);
  huge_rows.set_rows(4000000000u);
  add("bad_huge_rows", huge_rows);
  add("bad_k0", Make({16, 16}, 0, f32, 1, engine, 0));
  add("bad_one_factor", Make({16}, 4, f32, 1, engine, 0));
  add("bad_33_bits", Make({65535, 65535, 2}, 4, f32, 0, engine, 0));
  TopKRequest no_dtype = Make({8, 8}, 4, f32, 1, engine, 0);
  no_dtype.set_dtype(pkserve::v1::DTYPE_UNSPECIFIED);
  add("bad_no_dtype", no_dtype);
  seeds.emplace_back("bad_truncated_proto", seeds[0].second.substr(0, 9));
  // Lookups of the fuzzer's memories ("m": 16x16 bfloat16 dim 8; "f": 4x4x4 float32 dim 5).
  const auto lookup = [&](const std::string& name, const std::string& memory,
                          const std::vector<uint32_t>& widths, uint32_t k, uint32_t rows,
                          uint32_t heads, pkserve::v1::DType dtype, int pattern) {
    const TopKRequest scores = Make(widths, k, dtype, rows, engine, pattern);
    pkserve::v1::LookupRequest request;
    request.set_memory(memory);
    request.set_k(k);
    request.set_dtype(dtype);
    request.set_rows(rows);
    request.set_heads(heads);
    request.set_scores(scores.scores());
    request.set_return_slots(pattern % 2 == 1);
    std::string bytes;
    request.SerializeToString(&bytes);
    seeds.emplace_back(name, bytes);
  };
  lookup("lookup_valid_m", "m", {16, 16}, 8, 4, 2, bf16, 0);
  lookup("lookup_valid_f_specials", "f", {4, 4, 4}, 16, 3, 3, f32, 2);
  lookup("lookup_valid_ties", "m", {16, 16}, 256, 1, 1, f32, 1);
  lookup("lookup_bad_memory", "absent", {16, 16}, 8, 2, 1, bf16, 0);
  lookup("lookup_bad_heads", "m", {16, 16}, 8, 3, 2, bf16, 0);
  // Memory files: a safetensors file and a .npy.
  const auto safetensors = [](const std::string& json, size_t data_bytes) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
    return out + json + std::string(data_bytes, '\x3f');
  };
  seeds.emplace_back("memory_safetensors",
                     safetensors(R"({"__metadata__":{"factor_widths":"4,4"},"values":)"
                                 R"({"data_offsets":[0,64],"dtype":"BF16","shape":[16,2]}})",
                                 64));
  seeds.emplace_back("memory_safetensors_single_f32",
                     safetensors(R"({"t":{"data_offsets":[0,96],"dtype":"F32","shape":[8,3]},)"
                                 R"("__metadata__":{"factor_widths":"2x2x2"}})",
                                 96));
  std::string npy = "\x93NUMPY\x01";
  npy += '\0';
  const std::string dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (16, 2), }\n";
  npy += static_cast<char>(dict.size());
  npy += '\0';
  seeds.emplace_back("memory_npy", npy + dict + std::string(64, '\x01'));
  for (const auto& [name, bytes] : seeds) {
    std::ofstream file(dir + "/" + name, std::ios::binary);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!file) {
      std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
      return 1;
    }
  }
  std::printf("%zu seeds written to %s\n", seeds.size(), dir.c_str());
  return 0;
}
