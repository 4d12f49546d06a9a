// Transport security of a client channel: plaintext (the default), TLS (the server's certificate
// checked against a CA), and mutual TLS (the client presents a certificate of its own).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace pkserve::client {

struct TlsOptions {
  // False: plaintext, and the fields below must be empty.
  bool enabled = false;
  // PEM CA bundle the server's certificate must chain to; empty: the system's roots.
  std::string ca_file;
  // PEM certificate chain and private key to present (mutual TLS); both or neither.
  std::string cert_file;
  std::string key_file;
  // The name to check the server's certificate against, when it differs from the target's host
  // (e.g. the target is an IP address the certificate does not list).
  std::string server_name;
};

// The channel credentials for `tls` (insecure ones when it is off); sets the server-name override
// on `arguments` when there is one. Reads the files: an error names the option and the file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& tls, grpc::ChannelArguments& arguments);

}  // namespace pkserve::client
