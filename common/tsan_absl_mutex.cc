// Makes absl::Mutex visible to ThreadSanitizer in the tsan preset (KF_TSAN_ABSL_MUTEX).
//
// Debian's libabsl is not built with -fsanitize=thread, so its Mutex takes and releases the
// lock with atomics TSan never sees, and TSan reports every access guarded by an absl::Mutex
// across threads as a data race. The tsan link wraps the four Mutex calls kube-fanout makes
// (through absl::MutexLock and absl::ReaderMutexLock; -Wl,--wrap in CMakeLists.txt) and tells
// TSan the lock's happens-before edges: acquire after taking it, release before giving it up.
// The names are Debian's abseil 20220623 (inline namespace debian3).
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"

extern "C" {
// NOLINTBEGIN(bugprone-reserved-identifier,readability-identifier-naming)
void __real__ZN4absl7debian35Mutex4LockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex6UnlockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex10ReaderLockEv(absl::Mutex* mu);
void __real__ZN4absl7debian35Mutex12ReaderUnlockEv(absl::Mutex* mu);

void __wrap__ZN4absl7debian35Mutex4LockEv(absl::Mutex* mu) {
  __real__ZN4absl7debian35Mutex4LockEv(mu);
  __tsan_acquire(mu);
}
void __wrap__ZN4absl7debian35Mutex6UnlockEv(absl::Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex6UnlockEv(mu);
}
void __wrap__ZN4absl7debian35Mutex10ReaderLockEv(absl::Mutex* mu) {
  __real__ZN4absl7debian35Mutex10ReaderLockEv(mu);
  __tsan_acquire(mu);
}
void __wrap__ZN4absl7debian35Mutex12ReaderUnlockEv(absl::Mutex* mu) {
  __tsan_release(mu);
  __real__ZN4absl7debian35Mutex12ReaderUnlockEv(mu);
}
// NOLINTEND(bugprone-reserved-identifier,readability-identifier-naming)
}
