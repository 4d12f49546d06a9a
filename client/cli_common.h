// What the commands of pkserve-cli share: exit statuses, error printing (with the hints a user
// needs: is pkserve running there, which server flag bounds a message), the connection options,
// and the parsing of widths and element types.
//
// Exit statuses, one rule for every pkserve tool: 0 success (and --help), 1 a call failed or the
// server answered an error, 2 bad usage or a file that cannot be read or written, 130 stopped by
// Ctrl-C (SIGINT) or SIGTERM.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cli_options.h"
#include "client/client.h"

namespace pkserve::client {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInterrupted = 130;

// The options every command that calls a server ends with.
std::span<const OptionSpec> ConnectionOptions();

// Prints a failed call's status, with a hint for UNAVAILABLE (check that pkserve runs at
// `target`) and for a message past the server's limit (--max_message_bytes); returns kExitFailed.
int Fail(const absl::Status& status, absl::string_view target);
// Prints "pkserve-cli: <message>"; returns kExitUsage (bad usage, or a file error).
int UsageError(absl::string_view message);
// The hint Fail adds to `status`, or "".
std::string HintFor(const absl::Status& status, absl::string_view target);

struct Connection {
  std::unique_ptr<Client> client;
  absl::Duration deadline;
};

// A client from --target, --deadline_ms, --lb_policy and the --tls* options; with
// `own_connection`, one that does not share its TCP connection with the process's others.
absl::StatusOr<Connection> ConnectFromOptions(const ParsedOptions& options,
                                              bool own_connection = false);

// "--widths=W0,W1[,...]": positive numbers separated by single commas (no empty entries).
absl::StatusOr<std::vector<uint32_t>> ParseWidths(const std::string& text);
// "float32" or "bfloat16", and the spellings pkserve-bench prints ("f32", "bf16"); "" stays "".
absl::StatusOr<std::string> ParseDTypeName(const std::string& text);

// "1 row" / "2 rows".
std::string Plural(uint64_t count, absl::string_view one, absl::string_view many);

}  // namespace pkserve::client
