// Transport security of the listening port: plaintext (the default), TLS from a certificate and
// key, or mutual TLS when a client CA is given (every client must present a certificate that CA
// signed, or the handshake fails).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace pkserve {

// PEM files, as the flags --tls_cert, --tls_key and --tls_client_ca name them.
struct ServerTlsFiles {
  std::string cert;       // the server's certificate chain; empty (with key empty) = plaintext
  std::string key;        // its private key
  std::string client_ca;  // optional: CA bundle that client certificates must chain to (mTLS)

  bool enabled() const { return !cert.empty() || !key.empty(); }
  // "plaintext", "TLS" or "mutual TLS", for the log.
  const char* ModeName() const;
};

// Checks that the combination makes sense (cert and key together; client_ca only with them);
// the message names the flags.
absl::Status ValidateTlsFiles(const ServerTlsFiles& files);

// The credentials for the listening port; reads the files (an error names the flag and the file).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files);

}  // namespace pkserve
