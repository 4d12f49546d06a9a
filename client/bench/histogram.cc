#include "client/bench/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace pkserve::bench {
namespace {

constexpr uint64_t kLargestValue = (uint64_t{1} << LogHistogram::kValueBits) - 1;

}  // namespace

// Bucket layout: a value v below 2^(kSubBucketBits + 1) is its own bucket. Above, with
// e = floor(log2 v) and shift = e - kSubBucketBits, the bucket is shift * 2^kSubBucketBits +
// (v >> shift): 2^kSubBucketBits buckets of width 2^shift per power of two, contiguous with the
// exact ones.
size_t LogHistogram::BucketOf(uint64_t value) {
  const int exponent = std::bit_width(value) - 1;
  if (exponent <= kSubBucketBits) return static_cast<size_t>(value);
  const int shift = exponent - kSubBucketBits;
  return (static_cast<size_t>(shift) << kSubBucketBits) + static_cast<size_t>(value >> shift);
}

uint64_t LogHistogram::BucketLow(size_t bucket) {
  constexpr size_t kSub = size_t{1} << kSubBucketBits;
  if (bucket < 2 * kSub) return bucket;
  const size_t shift = bucket / kSub - 1;
  return static_cast<uint64_t>(bucket - shift * kSub) << shift;
}

uint64_t LogHistogram::BucketWidth(size_t bucket) {
  constexpr size_t kSub = size_t{1} << kSubBucketBits;
  if (bucket < 2 * kSub) return 1;
  return uint64_t{1} << (bucket / kSub - 1);
}

LogHistogram::LogHistogram() : counts_(BucketOf(kLargestValue) + 1, 0) {}

void LogHistogram::Record(uint64_t value) {
  value = std::min(value, kLargestValue);
  ++counts_[BucketOf(value)];
  if (count_ == 0 || value < min_) min_ = value;
  max_ = std::max(max_, value);
  ++count_;
  sum_ += value;
}

void LogHistogram::Merge(const LogHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void LogHistogram::Clear() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = min_ = max_ = 0;
  sum_ = 0;
}

double LogHistogram::mean() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_ / static_cast<long double>(count_));
}

uint64_t LogHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (size_t bucket = 0; bucket < counts_.size(); ++bucket) {
    seen += counts_[bucket];
    if (seen >= rank) {
      const uint64_t middle = BucketLow(bucket) + BucketWidth(bucket) / 2;
      return std::clamp(middle, min_, max_);
    }
  }
  return max_;
}

}  // namespace pkserve::bench
