// The command line the golden checkers share: FILE [--backend cpu|cuda|all] [--threads N].
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace pk::tools {

struct GoldenArgs {
  std::string path;
  std::string backend = "cpu";  // cpu, cuda or all
  int threads = 1;
};

// Prints `message` and the usage of `program` (`summary` says what it checks) on stderr; returns
// the usage error's exit status, 2.
inline int GoldenUsage(const char* program, const char* summary, const std::string& message) {
  std::fprintf(stderr,
               "%s\nusage: %s FILE [--backend cpu|cuda|all] [--threads N]\n"
               "  %s (default backend cpu).\n"
               "  all: the CPU and, where built and a device is usable, CUDA.\n",
               message.c_str(), program, summary);
  return 2;
}

// Parses argv into *args. Returns -1 to go on, or the exit status to return at once (0 after
// --help, 2 after a usage error, its message printed).
inline int ParseGoldenArgs(int argc, char** argv, const char* program, const char* summary,
                           GoldenArgs* args) {
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto value = [&](const char* flag) -> const char* {
      const size_t length = std::strlen(flag);
      if (arg.compare(0, length, flag) == 0 && arg.size() > length && arg[length] == '=') {
        return argv[a] + length + 1;
      }
      if (arg == flag && a + 1 < argc) return argv[++a];
      return nullptr;
    };
    if (arg == "--help" || arg == "-h") {
      GoldenUsage(program, summary, std::string(program) + ": " + summary);
      return 0;
    }
    if (const char* v = value("--backend")) {
      args->backend = v;
    } else if (const char* v = value("--threads")) {
      args->threads = std::atoi(v);
      if (args->threads < 1 || args->threads > 1024) {
        return GoldenUsage(program, summary, "--threads must be in [1, 1024]");
      }
    } else if (!arg.empty() && arg[0] == '-') {
      return GoldenUsage(program, summary, "unknown option " + arg);
    } else if (args->path.empty()) {
      args->path = arg;
    } else {
      return GoldenUsage(program, summary, "only one FILE may be given");
    }
  }
  if (args->path.empty()) return GoldenUsage(program, summary, "missing FILE");
  if (args->backend != "cpu" && args->backend != "cuda" && args->backend != "all") {
    return GoldenUsage(program, summary,
                       "--backend must be cpu, cuda or all, got " + args->backend);
  }
  return -1;
}

}  // namespace pk::tools
