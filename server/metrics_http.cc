#include "server/metrics_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/listen_probe.h"
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

// A listening, non-blocking socket on `where` (SO_REUSEADDR only: with SO_REUSEPORT a second
// process would bind the same port without an error), or the reason it cannot be had.
absl::StatusOr<int> Listen(const HostPort& where, const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(where.port);
  if (const int error = getaddrinfo(where.host.empty() ? nullptr : where.host.c_str(),
                                    service.c_str(), &hints, &found);
      error != 0) {
    return absl::UnavailableError(absl::StrCat("could not listen on --metrics_address=", address,
                                               ": the host does not resolve (", gai_strerror(error),
                                               ")"));
  }
  int error = EADDRNOTAVAIL;
  int fd = -1;
  for (const addrinfo* entry = found; entry != nullptr && fd < 0; entry = entry->ai_next) {
    fd = socket(entry->ai_family, entry->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                entry->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, entry->ai_addr, entry->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("could not listen on --metrics_address=", address,
                                               ": ", ListenErrorText(error)));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size) != 0) return -1;
  if (bound.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
}

std::string Answer(int code, absl::string_view reason, absl::string_view content_type,
                   absl::string_view body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

std::string ErrorAnswer(int code, absl::string_view reason) {
  return Answer(code, reason, "text/plain; charset=utf-8", absl::StrCat(reason, "\n"));
}

// The answer to `head` (the request line and headers, without the blank line that ends them).
std::string AnswerRequest(absl::string_view head, const std::function<std::string()>& render) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
  for (absl::string_view& line : lines) line = absl::StripSuffix(line, "\r");
  const std::vector<absl::string_view> request_line = absl::StrSplit(lines[0], ' ');
  if (request_line.size() != 3 || !absl::StartsWith(request_line[2], "HTTP/1.")) {
    return ErrorAnswer(400, "Bad Request");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
    if (name == "transfer-encoding" || (name == "content-length" && value != "0")) {
      return ErrorAnswer(413, "Payload Too Large");  // a scrape has no body
    }
  }
  if (request_line[0] != "GET") return ErrorAnswer(405, "Method Not Allowed");
  const absl::string_view path = request_line[1].substr(0, request_line[1].find('?'));
  if (path != kMetricsPath) return ErrorAnswer(404, "Not Found");
  return Answer(200, "OK", kPrometheusTextContentType, render());
}

// One client connection: reading its request, then writing the answer, then closed.
struct Connection {
  int fd = -1;
  absl::Time deadline;  // for the request to arrive, then for the answer to be taken
  bool answering = false;
  std::string request;  // what arrived, up to kMetricsMaxRequestBytes and one read more
  std::string answer;
  size_t written = 0;
};

// Reads what `connection` has; sets its answer once the request is whole or cannot be. False when
// the client has gone.
bool ReadRequest(Connection& connection, const std::function<std::string()>& render) {
  char buffer[4096];
  while (true) {
    const ssize_t got = recv(connection.fd, buffer, sizeof buffer, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (got <= 0) return false;
    connection.request.append(buffer, static_cast<size_t>(got));
    const size_t end = connection.request.find("\r\n\r\n");
    if (end != std::string::npos && end + 4 <= kMetricsMaxRequestBytes) {
      connection.answer =
          AnswerRequest(absl::string_view(connection.request).substr(0, end), render);
    } else if (connection.request.size() > kMetricsMaxRequestBytes) {
      const bool line_ended = connection.request.find('\n') < kMetricsMaxRequestBytes;
      connection.answer = line_ended ? ErrorAnswer(431, "Request Header Fields Too Large")
                                     : ErrorAnswer(414, "URI Too Long");
    } else {
      continue;
    }
    connection.answering = true;
    connection.deadline = absl::Now() + kMetricsWriteTimeout;
    return true;
  }
}

// Writes what `connection` can take of its answer. False when it is done (all written, or the
// client has gone).
bool WriteAnswer(Connection& connection) {
  while (connection.written < connection.answer.size()) {
    const ssize_t sent = send(connection.fd, connection.answer.data() + connection.written,
                              connection.answer.size() - connection.written, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (sent < 0) return false;
    connection.written += static_cast<size_t>(sent);
  }
  return false;
}

void Close(Connection& connection) {
  // The answer is sent; a FIN first, so that unread request bytes do not turn the close into a
  // reset that could discard the answer before the client has read it.
  shutdown(connection.fd, SHUT_WR);
  close(connection.fd);
}

}  // namespace

absl::Status CheckMetricsAddress(const std::string& address) {
  if (address.empty()) return absl::OkStatus();
  return SplitHostPort(address).status();
}

MetricsHttpServer::MetricsHttpServer(PrivateTag /*tag*/) {}

MetricsHttpServer::~MetricsHttpServer() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render) {
  absl::StatusOr<HostPort> split = SplitHostPort(address);
  if (!split.ok()) return split.status();
  auto server = std::make_unique<MetricsHttpServer>(PrivateTag());
  server->render_ = std::move(render);
  absl::StatusOr<int> listening = Listen(*split, address);
  if (!listening.ok()) return listening.status();
  server->listen_fd_ = *listening;
  server->port_ = BoundPort(server->listen_fd_);
  server->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (server->port_ <= 0 || server->wake_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("could not listen on --metrics_address=", address,
                                               ": ", std::strerror(errno)));
  }
  server->address_ = absl::StrCat(address.substr(0, address.rfind(':')), ":", server->port_);
  server->loop_ = std::thread([raw = server.get()] { raw->Run(); });
  pthread_setname_np(server->loop_.native_handle(), "pk-metrics");
  return server;
}

void MetricsHttpServer::Stop() {
  {
    absl::MutexLock lock(&stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof one);
  }
  if (loop_.joinable()) loop_.join();
}

void MetricsHttpServer::Run() {
  std::list<Connection> connections;  // oldest first
  // When accept() fails for want of descriptors, the listener rests for a moment rather than
  // waking the loop at once again.
  absl::Time accept_again = absl::InfinitePast();
  std::vector<pollfd> polled;
  std::vector<std::list<Connection>::iterator> polled_connections;
  while (true) {
    const absl::Time now = absl::Now();
    for (auto it = connections.begin(); it != connections.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      if (!it->answering) {  // a request too slow to arrive: 408, if the client takes it now
        const std::string late = ErrorAnswer(408, "Request Timeout");
        [[maybe_unused]] const ssize_t sent =
            send(it->fd, late.data(), late.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      Close(*it);
      it = connections.erase(it);
    }
    absl::Time wake_at = now + absl::Seconds(1);
    polled.clear();
    polled_connections.clear();
    polled.push_back({wake_fd_, POLLIN, 0});
    if (now >= accept_again) {
      polled.push_back({listen_fd_, POLLIN, 0});
    } else {
      wake_at = std::min(wake_at, accept_again);
    }
    const size_t first_connection = polled.size();
    for (auto it = connections.begin(); it != connections.end(); ++it) {
      polled.push_back({it->fd, static_cast<short>(it->answering ? POLLOUT : POLLIN), 0});
      polled_connections.push_back(it);
      wake_at = std::min(wake_at, it->deadline);
    }
    const int64_t timeout_ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(wake_at - now) + 1);
    if (poll(polled.data(), polled.size(), static_cast<int>(timeout_ms)) < 0 && errno != EINTR) {
      continue;
    }
    if (polled[0].revents != 0) break;  // Stop
    for (size_t i = first_connection; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      Connection& connection = *polled_connections[i - first_connection];
      bool open = connection.answering ? WriteAnswer(connection) : ReadRequest(connection, render_);
      if (open && connection.answering && connection.written == 0) open = WriteAnswer(connection);
      if (!open) {
        Close(connection);
        connections.erase(polled_connections[i - first_connection]);
      }
    }
    if (first_connection == 2 && polled[1].revents != 0) {
      while (true) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            accept_again = absl::Now() + absl::Milliseconds(100);
          }
          break;
        }
        if (connections.size() >= kMetricsMaxConnections) {
          // Full: the oldest connection still sending its request makes room (a slow client is
          // dropped before a new one is refused).
          auto oldest = std::find_if(connections.begin(), connections.end(),
                                     [](const Connection& c) { return !c.answering; });
          if (oldest == connections.end()) {
            close(fd);
            continue;
          }
          Close(*oldest);
          connections.erase(oldest);
        }
        Connection& connection = connections.emplace_back();
        connection.fd = fd;
        connection.deadline = absl::Now() + kMetricsRequestTimeout;
      }
    }
  }
  for (Connection& connection : connections) close(connection.fd);
  close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace pkserve
