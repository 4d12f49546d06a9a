// The memory files' checks: every malformed class of safetensors and .npy file is refused with a
// message that names the file and what is wrong, and the --memory flag's form.
#include "server/memory_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/memory_store.h"

namespace pkserve {
namespace {

std::span<const std::byte> Bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// A safetensors file: the 8-byte length, `json`, then `data_bytes` bytes.
std::string Safetensors(const std::string& json, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + std::string(data_bytes, '\x01');
}

std::string Npy(const std::string& dict, size_t data_bytes) {
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + std::string(data_bytes, '\x02');
}

std::string Error(const std::string& file, std::vector<uint32_t> widths = {}) {
  absl::StatusOr<MemoryLayout> layout = ParseMemoryFile(Bytes(file), widths, "m.safetensors");
  if (layout.ok()) return "(accepted)";
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(layout.status().message(), "m.safetensors: "))
      << layout.status().message();
  return std::string(layout.status().message());
}

constexpr char kGood[] = R"({"values":{"dtype":"BF16","shape":[16,3],"data_offsets":[0,96]},)"
                         R"("__metadata__":{"factor_widths":"4,4"}})";

TEST(MemoryFile, AWellFormedSafetensorsFileGivesItsLayout) {
  const std::string file = Safetensors(kGood, 96);
  absl::StatusOr<MemoryLayout> layout = ParseMemoryFile(Bytes(file), {}, "m.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->factor_widths, (std::vector<uint32_t>{4, 4}));
  EXPECT_EQ(layout->slots, 16u);
  EXPECT_EQ(layout->dim, 3u);
  EXPECT_EQ(layout->dtype, pk::DType::kBFloat16);
  EXPECT_EQ(layout->data_offset, 8 + std::string(kGood).size());
  EXPECT_EQ(layout->data_bytes, 96u);
}

TEST(MemoryFile, TheWriterAndTheReaderAgree) {
  const std::vector<uint32_t> widths = {8, 2, 4};
  const std::string header = SafetensorsHeader(widths, 64, 5, pk::DType::kFloat32);
  EXPECT_EQ(header.size() % 64, 0u) << "the data starts 64-byte aligned";
  const std::string file = header + std::string(64 * 5 * 4, '\0');
  absl::StatusOr<MemoryLayout> layout = ParseMemoryFile(Bytes(file), {}, "m.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->factor_widths, widths);
  EXPECT_EQ(layout->data_offset, header.size());
}

TEST(MemoryFile, EveryMalformedSafetensorsFileIsRefusedSayingWhy) {
  EXPECT_TRUE(absl::StrContains(Error("abc"), "fewer than the 8"));
  EXPECT_TRUE(absl::StrContains(Error(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)),
                                "over the limit"));
  EXPECT_TRUE(absl::StrContains(Error(Safetensors(kGood, 96).substr(0, 50)), "only 42 follow"));
  EXPECT_TRUE(absl::StrContains(Error(Safetensors("{not json", 0)), "not a JSON object"));
  EXPECT_TRUE(absl::StrContains(Error(Safetensors("[1,2]", 0)), "not a JSON object"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"a":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1,1],"data_offsets":[4,8]}})",
                        8)),
      "no tensor named 'values', and 2 tensors"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"F16","shape":[16,3],"data_offsets":[0,96]}})", 96)),
      "dtype F16"));
  EXPECT_TRUE(absl::StrContains(
      Error(
          Safetensors(R"({"values":{"dtype":"BF16","shape":[16,3,1],"data_offsets":[0,96]}})", 96)),
      "shape of two"));
  EXPECT_TRUE(absl::StrContains(
      Error(
          Safetensors(R"({"values":{"dtype":"BF16","shape":[16,-3],"data_offsets":[0,96]}})", 96)),
      "shape of two"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"BF16","shape":[16,0],"data_offsets":[0,0]}})", 0)),
      "dim"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"BF16","shape":[16,3],"data_offsets":[0,96]}})", 95)),
      "outside the 95 data bytes"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"BF16","shape":[16,3],"data_offsets":[0,94]}})", 96)),
      "needs 96"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"BF16","shape":[16,3],"data_offsets":[0,96]}})", 96)),
      "no factor widths"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"BF16","shape":[16,3],"data_offsets":[0,96]},)"
                        R"("__metadata__":{"factor_widths":"4,5"}})",
                        96)),
      "make 20 slots"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"BF16","shape":[16,3],"data_offsets":[0,96]},)"
                        R"("__metadata__":{"factor_widths":"4,four"}})",
                        96)),
      "factor widths such as"));
  EXPECT_TRUE(absl::StrContains(
      Error(Safetensors(R"({"values":{"dtype":"BF16","shape":[16,3],"data_offsets":[0,96]},)"
                        R"("__metadata__":{"factor_widths":"16"}})",
                        96)),
      "not a valid product-key layout"));
}

TEST(MemoryFile, WidthsGivenOnTheCommandLineOverrideTheMetadata) {
  const std::string file = Safetensors(kGood, 96);
  absl::StatusOr<MemoryLayout> layout =
      ParseMemoryFile(Bytes(file), std::vector<uint32_t>{2, 8}, "m.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->factor_widths, (std::vector<uint32_t>{2, 8}));
  EXPECT_TRUE(absl::StrContains(Error(file, {2, 2}), "given with widths="));
}

TEST(MemoryFile, NpyFilesNeedWidthsAndAreCheckedLikeSafetensors) {
  const std::string good =
      Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (16, 3), }\n", 192);
  absl::StatusOr<MemoryLayout> layout =
      ParseMemoryFile(Bytes(good), std::vector<uint32_t>{4, 4}, "m.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->dtype, pk::DType::kFloat32);
  EXPECT_EQ(layout->format, MemoryFileFormat::kNpy);
  EXPECT_TRUE(absl::StrContains(Error(good), "has no factor widths"));
  EXPECT_TRUE(absl::StrContains(
      Error(Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (16, 3), }\n", 384), {4, 4}),
      "'<f8'"));
  EXPECT_TRUE(absl::StrContains(
      Error(Npy("{'descr': '<u2', 'fortran_order': True, 'shape': (16, 3), }\n", 96), {4, 4}),
      "Fortran order"));
  EXPECT_TRUE(absl::StrContains(
      Error(Npy("{'descr': '<u2', 'fortran_order': False, 'shape': (48,), }\n", 96), {4, 4}),
      "2-D"));
  EXPECT_TRUE(absl::StrContains(
      Error(Npy("{'descr': '<u2', 'fortran_order': False, 'shape': (16, 3), }\n", 90), {4, 4}),
      "holds 90"));
  EXPECT_TRUE(absl::StrContains(Error(good.substr(0, 30), {4, 4}), "truncated"));
}

TEST(MemorySpec, TheFlagsFormIsNamePathAndOptionalWidths) {
  absl::StatusOr<MemorySpec> spec = ParseMemorySpec("layer3=/data/a,b.safetensors,widths=32x32x4");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "layer3");
  EXPECT_EQ(spec->path, "/data/a,b.safetensors");
  EXPECT_EQ(spec->widths, (std::vector<uint32_t>{32, 32, 4}));
  EXPECT_TRUE(ParseMemorySpec("m=/x.npy").ok());
  EXPECT_FALSE(ParseMemorySpec("/x.npy").ok());
  EXPECT_FALSE(ParseMemorySpec("bad name=/x.npy").ok());
  EXPECT_FALSE(ParseMemorySpec("m=").ok());
  EXPECT_FALSE(ParseMemorySpec("m=/x.npy,widths=32xx").ok());
}

TEST(MemoryStore, FilesThatCannotBeReadAndRepeatedNamesStopTheStart) {
  EXPECT_TRUE(absl::StrContains(
      MemoryStore::Open({{MemorySpec{"m", "/nonexistent/m.safetensors", {}}}}).status().message(),
      "No such file"));
  EXPECT_TRUE(absl::StrContains(
      MemoryStore::Open({{MemorySpec{"m", "/tmp", {}}}}).status().message(), "not a regular file"));
  char path[] = "/tmp/pk-memory-store-XXXXXX";
  const int fd = mkstemp(path);
  const std::string file = Safetensors(kGood, 96);
  ASSERT_EQ(write(fd, file.data(), file.size()), static_cast<ssize_t>(file.size()));
  close(fd);
  const std::vector<MemorySpec> twice = {MemorySpec{"m", path, {}}, MemorySpec{"m", path, {}}};
  EXPECT_TRUE(absl::StrContains(MemoryStore::Open(twice).status().message(), "names 'm' twice"));
  absl::StatusOr<std::unique_ptr<MemoryStore>> store =
      MemoryStore::Open({{MemorySpec{"m", path, {}}}});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_NE((*store)->Find("m"), nullptr);
  // The data starts at an odd offset in this file: the table is read from an aligned copy.
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*store)->Find("m")->values().data) % 4, 0u);
  EXPECT_EQ((*store)->Find("m")->values().data[0], std::byte{1});
  std::remove(path);
}

TEST(MakeMemory, WritesFilesTheStoreOpensWithTheAskedLayout) {
  char directory[] = "/tmp/pk-make-memory-XXXXXX";
  ASSERT_NE(mkdtemp(directory), nullptr);
  const std::string safetensors = std::string(directory) + "/m.safetensors";
  const std::string npy = std::string(directory) + "/m.npy";
  ASSERT_EQ(std::system((std::string(PKSERVE_MAKE_MEMORY) + " --out=" + safetensors +
                         " --widths=8x4x2 --dim=3 --dtype=float32 >/dev/null")
                            .c_str()),
            0);
  ASSERT_EQ(std::system((std::string(PKSERVE_MAKE_MEMORY) + " --out=" + npy +
                         " --widths=16x16 --dim=5 --dtype=bf16 >/dev/null")
                            .c_str()),
            0);
  absl::StatusOr<std::unique_ptr<MemoryStore>> store =
      MemoryStore::Open({{MemorySpec{"a", safetensors, {}}, MemorySpec{"b", npy, {16, 16}}}});
  ASSERT_TRUE(store.ok()) << store.status();
  const MemoryLayout& a = (*store)->Find("a")->layout();
  EXPECT_EQ(a.factor_widths, (std::vector<uint32_t>{8, 4, 2}));
  EXPECT_EQ(a.slots, 64u);
  EXPECT_EQ(a.dim, 3u);
  EXPECT_EQ(a.dtype, pk::DType::kFloat32);
  const MemoryLayout& b = (*store)->Find("b")->layout();
  EXPECT_EQ(b.slots, 256u);
  EXPECT_EQ(b.dtype, pk::DType::kBFloat16);
  // Random values, not zeros.
  const pk::ValuesView values = (*store)->Find("a")->values();
  float first = 0;
  std::memcpy(&first, values.data, sizeof first);
  EXPECT_NE(first, 0.0f);
  EXPECT_NE(std::system((std::string(PKSERVE_MAKE_MEMORY) + " --out=" + safetensors +
                         " --widths=16 2>/dev/null")
                            .c_str()),
            0)
      << "one factor is not a product-key layout";
  std::remove(safetensors.c_str());
  std::remove(npy.c_str());
  rmdir(directory);
}

}  // namespace
}  // namespace pkserve
