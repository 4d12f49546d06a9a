// Flags for tests only, kept out of `pkserve-bench --help` (which lists client/bench/main.cc
// alone; --helpfull shows them).
#include <cstdint>

#include "absl/flags/flag.h"

ABSL_FLAG(uint32_t, inject_answer_pause_us, 0,
          "TESTING ONLY: after a stream's answer is recorded, hold its completion thread this "
          "long before the stream takes its next request, so that a level's end lands in that "
          "gap; 0 = off");
