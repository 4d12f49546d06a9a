// pkserve-make-memory: writes a memory file of random values (a safetensors file with the factor
// widths in its metadata, or a .npy), for tests, benchmarks and trials. The table is written in
// chunks, so a file of many GiB needs little memory.
//
//   pkserve-make-memory --out=mem.safetensors --widths=1024x1024 --dim=1024 --dtype=bfloat16
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/numeric.h"
#include "server/memory_file.h"

ABSL_FLAG(std::string, out, "", "the file to write (.safetensors, or .npy)");
ABSL_FLAG(std::string, widths, "1024x1024", "the factor widths: slots = their product");
ABSL_FLAG(uint32_t, dim, 1024, "values per slot");
ABSL_FLAG(std::string, dtype, "bfloat16", "float32, or bfloat16 (bf16)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the values (uniform in [-1, 1))");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "pkserve-make-memory: %s\n", message.c_str());
  return 2;
}

std::string NpyHeader(uint64_t slots, uint32_t dim, pk::DType dtype) {
  std::string dict =
      absl::StrCat("{'descr': '", dtype == pk::DType::kFloat32 ? "<f4" : "<u2",
                   "', 'fortran_order': False, 'shape': (", slots, ", ", dim, "), }");
  // Magic, version 1.0, a 2-byte length; the header ends in '\n' and pads to 64 bytes.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "writes a hosted-memory file of random values.\n"
      "Usage: pkserve-make-memory --out=FILE.safetensors|FILE.npy [--widths=1024x1024] "
      "[--dim=1024] [--dtype=bfloat16|float32] [--seed=1]");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) return Fail(absl::StrCat("unexpected argument '", positional[1], "'"));
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return Fail("--out is required (see --help)");
  absl::StatusOr<std::vector<uint32_t>> widths =
      pkserve::ParseFactorWidths(absl::GetFlag(FLAGS_widths), "--widths");
  if (!widths.ok()) return Fail(std::string(widths.status().message()));
  const pk::Result<pk::Problem> layout = pk::ValidateProblem(*widths, 1, pk::DType::kFloat32);
  if (!layout.ok()) return Fail(absl::StrCat("--widths: ", layout.error().message));
  const uint32_t dim = absl::GetFlag(FLAGS_dim);
  if (dim == 0 || dim > pkserve::kMaxMemoryDim) {
    return Fail(absl::StrCat("--dim must be in [1, ", pkserve::kMaxMemoryDim, "], got ", dim));
  }
  const std::string dtype_text = absl::GetFlag(FLAGS_dtype);
  pk::DType dtype;
  if (dtype_text == "bfloat16" || dtype_text == "bf16") {
    dtype = pk::DType::kBFloat16;
  } else if (dtype_text == "float32" || dtype_text == "f32") {
    dtype = pk::DType::kFloat32;
  } else {
    return Fail(absl::StrCat("--dtype must be float32 or bfloat16, got '", dtype_text, "'"));
  }
  uint64_t slots = 1;
  for (uint32_t width : *widths) slots *= width;
  const bool npy = absl::EndsWith(out, ".npy");
  const std::string header =
      npy ? NpyHeader(slots, dim, dtype) : pkserve::SafetensorsHeader(*widths, slots, dim, dtype);

  const std::string partial = out + ".partial";
  std::FILE* file = std::fopen(partial.c_str(), "wb");
  if (file == nullptr) {
    return Fail(absl::StrCat("cannot write ", partial, ": ", std::strerror(errno)));
  }
  bool written = std::fwrite(header.data(), 1, header.size(), file) == header.size();
  std::mt19937_64 engine(absl::GetFlag(FLAGS_seed));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const size_t element = pk::ElementBytes(dtype);
  std::vector<std::byte> chunk;
  const uint64_t elements = slots * dim;
  constexpr uint64_t kChunkElements = uint64_t{1} << 20;
  for (uint64_t done = 0; written && done < elements; done += kChunkElements) {
    const uint64_t count = std::min(kChunkElements, elements - done);
    chunk.resize(count * element);
    for (uint64_t i = 0; i < count; ++i) {
      const float value = uniform(engine);
      if (dtype == pk::DType::kFloat32) {
        std::memcpy(chunk.data() + i * 4, &value, 4);
      } else {
        const uint16_t bits = pk::FloatToBf16(value);
        std::memcpy(chunk.data() + i * 2, &bits, 2);
      }
    }
    written = std::fwrite(chunk.data(), 1, chunk.size(), file) == chunk.size();
  }
  const int error = errno;
  if (std::fclose(file) != 0 || !written) {
    std::remove(partial.c_str());
    return Fail(absl::StrCat("cannot write ", partial, ": ", std::strerror(error)));
  }
  if (std::rename(partial.c_str(), out.c_str()) != 0) {
    return Fail(absl::StrCat("cannot rename ", partial, " to ", out, ": ", std::strerror(errno)));
  }
  std::printf("%s: %llu slots (%s) x dim %u %s, %.1f MiB\n", out.c_str(),
              static_cast<unsigned long long>(slots), absl::StrJoin(*widths, "x").c_str(), dim,
              pk::DTypeName(dtype),
              static_cast<double>(elements * element + header.size()) / (1 << 20));
  return 0;
}
