// The 120 golden cases through the CPU implementation, whole and split into odd row groups, and
// the golden reader's handling of a damaged file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "kernels/cpu/parallel_topk.h"
#include "kernels/golden/golden.h"

namespace pk {
namespace {

TEST(Golden, EveryCaseBitExactWholeAndInRowGroups) {
  auto cases = golden::ReadFile(PK_GOLDEN_FILE);
  ASSERT_TRUE(cases.ok()) << cases.error().message;
  ASSERT_EQ(cases.value().size(), 120u);
  cpu::ParallelTopK runner(2, 1);
  for (const golden::Case& c : cases.value()) {
    const uint32_t kk = c.problem.kk();
    std::vector<std::byte> values(c.values.size(), std::byte{0x77});
    std::vector<uint32_t> slots(c.slots.size(), 0xffffffffu);
    runner.Run(c.problem, c.scores.data(), c.rows, values.data(), slots.data());
    auto difference = golden::Compare(c, values, slots);
    EXPECT_FALSE(difference.has_value()) << c.name << ": " << *difference;
    // Groups of 3 rows, each its own call.
    std::fill(slots.begin(), slots.end(), 0xffffffffu);
    for (uint32_t first = 0; first < c.rows; first += 3) {
      const uint32_t rows = std::min<uint32_t>(3, c.rows - first);
      runner.Run(c.problem, c.scores.data() + first * c.problem.row_bytes(), rows,
                 values.data() + first * c.problem.out_value_bytes(), slots.data() + first * kk);
    }
    difference = golden::Compare(c, values, slots);
    EXPECT_FALSE(difference.has_value()) << c.name << " in groups of 3: " << *difference;
  }
}

TEST(Golden, CompareReportsTheFirstDifference) {
  auto cases = golden::ReadFile(PK_GOLDEN_FILE);
  ASSERT_TRUE(cases.ok());
  const golden::Case& c = *std::find_if(cases.value().begin(), cases.value().end(),
                                        [](const golden::Case& each) { return each.rows >= 2 && each.problem.kk() >= 2; });
  std::vector<uint32_t> slots = c.slots;
  slots[c.problem.kk() + 1] += 1;
  auto difference = golden::Compare(c, c.values, slots);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(difference->rfind("row 1, position 1: expected slot ", 0), 0u) << *difference;
}

TEST(Golden, TruncatedAndForeignFilesAreErrors) {
  std::ifstream in(PK_GOLDEN_FILE, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = ::testing::TempDir() + "/truncated_golden.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  auto truncated = golden::ReadFile(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message.find("truncated"), std::string::npos)
      << truncated.error().message;
  {
    std::ofstream out(path, std::ios::binary);
    out << "NOPE this is not a golden file";
  }
  auto foreign = golden::ReadFile(path);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message.find("not a golden file"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_FALSE(golden::ReadFile(path).ok());
}

}  // namespace
}  // namespace pk
