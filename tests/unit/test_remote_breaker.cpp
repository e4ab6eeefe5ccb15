// Unit tests for the remote breaker: state shared through files, one prober at a time, a fake clock.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "servers.hpp"
#include "storage/remote/breaker.hpp"
#include "util/fs.hpp"

namespace kache::storage::remote {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;

struct BreakerTest : ::testing::Test {
  std::string dir = testing::make_temp_dir("kache-breaker");
  std::int64_t clock_ns = 1000 * kSecond;
  BreakerOptions options() {
    return BreakerOptions{dir + "/remote", 3, 30 * kSecond, [this] { return clock_ns; }};
  }
  ~BreakerTest() override { util::remove_all(dir); }
};

TEST_F(BreakerTest, OpensAfterThreeConsecutiveFailuresAndSharesItAcrossInstances) {
  Breaker a(options(), "redis://h:1/0");
  EXPECT_EQ(a.decide(), Breaker::Decision::use);
  a.record_failure();
  a.record_failure();
  EXPECT_EQ(a.decide(), Breaker::Decision::use);
  a.record_success();  // consecutive failures only
  a.record_failure();
  a.record_failure();
  EXPECT_EQ(a.decide(), Breaker::Decision::use);
  a.record_failure();
  EXPECT_EQ(a.read_state().failures, 3);
  EXPECT_EQ(a.decide(), Breaker::Decision::skip);
  // Another process (here: another instance, its own file descriptors) sees the same state.
  Breaker b(options(), "redis://h:1/0");
  EXPECT_EQ(b.decide(), Breaker::Decision::skip);
  // A different remote is not affected.
  Breaker other(options(), "redis://h:2/0");
  EXPECT_EQ(other.decide(), Breaker::Decision::use);

  clock_ns += 29 * kSecond;
  EXPECT_EQ(b.decide(), Breaker::Decision::skip);
  clock_ns += 1 * kSecond;
  // Cooled down: exactly one of them probes, the other keeps skipping while the probe runs.
  EXPECT_EQ(a.decide(), Breaker::Decision::probe);
  EXPECT_EQ(b.decide(), Breaker::Decision::skip);
  a.record_failure();  // the probe failed: open for another 30 s
  EXPECT_EQ(b.decide(), Breaker::Decision::skip);
  clock_ns += 30 * kSecond;
  EXPECT_EQ(b.decide(), Breaker::Decision::probe);
  EXPECT_EQ(a.decide(), Breaker::Decision::skip);
  b.record_success();  // closed again for everybody
  EXPECT_EQ(a.decide(), Breaker::Decision::use);
  EXPECT_EQ(b.decide(), Breaker::Decision::use);
  EXPECT_EQ(a.read_state().failures, 0);
}

TEST_F(BreakerTest, ADeadProberDoesNotBlockTheNextOne) {
  {
    Breaker a(options(), "http://h/c");
    for (int i = 0; i < 3; ++i) a.record_failure();
    clock_ns += 31 * kSecond;
    ASSERT_EQ(a.decide(), Breaker::Decision::probe);
    // `a` goes away without reporting (its process died): the kernel drops its flock.
  }
  Breaker b(options(), "http://h/c");
  EXPECT_EQ(b.decide(), Breaker::Decision::probe);
}

TEST_F(BreakerTest, UnusableStateDirectoryMeansUse) {
  util::write_file(dir + "/remote", "a file where the directory should be");
  Breaker a(options(), "redis://h:1/0");
  for (int i = 0; i < 5; ++i) a.record_failure();
  EXPECT_EQ(a.decide(), Breaker::Decision::use);
}

TEST_F(BreakerTest, CorruptStateFileMeansClosed) {
  Breaker a(options(), "redis://h:1/0");
  for (int i = 0; i < 3; ++i) a.record_failure();
  for (const auto& e : std::filesystem::directory_iterator(dir + "/remote")) {
    if (e.path().extension() == ".state") util::write_file(e.path().string(), "garbage");
  }
  EXPECT_EQ(a.decide(), Breaker::Decision::use);
}

// The state directory lies in the cache dir, which a group may share: a FIFO planted at the state or
// probe file never waits (a stuck call kills the test), a link there is never written through.
TEST_F(BreakerTest, PlantedFifosAndLinksAreNeitherWaitedOnNorFollowed) {
  Breaker a(options(), "redis://h:1/0");
  for (int i = 0; i < 3; ++i) a.record_failure();
  std::filesystem::create_directories(dir + "/outside");
  util::write_file(dir + "/outside/profile", "mine");
  for (const auto& e : std::filesystem::directory_iterator(dir + "/remote")) {
    const std::string path = e.path().string();
    std::filesystem::remove(path);
    if (e.path().extension() == ".state") {
      ASSERT_EQ(::mkfifo(path.c_str(), 0666), 0);
    }
  }
  ::alarm(20);
  EXPECT_EQ(a.decide(), Breaker::Decision::use) << "an unreadable state is closed";
  for (const auto& e : std::filesystem::directory_iterator(dir + "/remote")) {
    std::filesystem::remove(e.path());
    std::filesystem::create_symlink(dir + "/outside/profile", e.path());
  }
  for (int i = 0; i < 3; ++i) a.record_failure();
  a.decide();
  ::alarm(0);
  EXPECT_EQ(util::read_file(dir + "/outside/profile"), "mine");
}

}  // namespace
}  // namespace kache::storage::remote
