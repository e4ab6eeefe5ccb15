#pragma once
// A write to a connection the server has closed raises SIGPIPE, whose default action would kill kache
// instead of turning into a RemoteError. hiredis writes with write(2) (no MSG_NOSIGNAL) and other
// libraries may too, so each remote operation runs with SIGPIPE blocked in its thread; a SIGPIPE it
// caused is consumed before the mask is restored. Ignoring SIGPIPE process-wide is not an option:
// SIG_IGN survives execve, and the compiler kache runs must get the default disposition.
#include <signal.h>
#include <time.h>

namespace kache::storage::remote {

class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    // A SIGPIPE already pending before us is not ours to consume.
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeGuard() {
    if (!blocked_) return;
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

}  // namespace kache::storage::remote
