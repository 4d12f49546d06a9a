#include "tests/reliability/raw_http2.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pkserve::testing::http2 {
namespace {

// HPACK integer with an N-bit prefix (RFC 7541, 5.1); `first` holds the bits above the prefix.
void AppendInteger(std::string& out, uint8_t first, int prefix_bits, uint64_t value) {
  const uint64_t max_prefix = (uint64_t{1} << prefix_bits) - 1;
  if (value < max_prefix) {
    out.push_back(static_cast<char>(first | value));
    return;
  }
  out.push_back(static_cast<char>(first | max_prefix));
  value -= max_prefix;
  while (value >= 128) {
    out.push_back(static_cast<char>((value % 128) | 128));
    value /= 128;
  }
  out.push_back(static_cast<char>(value));
}

// "Literal Header Field without Indexing -- New Name" (RFC 7541, 6.2.2), no Huffman coding.
void AppendLiteralHeader(std::string& out, std::string_view name, std::string_view value) {
  out.push_back(0x00);
  AppendInteger(out, 0x00, 7, name.size());
  out.append(name);
  AppendInteger(out, 0x00, 7, value.size());
  out.append(value);
}

}  // namespace

std::string ClientPreface() {
  return std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + Frame(kSettings, 0, 0, "");
}

std::string FrameHeader(uint32_t declared_length, uint8_t type, uint8_t flags, uint32_t stream_id) {
  std::string header(9, '\0');
  header[0] = static_cast<char>((declared_length >> 16) & 0xff);
  header[1] = static_cast<char>((declared_length >> 8) & 0xff);
  header[2] = static_cast<char>(declared_length & 0xff);
  header[3] = static_cast<char>(type);
  header[4] = static_cast<char>(flags);
  header[5] = static_cast<char>((stream_id >> 24) & 0x7f);
  header[6] = static_cast<char>((stream_id >> 16) & 0xff);
  header[7] = static_cast<char>((stream_id >> 8) & 0xff);
  header[8] = static_cast<char>(stream_id & 0xff);
  return header;
}

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload) {
  return FrameHeader(static_cast<uint32_t>(payload.size()), type, flags, stream_id) +
         std::string(payload);
}

std::string GrpcRequestHeaders(std::string_view path, std::string_view authority,
                               const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string block;
  AppendLiteralHeader(block, ":method", "POST");
  AppendLiteralHeader(block, ":scheme", "http");
  AppendLiteralHeader(block, ":path", path);
  AppendLiteralHeader(block, ":authority", authority);
  AppendLiteralHeader(block, "content-type", "application/grpc");
  AppendLiteralHeader(block, "te", "trailers");
  for (const auto& [name, value] : extra) AppendLiteralHeader(block, name, value);
  return block;
}

std::vector<ParsedFrame> ParseFrames(std::string_view bytes) {
  std::vector<ParsedFrame> frames;
  while (bytes.size() >= 9) {
    const auto byte = [&bytes](size_t i) {
      return static_cast<uint32_t>(static_cast<uint8_t>(bytes[i]));
    };
    const uint32_t length = (byte(0) << 16) | (byte(1) << 8) | byte(2);
    if (bytes.size() < 9 + length) break;
    ParsedFrame frame;
    frame.type = static_cast<uint8_t>(byte(3));
    frame.flags = static_cast<uint8_t>(byte(4));
    frame.stream_id = ((byte(5) & 0x7f) << 24) | (byte(6) << 16) | (byte(7) << 8) | byte(8);
    frame.payload = std::string(bytes.substr(9, length));
    frames.push_back(std::move(frame));
    bytes.remove_prefix(9 + length);
  }
  return frames;
}

std::string GrpcMessage(std::string_view payload, uint32_t declared_length) {
  std::string message(5, '\0');
  message[1] = static_cast<char>((declared_length >> 24) & 0xff);
  message[2] = static_cast<char>((declared_length >> 16) & 0xff);
  message[3] = static_cast<char>((declared_length >> 8) & 0xff);
  message[4] = static_cast<char>(declared_length & 0xff);
  message.append(payload);
  return message;
}

namespace {

// A connected socket to 127.0.0.1:port from `source` (another loopback address: a second
// client host as the server sees it), or -1 with errno set.
int ConnectLoopback(int port, const char* source = nullptr) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (source != nullptr) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    int error = 0;
    if (inet_pton(AF_INET, source, &local.sin_addr) != 1) {
      error = EINVAL;
    } else if (bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
      error = errno;
    }
    if (error != 0) {
      close(fd);
      errno = error;
      return -1;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

std::unique_ptr<Connection> Connection::Open(int port) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) {
    ADD_FAILURE() << "connect to 127.0.0.1:" << port << ": " << std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<Connection>(new Connection(fd));
}

std::unique_ptr<Connection> Connection::TryOpen(int port, const char* source) {
  const int fd = ConnectLoopback(port, source);
  if (fd < 0) return nullptr;
  return std::unique_ptr<Connection>(new Connection(fd));
}

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

bool Connection::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    pollfd entry{fd_, POLLOUT, 0};
    if (poll(&entry, 1, 5000) <= 0) return false;  // the peer stopped reading: give up
    const ssize_t sent = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
  return true;
}

std::string Connection::ReadFor(absl::Duration timeout) {
  std::string received;
  const absl::Time deadline = absl::Now() + timeout;
  char buffer[16384];
  while (!closed_by_peer_) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd entry{fd_, POLLIN, 0};
    const int ready = poll(&entry, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t got = recv(fd_, buffer, sizeof buffer, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      closed_by_peer_ = true;
      break;
    }
    received.append(buffer, static_cast<size_t>(got));
  }
  return received;
}

void Connection::Reset() {
  if (fd_ < 0) return;
  const linger abort_on_close{1, 0};
  setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  close(fd_);
  fd_ = -1;
}

int64_t Connection::SendStreamData(uint32_t stream_id, std::string_view data,
                                   absl::Duration timeout, std::vector<ParsedFrame>& seen) {
  constexpr size_t kMaxFrame = 16384;  // SETTINGS_MAX_FRAME_SIZE's default
  int64_t connection_window = 65535;
  int64_t stream_window = 65535;
  int64_t initial_window = 65535;
  std::string pending;  // bytes read and not yet parsed into whole frames
  const absl::Time give_up = absl::Now() + timeout;
  size_t sent = 0;
  while (absl::Now() < give_up) {
    const int64_t window = std::min(connection_window, stream_window);
    if (sent < data.size() && window > 0) {
      const size_t size = std::min({data.size() - sent, kMaxFrame, static_cast<size_t>(window)});
      const bool last = sent + size == data.size();
      if (!Send(Frame(kData, last ? kEndStream : 0, stream_id, data.substr(sent, size)))) break;
      sent += size;
      connection_window -= static_cast<int64_t>(size);
      stream_window -= static_cast<int64_t>(size);
    }
    const bool blocked = sent == data.size() || std::min(connection_window, stream_window) <= 0;
    pending += ReadFor(blocked ? absl::Milliseconds(20) : absl::ZeroDuration());
    if (closed_by_peer_) break;
    size_t used = 0;
    bool stream_over = false;
    for (ParsedFrame& frame : ParseFrames(pending)) {
      used += 9 + frame.payload.size();
      const auto word = [&frame](size_t at) {
        uint32_t value = 0;
        for (size_t i = 0; i < 4; ++i)
          value = (value << 8) | static_cast<uint8_t>(frame.payload[at + i]);
        return value;
      };
      if (frame.type == kSettings && (frame.flags & kAck) == 0) {
        for (size_t at = 0; at + 6 <= frame.payload.size(); at += 6) {
          const uint32_t id =
              (static_cast<uint32_t>(static_cast<uint8_t>(frame.payload[at])) << 8) |
              static_cast<uint8_t>(frame.payload[at + 1]);
          if (id == 0x4) {  // SETTINGS_INITIAL_WINDOW_SIZE
            const int64_t value = word(at + 2);
            stream_window += value - initial_window;
            initial_window = value;
          }
        }
        Send(Frame(kSettings, kAck, 0, ""));
      } else if (frame.type == kWindowUpdate && frame.payload.size() == 4) {
        const int64_t increment = word(0) & 0x7fffffff;
        if (frame.stream_id == 0) connection_window += increment;
        if (frame.stream_id == stream_id) stream_window += increment;
      } else if (frame.stream_id == stream_id &&
                 (frame.type == kRstStream ||
                  (frame.type == kHeaders && (frame.flags & kEndStream) != 0))) {
        stream_over = true;
      }
      seen.push_back(std::move(frame));
    }
    pending.erase(0, used);
    if (stream_over || (sent == data.size() && blocked && absl::Now() >= give_up)) break;
  }
  return static_cast<int64_t>(sent);
}

}  // namespace pkserve::testing::http2
