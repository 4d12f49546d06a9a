// Flags for tests only, kept out of `pkserve --help` (which lists server/flags.cc alone;
// --helpfull shows them).
#include <cstdint>

#include "absl/flags/flag.h"

ABSL_FLAG(uint32_t, inject_batch_failures, 0,
          "TESTING ONLY: fail every Nth batch with INTERNAL (server/fault_injection.h); 0 = off");
