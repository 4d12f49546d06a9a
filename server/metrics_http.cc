#include "server/metrics_http.h"

#include <httplib.h>
#include <pthread.h>
#include <sys/socket.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/metrics.h"

namespace pkserve {
namespace {

struct HostPort {
  std::string host;  // without the brackets of an IPv6 literal
  int port = 0;
};

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort split;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &split.port) || split.port < 0 ||
      split.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_address must be host:port (port 0..65535, 0 picks one), or empty for no "
        "metrics endpoint; got '",
        address, "'"));
  }
  split.host = address.substr(0, colon);
  if (split.host.size() >= 2 && split.host.front() == '[' && split.host.back() == ']') {
    split.host = split.host.substr(1, split.host.size() - 2);
  }
  return split;
}

}  // namespace

absl::Status CheckMetricsAddress(const std::string& address) {
  if (address.empty()) return absl::OkStatus();
  return SplitHostPort(address).status();
}

MetricsHttpServer::MetricsHttpServer(PrivateTag /*tag*/)
    : http_(std::make_unique<httplib::Server>()) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render) {
  absl::StatusOr<HostPort> split = SplitHostPort(address);
  if (!split.ok()) return split.status();
  auto server = std::make_unique<MetricsHttpServer>(PrivateTag());
  httplib::Server& http = *server->http_;
  // Prometheus scrapes every few seconds: two threads answer, idle connections close after a
  // second, and a scraper that stops sending is dropped after two, which bounds Stop.
  http.new_task_queue = [] { return new httplib::ThreadPool(2); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second process binds the
  // same port without an error and the two share the scrapes.
  http.set_socket_options([](socket_t socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_keep_alive_timeout(1);
  http.set_read_timeout(2, 0);
  http.set_write_timeout(2, 0);
  http.Get(kMetricsPath, [render = std::move(render)](const httplib::Request& /*request*/,
                                                      httplib::Response& response) {
    response.set_content(render(), kPrometheusTextContentType);
  });

  if (split->port == 0) {
    server->port_ = http.bind_to_any_port(split->host);
  } else if (http.bind_to_port(split->host, split->port)) {
    server->port_ = split->port;
  } else {
    server->port_ = -1;
  }
  if (server->port_ <= 0) {
    server->listener_done_ = true;  // nothing to stop
    return absl::UnavailableError(absl::StrCat("could not listen on --metrics_address=", address,
                                               " (address in use, or not local?)"));
  }
  server->address_ = absl::StrCat(address.substr(0, address.rfind(':')), ":", server->port_);
  server->listener_ = std::thread([raw = server.get()] {
    raw->http_->listen_after_bind();
    raw->listener_done_ = true;
  });
  pthread_setname_np(server->listener_.native_handle(), "pk-metrics");
  return server;
}

void MetricsHttpServer::Stop() {
  // httplib's stop() acts only while the listener runs, and is meant to be called once (it asserts
  // that the socket is still open): wait until the listener runs, or has already returned, then
  // stop it once. The listener then finishes the connections it has (a second at most).
  while (!listener_done_ && !http_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!listener_done_) http_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace pkserve
