#include "util/clock.hpp"

#include <time.h>

#if defined(__linux__)
#include <sys/vfs.h>

#include <cerrno>
#include <cstdint>

#include "util/fs.hpp"
#endif

namespace kache::util {

std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

#if defined(__linux__)

namespace {

constexpr std::int64_t kTwoSeconds = 2'000'000'000;

// Filesystems that store whole or even seconds.
bool coarse_time_fs(std::uint64_t magic) {
  switch (magic) {
    case 0x4d44:      // MSDOS_SUPER_MAGIC (FAT, vfat)
    case 0x2011BAB0:  // exFAT
    case 0x4244:      // HFS
    case 0x482b:      // HFS+
      return true;
    default:
      return false;
  }
}

}  // namespace

std::int64_t file_time_margin_ns(const std::string& path) {
  // The path may not exist yet (an output file): ask about the nearest existing ancestor.
  std::string p = path.empty() ? std::string(".") : path;
  struct statfs sfs {};
  bool have_fs = false;
  for (;;) {
    if (::statfs(p.c_str(), &sfs) == 0) {
      have_fs = true;
      break;
    }
    if (errno != ENOENT && errno != ENOTDIR) break;
    std::string parent = dirname(p);
    if (parent == p) break;
    p = std::move(parent);
  }
  if (have_fs && coarse_time_fs(static_cast<std::uint64_t>(sfs.f_type))) return kTwoSeconds;

  // Linux stamps mtime/ctime from the coarse realtime clock, and file_clock_now_ns() reads that same
  // clock: a file time is never behind it, so no margin is needed. (Multigrain timestamps, Linux 6.13+,
  // only make file times finer, i.e. later, which keeps the comparison safe.)
  return 0;
}

std::int64_t file_clock_now_ns() {
  struct timespec ts {};
  if (::clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0) return now_ns();
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

#elif defined(__APPLE__)

std::int64_t file_time_margin_ns(const std::string&) { return 1'000'000; }
std::int64_t file_clock_now_ns() { return now_ns(); }

#else

std::int64_t file_time_margin_ns(const std::string&) { return 20'000'000; }
std::int64_t file_clock_now_ns() { return now_ns(); }

#endif

}  // namespace kache::util
