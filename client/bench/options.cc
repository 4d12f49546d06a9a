#include "client/bench/options.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pkserve::bench {

int BenchOptions::ResolvedThreads() const {
  if (threads > 0) return threads;
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hardware, 1, 8);
}

absl::StatusOr<std::vector<uint32_t>> ParseUintList(absl::string_view text,
                                                    absl::string_view flag) {
  std::vector<uint32_t> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    uint32_t value = 0;
    const absl::string_view entry = absl::StripAsciiWhitespace(part);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " has an empty entry: '", text, "' (write e.g. 64,64)"));
    }
    if (!absl::SimpleAtoi(entry, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " must be a comma-separated list of non-negative integers, got '", text,
          "'"));
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<std::vector<int>> ParseConcurrency(absl::string_view text) {
  absl::StatusOr<std::vector<uint32_t>> values = ParseUintList(text, "concurrency");
  if (!values.ok()) return values.status();
  std::vector<int> levels;
  for (uint32_t value : *values) {
    if (value < 1 || value > 100000) {
      return absl::InvalidArgumentError(
          absl::StrCat("--concurrency entries must be in [1, 100000], got ", value));
    }
    levels.push_back(static_cast<int>(value));
  }
  return levels;
}

absl::StatusOr<std::vector<double>> ParseRates(absl::string_view text) {
  std::vector<double> rates;
  if (text.empty()) return rates;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double rate = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &rate) || !std::isfinite(rate) ||
        rate <= 0 || rate > 1e7) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rate must be a comma-separated list of requests/s in (0, 1e7], got '", text, "'"));
    }
    rates.push_back(rate);
  }
  return rates;
}

absl::StatusOr<std::pair<uint32_t, uint32_t>> ParseRowRange(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '-');
  uint32_t low = 0;
  uint32_t high = 0;
  const bool parsed =
      (parts.size() == 1 && absl::SimpleAtoi(parts[0], &low) && (high = low, true)) ||
      (parts.size() == 2 && absl::SimpleAtoi(parts[0], &low) && absl::SimpleAtoi(parts[1], &high));
  if (!parsed || low < 1 || high < low) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rows must be a count >= 1 or a range LOW-HIGH with 1 <= LOW <= HIGH, got '", text, "'"));
  }
  return std::make_pair(low, high);
}

absl::StatusOr<pk::DType> ParseDType(absl::string_view text) {
  if (text == "f32" || text == "float32") return pk::DType::kFloat32;
  if (text == "bf16" || text == "bfloat16") return pk::DType::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype must be float32 or bfloat16 (or f32, bf16), got '", text, "'"));
}

const char* DTypeFlagName(pk::DType dtype) {
  return dtype == pk::DType::kBFloat16 ? "bfloat16" : "float32";
}

absl::StatusOr<CallMode> ParseCallMode(absl::string_view text) {
  if (text == "unary") return CallMode::kUnary;
  if (text == "stream") return CallMode::kStream;
  return absl::InvalidArgumentError(
      absl::StrCat("--mode must be unary or stream, got '", text, "'"));
}

absl::StatusOr<Arrivals> ParseArrivals(absl::string_view text) {
  if (text == "poisson") return Arrivals::kPoisson;
  if (text == "constant") return Arrivals::kConstant;
  return absl::InvalidArgumentError(
      absl::StrCat("--arrivals must be poisson or constant, got '", text, "'"));
}

absl::StatusOr<absl::Duration> ParseSeconds(double seconds, absl::string_view flag,
                                            bool allow_zero) {
  if (!std::isfinite(seconds) || seconds < 0 || (!allow_zero && seconds == 0) || seconds > 86400) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " must be in ", allow_zero ? "[0" : "(0", ", 86400] seconds, got ", seconds));
  }
  return absl::Seconds(seconds);
}

std::string DescribeWorkload(const Workload& workload) {
  const pk::Problem& problem = workload.problem;
  std::vector<uint32_t> widths(problem.widths.begin(), problem.widths.begin() + problem.factors);
  const std::string rows = workload.min_rows == workload.max_rows
                               ? absl::StrCat(workload.min_rows)
                               : absl::StrCat(workload.min_rows, "-", workload.max_rows);
  const char* mode = workload.mode == CallMode::kUnary ? "unary" : "stream";
  if (workload.lookup.has_value()) {
    const LookupWorkload& lookup = *workload.lookup;
    return absl::StrCat("lookup memory ", lookup.memory, " (", absl::StrJoin(widths, "x"),
                        " slots, dim ", lookup.dim, " ", DTypeFlagName(lookup.value_dtype),
                        ") k=", problem.k, " heads ", lookup.heads, " ",
                        DTypeFlagName(problem.dtype), lookup.return_slots ? " with slots" : "",
                        ", rows ", rows, ", ", mode);
  }
  return absl::StrCat(absl::StrJoin(widths, "x"), " k=", problem.k, " ",
                      DTypeFlagName(problem.dtype), ", rows ", rows, ", ", mode);
}

}  // namespace pkserve::bench
