// A small Prometheus metrics registry: counters, gauges and histograms with fixed buckets, and
// their text exposition (format 0.0.4, what Prometheus scrapes from /metrics).
//
// Cost: metrics are registered once, at set-up (that locks and allocates); the hot path holds a
// reference to a metric and updates it with relaxed atomics only, no lock and no allocation.
// Rendering reads the atomics one by one, so a scrape taken while requests run may see one
// histogram bucket ahead of another; each histogram's _count is the sum of the buckets it shows.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace pkserve {

// Label names and values of one series, in the order they are printed.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up (reset only by a restart).
class Counter {
 public:
  void Increment(uint64_t amount = 1) { value_.fetch_add(amount, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into fixed buckets, plus their sum. A bucket with upper bound `le` counts
// the observations <= le (cumulatively, as Prometheus wants them, when rendered).
class Histogram {
 public:
  // `upper_bounds`: finite and strictly increasing; the +Inf bucket is implicit.
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  std::span<const double> upper_bounds() const { return upper_bounds_; }
  // Per bucket, not cumulative: [i] counts the observations in (bound[i-1], bound[i]]; the last
  // entry counts those above every bound.
  std::vector<uint64_t> bucket_counts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // upper_bounds_.size() + 1
  std::atomic<double> sum_{0};
};

// Bucket bounds for durations in seconds: 50 us to 10 s, about three a decade.
std::vector<double> DurationBuckets();
// 1, 2, 4, ... up to the first power of two >= `max` (at least 1).
std::vector<double> PowerOfTwoBuckets(uint64_t max);

// The metrics of one process (or of one server in it), by family. A family is one metric name
// with its help text and type; its series differ in their label values.
class MetricsRegistry {
 public:
  enum class Listing {
    kAlways,       // every series, zero or not
    kOnceNonZero,  // a counter's series appear once they count something (for families with
                   // many possible label values, such as status codes)
  };

  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each adds one series to the family `name` (created by the first call, with `help`; later
  // calls must give the same type) and returns it, owned by the registry. `name` and the label
  // names must be valid Prometheus names; a series' label values must differ from the family's
  // other series. Set-up only: these lock and allocate.
  Counter& AddCounter(absl::string_view name, absl::string_view help, MetricLabels labels = {},
                      Listing listing = Listing::kAlways);
  Gauge& AddGauge(absl::string_view name, absl::string_view help, MetricLabels labels = {});
  // A gauge whose value `read` gives at each scrape (called from the scraping thread; it must
  // stay callable while the registry renders).
  void AddGaugeFunction(absl::string_view name, absl::string_view help, MetricLabels labels,
                        std::function<double()> read);
  Histogram& AddHistogram(absl::string_view name, absl::string_view help,
                          std::vector<double> upper_bounds, MetricLabels labels = {});

  // Every family in registration order, as Prometheus text format 0.0.4: "# HELP" and "# TYPE"
  // lines, then one line per sample.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    MetricLabels labels;
    Counter* counter = nullptr;
    Gauge* gauge = nullptr;
    std::function<double()> read;
    Histogram* histogram = nullptr;
    Listing listing = Listing::kAlways;
  };
  struct Family {
    std::string name;
    std::string help;
    Type type = Type::kCounter;
    std::vector<Series> series;
  };

  Family& FamilyLocked(absl::string_view name, absl::string_view help, Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddSeriesLocked(Family& family, Series series) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void RenderFamily(const Family& family, std::string* out);

  mutable absl::Mutex mu_;  // guards the lists, not the values
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
  // Stable addresses for the metrics handed out.
  std::deque<Counter> counters_ ABSL_GUARDED_BY(mu_);
  std::deque<Gauge> gauges_ ABSL_GUARDED_BY(mu_);
  std::deque<Histogram> histograms_ ABSL_GUARDED_BY(mu_);
};

// The content type of Render()'s output.
inline constexpr char kPrometheusTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace pkserve
