// The Prometheus endpoint: GET /metrics over plain HTTP/1.x, answered with whatever the render
// function returns, on one thread of its own (a poll loop) so that a slow or hostile client never
// touches the gRPC or compute threads, and can hold neither the scrapes nor the drain.
//
// Bounds, each enforced without reading further: a request (line and headers) must arrive whole
// within kMetricsRequestTimeout of the connection and fit in kMetricsMaxRequestBytes (else 408,
// 414 or 431); a request with a body is answered 413 at once; the answer must be taken within
// kMetricsWriteTimeout; every answer closes its connection; at most kMetricsMaxConnections are
// open (a new one replaces the oldest still sending its request). Stop returns at once.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkserve {

inline constexpr char kMetricsPath[] = "/metrics";
inline constexpr size_t kMetricsMaxRequestBytes = 8192;
inline constexpr absl::Duration kMetricsRequestTimeout = absl::Seconds(2);
inline constexpr absl::Duration kMetricsWriteTimeout = absl::Seconds(2);
inline constexpr size_t kMetricsMaxConnections = 64;

// OK when `address` is a valid --metrics_address (host:port, or empty for none); otherwise
// INVALID_ARGUMENT naming the flag.
absl::Status CheckMetricsAddress(const std::string& address);

class MetricsHttpServer {
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

 public:
  // Listens on `address` ("host:port", "[v6 host]:port"; port 0 picks a free port) and serves
  // kMetricsPath with `render()` (called on the endpoint's thread, until Stop returns).
  // INVALID_ARGUMENT for an address that is not host:port, UNAVAILABLE (saying why) when it
  // cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render);

  explicit MetricsHttpServer(PrivateTag /*tag*/);
  // Stops.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Closes the port and every open connection (an answer being written is cut off) and waits for
  // the endpoint's thread, which never blocks on a client; later calls do nothing.
  void Stop();

  // The port it listens on (the one picked, for port 0), and the address with that port.
  int port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  void Run();  // the poll loop, until Stop

  std::function<std::string()> render_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: Stop writes it to end Run
  std::thread loop_;  // "pk-metrics"
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  int port_ = 0;
  std::string address_;
};

}  // namespace pkserve
