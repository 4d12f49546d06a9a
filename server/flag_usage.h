// How pkserve and pkserve-bench treat their command lines, one rule for both (and for pkserve-cli,
// which parses its own): --help (and --helpfull, --helpshort, --version, ...) prints and exits 0;
// a usage error (an unknown flag, a value that does not parse, an argument where only flags go,
// a flag value out of range as the program judges it) exits kUsageError, 2; anything that goes
// wrong once the program runs exits 1.
//
// --help lists the program's own flags under its source file's path in the repository
// ("server/flags.cc"), never the path the build saw.
#pragma once

#include <string>
#include <vector>

namespace pkserve {

inline constexpr int kUsageError = 2;

struct ProgramUsage {
  std::string name;          // "pkserve": prefixes the messages
  std::string flags_source;  // where its flags are defined, from the repository root
  std::string message;       // the text --help opens with
  std::string version;       // what --version prints (a line)
};

// Sets --help's text and which flags it lists. Call once, before ParseFlagsOrExit.
void SetUpProgramUsage(const ProgramUsage& usage);

// Parses the flags out of argv and returns what is left (argv[0] first). Exits 0 after --help or
// --version, and kUsageError after a flag abseil cannot parse (its message on stderr).
std::vector<char*> ParseFlagsOrExit(int argc, char** argv);

}  // namespace pkserve
