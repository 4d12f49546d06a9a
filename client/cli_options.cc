#include "client/cli_options.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace pkserve::client {
namespace {

const OptionSpec* Find(std::span<const OptionSpec> specs, absl::string_view name) {
  for (const OptionSpec& spec : specs) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

}  // namespace

std::string ParsedOptions::get(absl::string_view name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  const OptionSpec* spec = Find(specs_, name);
  return spec != nullptr && spec->default_value != nullptr ? spec->default_value : "";
}

absl::StatusOr<ParsedOptions> ParseOptions(std::span<const OptionSpec> specs,
                                           std::span<char* const> args) {
  ParsedOptions parsed;
  parsed.specs_ = specs;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view word = args[i];
    if (word == "--help" || word == "-h") {
      parsed.help_ = true;
      continue;
    }
    if (!absl::ConsumePrefix(&word, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", word, "' (options are --name=value)"));
    }
    absl::string_view name = word;
    std::string value;
    bool has_value = false;
    if (const size_t equals = word.find('='); equals != absl::string_view::npos) {
      name = word.substr(0, equals);
      value = std::string(word.substr(equals + 1));
      has_value = true;
    }
    const OptionSpec* spec = Find(specs, name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name, " (see --help)"));
    }
    if (spec->value_name == nullptr) {
      if (has_value) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
    } else if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (--", name, "=", spec->value_name, ")"));
      }
      value = args[++i];
    }
    parsed.values_[std::string(name)] = std::move(value);
  }
  return parsed;
}

std::string FormatHelp(absl::string_view usage, absl::string_view summary,
                       std::span<const OptionSpec> specs) {
  std::string text = absl::StrCat("usage: ", usage, "\n\n", summary, "\n\noptions:\n");
  std::vector<std::string> left;
  size_t width = 0;
  for (const OptionSpec& spec : specs) {
    left.push_back(spec.value_name == nullptr
                       ? absl::StrCat("--", spec.name)
                       : absl::StrCat("--", spec.name, "=", spec.value_name));
    width = std::max(width, left.back().size());
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StrAppend(&text, "  ", left[i], std::string(width - left[i].size() + 2, ' '),
                    specs[i].help);
    if (specs[i].default_value != nullptr && std::strlen(specs[i].default_value) > 0) {
      absl::StrAppend(&text, " (default: ", specs[i].default_value, ")");
    }
    text += "\n";
  }
  absl::StrAppend(&text, "  --help", std::string(width > 6 ? width - 6 + 2 : 2, ' '),
                  "this text\n");
  return text;
}

}  // namespace pkserve::client
