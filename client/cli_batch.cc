#include "client/cli_batch.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/cli_common.h"
#include "client/resume_log.h"

namespace pkserve::client {
namespace {

constexpr OptionSpec kBatchOptions[] = {
    {"rows_per_request", "N", nullptr,
     "score rows per request (default: as many as the server's limits allow, up to 4 MiB of "
     "scores)"},
    {"streams", "N", "2", "streams the requests go over"},
    {"connections", "N", "1", "connections the streams are spread over"},
    {"max_in_flight", "N", "2", "requests sent and not yet answered, per stream"},
    {"quiet", nullptr, nullptr, "no progress line (it shows only on a terminal anyway)"},
    {"resume", nullptr, nullptr,
     "go on with an interrupted run: skip the rows its FILE.resume sidecar records as written"},
};

// The request size a run aims at when the server allows more: large enough that the per-request
// cost is small, small enough that streams x max_in_flight of them stay a few tens of MiB.
constexpr uint64_t kDefaultRequestBytes = 4 << 20;
// Room for the request's other fields within --max_message_bytes.
constexpr uint64_t kRequestOverheadBytes = 4096;

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop.store(true); }

// SIGINT and SIGTERM stop the run cleanly while it lasts; a second one kills the CLI as usual.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction action {};
    action.sa_handler = OnStopSignal;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

absl::StatusOr<int> PositiveOption(const ParsedOptions& options, const char* name) {
  int value = 0;
  if (!absl::SimpleAtoi(options.get(name), &value) || value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be a positive count, got '", options.get(name), "'"));
  }
  return value;
}

std::string Duration(double seconds) {
  const int64_t total = static_cast<int64_t>(seconds + 0.5);
  if (total >= 3600) return absl::StrFormat("%dh%02dm", total / 3600, total / 60 % 60);
  if (total >= 60) return absl::StrFormat("%dm%02ds", total / 60, total % 60);
  return absl::StrFormat("%ds", total);
}

}  // namespace

std::span<const OptionSpec> BatchOptionSpecs() { return kBatchOptions; }

int RunBatchJob(const ParsedOptions& options, const BatchJob& job) {
  const std::string target = options.get("target");
  absl::StatusOr<int> streams = PositiveOption(options, "streams");
  if (!streams.ok()) return UsageError(streams.status().message());
  absl::StatusOr<int> connections = PositiveOption(options, "connections");
  if (!connections.ok()) return UsageError(connections.status().message());
  absl::StatusOr<int> max_in_flight = PositiveOption(options, "max_in_flight");
  if (!max_in_flight.ok()) return UsageError(max_in_flight.status().message());
  uint64_t rows_per_request = 0;
  if (options.has("rows_per_request") &&
      (!absl::SimpleAtoi(options.get("rows_per_request"), &rows_per_request) ||
       rows_per_request == 0 || rows_per_request % job.row_group != 0)) {
    return UsageError(absl::StrCat("--rows_per_request must be a positive multiple of ",
                                   job.row_group, ", got '", options.get("rows_per_request"),
                                   "'"));
  }
  const bool resume = options.has("resume");

  std::vector<std::unique_ptr<Client>> owned_clients;
  std::vector<Client*> clients;
  for (int i = 0; i < std::min(*connections, *streams); ++i) {
    absl::StatusOr<Connection> connection = ConnectFromOptions(options, *connections > 1);
    if (!connection.ok()) return UsageError(connection.status().message());
    clients.push_back(connection->client.get());
    owned_clients.push_back(std::move(connection->client));
  }
  absl::StatusOr<v1::ServerInfo> info = clients[0]->GetServerInfo();
  if (!info.ok()) return Fail(info.status(), target);

  // The split: the server's limits bound a request; --rows_per_request picks within them.
  const v1::Limits& limits = info->limits();
  const uint64_t group_bytes = uint64_t{job.row_group} * job.row_bytes;
  if (group_bytes + kRequestOverheadBytes > limits.max_message_bytes() ||
      job.row_group > limits.max_rows_per_request()) {
    return Fail(absl::ResourceExhaustedError(absl::StrCat(
                    "a request of ", Plural(job.row_group, "row", "rows"), " is ", group_bytes,
                    " bytes, past the server's --max_message_bytes (",
                    limits.max_message_bytes(), ") or --max_rows_per_request (",
                    limits.max_rows_per_request(), ")")),
                target);
  }
  uint64_t fits = std::min<uint64_t>(limits.max_rows_per_request(),
                                     (limits.max_message_bytes() - kRequestOverheadBytes) /
                                         std::max<size_t>(job.row_bytes, 1));
  fits -= fits % job.row_group;
  if (rows_per_request == 0) {
    rows_per_request = std::min<uint64_t>(fits, kDefaultRequestBytes / std::max<size_t>(job.row_bytes, 1));
    rows_per_request = std::max<uint64_t>(rows_per_request - rows_per_request % job.row_group,
                                          job.row_group);
  } else if (rows_per_request > fits) {
    return UsageError(absl::StrCat(
        "--rows_per_request=", rows_per_request, " is past the server's limits: at most ", fits,
        " rows of ", job.row_bytes, " bytes fit its --max_rows_per_request (",
        limits.max_rows_per_request(), ") and --max_message_bytes (",
        limits.max_message_bytes(), ")"));
  }

  // The outputs and the sidecar.
  std::vector<std::string> output_paths;
  for (const BatchOutputFile& output : job.outputs) output_paths.push_back(output.path);
  const std::string log_path = job.outputs.front().path + ".resume";
  const std::string key = absl::StrCat(
      job.command, " input=", job.input_path, " bytes=", job.input->file_bytes(),
      " mtime_ns=", job.input->mtime_ns(), " ", job.parameters,
      " rows_per_request=", rows_per_request, " outputs=", absl::StrJoin(output_paths, ","));
  bool reuse = resume;
  if (resume && ::access(log_path.c_str(), F_OK) != 0) {
    std::fprintf(stderr, "pkserve-cli: --resume: no %s, so nothing to resume; starting afresh\n",
                 log_path.c_str());
    reuse = false;
  }
  // A resumed run checks the sidecar's key first (it says which parameters differ); a new one
  // makes the outputs first (an unwritable output is named, not its sidecar).
  std::vector<uint64_t> done_first_rows;
  absl::StatusOr<std::unique_ptr<ResumeLog>> log;
  if (reuse) {
    log = ResumeLog::Open(log_path, key, true, &done_first_rows);
    if (!log.ok()) return UsageError(log.status().message());
  }
  std::vector<std::unique_ptr<NpyOutput>> outputs;
  std::vector<NpyOutput*> output_pointers;
  for (const BatchOutputFile& output : job.outputs) {
    absl::StatusOr<std::unique_ptr<NpyOutput>> file =
        NpyOutput::Create(output.path, output.descr, output.shape, reuse);
    if (!file.ok()) return UsageError(file.status().message());
    output_pointers.push_back(file->get());
    outputs.push_back(*std::move(file));
  }
  if (!reuse) {
    log = ResumeLog::Open(log_path, key, false, &done_first_rows);
    if (!log.ok()) return UsageError(log.status().message());
  }
  std::sort(done_first_rows.begin(), done_first_rows.end());
  std::vector<BatchChunk> chunks;
  uint64_t rows_before = 0;
  for (uint64_t first = 0; first < job.rows; first += rows_per_request) {
    const BatchChunk chunk{first, static_cast<uint32_t>(std::min(rows_per_request, job.rows - first))};
    if (std::binary_search(done_first_rows.begin(), done_first_rows.end(), first)) {
      rows_before += chunk.rows;
    } else {
      chunks.push_back(chunk);
    }
  }

  std::unique_ptr<BatchCommand> command = job.make_command(output_pointers);
  BatchOptions batch_options;
  batch_options.streams = *streams;
  batch_options.max_in_flight = *max_in_flight;
  BatchCounters counters;
  BatchOutcome outcome;
  const bool show_progress = !options.has("quiet") && ::isatty(STDERR_FILENO) == 1;
  const absl::Time start = absl::Now();
  {
    StopSignals signals;
    g_stop.store(false);
    absl::Notification finished;
    std::thread runner([&] {
      outcome = RunBatch(*command, clients, std::move(chunks), batch_options, log->get(), g_stop,
                         counters);
      finished.Notify();
    });
    const uint64_t todo = job.rows - rows_before;
    while (!finished.WaitForNotificationWithTimeout(absl::Milliseconds(250))) {
      if (!show_progress) continue;
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
      const uint64_t done = counters.rows_done.load();
      const double rate = elapsed > 0 ? done / elapsed : 0;
      std::fprintf(stderr,
                   "\r%s: %llu/%llu rows (%.1f%%), %.0f rows/s, %.1f MB/s, elapsed %s, ETA %s  ",
                   job.command.c_str(), static_cast<unsigned long long>(rows_before + done),
                   static_cast<unsigned long long>(job.rows),
                   job.rows == 0 ? 100.0 : 100.0 * (rows_before + done) / job.rows, rate,
                   rate * job.row_bytes / 1e6, Duration(elapsed).c_str(),
                   rate > 0 ? Duration((todo - done) / rate).c_str() : "?");
      std::fflush(stderr);
    }
    runner.join();
    if (show_progress) std::fputs("\n", stderr);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const uint64_t done = counters.rows_done.load();
  const std::string written = absl::StrCat(rows_before + done, " of ", job.rows, " rows written");
  if (!outcome.status.ok() && rows_before + done == 0) {
    // Nothing to resume: no partial files or sidecar are left behind.
    for (const std::unique_ptr<NpyOutput>& output : outputs) output->Discard();
    (*log)->Remove().IgnoreError();
    Fail(outcome.status, target);
    std::fprintf(stderr, "pkserve-cli: %s stopped at rows %llu..%llu; no rows written\n",
                 job.command.c_str(), static_cast<unsigned long long>(outcome.failed.first_row),
                 static_cast<unsigned long long>(outcome.failed.first_row + outcome.failed.rows -
                                                 1));
    return kExitFailed;
  }
  if (!outcome.status.ok()) {
    Fail(outcome.status, target);
    std::fprintf(stderr,
                 "pkserve-cli: %s stopped at %s; %s; the partial outputs (*.partial) and %s are "
                 "kept: run again with --resume to go on\n",
                 job.command.c_str(),
                 absl::StrCat("rows ", outcome.failed.first_row, "..",
                              outcome.failed.first_row + outcome.failed.rows - 1)
                     .c_str(),
                 written.c_str(), log_path.c_str());
    return kExitFailed;
  }
  if (outcome.interrupted) {
    std::fprintf(stderr,
                 "pkserve-cli: %s interrupted; %s; the partial outputs (*.partial) and %s are "
                 "kept: run again with --resume to go on\n",
                 job.command.c_str(), written.c_str(), log_path.c_str());
    return kExitInterrupted;
  }
  for (const std::unique_ptr<NpyOutput>& output : outputs) {
    if (absl::Status committed = output->Commit(); !committed.ok()) {
      return UsageError(committed.message());
    }
  }
  if (absl::Status removed = (*log)->Remove(); !removed.ok()) return UsageError(removed.message());
  std::printf("%s: %s%s in %.2f s (%.0f rows/s, %.1f MB/s of scores), %s on %s over %s, %s\n",
              job.command.c_str(), Plural(job.rows, "row", "rows").c_str(),
              rows_before > 0 ? absl::StrCat(" (", rows_before, " from the earlier run)").c_str()
                              : "",
              seconds, seconds > 0 ? done / seconds : 0.0,
              seconds > 0 ? done * static_cast<double>(job.row_bytes) / 1e6 / seconds : 0.0,
              Plural(counters.requests_done.load(), "request", "requests").c_str(),
              Plural(*streams, "stream", "streams").c_str(),
              Plural(clients.size(), "connection", "connections").c_str(),
              Plural(counters.retries.load(), "retry", "retries").c_str());
  for (const std::unique_ptr<NpyOutput>& output : outputs) {
    std::printf("-> %s\n", output->path().c_str());
  }
  return kExitOk;
}

}  // namespace pkserve::client
