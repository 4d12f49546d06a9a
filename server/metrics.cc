#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pkserve {
namespace {

// A sample value as Prometheus reads it: the shortest text that reads back as the same double,
// in plain decimals ("0.00005", not "5e-05") unless the magnitude makes that long.
void AppendValue(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
  } else {
    const double magnitude = std::fabs(value);
    const bool plain = magnitude == 0 || (magnitude >= 1e-9 && magnitude < 1e15);
    char buffer[64];
    const std::to_chars_result result =
        plain ? std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed)
              : std::to_chars(buffer, buffer + sizeof(buffer), value);
    out->append(buffer, result.ptr);
  }
}

// Escapes a label value (backslash, double quote, line feed) or a HELP text (backslash, line
// feed), as the text format asks.
void AppendEscaped(absl::string_view text, bool quote_too, std::string* out) {
  for (const char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && quote_too) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

// `{a="x",b="y"}` with `extra` (such as le) last; nothing when there are no labels at all.
void AppendLabels(const MetricLabels& labels, const std::pair<std::string, std::string>* extra,
                  std::string* out) {
  if (labels.empty() && extra == nullptr) return;
  out->push_back('{');
  bool first = true;
  const auto append = [&](const std::pair<std::string, std::string>& label) {
    if (!first) out->push_back(',');
    first = false;
    absl::StrAppend(out, label.first, "=\"");
    AppendEscaped(label.second, /*quote_too=*/true, out);
    out->push_back('"');
  };
  for (const auto& label : labels) append(label);
  if (extra != nullptr) append(*extra);
  out->push_back('}');
}

void AppendSample(absl::string_view name, absl::string_view suffix, const MetricLabels& labels,
                  const std::pair<std::string, std::string>* extra, absl::string_view value,
                  std::string* out) {
  absl::StrAppend(out, name, suffix);
  AppendLabels(labels, extra, out);
  absl::StrAppend(out, " ", value, "\n");
}

std::string ValueText(double value) {
  std::string text;
  AppendValue(value, &text);
  return text;
}

// A metric or label name as the data model allows: [a-zA-Z_:][a-zA-Z0-9_:]* (labels: no colon).
bool ValidName(absl::string_view name, bool colon_allowed) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(letter || (digit && i > 0) || (c == ':' && colon_allowed))) return false;
  }
  return true;
}

// Registration mistakes are programming errors, caught by the first test that starts a server.
void CheckRegistration(bool ok, absl::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "pkserve metrics: %s\n", std::string(what).c_str());
  std::abort();
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(upper_bounds_.size() + 1)) {}

void Histogram::Observe(double value) {
  // The first bucket whose bound is >= value; past the end is the +Inf bucket.
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::bucket_counts() const {
  std::vector<uint64_t> counts(upper_bounds_.size() + 1);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = counts_[i].load(std::memory_order_relaxed);
  return counts;
}

std::vector<double> DurationBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
}

std::vector<double> PowerOfTwoBuckets(uint64_t max) {
  std::vector<double> bounds;
  uint64_t bound = 1;
  while (true) {
    bounds.push_back(static_cast<double>(bound));
    if (bound >= max) break;
    bound *= 2;
  }
  return bounds;
}

MetricsRegistry::Family& MetricsRegistry::FamilyLocked(absl::string_view name,
                                                       absl::string_view help, Type type) {
  for (const auto& family : families_) {
    if (family->name != name) continue;
    CheckRegistration(family->type == type,
                      absl::StrCat("metric ", name, " registered again with another type"));
    return *family;
  }
  CheckRegistration(ValidName(name, /*colon_allowed=*/true),
                    absl::StrCat("invalid metric name '", name, "'"));
  auto family = std::make_unique<Family>();
  family->name = std::string(name);
  family->help = std::string(help);
  family->type = type;
  families_.push_back(std::move(family));
  return *families_.back();
}

void MetricsRegistry::AddSeriesLocked(Family& family, Series series) {
  for (const auto& label : series.labels) {
    CheckRegistration(ValidName(label.first, /*colon_allowed=*/false) && label.first != "le",
                      absl::StrCat("invalid label name '", label.first, "' of ", family.name));
  }
  family.series.push_back(std::move(series));
}

Counter& MetricsRegistry::AddCounter(absl::string_view name, absl::string_view help,
                                     MetricLabels labels, Listing listing) {
  absl::MutexLock lock(&mu_);
  Family& family = FamilyLocked(name, help, Type::kCounter);
  Counter& counter = counters_.emplace_back();
  Series series;
  series.labels = std::move(labels);
  series.counter = &counter;
  series.listing = listing;
  AddSeriesLocked(family, std::move(series));
  return counter;
}

Gauge& MetricsRegistry::AddGauge(absl::string_view name, absl::string_view help,
                                 MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  Family& family = FamilyLocked(name, help, Type::kGauge);
  Gauge& gauge = gauges_.emplace_back();
  Series series;
  series.labels = std::move(labels);
  series.gauge = &gauge;
  AddSeriesLocked(family, std::move(series));
  return gauge;
}

void MetricsRegistry::AddGaugeFunction(absl::string_view name, absl::string_view help,
                                       MetricLabels labels, std::function<double()> read) {
  absl::MutexLock lock(&mu_);
  Family& family = FamilyLocked(name, help, Type::kGauge);
  Series series;
  series.labels = std::move(labels);
  series.read = std::move(read);
  AddSeriesLocked(family, std::move(series));
}

Histogram& MetricsRegistry::AddHistogram(absl::string_view name, absl::string_view help,
                                         std::vector<double> upper_bounds, MetricLabels labels) {
  CheckRegistration(
      !upper_bounds.empty() && std::is_sorted(upper_bounds.begin(), upper_bounds.end()) &&
          std::adjacent_find(upper_bounds.begin(), upper_bounds.end()) == upper_bounds.end() &&
          std::isfinite(upper_bounds.back()),
      absl::StrCat("histogram ", name, ": bounds must be finite and increasing"));
  absl::MutexLock lock(&mu_);
  Family& family = FamilyLocked(name, help, Type::kHistogram);
  Histogram& histogram = histograms_.emplace_back(std::move(upper_bounds));
  Series series;
  series.labels = std::move(labels);
  series.histogram = &histogram;
  AddSeriesLocked(family, std::move(series));
  return histogram;
}

std::string MetricsRegistry::Render() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) RenderFamily(*family, &out);
  return out;
}

void MetricsRegistry::RenderFamily(const Family& family, std::string* out) {
  static constexpr absl::string_view kTypeNames[] = {"counter", "gauge", "histogram"};
  absl::StrAppend(out, "# HELP ", family.name, " ");
  AppendEscaped(family.help, /*quote_too=*/false, out);
  absl::StrAppend(out, "\n# TYPE ", family.name, " ", kTypeNames[static_cast<int>(family.type)],
                  "\n");
  for (const Series& series : family.series) {
    switch (family.type) {
      case Type::kCounter: {
        const uint64_t value = series.counter->value();
        if (value == 0 && series.listing == Listing::kOnceNonZero) break;
        AppendSample(family.name, "", series.labels, nullptr, absl::StrCat(value), out);
        break;
      }
      case Type::kGauge: {
        const double value = series.read ? series.read() : series.gauge->value();
        AppendSample(family.name, "", series.labels, nullptr, ValueText(value), out);
        break;
      }
      case Type::kHistogram: {
        const Histogram& histogram = *series.histogram;
        const std::vector<uint64_t> counts = histogram.bucket_counts();
        const std::span<const double> bounds = histogram.upper_bounds();
        uint64_t cumulative = 0;
        for (size_t i = 0; i < counts.size(); ++i) {
          cumulative += counts[i];
          const std::pair<std::string, std::string> le{
              "le", i < bounds.size() ? ValueText(bounds[i]) : "+Inf"};
          AppendSample(family.name, "_bucket", series.labels, &le, absl::StrCat(cumulative), out);
        }
        AppendSample(family.name, "_sum", series.labels, nullptr, ValueText(histogram.sum()), out);
        AppendSample(family.name, "_count", series.labels, nullptr, absl::StrCat(cumulative), out);
        break;
      }
    }
  }
}

}  // namespace pkserve
