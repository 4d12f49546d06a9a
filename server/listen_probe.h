// Why a gRPC listening port could not be opened: gRPC's ServerBuilder says only that it failed,
// so after a failure the address is bound once more with a plain socket (SO_REUSEADDR, no
// SO_REUSEPORT, as pkserve's listener) and the system's answer is put into words for the log.
#pragma once

#include <string>

namespace pkserve {

// A phrase naming the reason `address` ("host:port", "[v6]:port") cannot be listened on:
// "the port is in use (another process listens on it)", "the host is not an address of this
// machine", "the address is not host:port", ...; or the system's error text for anything else.
// Binds and closes at once; never listens. Empty when a bind now succeeds.
std::string WhyCannotListen(const std::string& address);

// The phrase for a bind() or listen() that failed with `error` (an errno value), as above.
std::string ListenErrorText(int error);

}  // namespace pkserve
