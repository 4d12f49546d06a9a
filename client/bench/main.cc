// pkserve-bench: load generator for pkserve. Closed-loop concurrency sweeps or open-loop request
// rates, unary or stream calls, an echo baseline (a process of its own, or in-process with
// --baseline_in_process) measured level by level beside the target, sampled answers checked bit
// for bit against the CPU implementation. With --memory=NAME the load is lookups of that hosted
// memory (Lookup / LookupStream), its shape read from the target's GetServerInfo, answers verified
// against the CPU lookup on the table read from --memory_file.
//
//   pkserve-bench --target=127.0.0.1:50051 --widths=1024,1024 --k=64 --dtype=bfloat16 --rows=1
//       --concurrency=1,4,16,64 --warmup=2 --duration=10 --baseline=echo --verify=100
//       --json=out.json
//   pkserve-bench --memory=m --k=32 --heads=4 --rows=256 --baseline=echo --verify=20
//       --memory_file=m.safetensors
//
// Exit status: 0 when every level ran, every verified answer matched and no level's failed
// requests passed --max_error_fraction (also 0 after --help); 1 when a level could not run, no
// request of a level succeeded, an answer differed, or a level failed more requests than that;
// 2 on bad usage (server/flag_usage.h). The last line of the output gives the verdict.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/bench/channels.h"
#include "client/bench/echo_process.h"
#include "client/bench/echo_server.h"
#include "client/bench/load.h"
#include "client/bench/options.h"
#include "client/bench/report.h"
#include "client/bench/request_pool.h"
#include "client/bench/verify.h"
#include "pkserve/v1/pkserve.grpc.pb.h"
#include "server/flag_usage.h"
#include "server/large_messages.h"
#include "server/memory_store.h"
#include "server/version.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "pkserve address; several, comma-separated (a:port,b:port), are spread round_robin");
ABSL_FLAG(bool, tls, false, "use TLS (implied by the --tls_* flags); the system's CA roots");
ABSL_FLAG(std::string, tls_ca, "", "CA bundle (PEM) to verify the server's certificate against");
ABSL_FLAG(std::string, tls_cert, "", "client certificate chain (PEM), for mutual TLS");
ABSL_FLAG(std::string, tls_key, "", "private key (PEM) of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name the server's certificate must carry, when not the host of --target");
ABSL_FLAG(std::string, widths, "1024,1024",
          "factor widths of every request (with --memory: the memory's, from the server)");
ABSL_FLAG(std::string, memory, "",
          "lookup load: Lookup (or LookupStream) calls to this hosted memory instead of TopK; its "
          "widths, dim and dtype come from the target's GetServerInfo; --rows counts score rows, "
          "a multiple of --heads");
ABSL_FLAG(uint32_t, heads, 1, "with --memory: score rows per output, 1..64");
ABSL_FLAG(bool, return_slots, false,
          "with --memory: ask for each row's slots and weights too (and verify them)");
ABSL_FLAG(std::string, memory_file, "",
          "with --memory and --verify: the file the target loaded the memory from (safetensors "
          "or .npy; widths from the server), to compute the reference answers");
ABSL_FLAG(std::string, echo_memory, "",
          "with --serve_echo: the memories its lookups answer as, NAME:W0xW1:DIM:DTYPE, "
          "comma-separated (pkserve-bench passes them to the echo process it starts)");
ABSL_FLAG(uint32_t, k, 64, "slots wanted per row");
ABSL_FLAG(std::string, dtype, "bfloat16",
          "element type: float32 or bfloat16 (f32 and bf16 are taken too)");
ABSL_FLAG(std::string, rows, "1", "rows per request: a count, or a range LOW-HIGH drawn uniformly");
ABSL_FLAG(std::string, mode, "unary",
          "unary (TopK calls) or stream (TopKStream: one stream per closed-loop slot; open loop "
          "spreads sends over max(connections, threads) streams)");
ABSL_FLAG(std::string, concurrency, "1,4,16,64",
          "closed loop: requests kept in flight, one level per entry");
ABSL_FLAG(std::string, rate, "",
          "open loop: requests/s, one level per entry (replaces --concurrency); latency counts "
          "from the scheduled send time");
ABSL_FLAG(std::string, arrivals, "poisson", "open loop: poisson or constant gaps between sends");
ABSL_FLAG(double, warmup, 2, "seconds of warm-up before each level's measured window");
ABSL_FLAG(double, duration, 10, "seconds measured per level");
ABSL_FLAG(int32_t, connections, 1,
          "separate channels (HTTP/2 connections) per server; throughput runs need several");
ABSL_FLAG(int32_t, threads, 0, "completion-queue threads; 0 = min(hardware threads, 8)");
ABSL_FLAG(double, deadline_s, 10, "deadline of each unary call, seconds");
ABSL_FLAG(int32_t, max_outstanding, 10000,
          "open loop: requests in flight at most; later sends wait (and count the wait)");
ABSL_FLAG(int32_t, pool, 64,
          "distinct random requests generated up front and reused (at most 64 MiB of scores)");
ABSL_FLAG(int32_t, verify, 0,
          "answers per level, sampled uniformly, checked bit for bit against the CPU "
          "implementation; any difference fails the run");
ABSL_FLAG(std::string, baseline, "none",
          "none, or echo: also measure, level by level, a gRPC echo server that answers with "
          "responses of pkserve's size (pkserve-bench --serve_echo, started as a process of its "
          "own and ended with the run)");
ABSL_FLAG(bool, baseline_in_process, false,
          "with --baseline=echo: serve the echo from this process instead (cheaper than a "
          "separate server, so a lower baseline)");
ABSL_FLAG(std::string, json, "", "write every level's figures to this file (JSON)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the request pool and of the arrival times");
ABSL_FLAG(std::string, serve_echo, "",
          "instead of measuring: serve the echo baseline at this address (host:port; port 0 picks "
          "one) until SIGTERM or SIGINT, to measure it in a process of its own with --target");
ABSL_FLAG(double, max_error_fraction, 0.01,
          "the run fails (exit 1) when a level's failed requests pass this fraction of those sent "
          "in its window; 0 tolerates none, 1 any");
ABSL_FLAG(int32_t, server_pid, 0,
          "pid of the target server when it runs on this host: its CPU use is reported per level");
ABSL_DECLARE_FLAG(uint32_t, inject_answer_pause_us);  // client/bench/testing_flags.cc

namespace pkserve::bench {
namespace {

constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

absl::StatusOr<BenchOptions> OptionsFromFlags() {
  BenchOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  absl::StatusOr<std::vector<uint32_t>> widths =
      ParseUintList(absl::GetFlag(FLAGS_widths), "widths");
  if (!widths.ok()) return widths.status();
  absl::StatusOr<pk::DType> dtype = ParseDType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  // Lookups: the widths are checked again once the server has said the memory's.
  pk::Result<pk::Problem> problem = pk::ValidateProblem(*widths, absl::GetFlag(FLAGS_k), *dtype);
  if (!problem.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--widths/--k: ", problem.error().message));
  }
  options.workload.problem = problem.value();
  absl::StatusOr<std::pair<uint32_t, uint32_t>> rows = ParseRowRange(absl::GetFlag(FLAGS_rows));
  if (!rows.ok()) return rows.status();
  options.workload.min_rows = rows->first;
  options.workload.max_rows = rows->second;
  absl::StatusOr<CallMode> mode = ParseCallMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return mode.status();
  options.workload.mode = *mode;
  if (const std::string memory = absl::GetFlag(FLAGS_memory); !memory.empty()) {
    LookupWorkload lookup;
    lookup.memory = memory;
    lookup.heads = absl::GetFlag(FLAGS_heads);
    lookup.return_slots = absl::GetFlag(FLAGS_return_slots);
    if (lookup.heads < 1 || lookup.heads > pk::kMaxHeads) {
      return absl::InvalidArgumentError(
          absl::StrCat("--heads must be in [1, ", pk::kMaxHeads, "], got ", lookup.heads));
    }
    if (options.workload.min_rows % lookup.heads != 0 ||
        options.workload.max_rows % lookup.heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--rows must be a multiple of --heads (",
                                                     lookup.heads, ") at both ends, got ",
                                                     absl::GetFlag(FLAGS_rows)));
    }
    options.workload.lookup = lookup;
  } else if (!absl::GetFlag(FLAGS_memory_file).empty()) {
    return absl::InvalidArgumentError("--memory_file needs --memory");
  }
  absl::StatusOr<std::vector<int>> concurrency = ParseConcurrency(absl::GetFlag(FLAGS_concurrency));
  if (!concurrency.ok()) return concurrency.status();
  options.concurrency = *concurrency;
  absl::StatusOr<std::vector<double>> rates = ParseRates(absl::GetFlag(FLAGS_rate));
  if (!rates.ok()) return rates.status();
  options.rates = *rates;
  absl::StatusOr<Arrivals> arrivals = ParseArrivals(absl::GetFlag(FLAGS_arrivals));
  if (!arrivals.ok()) return arrivals.status();
  options.arrivals = *arrivals;
  absl::StatusOr<absl::Duration> warmup = ParseSeconds(absl::GetFlag(FLAGS_warmup), "warmup", true);
  if (!warmup.ok()) return warmup.status();
  options.warmup = *warmup;
  absl::StatusOr<absl::Duration> duration =
      ParseSeconds(absl::GetFlag(FLAGS_duration), "duration", false);
  if (!duration.ok()) return duration.status();
  options.duration = *duration;
  absl::StatusOr<absl::Duration> deadline =
      ParseSeconds(absl::GetFlag(FLAGS_deadline_s), "deadline_s", false);
  if (!deadline.ok()) return deadline.status();
  options.deadline = *deadline;

  const auto in_range = [](int32_t value, int32_t low, int32_t high,
                           const char* flag) -> absl::Status {
    if (value >= low && value <= high) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be in [", low, ", ", high, "], got ", value));
  };
  options.connections = absl::GetFlag(FLAGS_connections);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.max_outstanding = absl::GetFlag(FLAGS_max_outstanding);
  options.pool_requests = absl::GetFlag(FLAGS_pool);
  options.verify = absl::GetFlag(FLAGS_verify);
  options.memory_file = absl::GetFlag(FLAGS_memory_file);
  if (options.workload.lookup.has_value() && options.verify > 0 && options.memory_file.empty()) {
    return absl::InvalidArgumentError(
        "--verify with --memory needs --memory_file: the file the server loaded the memory from, "
        "to compute the reference answers");
  }
  for (absl::Status status : {in_range(options.connections, 1, 256, "connections"),
                              in_range(options.threads, 0, 256, "threads"),
                              in_range(options.max_outstanding, 1, 1000000, "max_outstanding"),
                              in_range(options.pool_requests, 1, 100000, "pool"),
                              in_range(options.verify, 0, 1000000, "verify")}) {
    if (!status.ok()) return status;
  }
  const std::string baseline = absl::GetFlag(FLAGS_baseline);
  if (baseline != "none" && baseline != "echo") {
    return absl::InvalidArgumentError(
        absl::StrCat("--baseline must be none or echo, got '", baseline, "'"));
  }
  options.baseline_echo = baseline == "echo";
  options.json_path = absl::GetFlag(FLAGS_json);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.answer_pause = absl::Microseconds(absl::GetFlag(FLAGS_inject_answer_pause_us));
  options.server_pid = absl::GetFlag(FLAGS_server_pid);
  options.max_error_fraction = absl::GetFlag(FLAGS_max_error_fraction);
  if (!(options.max_error_fraction >= 0 && options.max_error_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_error_fraction must be in [0, 1], got ", options.max_error_fraction));
  }
  return options;
}

// What the target says about itself (GetServerInfo), for the header; "" when it does not answer.
std::string DescribeServer(const v1::ServerInfo& info) {
  if (info.version().empty()) return "";
  if (info.backend() == "echo") return "the echo baseline (pkserve-bench --serve_echo): no top-k";
  return absl::StrCat("pkserve ", info.version(), ", backend ", info.backend(), " (",
                      absl::StrJoin(info.devices(), "; "), "), max_batch_rows ",
                      info.batching().max_batch_rows(), ", max_queue_delay_us ",
                      info.batching().max_queue_delay_us());
}

pk::DType FromWire(v1::DType dtype) {
  return dtype == v1::DTYPE_BFLOAT16 ? pk::DType::kBFloat16 : pk::DType::kFloat32;
}

// Lookups: the memory --memory names among those the target holds; its widths, dim and dtype
// complete `workload`. NOT_FOUND naming the memories held when it is not there.
absl::StatusOr<v1::MemoryInfo> ResolveMemory(const v1::ServerInfo& info, const std::string& target,
                                             Workload& workload) {
  LookupWorkload& lookup = *workload.lookup;
  std::vector<std::string> names;
  for (const v1::MemoryInfo& memory : info.memories()) {
    names.push_back(memory.name());
    if (memory.name() != lookup.memory) continue;
    if (memory.dtype() != v1::DTYPE_BFLOAT16 && memory.dtype() != v1::DTYPE_FLOAT32) {
      return absl::FailedPreconditionError(absl::StrCat("memory '", memory.name(), "' on ", target,
                                                        " has dtype ", memory.dtype(),
                                                        ", which pkserve-bench does not know"));
    }
    const std::vector<uint32_t> widths(memory.factor_widths().begin(),
                                       memory.factor_widths().end());
    pk::Result<pk::Problem> problem =
        pk::ValidateProblem(widths, workload.problem.k, workload.problem.dtype);
    if (!problem.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--k against memory '", memory.name(), "': ", problem.error().message));
    }
    workload.problem = problem.value();
    lookup.dim = memory.dim();
    lookup.value_dtype = FromWire(memory.dtype());
    return memory;
  }
  return absl::NotFoundError(
      absl::StrCat("--memory=", lookup.memory, ": ", target, " holds no such memory; it holds ",
                   names.empty() ? "none" : absl::StrCat("'", absl::StrJoin(names, "', '"), "'")));
}

// --memory_file for --verify: the table, read with the server's loader and checked against the
// shape the server reports (widths from the server, so a .npy file works too).
absl::StatusOr<std::unique_ptr<HostedMemory>> OpenReferenceTable(const std::string& path,
                                                                 const v1::MemoryInfo& memory) {
  MemorySpec spec;
  spec.name = memory.name();
  spec.path = path;
  spec.widths.assign(memory.factor_widths().begin(), memory.factor_widths().end());
  absl::StatusOr<std::unique_ptr<HostedMemory>> opened = HostedMemory::Open(spec);
  if (!opened.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--memory_file: ", opened.status().message()));
  }
  const MemoryLayout& layout = (*opened)->layout();
  if (layout.slots != memory.slots() || layout.dim != memory.dim() ||
      layout.dtype != FromWire(memory.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory_file=", path, " holds ", layout.slots, " slots x dim ", layout.dim,
                     " ", DTypeFlagName(layout.dtype), ", but memory '", memory.name(),
                     "' on the server is ", memory.slots(), " slots x dim ", memory.dim(), " ",
                     DTypeFlagName(FromWire(memory.dtype())), ": not the file it loaded"));
  }
  return opened;
}

// Runs one level, with a progress line on a terminal.
absl::StatusOr<LevelStats> RunLevel(LoadGenerator& generator, const LevelSpec& spec,
                                    const std::string& server, bool tty) {
  const std::string label = absl::StrCat(LevelName(spec), ", ", server);
  auto on_progress = [&label, tty](const Progress& progress) {
    if (!tty) return;
    std::printf("\r\033[K[%s] %s %.1f/%.1f s, answered %llu, failed %llu, in flight %lld",
                label.c_str(), progress.phase, progress.elapsed_s, progress.total_s,
                static_cast<unsigned long long>(progress.answered),
                static_cast<unsigned long long>(progress.failed),
                static_cast<long long>(progress.in_flight));
    std::fflush(stdout);
  };
  absl::StatusOr<LevelStats> stats = generator.Run(spec, on_progress);
  if (tty) std::printf("\r\033[K");
  if (stats.ok()) {
    std::printf("%-9s %-16s %s\n", server.c_str(), LevelName(spec).c_str(),
                SummaryLine(*stats).c_str());
    for (const std::string& line : ErrorLines(*stats)) std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
  return stats;
}

// --serve_echo: the echo baseline as a server of its own, until SIGTERM or SIGINT.
int ServeEcho(const std::string& address) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before gRPC starts threads
  EchoOptions echo_options;
  echo_options.address = address;
  if (const std::string memories = absl::GetFlag(FLAGS_echo_memory); !memories.empty()) {
    for (absl::string_view entry : absl::StrSplit(memories, ',')) {
      absl::StatusOr<v1::MemoryInfo> memory = ParseEchoMemory(entry);
      if (!memory.ok()) {
        std::fprintf(stderr, "pkserve-bench: %s\n", std::string(memory.status().message()).c_str());
        return kUsageError;
      }
      echo_options.memories.push_back(*std::move(memory));
    }
  }
  absl::StatusOr<std::unique_ptr<EchoServer>> echo = EchoServer::Start(echo_options);
  if (!echo.ok()) {
    std::fprintf(stderr, "pkserve-bench: %s\n", std::string(echo.status().message()).c_str());
    return 1;
  }
  std::printf("echo baseline listening on %s\n", (*echo)->address().c_str());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  return 0;
}

int Main() {
  if (const std::string address = absl::GetFlag(FLAGS_serve_echo); !address.empty()) {
    return ServeEcho(address);
  }
  absl::StatusOr<BenchOptions> parsed = OptionsFromFlags();
  if (!parsed.ok()) {
    std::fprintf(stderr, "pkserve-bench: %s\n", std::string(parsed.status().message()).c_str());
    return kUsageError;
  }
  BenchOptions options = *std::move(parsed);  // lookups: completed from the server's info
  absl::StatusOr<TargetSpec> target = ParseTarget(options.target);
  if (!target.ok()) {
    std::fprintf(stderr, "pkserve-bench: %s\n", std::string(target.status().message()).c_str());
    return kUsageError;
  }
  const bool tty = isatty(STDOUT_FILENO) == 1;
  const bool lookup = options.workload.lookup.has_value();
  // The echo baseline's own process: for TopK load it starts first, before this process has
  // gRPC's threads; for lookups once the server has said the memory's shape, which the echo
  // answers with (EchoProcess::Start only execs in the child, so that is safe too).
  std::unique_ptr<EchoProcess> echo_process;
  const auto start_echo_process = [&echo_process](const std::vector<std::string>& args) {
    absl::StatusOr<std::string> self = SelfExecutable();
    absl::StatusOr<std::unique_ptr<EchoProcess>> started =
        self.ok() ? EchoProcess::Start(*self, kConnectTimeout, args)
                  : absl::StatusOr<std::unique_ptr<EchoProcess>>(self.status());
    if (!started.ok()) {
      std::fprintf(stderr, "pkserve-bench: %s\n", std::string(started.status().message()).c_str());
      return false;
    }
    echo_process = *std::move(started);
    return true;
  };
  const bool echo_in_own_process =
      options.baseline_echo && !absl::GetFlag(FLAGS_baseline_in_process);
  if (echo_in_own_process && !lookup && !start_echo_process({})) return 1;

  client::TlsOptions tls;
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  tls.key_file = absl::GetFlag(FLAGS_tls_key);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  tls.enabled = absl::GetFlag(FLAGS_tls) || !tls.ca_file.empty() || !tls.cert_file.empty() ||
                !tls.key_file.empty() || !tls.server_name.empty();
  absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> made =
      MakeChannels(*target, options.connections, tls);
  if (!made.ok()) {
    std::fprintf(stderr, "pkserve-bench: %s\n", std::string(made.status().message()).c_str());
    return kUsageError;
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels = *std::move(made);
  if (absl::Status connected = WaitForChannels(channels, target->target, kConnectTimeout);
      !connected.ok()) {
    std::fprintf(stderr, "pkserve-bench: %s\n", std::string(connected.message()).c_str());
    return 1;
  }

  v1::ServerInfo info;
  grpc::Status info_status;
  {
    std::unique_ptr<v1::SparseMemory::Stub> stub = v1::SparseMemory::NewStub(channels.front());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    info_status = stub->GetServerInfo(&context, v1::ServerInfoRequest(), &info);
    if (!info_status.ok()) info.Clear();
  }
  v1::MemoryInfo memory;
  std::unique_ptr<HostedMemory> reference_table;  // lookups with --verify
  if (lookup) {
    if (!info_status.ok()) {
      std::fprintf(stderr,
                   "pkserve-bench: --memory needs the target's GetServerInfo, which failed: %s\n",
                   info_status.error_message().c_str());
      return 1;
    }
    absl::StatusOr<v1::MemoryInfo> resolved = ResolveMemory(info, options.target, options.workload);
    if (!resolved.ok()) {
      std::fprintf(stderr, "pkserve-bench: %s\n", std::string(resolved.status().message()).c_str());
      return 1;
    }
    memory = *std::move(resolved);
    if (options.verify > 0) {
      absl::StatusOr<std::unique_ptr<HostedMemory>> opened =
          OpenReferenceTable(options.memory_file, memory);
      if (!opened.ok()) {
        std::fprintf(stderr, "pkserve-bench: %s\n", std::string(opened.status().message()).c_str());
        return 1;
      }
      reference_table = *std::move(opened);
    }
    if (echo_in_own_process &&
        !start_echo_process({absl::StrCat("--echo_memory=", EchoMemoryFlag(memory))})) {
      return 1;
    }
  }

  const RequestPool pool(options.workload, options.pool_requests, options.pool_bytes, options.seed);
  std::unique_ptr<EchoServer> echo;
  BenchOptions echo_options = options;
  // The echo's CPU is reported when it runs in a process of its own; in this one, it is the
  // bench's.
  echo_options.server_pid = echo_process != nullptr ? echo_process->pid() : 0;
  std::string echo_address;
  std::string echo_where;
  std::optional<LoadGenerator> echo_generator;
  if (echo_process != nullptr) {
    echo_address = echo_process->address();
    echo_where = absl::StrCat("a process of its own, pid ", echo_process->pid());
  } else if (options.baseline_echo) {
    EchoOptions in_process;
    if (lookup) in_process.memories.push_back(memory);
    absl::StatusOr<std::unique_ptr<EchoServer>> started = EchoServer::Start(in_process);
    if (!started.ok()) {
      std::fprintf(stderr, "pkserve-bench: %s\n", std::string(started.status().message()).c_str());
      return 1;
    }
    echo = *std::move(started);
    echo_address = echo->address();
    echo_where = "in this process";
  }
  if (options.baseline_echo) {
    std::vector<std::shared_ptr<grpc::Channel>> echo_channels =
        *MakeChannels(TargetSpec{echo_address, ""}, options.connections);  // plaintext
    if (absl::Status connected = WaitForChannels(echo_channels, echo_address, kConnectTimeout);
        !connected.ok()) {
      std::fprintf(stderr, "pkserve-bench: %s\n", std::string(connected.message()).c_str());
      return 1;
    }
    echo_generator.emplace(echo_options, pool, std::move(echo_channels));
  }

  const std::string server = DescribeServer(info);
  // The measured server's name in the output: an echo in a process of its own (--serve_echo)
  // says so.
  const std::string target_name = info.backend() == "echo" ? "echo-process" : "pkserve";
  std::printf("pkserve-bench: target %s (%s)\n", options.target.c_str(),
              server.empty() ? "no server info" : server.c_str());
  std::printf(
      "workload %s; %s; %s, up to %s; %s (mean %.1f rows); warm-up %s, duration %s per "
      "level%s%s\n",
      DescribeWorkload(options.workload).c_str(),
      options.open_loop()
          ? absl::StrCat("open loop, ",
                         options.arrivals == Arrivals::kPoisson ? "poisson" : "constant",
                         " arrivals")
                .c_str()
          : "closed loop",
      Plural(options.connections, "connection", "connections").c_str(),
      Plural(options.ResolvedThreads(), "client thread", "client threads").c_str(),
      Plural(pool.size(), "pooled request", "pooled requests").c_str(), pool.mean_rows(),
      absl::FormatDuration(options.warmup).c_str(), absl::FormatDuration(options.duration).c_str(),
      options.baseline_echo
          ? absl::StrCat("; echo baseline on ", echo_address, " (", echo_where, ")").c_str()
          : "",
      options.verify > 0
          ? absl::StrCat("; verifying ", Plural(options.verify, "answer", "answers"), " a level")
                .c_str()
          : "");
  std::fflush(stdout);

  std::vector<LevelSpec> levels;
  if (options.open_loop()) {
    for (double rate : options.rates) levels.push_back({.rate = rate});
  } else {
    for (int concurrency : options.concurrency) levels.push_back({.concurrency = concurrency});
  }

  LoadGenerator generator(options, pool, channels);
  std::vector<LevelResult> results;
  int exit_code = 0;
  for (const LevelSpec& spec : levels) {
    LevelResult result;
    result.spec = spec;
    absl::StatusOr<LevelStats> measured = RunLevel(generator, spec, target_name, tty);
    if (!measured.ok()) {
      std::fprintf(stderr, "pkserve-bench: %s: %s\n", LevelName(spec).c_str(),
                   std::string(measured.status().message()).c_str());
      return 1;
    }
    result.service = *std::move(measured);
    if (result.service.ok == 0) {
      std::fprintf(stderr, "pkserve-bench: %s: no request succeeded\n", LevelName(spec).c_str());
      exit_code = 1;
    }
    if (options.verify > 0) {
      result.verify = lookup ? VerifyLookupSamples(options.workload, reference_table->values(),
                                                   result.service.samples)
                             : VerifySamples(options.workload.problem, result.service.samples);
      result.service.samples.clear();
      const VerifyResult& verify = *result.verify;
      if (verify.checked == 0) {
        std::printf("verify: no answer to check\n");
        exit_code = 1;
      } else if (verify.mismatched > 0) {
        std::printf("verify: %zu of %zu answers differ from the CPU implementation; first: %s\n",
                    verify.mismatched, verify.checked, verify.first_mismatch.c_str());
        exit_code = 1;
      } else {
        std::printf("verify: %zu answers equal the CPU implementation's, bit for bit\n",
                    verify.checked);
      }
    }
    if (echo_generator.has_value()) {
      absl::StatusOr<LevelStats> baseline = RunLevel(*echo_generator, spec, "echo", tty);
      if (!baseline.ok()) {
        std::fprintf(stderr, "pkserve-bench: %s, echo: %s\n", LevelName(spec).c_str(),
                     std::string(baseline.status().message()).c_str());
        return 1;
      }
      result.baseline = *std::move(baseline);
      result.baseline->samples.clear();
    }
    results.push_back(std::move(result));
  }

  std::printf("\n%s\n%s", ResultTable(results, target_name).c_str(),
              ResultJsonLines(results, target_name, options).c_str());
  std::fflush(stdout);
  if (!options.json_path.empty()) {
    std::ofstream out(options.json_path);
    out << ResultsJson(results, target_name, options);
    if (!out.good()) {
      std::fprintf(stderr, "pkserve-bench: cannot write %s\n", options.json_path.c_str());
      return 1;
    }
  }
  const std::vector<std::string> too_many_errors =
      ErrorFractionFailures(results, target_name, options.max_error_fraction);
  for (const std::string& failure : too_many_errors) {
    std::printf("errors: %s, over --max_error_fraction=%g\n", failure.c_str(),
                options.max_error_fraction);
  }
  if (!too_many_errors.empty()) exit_code = 1;
  // The verdict, always the last line.
  if (exit_code == 0) {
    std::printf("pkserve-bench: PASS: %s, failed requests within --max_error_fraction=%g\n",
                Plural(results.size(), "level", "levels").c_str(), options.max_error_fraction);
  } else {
    std::printf("pkserve-bench: FAIL: %s\n",
                !too_many_errors.empty()
                    ? absl::StrCat(Plural(too_many_errors.size(), "result", "results"),
                                   " failed more requests than --max_error_fraction=",
                                   options.max_error_fraction, " (see the errors lines above)")
                          .c_str()
                    : "see the lines above (no request succeeded, or answers differed)");
  }
  std::fflush(stdout);
  return exit_code;
}

}  // namespace
}  // namespace pkserve::bench

int main(int argc, char** argv) {
  // The request pool (up to 64 MiB of scores), the echo server's answers and the calls in flight.
  pkserve::SetUpForLargeMessages(512 << 20);
  pkserve::SetUpProgramUsage({
      .name = "pkserve-bench",
      .flags_source = "client/bench/main.cc",
      .message = "load generator for pkserve: closed-loop concurrency sweeps (--concurrency) or "
                 "open-loop rates (--rate), with an echo baseline (--baseline=echo) and answer "
                 "checks (--verify).\n"
                 "Usage: pkserve-bench [--target=127.0.0.1:50051] [flags]\n"
                 "Exit status: 0 when the run passes, 1 when it fails (too many failed requests, "
                 "answers that differ, a level that cannot run), 2 on bad usage.",
      .version = absl::StrCat("pkserve-bench ", pkserve::kVersion),
  });
  std::vector<char*> positional = pkserve::ParseFlagsOrExit(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr, "pkserve-bench: unexpected argument '%s' (flags only)\n", positional[1]);
    return pkserve::kUsageError;
  }
  return pkserve::bench::Main();
}
