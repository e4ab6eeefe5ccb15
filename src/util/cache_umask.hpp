#pragma once
// The umask for files and directories kache creates in the cache dir (cache.umask / KACHE_UMASK, like
// ccache's `umask`): a cache shared by a group needs group-writable files even when the user's own
// umask is 022 or 077. Build outputs keep the user's umask, so it is applied only around the code
// that writes into the cache, never around the compiler or a hit's restore into the output directory.
#include <sys/types.h>

namespace kache::util {

// -1: not configured (files in the cache get the process umask).
void set_cache_umask(int mask);
int cache_umask();

// Swaps in the cache umask for its lifetime (nothing when none is configured). umask is per process:
// kache's worker threads only stat files, none creates one while this is active.
class CacheUmaskScope {
 public:
  CacheUmaskScope();
  ~CacheUmaskScope();
  CacheUmaskScope(const CacheUmaskScope&) = delete;
  CacheUmaskScope& operator=(const CacheUmaskScope&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace kache::util
