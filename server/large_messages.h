// Process settings for the programs that move large gRPC messages: pkserve, pkserve-bench and
// pkserve-cli's batch runs. Header-only, so that each program takes it without a library.
#pragma once

#include <malloc.h>

#include <cstddef>

#include "absl/synchronization/mutex.h"

namespace pkserve {

// Called first in main (before any thread starts):
//   - glibc gives every block over 128 KiB (a request or answer of a few hundred rows, parsed,
//     received or serialized) a fresh mmap() and returns it on free, so each large message pays
//     its page faults again (half of the echo's CPU at 1 MiB requests; 2.6 faults a row in a
//     pkserve-cli batch run). Blocks up to 32 MiB come from the heap instead, and up to
//     `keep_freed_bytes` of freed heap stays for reuse rather than going back to the kernel: a
//     program's memory stays what its messages in flight need at their peak.
//   - Debian builds abseil without NDEBUG, so every absl::Mutex lock (gRPC's own included) would
//     update a lock graph for deadlock detection, a cost on every lock; it is turned off.
inline void SetUpForLargeMessages(size_t keep_freed_bytes) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep_freed_bytes));
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace pkserve
