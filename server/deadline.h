// A call's deadline as absl::Time, read from gRPC's own gpr_timespec. gRPC's
// ServerContext::deadline() converts to std::chrono::system_clock, whose nanosecond count ends in
// the year 2262: a grpc-timeout of about 2 080 000 hours or more (how some clients spell "no
// deadline") overflows there into a time long past, and the call would be refused as expired.
// Read from the timespec instead, any deadline more than kNoDeadlineBeyond away is no deadline.
#pragma once

#include <grpc/support/time.h>

#include "absl/time/time.h"

namespace pkserve {

// Deadlines further away than this (from now) are treated as no deadline at all.
inline constexpr absl::Duration kNoDeadlineBeyond = absl::Hours(24 * 365 * 100);

// `deadline` (any gRPC clock) as absl::Time: InfiniteFuture for gRPC's infinite future and for
// anything more than kNoDeadlineBeyond after `now`.
absl::Time DeadlineFromTimespec(gpr_timespec deadline, absl::Time now);

}  // namespace pkserve
