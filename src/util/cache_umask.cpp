#include "util/cache_umask.hpp"

#include <sys/stat.h>

#include <atomic>

namespace kache::util {
namespace {
std::atomic<int> g_cache_umask{-1};
}

void set_cache_umask(int mask) { g_cache_umask.store(mask < 0 ? -1 : (mask & 0777)); }

int cache_umask() { return g_cache_umask.load(); }

CacheUmaskScope::CacheUmaskScope() {
  const int mask = cache_umask();
  if (mask >= 0) saved_ = static_cast<int>(::umask(static_cast<mode_t>(mask)));
}

CacheUmaskScope::~CacheUmaskScope() {
  if (saved_ >= 0) ::umask(static_cast<mode_t>(saved_));
}

}  // namespace kache::util
