// A bare HTTP/2 client connection on a TCP socket, for tests that must send what no gRPC client
// would: broken prefaces, oversized or truncated frames, gRPC messages whose length prefix lies,
// and connections dropped halfway through a request. It writes frames and reads raw bytes; it
// does not parse (or decompress) what the server sends back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pkserve::testing::http2 {

enum FrameType : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPing = 0x6,
  kGoAway = 0x7,
  kWindowUpdate = 0x8,
};
inline constexpr uint8_t kEndStream = 0x1;
inline constexpr uint8_t kEndHeaders = 0x4;
inline constexpr uint8_t kAck = 0x1;

// The client connection preface ("PRI * HTTP/2.0...") followed by an empty SETTINGS frame.
std::string ClientPreface();
// One frame: the 9-byte header (24-bit length of `payload`, type, flags, stream id) and payload.
std::string Frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload);
// A frame header that declares `declared_length` bytes, whatever follows it.
std::string FrameHeader(uint32_t declared_length, uint8_t type, uint8_t flags, uint32_t stream_id);
// The HPACK block of a gRPC call's request headers (literal fields, no indexing, no Huffman).
// `extra` fields (name, value) follow the standard ones, e.g. {"grpc-timeout", "20S"}.
std::string GrpcRequestHeaders(std::string_view path, std::string_view authority,
                               const std::vector<std::pair<std::string, std::string>>& extra = {});

// One frame as read back: its header's fields and its payload.
struct ParsedFrame {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream_id = 0;
  std::string payload;
};
// The whole frames in `bytes` (what a server sent after the preface), in order; a trailing
// partial frame is left out.
std::vector<ParsedFrame> ParseFrames(std::string_view bytes);
// A gRPC length-prefixed message: flag 0 (uncompressed), the 32-bit big-endian length
// `declared_length`, then `payload` (which may be shorter or longer than it says).
std::string GrpcMessage(std::string_view payload, uint32_t declared_length);
inline std::string GrpcMessage(std::string_view payload) {
  return GrpcMessage(payload, static_cast<uint32_t>(payload.size()));
}

class Connection {
 public:
  // Connects to 127.0.0.1:port; null (and a test failure) when it cannot.
  static std::unique_ptr<Connection> Open(int port);
  // The same without the test failure: for attackers, which meet a server shutting down. From
  // `source` (e.g. "127.0.0.2") when given.
  static std::unique_ptr<Connection> TryOpen(int port, const char* source = nullptr);
  ~Connection();  // closes the socket (an abrupt disconnect, if nothing else closed it)
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Writes every byte; false once the peer has closed or reset the connection.
  bool Send(std::string_view bytes);
  // Reads what arrives for up to `timeout`, stopping early at end of stream; returns the bytes.
  std::string ReadFor(absl::Duration timeout);
  // True once a read saw the end of the stream or an error (the server closed the connection).
  bool closed_by_peer() const { return closed_by_peer_; }
  // Closes at once with a TCP reset (SO_LINGER 0) rather than an orderly FIN.
  void Reset();

  // Sends `data` as DATA frames of stream `stream_id` (the last with END_STREAM) within the
  // server's flow-control windows (its SETTINGS and WINDOW_UPDATEs, read as they come; its
  // SETTINGS are ACKed). Stops at `timeout`, or when the server resets the stream, ends it or
  // closes the connection. Returns how many bytes of `data` the server let through; the frames
  // it sent on the way are added to `seen`.
  int64_t SendStreamData(uint32_t stream_id, std::string_view data, absl::Duration timeout,
                         std::vector<ParsedFrame>& seen);

 private:
  explicit Connection(int fd) : fd_(fd) {}
  int fd_;
  bool closed_by_peer_ = false;
};

}  // namespace pkserve::testing::http2
