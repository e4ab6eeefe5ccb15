#include "util/lock.hpp"

#include <sys/file.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>
#include <system_error>

namespace kache::util {
namespace {

std::atomic<std::int64_t> g_timeout_ms{kDefaultLockTimeoutMs};

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void set_lock_timeout_ms(std::int64_t ms) { g_timeout_ms.store(std::max<std::int64_t>(ms, 0)); }

std::int64_t lock_timeout_ms() { return g_timeout_ms.load(); }

void lock_bounded(int fd, int how, const std::string& what, std::int64_t max_pause_ns) {
  const std::int64_t deadline = monotonic_ns() + lock_timeout_ms() * 1'000'000;
  // Locks in the cache are held for a rename and a counter write (microseconds) or an eviction pass:
  // start polling fast, back off (to 20 ms by default) so that a long wait costs little CPU.
  std::int64_t pause_ns = 50'000;
  for (;;) {
    if (::flock(fd, how | LOCK_NB) == 0) return;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) throw std::system_error(errno, std::generic_category(), "flock " + what);
    const std::int64_t now = monotonic_ns();
    if (now >= deadline) throw LockTimeout(what);
    const std::int64_t sleep_ns = std::min(pause_ns, deadline - now);
    timespec ts{static_cast<time_t>(sleep_ns / 1'000'000'000), static_cast<long>(sleep_ns % 1'000'000'000)};
    ::nanosleep(&ts, nullptr);
    pause_ns = std::min<std::int64_t>(pause_ns * 2, max_pause_ns);
  }
}

}  // namespace kache::util
