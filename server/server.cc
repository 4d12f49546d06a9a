#include "server/server.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "server/executor_factory.h"
#include "server/fault_injection.h"
#include "server/listen_probe.h"
#include "server/version.h"
#include "spdlog/spdlog.h"

namespace pkserve {
namespace {

v1::ServerInfo MakeServerInfo(const ServerConfig& config, const Executor& executor,
                              const MemoryStore& memories) {
  v1::ServerInfo info;
  info.set_version(kVersion);
  info.set_backend(std::string(executor.backend()));
  for (const std::string& device : executor.devices()) info.add_devices(device);
  v1::Limits* limits = info.mutable_limits();
  limits->set_max_k(pk::kMaxK);
  limits->set_min_factors(pk::kMinFactors);
  limits->set_max_factors(pk::kMaxFactors);
  limits->set_max_width(pk::kMaxWidth);
  limits->set_max_slot_bits(pk::kMaxSlotBits);
  limits->set_max_rows_per_request(config.max_rows_per_request);
  limits->set_max_message_bytes(static_cast<uint64_t>(config.max_message_bytes));
  v1::Batching* batching = info.mutable_batching();
  batching->set_max_batch_rows(config.max_batch_rows);
  batching->set_max_queue_delay_us(
      static_cast<uint64_t>(absl::ToInt64Microseconds(config.max_queue_delay)));
  batching->set_max_queued_rows(config.max_queued_rows);
  for (const auto& memory : memories.memories()) *info.add_memories() = memory->info();
  return info;
}

// `address` with its port replaced by `port` ("0.0.0.0:0" -> "0.0.0.0:41234").
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::StrCat(address, ":", port);
  return absl::StrCat(address.substr(0, colon), ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config,
                                                      std::unique_ptr<Executor> executor) {
  if (absl::Status valid = ValidateConfig(config); !valid.ok()) return valid;
  auto server = std::make_unique<Server>(PrivateTag());
  server->config_ = config;
  absl::StatusOr<std::unique_ptr<MemoryStore>> memories = MemoryStore::Open(config.memories);
  if (!memories.ok()) return memories.status();
  server->memories_ = *std::move(memories);
  if (executor == nullptr) {
    absl::StatusOr<std::unique_ptr<Executor>> made = MakeExecutor(config);
    if (!made.ok()) return made.status();
    executor = *std::move(made);
  }
  server->executor_ = MaybeInjectBatchFailures(std::move(executor), config.inject_batch_failures);
  server->info_ = MakeServerInfo(config, *server->executor_, *server->memories_);
  const std::vector<std::string> devices = server->executor_->devices();
  server->metrics_ =
      std::make_unique<ServerMetrics>(kVersion, std::string(server->executor_->backend()), devices);

  BatcherOptions batching;
  batching.max_batch_rows = config.max_batch_rows;
  batching.max_queue_delay = config.max_queue_delay;
  batching.max_queued_rows = config.max_queued_rows;
  batching.observer = server->metrics_.get();
  server->batcher_ = std::make_unique<Batcher>(batching, *server->executor_);
  server->metrics_->SetQueuedRowsSource(
      [batcher = server->batcher_.get()] { return batcher->stats().queued_rows; });
  server->admission_ = std::make_unique<Admission>(*server->batcher_, *server->memories_,
                                                   config.max_rows_per_request,
                                                   config.ResolvedMaxCallerQueuedRows());
  StreamLimits stream_limits;
  stream_limits.max_open_streams = config.max_open_streams;
  stream_limits.max_pending_bytes = config.max_stream_pending_bytes;
  stream_limits.answer_pause = config.inject_stream_answer_pause;
  if (stream_limits.answer_pause > absl::ZeroDuration()) {
    spdlog::warn(
        "TESTING ONLY (--inject_stream_answer_pause_us={}): each stream answer pauses its "
        "thread; never use this in production",
        absl::ToInt64Microseconds(stream_limits.answer_pause));
  }
  server->service_ = std::make_unique<SparseMemoryService>(*server->admission_, server->info_,
                                                           *server->metrics_, stream_limits);

  if (!config.metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http = MetricsHttpServer::Start(
        config.metrics_address, [metrics = server->metrics_.get()] { return metrics->Render(); });
    if (!http.ok()) return http.status();
    server->metrics_http_ = *std::move(http);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(config.tls);
  if (!credentials.ok()) return credentials.status();
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  // Bounded memory: one quota for the transport's buffers (gRPC narrows flow-control windows as
  // it fills), no window growth past 64 KiB a stream unless asked for, and a bound on the streams
  // of one connection. What a stream holds above the transport is bounded in topk_stream.h.
  grpc::ResourceQuota quota("pkserve");
  quota.Resize(static_cast<size_t>(config.grpc_memory_bytes));
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, config.http2_bdp_probe ? 1 : 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, config.max_streams_per_connection);
  // No SO_REUSEPORT (gRPC's default): with it a second pkserve binds a port already served,
  // without an error, and the two share its callers.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // No compression: gRPC 1.51 inflates a compressed message whole before --max_message_bytes is
  // checked (1 MiB of gzip can be 1 GiB), so a call naming any algorithm but identity is refused
  // UNIMPLEMENTED from its headers, and no message is ever inflated.
  builder.AddChannelArgument(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
                             1 << GRPC_COMPRESS_NONE);
  builder.AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0);
  builder.AddListeningPort(config.address, *credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    const std::string why = WhyCannotListen(config.address);
    if (!why.empty()) {
      return absl::UnavailableError(
          absl::StrCat("could not listen on --address=", config.address, ": ", why));
    }
    return absl::UnavailableError(
        absl::StrCat("could not listen on --address=", config.address,
                     config.tls.enabled() ? " (is --tls_key the key of --tls_cert?)" : ""));
  }
  server->address_ = WithPort(config.address, server->port_);
  server->grpc_server_->GetHealthCheckService()->SetServingStatus(kServiceName, false);
  if (absl::Status loaded = server->LoadMemories(); !loaded.ok()) return loaded;
  server->grpc_server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  server->health_watch_ = std::thread([raw = server.get()] { raw->WatchExecutorHealth(); });
  pthread_setname_np(server->health_watch_.native_handle(), "pk-health");

  const v1::ServerInfo& info = server->info_;
  spdlog::info("pkserve {} backend {} ({}), max_rows_per_request {}, max_message_bytes {}",
               info.version(), info.backend(), absl::StrJoin(info.devices(), "; "),
               config.max_rows_per_request, config.max_message_bytes);
  spdlog::info(
      "batching: max_batch_rows {}, max_queue_delay_us {}, max_queued_rows {}, "
      "{} {} in flight",
      config.max_batch_rows, absl::ToInt64Microseconds(config.max_queue_delay),
      config.max_queued_rows, server->executor_->max_in_flight(),
      server->executor_->max_in_flight() == 1 ? "batch" : "batches");
  spdlog::info(
      "bounds: max_caller_queued_rows {}, grpc_memory_bytes {}, max_streams_per_connection {}, "
      "http2_bdp_probe {}, max_open_streams {}, max_stream_pending_bytes {}",
      config.ResolvedMaxCallerQueuedRows(), config.grpc_memory_bytes,
      config.max_streams_per_connection, config.http2_bdp_probe, config.max_open_streams,
      config.max_stream_pending_bytes);
  spdlog::info("listening on {} ({}; health, reflection on)", server->address_,
               config.tls.ModeName());
  if (server->metrics_http_ != nullptr) {
    spdlog::info("metrics on http://{}{}", server->metrics_http_->address(), kMetricsPath);
  }
  return server;
}

absl::Status Server::LoadMemories() {
  for (const auto& memory : memories_->memories()) {
    const MemoryLayout& layout = memory->layout();
    spdlog::info("memory '{}': loading {} ({} slots {} x dim {} {}, {:.1f} MiB)", memory->name(),
                 memory->path(), layout.slots, absl::StrJoin(layout.factor_widths, "x"),
                 layout.dim, pk::DTypeName(layout.dtype),
                 static_cast<double>(layout.data_bytes) / (1 << 20));
    const absl::Time start = absl::Now();
    if (absl::Status added = executor_->AddMemory(*memory); !added.ok()) {
      return absl::Status(added.code(),
                          absl::StrCat("memory '", memory->name(), "': ", added.message()));
    }
    memory->set_load_time(absl::Now() - start);
    const double seconds = std::max(1e-9, absl::ToDoubleSeconds(memory->load_time()));
    spdlog::info("memory '{}': loaded in {:.3f} s ({:.2f} GB/s)", memory->name(), seconds,
                 static_cast<double>(layout.data_bytes) / seconds / 1e9);
    metrics_->AddMemory(*memory);
  }
  admission_->MemoriesReady();
  return absl::OkStatus();
}

Server::~Server() { Drain(absl::ZeroDuration()); }

void Server::WatchExecutorHealth() {
  bool serving = true;
  while (!stop_health_watch_.WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
    const bool healthy = executor_->healthy();
    if (healthy == serving) continue;
    serving = healthy;
    if (healthy) {
      spdlog::info("executor healthy again: health SERVING");
    } else {
      spdlog::error("executor out of service: health NOT_SERVING");
    }
    grpc_server_->GetHealthCheckService()->SetServingStatus(healthy);
  }
}

void Server::Drain(absl::Duration timeout) {
  absl::MutexLock lock(&drain_mu_);
  if (drained_ || grpc_server_ == nullptr) return;  // drained already, or never started
  drained_ = true;
  const absl::Time drain_start = absl::Now();
  const absl::Time deadline = drain_start + timeout;
  spdlog::info(
      "draining: health NOT_SERVING, new requests UNAVAILABLE, up to {}s to answer "
      "accepted requests",
      absl::ToDoubleSeconds(timeout));
  stop_health_watch_.Notify();
  if (health_watch_.joinable()) health_watch_.join();
  grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  service_->StartDraining();
  batcher_->StopAccepting();
  if (!batcher_->WaitIdle(deadline)) {
    spdlog::warn("drain timeout: answering still-queued requests UNAVAILABLE");
    batcher_->CancelQueued(absl::UnavailableError(
        "the server shut down (drain timeout) before the request was computed"));
    // Batches already computing cannot be interrupted; their answers follow shortly.
    batcher_->WaitIdle(absl::Now() + absl::Seconds(5));
  }
  // Keep answering UNAVAILABLE for the notice period: callers that learn it now go elsewhere;
  // calls that reach a port being shut down may instead see gRPC's own CANCELLED.
  const absl::Time notice_over = std::min(drain_start + config_.drain_notice, deadline);
  if (absl::Now() < notice_over) absl::SleepFor(notice_over - absl::Now());
  // Every accepted request is answered; give the answers a moment to reach the callers. Calls
  // still open at the deadline are cancelled by gRPC.
  const absl::Time shutdown_by = std::max(deadline, absl::Now() + absl::Milliseconds(500));
  grpc_server_->Shutdown(absl::ToChronoTime(shutdown_by));
  grpc_server_->Wait();
  if (metrics_http_ != nullptr) metrics_http_->Stop();
  const BatcherStats stats = batcher_->stats();
  spdlog::info(
      "drained: {} requests accepted, {} batches, {} rows computed, {} rejected (queue "
      "full), {} dropped (deadline), {} dropped (cancelled)",
      stats.requests_accepted, stats.batches, stats.rows_computed, stats.requests_rejected_full,
      stats.requests_dropped_deadline, stats.requests_dropped_cancelled);
}

}  // namespace pkserve
