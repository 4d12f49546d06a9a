// The Prometheus metrics: the registry's text format (checked line by line by a small parser of
// format 0.0.4), its counts under concurrent updates, and a real server scraped over HTTP on
// 127.0.0.1 after known traffic (unary and stream, OK and INVALID_ARGUMENT, a failing executor,
// calls their client cancelled), whose counts must match what was sent exactly. The endpoint is
// off when its address is empty, in-process and for the pkserve binary's --metrics_address flag.
#include "server/metrics.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "server/server_metrics.h"
#include "server/version.h"
#include "tests/server/pkserve_process.h"
#include "tests/server/test_support.h"

namespace pkserve {
namespace {

using testing::CheckResponse;
using testing::GatedExecutor;
using testing::LoopbackConfig;
using testing::MakeProblem;
using testing::RandomRequest;
using testing::StartServer;

// ---------------------------------------------------------------------------------------------
// A parser of the text exposition format 0.0.4, strict enough to catch what Prometheus rejects.

struct Exposition {
  // Each sample by its series, written as `name{label="value",...}` with the labels in the order
  // they came (no braces without labels).
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram, ...
  std::map<std::string, std::string> helps;  // family -> help text (unescaped)
  std::vector<std::string> errors;           // what is wrong, with the line number

  double Value(const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? std::nan("") : it->second;
  }
  bool Has(const std::string& series) const { return samples.count(series) > 0; }
};

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c, bool colon) {
  return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)) || (colon && c == ':');
}

// Reads a name at `text`, advancing it; "" when there is none.
std::string TakeName(absl::string_view& text, bool colon) {
  size_t end = 0;
  if (text.empty() || !(IsNameStart(text[0]) || (colon && text[0] == ':'))) return "";
  while (end < text.size() && IsNameChar(text[end], colon)) ++end;
  std::string name(text.substr(0, end));
  text.remove_prefix(end);
  return name;
}

bool ParseSampleValue(absl::string_view text, double* value) {
  if (text == "+Inf") {
    *value = INFINITY;
  } else if (text == "-Inf") {
    *value = -INFINITY;
  } else if (text == "NaN") {
    *value = NAN;
  } else {
    return absl::SimpleAtod(text, value) && !text.empty() && text.find(' ') == text.npos;
  }
  return true;
}

// The family a sample name belongs to: its histogram family, if it has one of its suffixes.
std::string FamilyOf(const std::string& sample_name, const Exposition& exposition) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    absl::string_view base = sample_name;
    if (absl::ConsumeSuffix(&base, suffix)) {
      auto it = exposition.types.find(std::string(base));
      if (it != exposition.types.end() && it->second == "histogram") return std::string(base);
    }
  }
  return sample_name;
}

Exposition ParseExposition(const std::string& text) {
  Exposition out;
  auto error = [&out](int line, std::string what) {
    out.errors.push_back(absl::StrCat("line ", line, ": ", what));
  };
  if (!text.empty() && text.back() != '\n') error(0, "the text does not end with a line feed");
  std::set<std::string> finished_families;  // families whose samples ended
  std::string current_family;
  // Histogram checks, per series without le: the last bucket bound and count.
  std::map<std::string, std::pair<double, double>> last_bucket;
  std::map<std::string, double> inf_bucket;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 3));
      if (parts.size() >= 3 && (parts[1] == "HELP" || parts[1] == "TYPE")) {
        const std::string& family = parts[2];
        absl::string_view family_view = family;
        if (TakeName(family_view, true) != family) error(number, "bad metric name " + family);
        const std::string rest = parts.size() == 4 ? parts[3] : "";
        if (parts[1] == "TYPE") {
          if (out.types.count(family)) error(number, "second TYPE line for " + family);
          if (finished_families.count(family) || current_family == family) {
            error(number, "TYPE of " + family + " after its samples");
          }
          static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                       "untyped"};
          if (!kTypes.count(rest)) error(number, "unknown type '" + rest + "'");
          out.types[family] = rest;
        } else {
          if (out.helps.count(family)) error(number, "second HELP line for " + family);
          std::string help;
          for (size_t i = 0; i < rest.size(); ++i) {
            if (rest[i] == '\\' && i + 1 < rest.size() &&
                (rest[i + 1] == '\\' || rest[i + 1] == 'n')) {
              help.push_back(rest[i + 1] == 'n' ? '\n' : '\\');
              ++i;
            } else if (rest[i] == '\\') {
              error(number, "bad escape in HELP");
            } else {
              help.push_back(rest[i]);
            }
          }
          out.helps[family] = help;
        }
      }
      continue;  // other comments are allowed
    }
    absl::string_view rest = line;
    const std::string name = TakeName(rest, true);
    if (name.empty()) {
      error(number, absl::StrCat("no metric name in '", line, "'"));
      continue;
    }
    std::string series = name;
    std::string series_without_le = name;
    std::string le;
    std::set<std::string> label_names;
    if (!rest.empty() && rest[0] == '{') {
      rest.remove_prefix(1);
      std::string labels, labels_without_le;
      bool ok = true;
      while (ok && !rest.empty() && rest[0] != '}') {
        const std::string label = TakeName(rest, false);
        if (label.empty() || rest.size() < 2 || rest[0] != '=' || rest[1] != '"') {
          ok = false;
          break;
        }
        rest.remove_prefix(2);
        std::string value;
        bool closed = false;
        while (!rest.empty()) {
          const char c = rest[0];
          rest.remove_prefix(1);
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\') {
            if (rest.empty() || (rest[0] != '\\' && rest[0] != '"' && rest[0] != 'n')) {
              ok = false;
              break;
            }
            value.push_back(rest[0] == 'n' ? '\n' : rest[0]);
            rest.remove_prefix(1);
          } else {
            value.push_back(c);
          }
        }
        if (!closed) ok = false;
        if (!label_names.insert(label).second) error(number, "label " + label + " twice");
        const std::string printed = absl::StrCat(label, "=\"", value, "\"");
        absl::StrAppend(&labels, labels.empty() ? "" : ",", printed);
        if (label == "le") {
          le = value;
        } else {
          absl::StrAppend(&labels_without_le, labels_without_le.empty() ? "" : ",", printed);
        }
        if (!rest.empty() && rest[0] == ',') rest.remove_prefix(1);
      }
      if (!ok || rest.empty() || rest[0] != '}') {
        error(number, absl::StrCat("bad labels in '", line, "'"));
        continue;
      }
      rest.remove_prefix(1);
      series = absl::StrCat(name, "{", labels, "}");
      if (!labels_without_le.empty()) {
        series_without_le = absl::StrCat(name, "{", labels_without_le, "}");
      }
    }
    if (rest.empty() || rest[0] != ' ') {
      error(number, absl::StrCat("no space before the value in '", line, "'"));
      continue;
    }
    rest.remove_prefix(1);
    std::vector<absl::string_view> fields = absl::StrSplit(rest, ' ');
    double value = 0;
    if (fields.size() > 2 || !ParseSampleValue(fields[0], &value)) {
      error(number, absl::StrCat("bad value in '", line, "'"));
      continue;
    }
    if (!out.samples.emplace(series, value).second) error(number, "duplicate series " + series);

    const std::string family = FamilyOf(name, out);
    if (!out.types.count(family)) error(number, "sample of " + family + " before its TYPE line");
    if (family != current_family) {
      if (finished_families.count(family)) error(number, "samples of " + family + " not together");
      if (!current_family.empty()) finished_families.insert(current_family);
      current_family = family;
    }
    const std::string type = out.types.count(family) ? out.types.at(family) : "";
    if (type == "counter" && !(value >= 0)) error(number, "negative counter " + series);
    if (type == "histogram") {
      if (name == family) error(number, "histogram sample without a suffix: " + name);
      if (name == family + "_bucket") {
        double bound = 0;
        if (le.empty() || !ParseSampleValue(le, &bound)) {
          error(number, "bucket without a valid le: " + series);
          continue;
        }
        auto it = last_bucket.find(series_without_le);
        if (it != last_bucket.end() && !(bound > it->second.first && value >= it->second.second)) {
          error(number, "buckets out of order or not cumulative at " + series);
        }
        last_bucket[series_without_le] = {bound, value};
        if (std::isinf(bound)) inf_bucket[series_without_le] = value;
      }
      if (name == family + "_count") {
        const std::string buckets = absl::StrCat(family, "_bucket", series.substr(name.size()));
        auto it = inf_bucket.find(buckets);
        if (it == inf_bucket.end()) {
          error(number, "no le=\"+Inf\" bucket before " + series);
        } else if (it->second != value) {
          error(number, absl::StrCat(series, " is ", value, ", its +Inf bucket ", it->second));
        }
      }
    }
  }
  return out;
}

std::string JoinErrors(const Exposition& exposition) {
  std::string text;
  for (const std::string& error : exposition.errors) absl::StrAppend(&text, error, "\n");
  return text;
}

// ---------------------------------------------------------------------------------------------
// The registry.

TEST(MetricsRegistry, RendersCountersGaugesAndHistogramsInTextFormat) {
  MetricsRegistry registry;
  Counter& ok = registry.AddCounter("demo_requests_total", "Requests.", {{"code", "OK"}});
  registry.AddCounter("demo_requests_total", "Requests.", {{"code", "INTERNAL"}},
                      MetricsRegistry::Listing::kOnceNonZero);
  Gauge& depth = registry.AddGauge("demo_depth", "Depth.");
  Histogram& latency =
      registry.AddHistogram("demo_latency_seconds", "Latency.", {0.001, 0.01, 0.1});
  registry.AddGaugeFunction("demo_read", "Read at scrape time.", {{"kind", "x"}},
                            [] { return 2.5; });
  ok.Increment(3);
  depth.Set(7);
  depth.Add(-2);
  latency.Observe(0.0005);
  latency.Observe(0.001);  // on a bound: counts in that bucket (le is inclusive)
  latency.Observe(0.05);
  latency.Observe(3);

  EXPECT_EQ(registry.Render(),
            "# HELP demo_requests_total Requests.\n"
            "# TYPE demo_requests_total counter\n"
            "demo_requests_total{code=\"OK\"} 3\n"
            "# HELP demo_depth Depth.\n"
            "# TYPE demo_depth gauge\n"
            "demo_depth 5\n"
            "# HELP demo_latency_seconds Latency.\n"
            "# TYPE demo_latency_seconds histogram\n"
            "demo_latency_seconds_bucket{le=\"0.001\"} 2\n"
            "demo_latency_seconds_bucket{le=\"0.01\"} 2\n"
            "demo_latency_seconds_bucket{le=\"0.1\"} 3\n"
            "demo_latency_seconds_bucket{le=\"+Inf\"} 4\n"
            "demo_latency_seconds_sum 3.0515\n"
            "demo_latency_seconds_count 4\n"
            "# HELP demo_read Read at scrape time.\n"
            "# TYPE demo_read gauge\n"
            "demo_read{kind=\"x\"} 2.5\n");
  const Exposition parsed = ParseExposition(registry.Render());
  EXPECT_TRUE(parsed.errors.empty()) << JoinErrors(parsed);
}

TEST(MetricsRegistry, ACounterListedOnceNonZeroAppearsWhenItCounts) {
  MetricsRegistry registry;
  Counter& rare = registry.AddCounter("demo_total", "Demo.", {{"code", "DATA_LOSS"}},
                                      MetricsRegistry::Listing::kOnceNonZero);
  EXPECT_EQ(registry.Render().find("demo_total{"), std::string::npos) << registry.Render();
  rare.Increment();
  EXPECT_EQ(ParseExposition(registry.Render()).Value("demo_total{code=\"DATA_LOSS\"}"), 1);
}

TEST(MetricsRegistry, EscapesLabelValuesAndHelpText) {
  MetricsRegistry registry;
  registry.AddGauge("demo_info", "Line one\nback\\slash.", {{"path", "a\"b\\c\nd"}}).Set(1);
  const std::string text = registry.Render();
  EXPECT_NE(text.find("# HELP demo_info Line one\\nback\\\\slash.\n"), std::string::npos) << text;
  EXPECT_NE(text.find("demo_info{path=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << text;
  const Exposition parsed = ParseExposition(text);
  EXPECT_TRUE(parsed.errors.empty()) << JoinErrors(parsed);
  EXPECT_EQ(parsed.helps.at("demo_info"), "Line one\nback\\slash.");
}

TEST(MetricsRegistry, ValuesArePlainDecimalsThatReadBackExactly) {
  MetricsRegistry registry;
  Gauge& gauge = registry.AddGauge("demo_value", "Demo.");
  for (const double value : {0.00005, 0.1 + 0.2, 123456789.0, 1e-12, -3.25, 1e20}) {
    gauge.Set(value);
    const Exposition parsed = ParseExposition(registry.Render());
    ASSERT_TRUE(parsed.errors.empty()) << JoinErrors(parsed);
    EXPECT_EQ(parsed.Value("demo_value"), value) << registry.Render();
  }
  gauge.Set(0.00005);
  EXPECT_NE(registry.Render().find("demo_value 0.00005\n"), std::string::npos) << registry.Render();
}

TEST(MetricsRegistry, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("demo_total", "Demo.");
  Gauge& gauge = registry.AddGauge("demo_inflight", "Demo.");
  Histogram& histogram = registry.AddHistogram("demo_rows", "Demo.", PowerOfTwoBuckets(64));
  constexpr int kThreads = 8;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        counter.Increment();
        gauge.Add(1);
        histogram.Observe(1 + (i + t) % 100);
        gauge.Add(-1);
      }
    });
  }
  std::thread scraper([&] {
    for (int i = 0; i < 50; ++i) {
      const Exposition parsed = ParseExposition(registry.Render());
      EXPECT_TRUE(parsed.errors.empty()) << JoinErrors(parsed);
    }
  });
  for (std::thread& thread : threads) thread.join();
  scraper.join();
  const Exposition parsed = ParseExposition(registry.Render());
  EXPECT_EQ(parsed.Value("demo_total"), kThreads * kEach);
  EXPECT_EQ(parsed.Value("demo_inflight"), 0);
  EXPECT_EQ(parsed.Value("demo_rows_count"), kThreads * kEach);
  EXPECT_EQ(parsed.Value("demo_rows_bucket{le=\"64\"}"), kThreads * kEach / 100 * 64);
}

TEST(MetricsRegistry, DeviceLabelIsTheDeviceLinesFirstWord) {
  EXPECT_EQ(DeviceLabel("cpu: 16 threads, avx512"), "cpu");
  EXPECT_EQ(DeviceLabel("cuda:0 NVIDIA H200, 132 SMs, 143771 MiB, 2 streams"), "cuda:0");
  EXPECT_EQ(DeviceLabel("cuda:1 NVIDIA H200 (out of service)"), "cuda:1");
}

// ---------------------------------------------------------------------------------------------
// A server, scraped over HTTP.

struct Scrape {
  int status = 0;
  std::string content_type;
  std::string body;
};

Scrape Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  Scrape scrape;
  if (httplib::Result result = client.Get(path.c_str())) {
    scrape.status = result->status;
    scrape.content_type = result->get_header_value("Content-Type");
    scrape.body = result->body;
  }
  return scrape;
}

Exposition ScrapeMetrics(const Server& server) {
  const Scrape scrape = Get(server.metrics_port(), "/metrics");
  EXPECT_EQ(scrape.status, 200) << "GET /metrics on 127.0.0.1:" << server.metrics_port();
  EXPECT_EQ(scrape.content_type, "text/plain; version=0.0.4; charset=utf-8");
  Exposition parsed = ParseExposition(scrape.body);
  EXPECT_TRUE(parsed.errors.empty()) << JoinErrors(parsed) << scrape.body;
  return parsed;
}

ServerConfig MetricsConfig() {
  ServerConfig config = LoopbackConfig();
  config.metrics_address = "127.0.0.1:0";
  return config;
}

std::string Requests(const std::string& rpc, const std::string& code) {
  return absl::StrCat("pkserve_requests_total{rpc=\"", rpc, "\",code=\"", code, "\"}");
}

TEST(MetricsEndpoint, CountsMatchTheTrafficSent) {
  std::unique_ptr<Server> server = StartServer(MetricsConfig());
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->metrics_port(), 0);
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(7);
  const pk::Problem problem = MakeProblem({64, 64}, 8, pk::DType::kFloat32);
  const pk::Problem other = MakeProblem({16, 16, 16}, 4, pk::DType::kBFloat16);

  // Before any traffic: every family is there, the OK counters at zero.
  {
    const Exposition before = ScrapeMetrics(*server);
    for (const char* family :
         {"pkserve_requests_total", "pkserve_rows_total", "pkserve_request_duration_seconds",
          "pkserve_queue_duration_seconds", "pkserve_compute_duration_seconds",
          "pkserve_batch_rows", "pkserve_queued_rows", "pkserve_inflight_requests",
          "pkserve_backend_info", "pkserve_device_failures_total", "pkserve_build_info"}) {
      EXPECT_TRUE(before.types.count(family)) << family << " is missing";
      EXPECT_TRUE(before.helps.count(family) && !before.helps.at(family).empty())
          << family << " has no HELP";
    }
    EXPECT_EQ(before.types.at("pkserve_requests_total"), "counter");
    EXPECT_EQ(before.types.at("pkserve_request_duration_seconds"), "histogram");
    EXPECT_EQ(before.types.at("pkserve_queued_rows"), "gauge");
    EXPECT_EQ(before.Value(Requests("TopK", "OK")), 0);
    EXPECT_FALSE(before.Has(Requests("TopK", "INVALID_ARGUMENT")));
  }

  // Unary: 5 OK requests of 1..5 rows, 3 INVALID_ARGUMENT (k out of range).
  uint64_t rows_ok = 0;
  for (uint32_t rows = 1; rows <= 5; ++rows) {
    const v1::TopKRequest request = RandomRequest(rows % 2 ? problem : other, rows, engine);
    grpc::ClientContext context;
    v1::TopKResponse response;
    ASSERT_TRUE(stub->TopK(&context, request, &response).ok());
    EXPECT_EQ(CheckResponse(request, response), "");
    rows_ok += rows;
  }
  for (int i = 0; i < 3; ++i) {
    v1::TopKRequest request = RandomRequest(problem, 2, engine);
    request.set_k(300);
    grpc::ClientContext context;
    v1::TopKResponse response;
    EXPECT_EQ(stub->TopK(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // A stream: 4 OK requests (2 rows each), 2 INVALID_ARGUMENT (bad scores length).
  {
    grpc::ClientContext context;
    auto stream = stub->TopKStream(&context);
    for (int i = 0; i < 6; ++i) {
      v1::TopKRequest request = RandomRequest(problem, 2, engine, absl::StrCat("s", i));
      if (i == 1 || i == 4) request.mutable_scores()->pop_back();
      ASSERT_TRUE(stream->Write(request));
    }
    stream->WritesDone();
    int results = 0, errors = 0;
    v1::TopKStreamResponse answer;
    while (stream->Read(&answer)) {
      if (answer.has_result()) {
        ++results;
      } else {
        EXPECT_EQ(answer.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
        ++errors;
      }
    }
    ASSERT_TRUE(stream->Finish().ok());
    ASSERT_EQ(results, 4);
    ASSERT_EQ(errors, 2);
    rows_ok += 4 * 2;
  }
  {
    grpc::ClientContext context;
    v1::ServerInfo info;
    ASSERT_TRUE(stub->GetServerInfo(&context, v1::ServerInfoRequest(), &info).ok());
  }

  const Exposition after = ScrapeMetrics(*server);
  EXPECT_EQ(after.Value(Requests("TopK", "OK")), 5);
  EXPECT_EQ(after.Value(Requests("TopK", "INVALID_ARGUMENT")), 3);
  EXPECT_EQ(after.Value(Requests("TopKStream", "OK")), 4);
  EXPECT_EQ(after.Value(Requests("TopKStream", "INVALID_ARGUMENT")), 2);
  EXPECT_EQ(after.Value(Requests("GetServerInfo", "OK")), 1);
  int request_series = 0;
  for (const auto& [series, value] : after.samples) {
    request_series += series.rfind("pkserve_requests_total{", 0) == 0 && value > 0;
  }
  EXPECT_EQ(request_series, 5) << "requests counted under codes that were never answered";

  EXPECT_EQ(after.Value("pkserve_rows_total"), rows_ok);
  EXPECT_EQ(after.Value("pkserve_request_duration_seconds_count"), 5 + 3 + 4 + 2 + 1);
  EXPECT_GT(after.Value("pkserve_request_duration_seconds_sum"), 0);
  // Only valid requests reach the batcher's queue, and every row ran in exactly one batch.
  EXPECT_EQ(after.Value("pkserve_queue_duration_seconds_count"), 5 + 4);
  EXPECT_EQ(after.Value("pkserve_batch_rows_sum"), rows_ok);
  const double batches = after.Value("pkserve_batch_rows_count");
  EXPECT_GE(batches, 1);
  EXPECT_LE(batches, 5 + 4);
  EXPECT_EQ(after.Value("pkserve_compute_duration_seconds_count"), batches);
  EXPECT_EQ(after.Value("pkserve_queued_rows"), 0);
  EXPECT_EQ(after.Value("pkserve_inflight_requests"), 0);
  EXPECT_EQ(after.Value("pkserve_backend_info{backend=\"cpu\",device=\"cpu\"}"), 1);
  EXPECT_EQ(after.Value("pkserve_device_failures_total{device=\"cpu\"}"), 0);
  EXPECT_EQ(after.Value(absl::StrCat("pkserve_build_info{version=\"", kVersion, "\"}")), 1);

  // The same text in-process, and nothing but /metrics over HTTP.
  EXPECT_EQ(ParseExposition(server->RenderMetrics()).samples, after.samples);
  EXPECT_EQ(Get(server->metrics_port(), "/").status, 404);
  EXPECT_EQ(Get(server->metrics_port(), "/metrics/x").status, 404);
}

// The server's request counts once they stop changing (cancelled calls are counted by gRPC's
// threads after the client has moved on), or after 5 s.
Exposition SettledMetrics(const Server& server) {
  Exposition last = ScrapeMetrics(server);
  for (int i = 0; i < 50; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    Exposition now = ScrapeMetrics(server);
    if (now.samples == last.samples) return now;
    last = std::move(now);
  }
  return last;
}

// Every pkserve_requests_total series of `rpc` with a count, by code.
std::map<std::string, double> CodesOf(const Exposition& metrics, const std::string& rpc) {
  const std::string prefix = absl::StrCat("pkserve_requests_total{rpc=\"", rpc, "\",code=\"");
  std::map<std::string, double> codes;
  for (const auto& [series, value] : metrics.samples) {
    if (series.rfind(prefix, 0) != 0 || value == 0) continue;
    codes[series.substr(prefix.size(), series.size() - prefix.size() - 2)] = value;
  }
  return codes;
}

TEST(MetricsEndpoint, CallsTheClientCancelledCountAsCancelledNotAsInvalid) {
  std::unique_ptr<Server> server = StartServer(MetricsConfig());
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = testing::Connect(*server);
  // 300 unary calls that send their headers and are cancelled before their message: the server
  // sees each call come and go without a request.
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue queue;
  for (int i = 0; i < 300; ++i) {
    grpc::ClientContext context;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        generic.PrepareCall(&context, "/pkserve.v1.SparseMemory/TopK", &queue);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    ASSERT_TRUE(queue.Next(&tag, &ok));
    if (i % 2 == 1) absl::SleepFor(absl::Milliseconds(1));  // the server has the call by now
    context.TryCancel();
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(2));
    ASSERT_TRUE(queue.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  }
  // 30 streams cancelled with a request written and not yet answered or read.
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(11);
  const pk::Problem problem = MakeProblem({64, 64}, 8, pk::DType::kFloat32);
  for (int i = 0; i < 30; ++i) {
    grpc::ClientContext context;
    auto stream = stub->TopKStream(&context);
    ASSERT_TRUE(stream->Write(RandomRequest(problem, 1, engine)));
    context.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // An empty request that does come is still judged, and counted as what it got.
  {
    grpc::ClientContext context;
    v1::TopKResponse response;
    EXPECT_EQ(stub->TopK(&context, v1::TopKRequest(), &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }

  const Exposition after = SettledMetrics(*server);
  const std::map<std::string, double> unary = CodesOf(after, "TopK");
  EXPECT_EQ(unary.count("INVALID_ARGUMENT") ? unary.at("INVALID_ARGUMENT") : 0, 1)
      << "cancelled calls were judged as requests";
  for (const auto& [code, count] : unary) {
    EXPECT_TRUE(code == "CANCELLED" || code == "INVALID_ARGUMENT") << code << " " << count;
  }
  EXPECT_GT(unary.count("CANCELLED") ? unary.at("CANCELLED") : 0, 0)
      << "no cancelled call reached the service: the test shows nothing";
  EXPECT_LE(unary.count("CANCELLED") ? unary.at("CANCELLED") : 0, 300);
  for (const auto& [code, count] : CodesOf(after, "TopKStream")) {
    EXPECT_TRUE(code == "CANCELLED" || code == "OK") << code << " " << count;
  }
}

TEST(MetricsEndpoint, QueuedRowsAndInflightRequestsFollowTheBatcher) {
  auto gate = std::make_unique<GatedExecutor>(/*max_in_flight=*/1, /*open=*/false);
  GatedExecutor* gate_view = gate.get();
  std::unique_ptr<Server> server = StartServer(MetricsConfig(), std::move(gate));
  ASSERT_NE(server, nullptr);
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(3);
  const pk::Problem problem = MakeProblem({32, 32}, 4, pk::DType::kFloat32);
  // One request computing (held by the gate), two queued behind it: 3 + 4 rows.
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (uint32_t rows : {2u, 3u, 4u}) {
    callers.emplace_back([&, request = RandomRequest(problem, rows, engine)] {
      grpc::ClientContext context;
      v1::TopKResponse response;
      ok += stub->TopK(&context, request, &response).ok();
    });
    if (rows == 2) {
      ASSERT_TRUE(gate_view->WaitForSubmitted(1, absl::Seconds(10)));
    }
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  Exposition held;
  do {
    held = ScrapeMetrics(*server);
  } while (held.Value("pkserve_queued_rows") != 7 && absl::Now() < deadline);
  EXPECT_EQ(held.Value("pkserve_queued_rows"), 7);
  EXPECT_EQ(held.Value("pkserve_inflight_requests"), 3);
  EXPECT_EQ(held.Value("pkserve_backend_info{backend=\"gated-test\",device=\"test\"}"), 1);
  gate_view->Open();
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(ok.load(), 3);
  const Exposition done = ScrapeMetrics(*server);
  EXPECT_EQ(done.Value("pkserve_queued_rows"), 0);
  EXPECT_EQ(done.Value("pkserve_inflight_requests"), 0);
  EXPECT_EQ(done.Value("pkserve_rows_total"), 9);
}

TEST(MetricsEndpoint, FailedBatchesCountAgainstTheirDevice) {
  auto gate = std::make_unique<GatedExecutor>(/*max_in_flight=*/1, /*open=*/true);
  gate->FailWith(absl::InternalError("injected device failure"));
  std::unique_ptr<Server> server = StartServer(MetricsConfig(), std::move(gate));
  ASSERT_NE(server, nullptr);
  auto stub = testing::NewStub(*server);
  std::mt19937_64 engine(5);
  const pk::Problem problem = MakeProblem({32, 32}, 4, pk::DType::kFloat32);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::TopKResponse response;
    EXPECT_EQ(stub->TopK(&context, RandomRequest(problem, 2, engine), &response).error_code(),
              grpc::StatusCode::INTERNAL);
  }
  const Exposition after = ScrapeMetrics(*server);
  EXPECT_EQ(after.Value("pkserve_device_failures_total{device=\"test\"}"), 3);
  EXPECT_EQ(after.Value(Requests("TopK", "INTERNAL")), 3);
  EXPECT_EQ(after.Value("pkserve_rows_total"), 0);
  EXPECT_EQ(after.Value("pkserve_batch_rows_count"), 3);
}

TEST(MetricsEndpoint, OffWhenTheAddressIsEmpty) {
  ServerConfig config = LoopbackConfig();
  ASSERT_EQ(config.metrics_address, "") << "in-process servers serve no metrics by default";
  std::unique_ptr<Server> server = StartServer(config);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->metrics_port(), 0);
  // The metrics are still kept.
  EXPECT_TRUE(ParseExposition(server->RenderMetrics()).types.count("pkserve_requests_total"));
}

TEST(MetricsEndpoint, ABadOrBusyAddressFailsTheStart) {
  ServerConfig config = LoopbackConfig();
  config.metrics_address = "no-port-here";
  absl::StatusOr<std::unique_ptr<Server>> bad = Server::Start(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--metrics_address"), absl::string_view::npos)
      << bad.status();

  std::unique_ptr<Server> first = StartServer(MetricsConfig());
  ASSERT_NE(first, nullptr);
  config.metrics_address = absl::StrCat("127.0.0.1:", first->metrics_port());
  absl::StatusOr<std::unique_ptr<Server>> busy = Server::Start(config);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(busy.status().message().find("could not listen on --metrics_address"),
            absl::string_view::npos)
      << busy.status();
}

TEST(MetricsEndpoint, StopsWithTheServerEvenWithAScraperConnected) {
  std::unique_ptr<Server> server = StartServer(MetricsConfig());
  ASSERT_NE(server, nullptr);
  const int port = server->metrics_port();
  // A scraper that keeps its connection open between scrapes, as Prometheus does.
  httplib::Client scraper("127.0.0.1", port);
  scraper.set_keep_alive(true);
  for (int i = 0; i < 3; ++i) {
    httplib::Result result = scraper.Get("/metrics");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 200);
  }
  const absl::Time start = absl::Now();
  server->Drain(absl::Seconds(5));
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "the endpoint held the drain up";
  EXPECT_EQ(Get(port, "/metrics").status, 0) << "the endpoint still answers after the drain";
}

TEST(MetricsEndpoint, StopsRightAfterItStarts) {
  for (int i = 0; i < 20; ++i) {
    std::unique_ptr<Server> server = StartServer(MetricsConfig());
    ASSERT_NE(server, nullptr);
  }
}

// ---------------------------------------------------------------------------------------------
// The binary's flag.

TEST(MetricsFlag, TheBinaryServesMetricsWhereTheFlagSaysAndNoneWhenItIsEmpty) {
  {
    testing::PkserveProcess on(
        PKSERVE_BINARY, {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", "--threads=1"});
    ASSERT_TRUE(on.WaitServing(absl::Seconds(20))) << on.log();
    const Scrape scrape = Get(on.metrics_port(), "/metrics");
    EXPECT_EQ(scrape.status, 200);
    const Exposition parsed = ParseExposition(scrape.body);
    EXPECT_TRUE(parsed.errors.empty()) << JoinErrors(parsed);
    EXPECT_EQ(parsed.Value(absl::StrCat("pkserve_build_info{version=\"", kVersion, "\"}")), 1);
    on.Signal(SIGTERM);
    const std::optional<int> status = on.WaitExit(absl::Seconds(20));
    ASSERT_TRUE(status.has_value()) << on.log();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << on.log();
  }
  {
    testing::PkserveProcess off(PKSERVE_BINARY,
                                {"--address=127.0.0.1:0", "--metrics_address=", "--threads=1"});
    ASSERT_TRUE(off.WaitServing(absl::Seconds(20), /*metrics=*/false)) << off.log();
    EXPECT_EQ(off.log().find("metrics on"), std::string::npos) << off.log();
    off.Signal(SIGTERM);
    EXPECT_TRUE(off.WaitExit(absl::Seconds(20)).has_value()) << off.log();
  }
  {
    testing::PkserveProcess bad(PKSERVE_BINARY,
                                {"--address=127.0.0.1:0", "--metrics_address=9090"});
    const std::optional<int> status = bad.WaitExit(absl::Seconds(20));
    ASSERT_TRUE(status.has_value()) << bad.log();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << bad.log();
    EXPECT_NE(bad.log().find("--metrics_address must be host:port"), std::string::npos)
        << bad.log();
  }
}

}  // namespace
}  // namespace pkserve
