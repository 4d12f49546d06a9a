#include "client/bench/report.h"

#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
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
  return absl::StrCat(
      "\"requests_per_s\": ", Number(PerSecond(stats.ok, stats)),
      ", \"rows_per_s\": ", Number(PerSecond(stats.rows, stats)),
      ", \"mb_per_s\": ", Number(PerSecond(stats.payload_bytes, stats) / 1e6),
      stats.lookup ? absl::StrCat(", \"outputs_per_s\": ", Number(PerSecond(stats.outputs, stats)),
                                  ", \"value_mb_per_s\": ",
                                  Number(PerSecond(stats.table_bytes, stats) / 1e6))
                   : "",
      ", \"latency_us\": {\"p50\": ", Number(Micros(latency.Percentile(0.50))),
      ", \"p90\": ", Number(Micros(latency.Percentile(0.90))),
      ", \"p99\": ", Number(Micros(latency.Percentile(0.99))),
      ", \"p999\": ", Number(Micros(latency.Percentile(0.999))),
      ", \"max\": ", Number(Micros(latency.max())), "}, \"errors\": {", absl::StrJoin(errors, ", "),
      "}");
}

std::string LevelKeyJson(const LevelSpec& spec) {
  return spec.rate > 0 ? absl::StrCat("\"rate\": ", Number(spec.rate))
                       : absl::StrCat("\"concurrency\": ", spec.concurrency);
}

// Lookups: outputs/s and value-table MB/s, as table cells ("| 1234 | 56.7 ") after rows/s.
std::string LookupCells(const LevelStats& s) {
  return absl::StrFormat(" %.0f | %.1f |", PerSecond(s.outputs, s),
                         PerSecond(s.table_bytes, s) / 1e6);
}

std::string TableRow(const std::string& level, const std::string& server, const LevelStats& s,
                     bool lookup) {
  const LogHistogram& latency = s.latency_ns;
  return absl::StrFormat(
      "| %s | %s | %.0f | %.0f |%s %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |\n", level,
      server, PerSecond(s.ok, s), PerSecond(s.rows, s), lookup ? LookupCells(s) : "",
      PerSecond(s.payload_bytes, s) / 1e6, Micros(latency.Percentile(0.50)),
      Micros(latency.Percentile(0.90)), Micros(latency.Percentile(0.99)),
      Micros(latency.Percentile(0.999)), Micros(latency.max()), ErrorsText(s), BatchText(s));
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
  if (s.lookup) {
    absl::StrAppendFormat(&line, "; %.0f outputs/s, %.1f value MB/s", PerSecond(s.outputs, s),
                          PerSecond(s.table_bytes, s) / 1e6);
  }
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
  bool lookup = false;
  for (const LevelResult& result : results) lookup = lookup || result.service.lookup;
  std::string table =
      absl::StrCat("| level | server | req/s | rows/s |", lookup ? " outputs/s | value MB/s |" : "",
                   " MB/s | p50 us | p90 us | p99 us | p99.9 us | max us | "
                   "errors | batch rows mean (p10/p50/p90/max) |\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|---|",
                   lookup ? "---|---|" : "", "\n");
  std::string ratios;
  for (const LevelResult& result : results) {
    const std::string level = LevelName(result.spec);
    absl::StrAppend(&table, TableRow(level, target, result.service, lookup));
    if (!result.baseline.has_value()) continue;
    const LevelStats& echo = *result.baseline;
    absl::StrAppend(&table, TableRow(level, "echo", echo, lookup));
    const uint64_t ours = lookup ? result.service.outputs : result.service.rows;
    const uint64_t theirs = lookup ? echo.outputs : echo.rows;
    const double rows_ratio =
        theirs > 0 ? static_cast<double>(ours) / static_cast<double>(theirs) : 0.0;
    const auto more_us = [&result, &echo](double quantile) {
      return Micros(result.service.latency_ns.Percentile(quantile)) -
             Micros(echo.latency_ns.Percentile(quantile));
    };
    absl::StrAppendFormat(&ratios, "| %s | %.2fx | %+.1f | %+.1f | %+.1f |\n", level, rows_ratio,
                          more_us(0.50), more_us(0.90), more_us(0.99));
  }
  if (!ratios.empty()) {
    absl::StrAppendFormat(&table,
                          "\n| level | %s/s, %s / echo | p50 us, %s - echo | p90 us, %s - echo "
                          "| p99 us, %s - echo |\n|---|---|---|---|---|\n%s",
                          lookup ? "outputs" : "rows", target, target, target, target, ratios);
  }
  return table;
}

std::string WorkloadJson(const BenchOptions& options) {
  const pk::Problem& problem = options.workload.problem;
  std::vector<uint32_t> widths(problem.widths.begin(), problem.widths.begin() + problem.factors);
  std::string json = absl::StrCat(
      "{\"target\": \"", options.target, "\", \"widths\": [", absl::StrJoin(widths, ", "),
      "], \"k\": ", problem.k, ", \"dtype\": \"", DTypeFlagName(problem.dtype),
      "\", \"rows\": {\"min\": ", options.workload.min_rows,
      ", \"max\": ", options.workload.max_rows, "}, \"mode\": \"",
      options.workload.mode == CallMode::kUnary ? "unary" : "stream", "\", \"loop\": \"",
      options.open_loop() ? "open" : "closed", "\"");
  if (const std::optional<LookupWorkload>& lookup = options.workload.lookup; lookup.has_value()) {
    absl::StrAppend(&json, ", \"memory\": \"", lookup->memory, "\", \"heads\": ", lookup->heads,
                    ", \"dim\": ", lookup->dim, ", \"value_dtype\": \"",
                    DTypeFlagName(lookup->value_dtype),
                    "\", \"return_slots\": ", lookup->return_slots ? "true" : "false");
  }
  if (options.open_loop()) {
    absl::StrAppend(&json, ", \"arrivals\": \"",
                    options.arrivals == Arrivals::kPoisson ? "poisson" : "constant", "\"");
  }
  absl::StrAppend(&json, ", \"connections\": ", options.connections,
                  ", \"threads\": ", options.ResolvedThreads(),
                  ", \"warmup_s\": ", Number(absl::ToDoubleSeconds(options.warmup)),
                  ", \"duration_s\": ", Number(absl::ToDoubleSeconds(options.duration)),
                  ", \"deadline_s\": ", Number(absl::ToDoubleSeconds(options.deadline)),
                  ", \"pool\": ", options.pool_requests, ", \"seed\": ", options.seed, "}");
  return json;
}

std::vector<std::string> ResultObjects(const std::vector<LevelResult>& results,
                                       const std::string& target, const BenchOptions& options) {
  const std::string workload = WorkloadJson(options);
  const auto object = [&workload](const LevelSpec& spec, const std::string& server,
                                  const LevelStats& s) {
    std::string json = absl::StrCat("{\"server\": \"", server, "\", ", LevelKeyJson(spec),
                                    ", \"workload\": ", workload, ", ", FiguresJson(s));
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
    return absl::StrCat(json, "}");
  };
  std::vector<std::string> objects;
  for (const LevelResult& result : results) {
    objects.push_back(object(result.spec, target, result.service));
    if (result.baseline.has_value()) {
      objects.push_back(object(result.spec, "echo", *result.baseline));
    }
  }
  return objects;
}

std::string ResultsJson(const std::vector<LevelResult>& results, const std::string& target,
                        const BenchOptions& options) {
  const std::vector<std::string> objects = ResultObjects(results, target, options);
  if (objects.empty()) return "[]\n";
  return absl::StrCat("[\n  ", absl::StrJoin(objects, ",\n  "), "\n]\n");
}

std::string ResultJsonLines(const std::vector<LevelResult>& results, const std::string& target,
                            const BenchOptions& options) {
  std::string lines;
  for (const std::string& object : ResultObjects(results, target, options)) {
    absl::StrAppend(&lines, object, "\n");
  }
  return lines;
}

std::vector<std::string> ErrorFractionFailures(const std::vector<LevelResult>& results,
                                               const std::string& target, double max_fraction) {
  std::vector<std::string> failures;
  const auto check = [&failures, max_fraction](const LevelSpec& spec, const std::string& server,
                                               const LevelStats& s) {
    const uint64_t failed = s.error_count();
    const uint64_t sent = s.ok + failed;
    if (failed == 0 || static_cast<double>(failed) <= max_fraction * static_cast<double>(sent)) {
      return;
    }
    failures.push_back(absl::StrFormat(
        "%s, %s: %d of %d requests failed (%.2f%%; %s)", LevelName(spec), server, failed, sent,
        100.0 * static_cast<double>(failed) / static_cast<double>(sent), ErrorsText(s)));
  };
  for (const LevelResult& result : results) {
    check(result.spec, target, result.service);
    if (result.baseline.has_value()) check(result.spec, "echo", *result.baseline);
  }
  return failures;
}

std::vector<std::string> ErrorLines(const LevelStats& stats) {
  std::vector<std::string> lines;
  for (const auto& [code, message] : stats.first_messages) {
    std::string line = absl::StrCat("  first ", StatusCodeName(code), ": ", message);
    // gRPC's own words for a message over a size limit name no flag.
    if (absl::StrContains(message, "message larger than max")) {
      absl::StrAppend(&line,
                      " (a message over a size limit: pkserve takes requests up to its "
                      "--max_message_bytes; raise it there, or send fewer --rows)");
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string Plural(uint64_t count, absl::string_view one, absl::string_view many) {
  return absl::StrCat(count, " ", count == 1 ? one : many);
}

}  // namespace pkserve::bench
