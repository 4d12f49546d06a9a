// Every limit of SPEC.md, checked by ValidateProblem / ValidatePayload, with its message.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/problem.h"

namespace pk {
namespace {

Error Invalid(std::vector<uint32_t> widths, uint32_t k, DType dtype = DType::kFloat32) {
  auto result = ValidateProblem(widths, k, dtype);
  EXPECT_FALSE(result.ok()) << "expected an error for k=" << k;
  return result.ok() ? Error{} : result.error();
}

TEST(Validation, AcceptsTheSpecExamples) {
  for (const auto& widths : std::vector<std::vector<uint32_t>>{
           {1024, 1024}, {65535, 65535}, {256, 256, 256, 256}, {1, 1}, {1, 1, 1, 1}, {2, 65535}}) {
    auto result = ValidateProblem(widths, 256, DType::kBFloat16);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result.value().factors, static_cast<int>(widths.size()));
  }
}

TEST(Validation, FactorCount) {
  Error one = Invalid({1024}, 8);
  EXPECT_EQ(one.field, "factor_widths");
  EXPECT_EQ(one.message, "factor_widths must have between 2 and 4 entries, got 1");
  EXPECT_EQ(Invalid({2, 2, 2, 2, 2}, 8).message,
            "factor_widths must have between 2 and 4 entries, got 5");
  EXPECT_EQ(Invalid({}, 8).message, "factor_widths must have between 2 and 4 entries, got 0");
}

TEST(Validation, WidthRange) {
  Error zero = Invalid({1024, 0}, 8);
  EXPECT_EQ(zero.field, "factor_widths");
  EXPECT_EQ(zero.message, "factor_widths[1] must be in [1, 65535], got 0");
  EXPECT_EQ(Invalid({65536, 2}, 8).message, "factor_widths[0] must be in [1, 65535], got 65536");
}

TEST(Validation, SlotBits) {
  Error too_wide = Invalid({1024, 1024, 1024, 8}, 8);
  EXPECT_EQ(too_wide.field, "factor_widths");
  EXPECT_EQ(too_wide.message,
            "factor_widths need 33 slot bits (sum of bits(w - 1)), at most 32 allowed");
  EXPECT_TRUE(ValidateProblem(std::vector<uint32_t>{1024, 1024, 1024, 4}, 8, DType::kFloat32).ok());
  EXPECT_FALSE(ValidateProblem(std::vector<uint32_t>{65535, 65535, 2}, 8, DType::kFloat32).ok());
  EXPECT_TRUE(ValidateProblem(std::vector<uint32_t>{65536 - 1, 65536 / 2 + 1 - 1, 1}, 8,
                              DType::kFloat32).ok());
}

TEST(Validation, BitLength) {
  EXPECT_EQ(BitLength(0), 0);
  EXPECT_EQ(BitLength(1), 1);
  EXPECT_EQ(BitLength(1023), 10);
  EXPECT_EQ(BitLength(1024), 11);
  EXPECT_EQ(BitLength(65534), 16);
}

TEST(Validation, KRange) {
  Error zero = Invalid({16, 16}, 0);
  EXPECT_EQ(zero.field, "k");
  EXPECT_EQ(zero.message, "k must be in [1, 256], got 0");
  EXPECT_EQ(Invalid({16, 16}, 257).message, "k must be in [1, 256], got 257");
  EXPECT_EQ(Invalid({16, 16}, 300).message, "k must be in [1, 256], got 300");
  EXPECT_TRUE(ValidateProblem(std::vector<uint32_t>{16, 16}, 1, DType::kFloat32).ok());
}

TEST(Validation, DType) {
  Error bad = Invalid({16, 16}, 8, static_cast<DType>(7));
  EXPECT_EQ(bad.field, "dtype");
  EXPECT_EQ(bad.message, "dtype must be float32 or bfloat16, got code 7");
}

TEST(Validation, DerivedSizes) {
  const Problem p = ValidateProblem(std::vector<uint32_t>{3, 5, 7}, 256, DType::kBFloat16).value();
  EXPECT_EQ(p.row_width(), 15u);
  EXPECT_EQ(p.offset(2), 8u);
  EXPECT_EQ(p.kk(), 105u);  // k above the number of slots
  EXPECT_EQ(p.row_bytes(), 30u);
  EXPECT_EQ(p.out_value_bytes(), 210u);
  const Problem big =
      ValidateProblem(std::vector<uint32_t>{65535, 65535}, 64, DType::kFloat32).value();
  EXPECT_EQ(big.kk(), 64u);
}

TEST(Validation, Payload) {
  const Problem p = ValidateProblem(std::vector<uint32_t>{4, 4}, 4, DType::kBFloat16).value();
  EXPECT_TRUE(ValidatePayload(p, 3, 3 * 8 * 2).ok());
  auto short_by_one = ValidatePayload(p, 3, 3 * 8 * 2 - 1);
  ASSERT_FALSE(short_by_one.ok());
  EXPECT_EQ(short_by_one.error().field, "scores");
  EXPECT_EQ(short_by_one.error().message,
            "scores must hold rows x sum(factor_widths) x 2 = 3 x 8 x 2 = 48 bytes, got 47");
  EXPECT_FALSE(ValidatePayload(p, 3, 3 * 8 * 2 + 1).ok());
  auto no_rows = ValidatePayload(p, 0, 0);
  ASSERT_FALSE(no_rows.ok());
  EXPECT_EQ(no_rows.error().field, "rows");
  EXPECT_EQ(no_rows.error().message, "rows must be at least 1, got 0");
  auto huge = ValidatePayload(p, UINT64_MAX, 16);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("over 2^64"), std::string::npos) << huge.error().message;
}

}  // namespace
}  // namespace pk
