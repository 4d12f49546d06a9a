// The small option parser of pkserve-cli: each command has its own options and its own --help.
// Accepts --name=value, --name value, and --name for switches.
#pragma once

#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pkserve::client {

struct OptionSpec {
  const char* name;           // without the dashes
  const char* value_name;     // e.g. "N" or "FILE"; nullptr for a switch
  const char* default_value;  // nullptr for none
  const char* help;
};

class ParsedOptions {
 public:
  bool help() const { return help_; }
  // Given on the command line (switches: present).
  bool has(absl::string_view name) const { return values_.contains(name); }
  // The value given, else the default, else "".
  std::string get(absl::string_view name) const;

 private:
  friend absl::StatusOr<ParsedOptions> ParseOptions(std::span<const OptionSpec> specs,
                                                    std::span<char* const> args);
  std::span<const OptionSpec> specs_;
  absl::flat_hash_map<std::string, std::string> values_;
  bool help_ = false;
};

// Parses `args` (the words after the command). Unknown options, missing values and stray words
// are errors that say so.
absl::StatusOr<ParsedOptions> ParseOptions(std::span<const OptionSpec> specs,
                                           std::span<char* const> args);

// "usage: <usage>\n\n<summary>\n\noptions:\n  --name=VALUE  help (default: x)\n ..."
std::string FormatHelp(absl::string_view usage, absl::string_view summary,
                       std::span<const OptionSpec> specs);

}  // namespace pkserve::client
