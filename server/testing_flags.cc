// Flags for tests only, kept out of `pkserve --help` (which lists server/flags.cc alone;
// --helpfull shows them).
#include <cstdint>

#include "absl/flags/flag.h"

ABSL_FLAG(uint32_t, inject_batch_failures, 0,
          "TESTING ONLY: fail every Nth batch with INTERNAL (server/fault_injection.h); 0 = off");
ABSL_FLAG(uint32_t, inject_stream_answer_pause_us, 0,
          "TESTING ONLY: after a stream request's answer is recorded (on the batcher's thread), "
          "pause this long before starting what it calls for, so that a test can make the "
          "stream's other events land in that gap; 0 = off");
