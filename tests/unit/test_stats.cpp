// Unit tests for the persistent stats counters.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/stats.hpp"
#include "util/fs.hpp"

namespace kache::core {
namespace {

std::string test_root() { return (std::filesystem::temp_directory_path() / "kache-unit").string(); }

class StatsTest : public ::testing::Test {
 protected:
  std::string file() const { return util::join_path(dir_.path(), "stats"); }
  std::string journal() const { return util::join_path(dir_.path(), "stats.journal"); }
  util::TempDir dir_{test_root()};
};

TEST_F(StatsTest, MissingFileReadsEmpty) {
  StatsFile stats(dir_.path());
  EXPECT_TRUE(stats.read().counters.empty());
  EXPECT_EQ(stats.read().get(counter::kHits), 0u);
}

TEST_F(StatsTest, AddAccumulatesAndPersists) {
  StatsFile stats(dir_.path());
  stats.add({{counter::kHits, 2}, {counter::kMisses, 1}});
  stats.add({{counter::kHits, 3}, {"passthrough.preprocess_only", 1}});
  const auto snap = StatsFile(dir_.path()).read();
  EXPECT_EQ(snap.get(counter::kHits), 5u);
  EXPECT_EQ(snap.get(counter::kMisses), 1u);
  EXPECT_EQ(snap.get("passthrough.preprocess_only"), 1u);
  EXPECT_EQ(snap.get("nope"), 0u);
  // Compaction folds the journal into the totals file and empties it; the sums stay.
  stats.compact();
  EXPECT_EQ(util::read_file(file()), "hits 5\nmisses 1\npassthrough.preprocess_only 1\n");
  EXPECT_EQ(util::read_file(journal()), "");
  EXPECT_EQ(stats.read().get(counter::kHits), 5u);
  stats.add({{counter::kHits, 1}});
  EXPECT_EQ(stats.read().get(counter::kHits), 6u);
}

TEST_F(StatsTest, AHugeSparseJournalIsDroppedNotRead) {
  StatsFile stats(dir_.path());
  stats.add({{counter::kHits, 2}});
  stats.compact();
  // A group member's `truncate -s 1T stats.journal`: a compile must not read it (under the lock).
  std::filesystem::resize_file(journal(), std::uintmax_t(1) << 40);
  EXPECT_EQ(stats.read().get(counter::kHits), 2u) << "the totals are read without the journal";
  stats.add({{counter::kHits, 1}});  // past kCompactAt: compacts, dropping what it cannot read
  EXPECT_LT(std::filesystem::file_size(journal()), std::uintmax_t(1) << 20);
  EXPECT_EQ(stats.read().get(counter::kHits), 2u);
}

TEST_F(StatsTest, ZeroEmpties) {
  StatsFile stats(dir_.path());
  stats.add({{counter::kErrors, 4}});
  stats.zero();
  EXPECT_TRUE(stats.read().counters.empty());
  stats.add({{counter::kErrors, 1}});
  EXPECT_EQ(stats.read().get(counter::kErrors), 1u);
}

TEST_F(StatsTest, MalformedLinesAreIgnored) {
  util::write_file(file(), "hits 3\ngarbage\nmisses x\n\nstored 2");
  StatsFile stats(dir_.path());
  stats.add({{counter::kHits, 1}});
  const auto snap = stats.read();
  EXPECT_EQ(snap.get(counter::kHits), 4u);
  EXPECT_EQ(snap.get(counter::kStored), 2u);
  EXPECT_EQ(snap.counters.size(), 2u);
}

TEST_F(StatsTest, AddNeverThrows) {
  // The "cache dir" lies below a regular file: nothing can be created there.
  util::write_file(util::join_path(dir_.path(), "f"), "x");
  StatsFile broken(util::join_path(dir_.path(), "f/cache"));
  EXPECT_NO_THROW(broken.add({{counter::kHits, 1}}));
  // Names that would break the line format are dropped, the rest is counted.
  StatsFile stats(dir_.path());
  EXPECT_NO_THROW(stats.add({{"bad name", 1}, {"", 1}, {counter::kHits, 1}}));
  EXPECT_EQ(stats.read().counters.size(), 1u);
  EXPECT_EQ(stats.read().get(counter::kHits), 1u);
}

TEST_F(StatsTest, CreatesCacheDir) {
  const std::string sub = util::join_path(dir_.path(), "new/cache");
  StatsFile stats(sub);
  stats.add({{counter::kHits, 1}});
  EXPECT_EQ(StatsFile(sub).read().get(counter::kHits), 1u);
}

TEST_F(StatsTest, ConcurrentThreadsLoseNothing) {
  // Each StatsFile::add opens its own lock descriptor, so threads exclude each other like processes.
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([this] {
      StatsFile stats(dir_.path());
      for (int i = 0; i < 50; ++i) stats.add({{counter::kMisses, 1}, {counter::kStored, 2}});
    });
  }
  for (auto& t : threads) t.join();
  const auto snap = StatsFile(dir_.path()).read();
  EXPECT_EQ(snap.get(counter::kMisses), 400u);
  EXPECT_EQ(snap.get(counter::kStored), 800u);
}

// A journal record torn by a crash, damaged, or cut short is ignored; the records around it count.
TEST_F(StatsTest, DamagedJournalRecordsAreIgnored) {
  StatsFile stats(dir_.path());
  stats.add({{counter::kHits, 1}, {counter::kDirectHits, 1}});
  const std::string good = util::read_file(journal());
  ASSERT_TRUE(good.starts_with("@k1 ") && good.ends_with("\n")) << good;
  std::string damaged = good;
  damaged[damaged.size() - 2] = '7';                         // "direct_hits 1 hits 7": the checksum no longer matches
  const std::string torn = good.substr(0, good.size() / 2);  // a write cut short by a crash...
  std::string text = good + damaged + torn + good;           // ...then the next record on its line
  text += good.substr(0, good.size() - 1);                   // the tail, still being written
  util::write_file(journal(), text);
  const auto snap = stats.read();
  EXPECT_EQ(snap.get(counter::kHits), 2u);
  EXPECT_EQ(snap.get(counter::kDirectHits), 2u);
  stats.compact();
  EXPECT_EQ(util::read_file(file()), "direct_hits 2\nhits 2\n");
}

// The hot path appends under a shared lock only: a process holding the old global lock (or any
// exclusive lock but the journal's) does not hold up a hit's counting.
TEST_F(StatsTest, AddTakesNoExclusiveLock) {
  const std::string lock_path = util::join_path(dir_.path(), "stats.lock");
  const int held = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    StatsFile(dir_.path()).add({{counter::kHits, 1}});
    ::_exit(0);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && done == 0; ++i) {
    done = ::waitpid(pid, &status, WNOHANG);
    if (done == 0) ::usleep(10'000);
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ::close(held);
  EXPECT_NE(done, 0) << "add() waited for a lock another process held";
  EXPECT_EQ(StatsFile(dir_.path()).read().get(counter::kHits), done ? 1u : 0u);
}

// Forked writers (enough records to pass kCompactAt several times, so writers compact too) while
// another process compacts in a loop: every record is counted exactly once.
TEST_F(StatsTest, ForkedWritersAndCompactionLoseNothing) {
  constexpr int kWriters = 12, kPerWriter = 150;
  const std::string dir = dir_.path();
  auto spawn = [&](auto&& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      body();
      ::_exit(0);
    }
    return pid;
  };
  std::vector<pid_t> writers;
  const std::string stop = util::join_path(dir, "stop");
  const pid_t compactor = spawn([&] {
    while (!util::exists(stop)) StatsFile(dir).compact();
  });
  ASSERT_GT(compactor, 0);
  for (int w = 0; w < kWriters; ++w) {
    writers.push_back(spawn([&] {
      StatsFile stats(dir);
      for (int i = 0; i < kPerWriter; ++i) stats.add({{counter::kHits, 1}, {"passthrough.long-reason-name", 2}});
    }));
    ASSERT_GT(writers.back(), 0);
  }
  for (pid_t pid : writers) {
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  util::write_file(stop, "");
  int cst = 0;
  ASSERT_EQ(::waitpid(compactor, &cst, 0), compactor);
  EXPECT_TRUE(WIFEXITED(cst) && WEXITSTATUS(cst) == 0);
  const auto snap = StatsFile(dir).read();
  EXPECT_EQ(snap.get(counter::kHits), std::uint64_t{kWriters} * kPerWriter);
  EXPECT_EQ(snap.get("passthrough.long-reason-name"), 2u * kWriters * kPerWriter);
}

// kache -z while writers run: what was counted before the reset is gone, nothing after it is lost,
// and the files stay well-formed.
TEST_F(StatsTest, ZeroDuringWrites) {
  constexpr int kWriters = 8, kPerWriter = 200;
  const std::string dir = dir_.path();
  std::vector<pid_t> writers;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      StatsFile stats(dir);
      for (int i = 0; i < kPerWriter; ++i) stats.add({{counter::kMisses, 1}});
      ::_exit(0);
    }
    writers.push_back(pid);
  }
  ::usleep(2000);
  StatsFile(dir).zero();
  StatsFile(dir).add({{counter::kErrors, 1}});  // after the reset: always counted
  for (pid_t pid : writers) ::waitpid(pid, nullptr, 0);
  const auto snap = StatsFile(dir).read();
  EXPECT_LE(snap.get(counter::kMisses), std::uint64_t{kWriters} * kPerWriter);
  EXPECT_EQ(snap.get(counter::kErrors), 1u);
  StatsFile(dir).add({{counter::kMisses, 1}});
  EXPECT_EQ(StatsFile(dir).read().get(counter::kMisses), snap.get(counter::kMisses) + 1);
  StatsFile(dir).zero();
  EXPECT_TRUE(StatsFile(dir).read().counters.empty());
}

}  // namespace
}  // namespace kache::core
