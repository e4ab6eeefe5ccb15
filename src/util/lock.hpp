#pragma once
// Bounded flock waits. A lock in the cache dir can be held by a process that never lets go in time: one
// stopped by SIGSTOP or a debugger, one on a hung NFS client. A compile must not wait on it forever, so
// every wait polls with LOCK_NB up to a deadline and then gives up; the caller degrades (skips the
// stats update, the store or the eviction) with a named reason, and the build goes on.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kache::util {

// The lock named `what` was still held by another process when the lock timeout passed.
class LockTimeout : public std::runtime_error {
 public:
  explicit LockTimeout(const std::string& what) : std::runtime_error("timed out waiting for the lock " + what) {}
};

// The longest a lock wait lasts, for the whole process (set once from the config: cache.lock_timeout).
inline constexpr std::int64_t kDefaultLockTimeoutMs = 10'000;
void set_lock_timeout_ms(std::int64_t ms);
std::int64_t lock_timeout_ms();

// flock(fd, how) (LOCK_SH or LOCK_EX), retried without blocking until it succeeds or the lock timeout
// passes, the pauses between tries growing to at most max_pause_ns. Throws LockTimeout on timeout,
// std::system_error on any other failure.
inline constexpr std::int64_t kDefaultLockMaxPauseNs = 20'000'000;
void lock_bounded(int fd, int how, const std::string& what, std::int64_t max_pause_ns = kDefaultLockMaxPauseNs);

}  // namespace kache::util
