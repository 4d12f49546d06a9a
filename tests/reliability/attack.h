// The harness of the exposed-endpoint attack tests (issue 23): a pkserve child on loopback, a
// well-behaved caller beside the attacker (TopK, 4 rows of 1024x1024 bf16, at a fixed rate, each
// answer checked bit for bit), and the server's resident set sampled throughout. A test runs its
// attack on a few threads for AttackDuration() and then asserts what must hold under any attack:
//
//   - the good caller got >= 90% of its calls through during the attack, and every call it began
//     2 s or more after the attack ended;
//   - the server's RSS grew by at most 256 MiB over its level before the attack, and came back
//     (within 64 MiB of it) after;
//   - with the attack started again, SIGTERM ends the process (exit 0) within --drain_timeout_s
//     (2 s here) + 1 s.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "tests/server/pkserve_process.h"

namespace pkserve::testing {

// How long each attack runs: PK_ATTACK_SECONDS, else 30 s (the figure).
absl::Duration AttackDuration();

// One attacker thread's work: attack until `stop` is set, then return (promptly).
using Attacker = std::function<void(const std::atomic<bool>& stop)>;

class AttackHarness {
 public:
  // Starts pkserve (--backend=cpu --threads=2 --drain_timeout_s=2 on a free loopback port, no
  // metrics endpoint unless `extra_flags` ask for one, and `extra_flags`) and the good caller,
  // and waits for the caller's first answers. A `launcher` (a program and its arguments, e.g.
  // prlimit) runs pkserve when given.
  // With `front`, called with pkserve's port, the good caller (and target()) go to the port
  // `front` returns instead (a proxy it started before pkserve's drain is checked).
  explicit AttackHarness(const std::vector<std::string>& extra_flags = {},
                         const std::vector<std::string>& launcher = {},
                         const std::function<int(int)>& front = {});
  ~AttackHarness();
  AttackHarness(const AttackHarness&) = delete;
  AttackHarness& operator=(const AttackHarness&) = delete;

  PkserveProcess& server() { return *server_; }
  // Where callers go: the front's port when there is one, else pkserve's.
  int port() const { return port_; }
  std::string target() const;

  // Runs `attacker` on `threads` threads for AttackDuration(), then checks everything listed
  // above (test failures for what does not hold), printing what was measured. `after_attack`,
  // when given, runs once the attack is over and the server has recovered, before the SIGTERM.
  void RunAndCheck(const std::string& name, int threads, const Attacker& attacker,
                   const std::function<void()>& after_attack = {});

 private:
  struct Call {
    absl::Time started;
    bool ok = false;
  };
  void CallWell(uint64_t seed);  // the good caller's thread
  void SampleRss();              // the RSS sampler's thread
  // Of the good caller's calls begun in [from, to): how many, how many OK.
  std::pair<int64_t, int64_t> Calls(absl::Time from, absl::Time to) const;

  std::unique_ptr<PkserveProcess> server_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<Call> calls_;    // guarded by mutex_
  std::string first_failure_;  // guarded by mutex_
  int64_t peak_rss_kib_ = 0;   // guarded by mutex_; since the last reset
  std::thread caller_;
  std::thread sampler_;
};

}  // namespace pkserve::testing
