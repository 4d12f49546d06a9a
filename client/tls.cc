#include "client/tls.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pkserve::client {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* option) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat(option, " ", path, ": cannot read the file"));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  std::string pem = contents.str();
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, " ", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& tls, grpc::ChannelArguments& arguments) {
  if (!tls.enabled) {
    if (!tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
        !tls.server_name.empty()) {
      return absl::InvalidArgumentError("TLS files or a server name given, but TLS is off");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "the TLS client certificate and key go together: give both (mutual TLS) or neither");
  }
  grpc::SslCredentialsOptions options;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "TLS CA");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "TLS client certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key_file, "TLS client key");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  if (!tls.server_name.empty()) arguments.SetSslTargetNameOverride(tls.server_name);
  return grpc::SslCredentials(options);
}

}  // namespace pkserve::client
