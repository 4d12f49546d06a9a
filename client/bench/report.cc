#include "client/bench/report.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pkserve::bench {
namespace {

double PerSecond(uint64_t count, const LevelStats& stats) {
  return stats.seconds > 0 ? static_cast<double>(count) / stats.seconds : 0.0;
}

double Micros(uint64_t nanoseconds) { return static_cast<double>(nanoseconds) / 1000.0; }

std::string Number(double value) { return absl::StrFormat("%.3f", value); }

std::string ErrorsText(const LevelStats& stats) {
  if (stats.errors.empty()) return "0";
  std::vector<std::string> parts;
  for (const auto& [code, count] : stats.errors) {
    parts.push_back(absl::StrCat(StatusCodeName(code), " ", count));
  }
  return absl::StrJoin(parts, ", ");
}

std::string BatchText(const LevelStats& stats) {
  const LogHistogram& batch = stats.batch_rows;
  if (batch.count() == 0) return "-";
  return absl::StrFormat("%.1f (%d/%d/%d/%d)", batch.mean(), batch.Percentile(0.10),
                         batch.Percentile(0.50), batch.Percentile(0.90), batch.max());
}

// The schema's figures of one run, as JSON members (no braces).
std::string FiguresJson(const LevelStats& stats) {
  const LogHistogram& latency = stats.latency_ns;
  std::vector<std::string> errors;
  for (const auto& [code, count] : stats.errors) {
    errors.push_back(absl::StrCat("\"", StatusCodeName(code), "\": ", count));
  }
  return absl::StrCat("\"requests_per_s\": ", Number(PerSecond(stats.ok, stats)),
                      ", \"rows_per_s\": ", Number(PerSecond(stats.rows, stats)),
                      ", \"mb_per_s\": ", Number(PerSecond(stats.payload_bytes, stats) / 1e6),
                      ", \"latency_us\": {\"p50\": ", Number(Micros(latency.Percentile(0.50))),
                      ", \"p90\": ", Number(Micros(latency.Percentile(0.90))),
                      ", \"p99\": ", Number(Micros(latency.Percentile(0.99))),
                      ", \"p999\": ", Number(Micros(latency.Percentile(0.999))),
                      ", \"max\": ", Number(Micros(latency.max())), "}, \"errors\": {",
                      absl::StrJoin(errors, ", "), "}");
}

std::string LevelKeyJson(const LevelSpec& spec) {
  return spec.rate > 0 ? absl::StrCat("\"rate\": ", Number(spec.rate))
                       : absl::StrCat("\"concurrency\": ", spec.concurrency);
}

std::string TableRow(const std::string& level, const std::string& server, const LevelStats& s) {
  const LogHistogram& latency = s.latency_ns;
  return absl::StrFormat(
      "| %s | %s | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |\n", level,
      server, PerSecond(s.ok, s), PerSecond(s.rows, s), PerSecond(s.payload_bytes, s) / 1e6,
      Micros(latency.Percentile(0.50)), Micros(latency.Percentile(0.90)),
      Micros(latency.Percentile(0.99)), Micros(latency.Percentile(0.999)), Micros(latency.max()),
      ErrorsText(s), BatchText(s));
}

}  // namespace

std::string LevelName(const LevelSpec& spec) {
  return spec.rate > 0 ? absl::StrFormat("rate %g/s", spec.rate)
                       : absl::StrCat("concurrency ", spec.concurrency);
}

std::string SummaryLine(const LevelStats& s) {
  const LogHistogram& latency = s.latency_ns;
  std::string line = absl::StrFormat(
      "%.0f req/s, %.0f rows/s, %.1f MB/s; latency us p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max "
      "%.1f; errors %s",
      PerSecond(s.ok, s), PerSecond(s.rows, s), PerSecond(s.payload_bytes, s) / 1e6,
      Micros(latency.Percentile(0.50)), Micros(latency.Percentile(0.90)),
      Micros(latency.Percentile(0.99)), Micros(latency.Percentile(0.999)), Micros(latency.max()),
      ErrorsText(s));
  if (s.ok > 0) {
    absl::StrAppendFormat(&line, "; bench CPU %.2f cores, %.1f us/req", s.cpu_seconds / s.seconds,
                          s.cpu_seconds * 1e6 / static_cast<double>(s.ok + s.error_count()));
  }
  if (s.server_cpu_seconds >= 0) {
    absl::StrAppendFormat(&line, "; server CPU %.2f cores", s.server_cpu_seconds / s.seconds);
  }
  if (s.batch_rows.count() > 0) {
    absl::StrAppend(&line, "; server batch rows mean (p10/p50/p90/max) ", BatchText(s));
  }
  if (s.compute_us.max() > 0) {
    absl::StrAppendFormat(&line,
                          "; server queue us p50 %d p99 %d, compute us p50 %d p99 %d, "
                          "executor busy %.0f%%",
                          s.queue_us.Percentile(0.5), s.queue_us.Percentile(0.99),
                          s.compute_us.Percentile(0.5), s.compute_us.Percentile(0.99),
                          100.0 * s.executor_seconds / s.seconds);
  }
  if (s.send_lag_ns.count() > 0) {
    absl::StrAppendFormat(&line, "; send lag us p50 %.1f p99 %.1f max %.1f",
                          Micros(s.send_lag_ns.Percentile(0.5)),
                          Micros(s.send_lag_ns.Percentile(0.99)), Micros(s.send_lag_ns.max()));
  }
  return line;
}

std::string ResultTable(const std::vector<LevelResult>& results, const std::string& target) {
  std::string table =
      "| level | server | req/s | rows/s | MB/s | p50 us | p90 us | p99 us | p99.9 us | max us | "
      "errors | batch rows mean (p10/p50/p90/max) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const LevelResult& result : results) {
    const std::string level = LevelName(result.spec);
    absl::StrAppend(&table, TableRow(level, target, result.service));
    if (!result.baseline.has_value()) continue;
    const LevelStats& echo = *result.baseline;
    absl::StrAppend(&table, TableRow(level, "echo", echo));
    const double rows_ratio =
        echo.rows > 0 ? static_cast<double>(result.service.rows) / static_cast<double>(echo.rows)
                      : 0.0;
    absl::StrAppendFormat(&table,
                          "| %s | %s / echo | | %.2fx | | %+.1f | %+.1f | %+.1f | | | | |\n", level,
                          target, rows_ratio,
                          Micros(result.service.latency_ns.Percentile(0.50)) -
                              Micros(echo.latency_ns.Percentile(0.50)),
                          Micros(result.service.latency_ns.Percentile(0.90)) -
                              Micros(echo.latency_ns.Percentile(0.90)),
                          Micros(result.service.latency_ns.Percentile(0.99)) -
                              Micros(echo.latency_ns.Percentile(0.99)));
  }
  return table;
}

std::string LevelJson(const LevelResult& result) {
  std::string json =
      absl::StrCat("{", LevelKeyJson(result.spec), ", ", FiguresJson(result.service));
  if (result.baseline.has_value()) {
    absl::StrAppend(&json, ", \"baseline\": {", LevelKeyJson(result.spec), ", ",
                    FiguresJson(*result.baseline), "}");
  }
  absl::StrAppend(&json, "}");
  return json;
}

std::string ResultsJson(const std::vector<LevelResult>& results) {
  std::vector<std::string> levels;
  for (const LevelResult& result : results) levels.push_back(LevelJson(result));
  return absl::StrCat("[\n  ", absl::StrJoin(levels, ",\n  "), "\n]\n");
}

std::string ResultJsonLines(const std::vector<LevelResult>& results, const std::string& target) {
  const auto line = [](const LevelSpec& spec, const std::string& server, const LevelStats& s) {
    std::string json =
        absl::StrCat("{\"server\": \"", server, "\", ", LevelKeyJson(spec), ", ", FiguresJson(s));
    const LogHistogram& batch = s.batch_rows;
    if (batch.count() > 0) {
      absl::StrAppend(&json, ", \"batch_rows\": {\"mean\": ", Number(batch.mean()),
                      ", \"p10\": ", batch.Percentile(0.10), ", \"p50\": ", batch.Percentile(0.50),
                      ", \"p90\": ", batch.Percentile(0.90), ", \"p99\": ", batch.Percentile(0.99),
                      ", \"max\": ", batch.max(), "}");
    }
    if (s.compute_us.max() > 0) {
      absl::StrAppend(&json, ", \"server_us\": {\"queue_p50\": ", s.queue_us.Percentile(0.5),
                      ", \"queue_p99\": ", s.queue_us.Percentile(0.99),
                      ", \"compute_p50\": ", s.compute_us.Percentile(0.5),
                      ", \"compute_p99\": ", s.compute_us.Percentile(0.99),
                      "}, \"executor_busy\": ", Number(s.executor_seconds / s.seconds));
    }
    if (s.ok > 0) {
      absl::StrAppend(&json, ", \"bench_cpu_cores\": ", Number(s.cpu_seconds / s.seconds),
                      ", \"bench_cpu_us_per_request\": ",
                      Number(s.cpu_seconds * 1e6 / static_cast<double>(s.ok + s.error_count())));
    }
    if (s.server_cpu_seconds >= 0) {
      absl::StrAppend(&json, ", \"server_cpu_cores\": ", Number(s.server_cpu_seconds / s.seconds));
    }
    if (s.send_lag_ns.count() > 0) {
      absl::StrAppend(
          &json, ", \"send_lag_us\": {\"p50\": ", Number(Micros(s.send_lag_ns.Percentile(0.50))),
          ", \"p99\": ", Number(Micros(s.send_lag_ns.Percentile(0.99))),
          ", \"max\": ", Number(Micros(s.send_lag_ns.max())), "}");
    }
    return absl::StrCat(json, "}\n");
  };
  std::string lines;
  for (const LevelResult& result : results) {
    absl::StrAppend(&lines, line(result.spec, target, result.service));
    if (result.baseline.has_value()) {
      absl::StrAppend(&lines, line(result.spec, "echo", *result.baseline));
    }
  }
  return lines;
}

}  // namespace pkserve::bench
