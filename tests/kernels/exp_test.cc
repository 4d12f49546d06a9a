// Exp (kernels/lookup/exp.h) against long double expl: its stated relative error bound on
// [-87.3, 0], exact 0 below its cut, and its exact points. A sweep of every 61st float of the
// range plus every float of the sub-ranges where the method changes regime (the reduction's
// integer n steps at odd multiples of ln(2)/2; the cut near -87.33), and a sweep of tiny |x|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/lookup/exp.h"
#include "kernels/numeric.h"

namespace pk {
namespace {

constexpr long double kBound = 1.0L / (1 << 21);  // 2^-21

struct Sweep {
  long double worst = 0;
  float worst_x = 0;
  uint64_t count = 0;

  void Check(float x) {
    const long double exact = expl(static_cast<long double>(x));
    const long double error = fabsl((static_cast<long double>(Exp(x)) - exact) / exact);
    if (error > worst) {
      worst = error;
      worst_x = x;
    }
    ++count;
  }
  // Every float in [low, high] (low <= high <= 0), or every `stride`-th.
  void Range(float low, float high, uint32_t stride = 1) {
    // Negative floats: a larger bit pattern is a larger magnitude.
    for (uint64_t bits = FloatBits(high); bits <= FloatBits(low); bits += stride) {
      Check(BitsToFloat(static_cast<uint32_t>(bits)));
    }
  }
};

TEST(Exp, RelativeErrorWithinTwoToMinus21OverTheWholeRange) {
  Sweep sweep;
  sweep.Range(-87.3f, -0.0f, 61);
  EXPECT_GT(sweep.count, 18'000'000u);
  EXPECT_LE(sweep.worst, kBound) << "worst at x = " << sweep.worst_x;
  std::printf("max relative error %.3Le (2^%.2Lf) at %a over %llu floats\n", sweep.worst,
              log2l(sweep.worst), sweep.worst_x, static_cast<unsigned long long>(sweep.count));
}

TEST(Exp, RelativeErrorWithinBoundOnEveryFloatOfTheRegimeChanges) {
  Sweep sweep;
  const long double ln2 = 0.693147180559945309417232121458L;
  for (int n = 1; n <= 125; n += 4) {  // where the reduction's n steps from -n+1 to -n
    const float edge = static_cast<float>(-(n - 0.5L) * ln2);
    sweep.Range(edge - 0.001f, edge + 0.001f);
  }
  sweep.Range(-87.3f, -87.29f);
  sweep.Range(-1e-3f, -0.0f, 997);  // down to 0 through the tiny and subnormal inputs
  sweep.Range(-1e-3f, -0.999e-3f);
  EXPECT_GT(sweep.count, 1'000'000u);
  EXPECT_LE(sweep.worst, kBound) << "worst at x = " << sweep.worst_x;
}

TEST(Exp, IsExactlyOneAtZeroAndZeroBelowTheCut) {
  EXPECT_EQ(FloatBits(Exp(0.0f)), FloatBits(1.0f));
  EXPECT_EQ(FloatBits(Exp(-0.0f)), FloatBits(1.0f));
  // The cut: kExpLowest itself is computed (a normal float); the next float below is 0.
  EXPECT_EQ(kExpLowest, -87.33f);
  const float at_cut = Exp(kExpLowest);
  EXPECT_GE(at_cut, std::numeric_limits<float>::min());
  EXPECT_LE(fabsl((at_cut - expl(kExpLowest)) / expl(kExpLowest)), kBound);
  const float below = BitsToFloat(FloatBits(kExpLowest) + 1);
  EXPECT_LT(below, kExpLowest);
  EXPECT_EQ(FloatBits(Exp(below)), 0u);
  EXPECT_EQ(FloatBits(Exp(-100.0f)), 0u);
  EXPECT_EQ(FloatBits(Exp(-std::numeric_limits<float>::max())), 0u);
  EXPECT_EQ(FloatBits(Exp(-std::numeric_limits<float>::infinity())), 0u);
  EXPECT_EQ(FloatBits(Exp(std::numeric_limits<float>::quiet_NaN())), 0u);
}

}  // namespace
}  // namespace pk
