// A histogram of non-negative integers (latencies in nanoseconds, batch sizes in rows) with
// bounded relative error, in the manner of HdrHistogram: each power of two [2^e, 2^(e+1)) is split
// into 1024 equal buckets, so every bucket is narrower than 1/1024 of its lower edge, and values
// below 2048 have a bucket each (exact: batch sizes and row counts come out as they are). A
// percentile is reported as the middle of the bucket that holds it, clamped to the exact minimum
// and maximum: within kRelativeError (1/2048) of the exact percentile. Fixed memory (about
// 280 KiB), O(1) Record, mergeable across threads. Not thread-safe: one per thread, merged at the
// end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pkserve::bench {

class LogHistogram {
 public:
  // Relative error bound of Percentile() against the exact percentile of the recorded values.
  static constexpr double kRelativeError = 1.0 / 2048;
  // Values at or above 2^kValueBits (about 4.9 hours in nanoseconds) count as 2^kValueBits - 1.
  static constexpr int kValueBits = 44;

  LogHistogram();

  void Record(uint64_t value);
  // Adds every value recorded in `other`.
  void Merge(const LogHistogram& other);
  void Clear();

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double mean() const;

  // The value at rank ceil(q * count) (1-based, at least 1) of the sorted values, within
  // kRelativeError; q in [0, 1]. 0 when empty.
  uint64_t Percentile(double q) const;

 private:
  static constexpr int kSubBucketBits = 10;  // 1024 buckets per power of two
  static size_t BucketOf(uint64_t value);
  static uint64_t BucketLow(size_t bucket);
  static uint64_t BucketWidth(size_t bucket);

  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t min_ = 0;
  uint64_t max_ = 0;
  long double sum_ = 0;
};

}  // namespace pkserve::bench
