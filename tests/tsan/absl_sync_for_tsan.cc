// ThreadSanitizer builds only (PK_SANITIZE=thread): makes Debian's abseil mutexes visible to TSan.
//
// Debian's libabsl_synchronization is not built with -fsanitize=thread, so TSan sees neither the
// locking of an absl::Mutex nor the order it gives: data handed from one thread to another under
// an absl::Mutex (ours, or gRPC's, which are absl::Mutex too) looks like a race. This file is
// linked into every binary of a TSan build and takes the place of the library's lock, unlock and
// wait functions (the executable's definitions win over the shared library's). Each calls the
// library's own function, found with dlsym(RTLD_NEXT), and tells TSan what it did:
// __tsan_acquire(mutex) once the mutex is held, __tsan_release(mutex) before it is let go.
//
// Waits that release and re-take the mutex inside the library (Await, LockWhen: the library
// evaluates the condition with the mutex taken where TSan cannot see it) are done here instead,
// as a loop of evaluate / unlock / short sleep / lock, so that every evaluation happens under a
// lock TSan saw. Slower than the library's, and the same in what it guarantees. CondVar waits keep
// the library's implementation, annotated around. absl::Notification and absl::BlockingCounter lock
// inside the library (where this file cannot step in), so they are annotated as a whole: release
// on Notify / DecrementCount, acquire when a wait returns. Notification::HasBeenNotified is inline
// in the header and cannot be: a `true` from it orders nothing for TSan.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace {

// The library's function with mangled name `name`, or exit with a message naming it.
template <typename Function>
Function Original(const char* name) {
  void* symbol = dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    std::fprintf(stderr,
                 "absl_sync_for_tsan: %s not found in the loaded abseil (another abseil version? "
                 "update tests/tsan/absl_sync_for_tsan.cc)\n",
                 name);
    std::abort();
  }
  return reinterpret_cast<Function>(symbol);
}

using MutexFunction = void (*)(absl::Mutex*);
using MutexTry = bool (*)(absl::Mutex*);
using CondVarWait = void (*)(absl::CondVar*, absl::Mutex*);
using CondVarWaitUntil = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);

void LockOriginal(absl::Mutex* mu) {
  static const auto lock = Original<MutexFunction>("_ZN4absl7debian35Mutex4LockEv");
  lock(mu);
  __tsan_acquire(mu);
}

void UnlockOriginal(absl::Mutex* mu) {
  static const auto unlock = Original<MutexFunction>("_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(mu);
  unlock(mu);
}

// With `mu` held: waits until `condition` holds or `deadline` passes, evaluating it only with
// `mu` held (taken through LockOriginal); true if it holds.
bool PollUntil(absl::Mutex* mu, const absl::Condition& condition, absl::Time deadline) {
  while (!condition.Eval()) {
    if (absl::Now() >= deadline) return false;
    UnlockOriginal(mu);
    absl::SleepFor(absl::Microseconds(50));
    LockOriginal(mu);
  }
  return true;
}

}  // namespace

namespace absl {

void Mutex::Lock() { LockOriginal(this); }
void Mutex::Unlock() { UnlockOriginal(this); }
// Readers are taken as writers: simpler, and correct (only less concurrent).
void Mutex::ReaderLock() { LockOriginal(this); }
void Mutex::ReaderUnlock() { UnlockOriginal(this); }

bool Mutex::TryLock() {
  static const auto try_lock = Original<MutexTry>("_ZN4absl7debian35Mutex7TryLockEv");
  if (!try_lock(this)) return false;
  __tsan_acquire(this);
  return true;
}
bool Mutex::ReaderTryLock() { return TryLock(); }

void Mutex::Await(const Condition& cond) { PollUntil(this, cond, InfiniteFuture()); }
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  return PollUntil(this, cond, Now() + timeout);
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  return PollUntil(this, cond, deadline);
}

void Mutex::LockWhen(const Condition& cond) {
  LockOriginal(this);
  PollUntil(this, cond, InfiniteFuture());
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  LockOriginal(this);
  return PollUntil(this, cond, Now() + timeout);
}
bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  LockOriginal(this);
  return PollUntil(this, cond, deadline);
}
void Mutex::ReaderLockWhen(const Condition& cond) { LockWhen(cond); }
bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  return LockWhenWithTimeout(cond, timeout);
}
bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  return LockWhenWithDeadline(cond, deadline);
}

void CondVar::Wait(Mutex* mu) {
  static const auto wait = Original<CondVarWait>("_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  wait(this, mu);
  __tsan_acquire(mu);
}
// Timeouts are deadlines from now, as in the library; only the deadline forms call it.
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  return WaitWithDeadline(mu, Now() + timeout);
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto wait = Original<CondVarWaitUntil>(
      "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = wait(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

void Notification::Notify() {
  static const auto notify =
      Original<void (*)(Notification*)>("_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(this);
  notify(this);
}
void Notification::WaitForNotification() const {
  static const auto wait = Original<void (*)(const Notification*)>(
      "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  wait(this);
  __tsan_acquire(const_cast<Notification*>(this));
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  return WaitForNotificationWithDeadline(Now() + timeout);
}
bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto wait = Original<bool (*)(const Notification*, Time)>(
      "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = wait(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool BlockingCounter::DecrementCount() {
  static const auto decrement = Original<bool (*)(BlockingCounter*)>(
      "_ZN4absl7debian315BlockingCounter14DecrementCountEv");
  __tsan_release(this);
  return decrement(this);
}
void BlockingCounter::Wait() {
  static const auto wait =
      Original<void (*)(BlockingCounter*)>("_ZN4absl7debian315BlockingCounter4WaitEv");
  wait(this);
  __tsan_acquire(this);
}

}  // namespace absl
