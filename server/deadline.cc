#include "server/deadline.h"

#include <cstdint>
#include <limits>

namespace pkserve {

absl::Time DeadlineFromTimespec(gpr_timespec deadline, absl::Time now) {
  if (deadline.tv_sec == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  // gpr's conversion between clocks saturates to the infinite future rather than overflowing.
  const gpr_timespec realtime = gpr_convert_clock_type(deadline, GPR_CLOCK_REALTIME);
  if (realtime.tv_sec == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  const absl::Time at =
      absl::FromUnixSeconds(realtime.tv_sec) + absl::Nanoseconds(realtime.tv_nsec);
  if (at - now > kNoDeadlineBeyond) return absl::InfiniteFuture();
  return at;
}

}  // namespace pkserve
