// Unit tests for the bounded flock wait and the cache umask scope.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "core/config.hpp"
#include "storage/open.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/lock.hpp"
#include "util/scoped_file.hpp"

namespace kache::util {
namespace {

class LockTimeoutGuard {
 public:
  explicit LockTimeoutGuard(std::int64_t ms) : saved_(lock_timeout_ms()) { set_lock_timeout_ms(ms); }
  ~LockTimeoutGuard() { set_lock_timeout_ms(saved_); }

 private:
  std::int64_t saved_;
};

TEST(BoundedLock, GivesUpOnAHeldLockAndTakesAFreeOne) {
  TempDir dir("/tmp", "kache-lock-");
  const std::string path = join_path(dir.path(), "lock");
  // Two open file descriptions: flock treats them as two holders, as two processes would be.
  UniqueFd holder(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  UniqueFd waiter(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_GE(holder.get(), 0);
  ASSERT_GE(waiter.get(), 0);
  ASSERT_EQ(::flock(holder.get(), LOCK_EX), 0);
  LockTimeoutGuard guard(50);
  EXPECT_THROW(lock_bounded(waiter.get(), LOCK_EX, path), LockTimeout);
  EXPECT_THROW(lock_bounded(waiter.get(), LOCK_SH, path), LockTimeout);
  holder.reset();  // released
  EXPECT_NO_THROW(lock_bounded(waiter.get(), LOCK_EX, path));
}

TEST(BoundedLock, SharedLocksDoNotWaitForEachOther) {
  TempDir dir("/tmp", "kache-lock-");
  const std::string path = join_path(dir.path(), "lock");
  UniqueFd a(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  UniqueFd b(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  LockTimeoutGuard guard(0);  // no waiting at all: only a free lock can be taken
  EXPECT_NO_THROW(lock_bounded(a.get(), LOCK_SH, path));
  EXPECT_NO_THROW(lock_bounded(b.get(), LOCK_SH, path));
}

TEST(CacheUmask, AppliesOnlyInsideTheScope) {
  const mode_t user = ::umask(077);
  set_cache_umask(002);
  {
    CacheUmaskScope scope;
    const mode_t inside = ::umask(002);
    EXPECT_EQ(inside, 002u);
  }
  const mode_t after = ::umask(077);
  EXPECT_EQ(after, 077u);
  set_cache_umask(-1);
  {
    CacheUmaskScope scope;  // none configured: the process umask stays
    const mode_t inside = ::umask(077);
    EXPECT_EQ(inside, 077u);
  }
  ::umask(user);
}

TEST(CacheUmask, ConfigKeysParse) {
  ::setenv("KACHE_UMASK", "007", 1);
  ::setenv("KACHE_LOCK_TIMEOUT", "1.5", 1);
  ::setenv("KACHE_ALLOW_WORLD_WRITABLE", "yes", 1);
  ::setenv("KACHE_CONFIG", "/nonexistent/kache.toml", 1);
  const core::Config c = core::load_config(storage::remote_url_schemes());
  ::unsetenv("KACHE_UMASK");
  ::unsetenv("KACHE_LOCK_TIMEOUT");
  ::unsetenv("KACHE_ALLOW_WORLD_WRITABLE");
  ::unsetenv("KACHE_CONFIG");
  EXPECT_EQ(c.cache_umask, 007);
  EXPECT_DOUBLE_EQ(c.lock_timeout_s, 1.5);
  EXPECT_TRUE(c.allow_world_writable);
  EXPECT_TRUE(c.problems.empty());
}

}  // namespace
}  // namespace kache::util
