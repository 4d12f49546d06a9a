// The Prometheus endpoint: GET /metrics over plain HTTP (cpp-httplib), answered with whatever the
// render function returns, on two threads of its own so that a slow scraper never touches the
// gRPC or compute threads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace pkserve {

inline constexpr char kMetricsPath[] = "/metrics";

// OK when `address` is a valid --metrics_address (host:port, or empty for none); otherwise
// INVALID_ARGUMENT naming the flag.
absl::Status CheckMetricsAddress(const std::string& address);

class MetricsHttpServer {
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

 public:
  // Listens on `address` ("host:port", "[v6 host]:port"; port 0 picks a free port) and serves
  // kMetricsPath with `render()` (called on the endpoint's threads, until Stop returns).
  // INVALID_ARGUMENT for an address that is not host:port, UNAVAILABLE when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render);

  explicit MetricsHttpServer(PrivateTag /*tag*/);
  // Stops.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Closes the port and waits for the requests being answered (a second or so at most); later
  // calls do nothing.
  void Stop();

  // The port it listens on (the one picked, for port 0), and the address with that port.
  int port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;  // "pk-metrics": accepts connections until Stop
  std::atomic<bool> listener_done_{false};
  int port_ = 0;
  std::string address_;
};

}  // namespace pkserve
