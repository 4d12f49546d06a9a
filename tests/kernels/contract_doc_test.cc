// docs/CONTRACT.md against the CPU implementation: every `example` block of the page (a request
// and its answer) is read from the document itself and computed, and the answer must be exactly
// the one written there (slots in order, values bit for bit, NaN as NaN). The shape limits the
// page states are checked against ValidateProblem. A document that drifts from the code fails
// here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/topk_cpu.h"
#include "kernels/numeric.h"
#include "kernels/problem.h"

namespace pk {
namespace {

struct Example {
  int line = 0;  // where its block starts in the document
  std::vector<uint32_t> widths;
  uint32_t k = 0;
  std::string dtype;
  std::vector<float> row;
  std::vector<uint32_t> slots;
  std::vector<float> values;
};

std::string ReadDocument() {
  std::ifstream in(PK_CONTRACT_DOC);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A number as the page writes it: decimal, "nan", "inf", "-inf", "-0".
float ParseNumber(const std::string& word) {
  char* end = nullptr;
  const float value = std::strtof(word.c_str(), &end);
  EXPECT_TRUE(end != word.c_str() && *end == '\0') << "not a number: " << word;
  return value;
}

// Every ```example block of the document, in order.
std::vector<Example> ParseExamples(const std::string& document) {
  std::vector<Example> examples;
  std::istringstream lines(document);
  std::string line;
  int number = 0;
  Example* open = nullptr;
  while (std::getline(lines, line)) {
    ++number;
    if (open == nullptr) {
      if (line == "```example") {
        examples.emplace_back();
        open = &examples.back();
        open->line = number;
      }
      continue;
    }
    if (line == "```") {
      open = nullptr;
      continue;
    }
    std::istringstream words(line);
    std::string key, word;
    words >> key;
    while (words >> word) {
      if (key == "widths") {
        open->widths.push_back(static_cast<uint32_t>(std::stoul(word)));
      } else if (key == "k") {
        open->k = static_cast<uint32_t>(std::stoul(word));
      } else if (key == "dtype") {
        open->dtype = word;
      } else if (key == "row") {
        open->row.push_back(ParseNumber(word));
      } else if (key == "slots") {
        open->slots.push_back(static_cast<uint32_t>(std::stoul(word)));
      } else if (key == "values") {
        open->values.push_back(ParseNumber(word));
      } else {
        ADD_FAILURE() << "line " << number << ": unknown key " << key;
      }
    }
  }
  EXPECT_EQ(open, nullptr) << "an example block is not closed";
  return examples;
}

// The bits of `x` in `dtype` (a bfloat16 must be exactly representable, as written on the page).
std::vector<std::byte> Encode(const std::vector<float>& row, DType dtype) {
  std::vector<std::byte> bytes(row.size() * ElementBytes(dtype));
  for (size_t i = 0; i < row.size(); ++i) {
    if (dtype == DType::kFloat32) {
      std::memcpy(&bytes[4 * i], &row[i], 4);
    } else {
      const uint16_t bits = FloatToBf16(row[i]);
      EXPECT_TRUE(std::isnan(row[i]) || Bf16ToFloat(bits) == row[i])
          << row[i] << " is not a bfloat16";
      std::memcpy(&bytes[2 * i], &bits, 2);
    }
  }
  return bytes;
}

float Decode(const std::byte* values, size_t i, DType dtype) {
  if (dtype == DType::kFloat32) {
    float x;
    std::memcpy(&x, values + 4 * i, 4);
    return x;
  }
  uint16_t bits;
  std::memcpy(&bits, values + 2 * i, 2);
  return Bf16ToFloat(bits);
}

TEST(ContractDocument, EveryExampleIsWhatTheCpuImplementationComputes) {
  const std::string document = ReadDocument();
  ASSERT_FALSE(document.empty()) << "cannot read " << PK_CONTRACT_DOC;
  const std::vector<Example> examples = ParseExamples(document);
  // The page's five examples: the worked one, a stage tie, NaN, -0, bfloat16 rounding.
  ASSERT_GE(examples.size(), 5u);
  cpu::Workspace workspace;
  for (const Example& example : examples) {
    SCOPED_TRACE(testing::Message() << "the example at line " << example.line);
    ASSERT_TRUE(example.dtype == "float32" || example.dtype == "bfloat16") << example.dtype;
    const DType dtype = example.dtype == "float32" ? DType::kFloat32 : DType::kBFloat16;
    Result<Problem> problem = ValidateProblem(example.widths, example.k, dtype);
    ASSERT_TRUE(problem.ok());
    ASSERT_EQ(example.row.size(), problem.value().row_width());
    const uint32_t kk = problem.value().kk();
    ASSERT_EQ(example.slots.size(), kk);
    ASSERT_EQ(example.values.size(), kk);

    const std::vector<std::byte> scores = Encode(example.row, dtype);
    std::vector<std::byte> values(kk * ElementBytes(dtype));
    std::vector<uint32_t> slots(kk);
    cpu::TopKRows(problem.value(), scores.data(), 1, values.data(), slots.data(), workspace);
    EXPECT_EQ(slots, example.slots);
    for (uint32_t i = 0; i < kk; ++i) {
      const float got = Decode(values.data(), i, dtype);
      if (std::isnan(example.values[i])) {
        EXPECT_TRUE(std::isnan(got)) << "value " << i << ": " << got;
      } else {
        EXPECT_EQ(FloatBits(got), FloatBits(example.values[i]))
            << "value " << i << ": " << got << ", the page says " << example.values[i];
      }
    }
  }
}

TEST(ContractDocument, TheShapeLimitsItStatesAreTheValidatorsLimits) {
  // "65535 x 65535 and 256 x 256 x 256 x 256 pass, 1024 x 1024 x 1024 x 8 does not".
  const std::vector<uint32_t> pass_a = {65535, 65535}, pass_b = {256, 256, 256, 256};
  const std::vector<uint32_t> too_many_bits = {1024, 1024, 1024, 8};
  EXPECT_TRUE(ValidateProblem(pass_a, 1, DType::kFloat32).ok());
  EXPECT_TRUE(ValidateProblem(pass_b, 1, DType::kFloat32).ok());
  EXPECT_FALSE(ValidateProblem(too_many_bits, 1, DType::kFloat32).ok());
  // F from 2 to 4, widths from 1 to 65535, k from 1 to 256.
  const std::vector<uint32_t> one = {64}, five = {2, 2, 2, 2, 2}, zero = {0, 4}, wide = {65536, 1};
  const std::vector<uint32_t> fine = {1, 1};
  EXPECT_FALSE(ValidateProblem(one, 1, DType::kFloat32).ok());
  EXPECT_FALSE(ValidateProblem(five, 1, DType::kFloat32).ok());
  EXPECT_FALSE(ValidateProblem(zero, 1, DType::kFloat32).ok());
  EXPECT_FALSE(ValidateProblem(wide, 1, DType::kFloat32).ok());
  EXPECT_TRUE(ValidateProblem(fine, 256, DType::kBFloat16).ok());
  EXPECT_FALSE(ValidateProblem(fine, 0, DType::kBFloat16).ok());
  EXPECT_FALSE(ValidateProblem(fine, 257, DType::kBFloat16).ok());
}

}  // namespace
}  // namespace pk
