#include "client/cli_common.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pkserve::client {
namespace {

constexpr OptionSpec kConnectionOptions[] = {
    {"target", "HOST:PORT", "127.0.0.1:50051",
     "the server; several: ipv4:HOST:PORT,HOST:PORT (with --lb_policy=round_robin)"},
    {"deadline_ms", "MS", "30000", "deadline of a unary call"},
    {"lb_policy", "POLICY", "pick_first", "pick_first or round_robin (across several addresses)"},
    {"tls", nullptr, nullptr, "use TLS (implied by the --tls_* options); the system's CA roots"},
    {"tls_ca", "FILE.pem", nullptr, "CA bundle to verify the server's certificate against"},
    {"tls_cert", "FILE.pem", nullptr, "client certificate chain, for mutual TLS (with --tls_key)"},
    {"tls_key", "FILE.pem", nullptr, "private key of --tls_cert"},
    {"tls_server_name", "NAME", nullptr,
     "the name the server's certificate must carry, when not the host of --target"},
};

}  // namespace

std::span<const OptionSpec> ConnectionOptions() { return kConnectionOptions; }

std::string HintFor(const absl::Status& status, absl::string_view target) {
  if (status.code() == absl::StatusCode::kUnavailable) {
    return absl::StrCat("(is pkserve running at ", target,
                        "? check --target, and that the server is up: pkserve-cli health)");
  }
  if (status.code() == absl::StatusCode::kResourceExhausted &&
      absl::StrContains(status.message(), "message larger than max")) {
    return "(a request past the server's --max_message_bytes: give --out_* files to split the "
           "input into requests that fit, or --rows_per_request, or raise the server's "
           "--max_message_bytes; pkserve-cli info shows it)";
  }
  return "";
}

int Fail(const absl::Status& status, absl::string_view target) {
  std::fprintf(stderr, "pkserve-cli: %s\n", status.ToString().c_str());
  if (const std::string hint = HintFor(status, target); !hint.empty()) {
    std::fprintf(stderr, "%s\n", hint.c_str());
  }
  return kExitFailed;
}

int UsageError(absl::string_view message) {
  std::fprintf(stderr, "pkserve-cli: %s\n", std::string(message).c_str());
  return kExitUsage;
}

absl::StatusOr<Connection> ConnectFromOptions(const ParsedOptions& options, bool own_connection) {
  ClientOptions client_options;
  client_options.target = options.get("target");
  int64_t deadline_ms = 0;
  if (!absl::SimpleAtoi(options.get("deadline_ms"), &deadline_ms) || deadline_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--deadline_ms must be a positive number of milliseconds, got '",
                     options.get("deadline_ms"), "'"));
  }
  client_options.deadline = absl::Milliseconds(deadline_ms);
  client_options.load_balancing_policy = options.get("lb_policy");
  client_options.own_connection = own_connection;
  TlsOptions& tls = client_options.tls;
  tls.ca_file = options.get("tls_ca");
  tls.cert_file = options.get("tls_cert");
  tls.key_file = options.get("tls_key");
  tls.server_name = options.get("tls_server_name");
  tls.enabled = options.has("tls") || !tls.ca_file.empty() || !tls.cert_file.empty() ||
                !tls.key_file.empty() || !tls.server_name.empty();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
  if (!client.ok()) return client.status();
  return Connection{*std::move(client), client_options.deadline};
}

absl::StatusOr<std::vector<uint32_t>> ParseWidths(const std::string& text) {
  if (text.empty()) return absl::InvalidArgumentError("--widths is required, e.g. --widths=1024,1024");
  std::vector<uint32_t> widths;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    uint32_t width = 0;
    if (!absl::SimpleAtoi(part, &width) || width == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--widths must be positive numbers separated by commas, got '", text, "'"));
    }
    widths.push_back(width);
  }
  return widths;
}

absl::StatusOr<std::string> ParseDTypeName(const std::string& text) {
  if (text.empty() || text == "float32" || text == "bfloat16") return text;
  if (text == "f32") return std::string("float32");
  if (text == "bf16") return std::string("bfloat16");
  return absl::InvalidArgumentError(absl::StrCat(
      "--dtype must be float32 (f32) or bfloat16 (bf16), got '", text, "'"));
}

std::string Plural(uint64_t count, absl::string_view one, absl::string_view many) {
  return absl::StrCat(count, " ", count == 1 ? one : many);
}

}  // namespace pkserve::client
