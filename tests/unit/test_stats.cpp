// Unit tests for the persistent stats counters.
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
  EXPECT_EQ(util::read_file(file()), "hits 5\nmisses 1\npassthrough.preprocess_only 1\n");
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

}  // namespace
}  // namespace kache::core
