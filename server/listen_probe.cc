#include "server/listen_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pkserve {

std::string ListenErrorText(int error) {
  switch (error) {
    case EADDRINUSE:
      return "the port is in use (another process listens on it)";
    case EADDRNOTAVAIL:
      return "the host is not an address of this machine";
    case EACCES:
      return "permission denied (a port below 1024 needs privileges)";
    default:
      return std::strerror(error);
  }
}

std::string WhyCannotListen(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return "the address is not host:port";
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int error =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      error != 0) {
    return absl::StrCat("the host does not resolve (", gai_strerror(error), ")");
  }
  std::string why;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    const int fd = socket(entry->ai_family, entry->ai_socktype | SOCK_CLOEXEC, entry->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    const int bound = bind(fd, entry->ai_addr, entry->ai_addrlen);
    const int error = errno;
    close(fd);
    if (bound == 0) continue;
    why = ListenErrorText(error);
    break;
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace pkserve
