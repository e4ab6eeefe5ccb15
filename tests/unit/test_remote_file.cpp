// Unit tests for the shared-directory remote (file:///PATH): the URL, publication by rename, a vanished
// or cut-short file, an unmounted share, read-only, eviction by age and maintain(), and what others
// plant in the share (links, FIFOs, directories) and the cache umask.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <utime.h>

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "core/remote_url.hpp"
#include "storage/remote/file_storage.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/schemes.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"

namespace kache::storage::remote {
namespace {

class SharedDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "kache-shared-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  FileStorage store(const std::string& attributes = "") {
    return FileStorage(core::parse_remote_url("file://" + dir_ + "/" + attributes, {}, remote_schemes()), UINT64_MAX,
                       false);
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
      if (e.is_regular_file()) out.push_back(std::filesystem::relative(e.path(), dir_).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string dir_;
};

TEST(FileUrl, Forms) {
  const auto u = core::parse_remote_url("file:///srv/kache//|read-only", {}, remote_schemes());
  EXPECT_EQ(u.scheme, "file");
  EXPECT_EQ(u.path, "/srv/kache");
  EXPECT_TRUE(u.read_only);
  EXPECT_EQ(u.to_string(true), "file:///srv/kache|read-only");
  EXPECT_EQ(core::parse_remote_url(u.to_string(true), {}, remote_schemes()), u);
  const auto limited = core::parse_remote_url("file:///srv/kache|max-size=2k", {}, remote_schemes());
  EXPECT_EQ(file_max_size(limited), 2048u);
  EXPECT_EQ(limited.to_string(true), "file:///srv/kache|max-size=2048");
  EXPECT_EQ(core::parse_remote_url("file:///x|max-size=0", {}, remote_schemes()).redacted(), "file:///x");
  for (const char* bad : {"file://host/x", "file://", "file:///a b", "file:///a%20b", "file:///x|layout=flat",
                          "file:///x|max-size=lots", "redis://h|max-size=1G"}) {
    EXPECT_THROW(core::parse_remote_url(bad, {}, remote_schemes()), core::RemoteUrlError) << bad;
  }
}

TEST_F(SharedDirectory, PublishesWholeValuesByRename) {
  auto s = store();
  EXPECT_EQ(s.get("abcdef"), std::nullopt);
  s.put("abcdef", "value one");
  EXPECT_EQ(s.get("abcdef"), std::optional<std::string>("value one"));
  s.put("abcdef", "value two");
  EXPECT_EQ(s.get("abcdef"), std::optional<std::string>("value two"));
  EXPECT_EQ(files(), std::vector<std::string>{"ab/abcdef"});  // no temporary file left behind
  s.remove("abcdef");
  s.remove("abcdef");  // already gone: no failure
  EXPECT_EQ(s.get("abcdef"), std::nullopt);
}

TEST_F(SharedDirectory, CutShortIsReadAsItIsAndVanishedIsAMiss) {
  auto s = store();
  s.put("abcdef", "a whole value");
  ASSERT_EQ(::truncate(s.key_path("abcdef").c_str(), 3), 0);
  EXPECT_EQ(s.get("abcdef"), std::optional<std::string>("a w"));  // the entry's own check refuses it
  std::filesystem::remove(s.key_path("abcdef"));
  EXPECT_EQ(s.get("abcdef"), std::nullopt);
}

TEST_F(SharedDirectory, AnUnmountedShareIsAnErrorNotAMiss) {
  FileStorage s(core::parse_remote_url("file://" + dir_ + "/not-mounted", {}, remote_schemes()), UINT64_MAX, false);
  EXPECT_THROW(s.get("abcdef"), RemoteError);
  EXPECT_THROW(s.put("abcdef", "v"), RemoteError);
}

TEST_F(SharedDirectory, ReadOnlyWritesNothing) {
  auto s = store("|read-only");
  s.put("abcdef", "v");
  EXPECT_TRUE(files().empty());
}

TEST_F(SharedDirectory, EvictsByAgeAndAbandonedTemporaryFiles) {
  auto s = store();
  s.put("aaaaaa", "old");
  s.put("bbbbbb", "new");
  util::write_file(util::join_path(dir_, "aa/.tmp.aaaaaa.1.x"), "left by a writer that died");
  const std::time_t two_days_ago = std::time(nullptr) - 2 * 86400;
  const struct utimbuf old_times { two_days_ago, two_days_ago };
  ASSERT_EQ(::utime(s.key_path("aaaaaa").c_str(), &old_times), 0);
  ASSERT_EQ(::utime(util::join_path(dir_, "aa/.tmp.aaaaaa.1.x").c_str(), &old_times), 0);
  EXPECT_EQ(s.evict_older_than(86400), 1u);
  EXPECT_EQ(files(), std::vector<std::string>{"bb/bbbbbb"});
}

TEST_F(SharedDirectory, TrimsTheLeastRecentlyUsedToMaxSize) {
  auto s = store("|max-size=250");
  const std::time_t now = std::time(nullptr);
  for (int i = 0; i < 4; ++i) {
    const std::string key = "k" + std::to_string(i) + "xxxx";
    s.put(key, std::string(100, 'v'));
    const struct utimbuf times { now - 1000 + i, now - 1000 + i };  // k0 the least recently used
    ASSERT_EQ(::utime(s.key_path(key).c_str(), &times), 0);
  }
  EXPECT_EQ(s.trim_to_max_size(), 2u);
  EXPECT_EQ(files(), (std::vector<std::string>{"k2/k2xxxx", "k3/k3xxxx"}));
  EXPECT_EQ(store().trim_to_max_size(), 0u);  // no max-size: nothing
}

// maintain(), what `kache -c` and `--evict-older-than` reach it by: trimmed to its max-size= (nothing to
// do without one), evicted by age, and never changed when read-only.
TEST_F(SharedDirectory, MaintainsWhatItKeepsUnlessReadOnly) {
  auto s = store("|max-size=150");
  s.put("aaaaaa", std::string(100, 'v'));
  s.put("bbbbbb", std::string(100, 'v'));
  const std::time_t two_days_ago = std::time(nullptr) - 2 * 86400;
  const struct utimbuf old_times { two_days_ago, two_days_ago };
  ASSERT_EQ(::utime(s.key_path("aaaaaa").c_str(), &old_times), 0);
  const Maintenance trim{Maintenance::Kind::trim_to_max_size, 0};
  const Maintenance evict{Maintenance::Kind::evict_older_than, 86400};
  EXPECT_FALSE(store().maintain(trim).has_value());
  EXPECT_FALSE(store("|read-only").maintain(evict).has_value());
  FileStorage every_remote_read_only(core::parse_remote_url("file://" + dir_, {}, remote_schemes()), UINT64_MAX, true);
  EXPECT_FALSE(every_remote_read_only.maintain(evict).has_value());
  EXPECT_EQ(files(), (std::vector<std::string>{"aa/aaaaaa", "bb/bbbbbb"}));
  const auto evicted = s.maintain(evict);
  ASSERT_TRUE(evicted.has_value());
  EXPECT_EQ(evicted->store, s.name());
  EXPECT_EQ(evicted->removed, 1u);
  EXPECT_EQ(files(), std::vector<std::string>{"bb/bbbbbb"});
  s.put("cccccc", std::string(100, 'v'));
  ASSERT_EQ(::utime(s.key_path("bbbbbb").c_str(), &old_times), 0);
  const auto trimmed = s.maintain(trim);
  ASSERT_TRUE(trimmed.has_value());
  EXPECT_EQ(trimmed->removed, 1u);
  EXPECT_EQ(trimmed->max_size, 150u);
  EXPECT_EQ(files(), std::vector<std::string>{"cc/cccccc"});
}

// What others may plant in the share, and where it must never lead: a directory outside the share
// holding a file the user cares about, old enough for any eviction.
class PlantedInTheShare : public SharedDirectory {
 protected:
  void SetUp() override {
    SharedDirectory::SetUp();
    outside_ = dir_ + "-outside";
    std::filesystem::remove_all(outside_);
    std::filesystem::create_directories(outside_);
    util::write_file(outside_ + "/id_rsa", "secret");  // a key's name, as far as the share can tell
    const std::time_t long_ago = std::time(nullptr) - 30 * 86400;
    const struct utimbuf old_times { long_ago, long_ago };
    ::utime((outside_ + "/id_rsa").c_str(), &old_times);
    // A stuck call kills the test (fails it) instead of hanging the suite.
    ::alarm(20);
  }
  void TearDown() override {
    ::alarm(0);
    std::filesystem::remove_all(outside_);
    SharedDirectory::TearDown();
  }
  bool outside_intact() const {
    std::ifstream in(outside_ + "/id_rsa");
    return std::string((std::istreambuf_iterator<char>(in)), {}) == "secret" &&
           std::filesystem::directory_iterator(outside_) != std::filesystem::directory_iterator() &&
           std::distance(std::filesystem::directory_iterator(outside_), std::filesystem::directory_iterator()) == 1;
  }
  std::string outside_;
};

TEST_F(PlantedInTheShare, EvictionAndTrimNeverFollowALink) {
  auto s = store("|max-size=1");
  std::filesystem::create_symlink(outside_, dir_ + "/zz");                        // a shard that is a link
  std::filesystem::create_directories(dir_ + "/ab");
  std::filesystem::create_symlink(outside_ + "/id_rsa", dir_ + "/ab/abcdef");  // a value that is a link
  EXPECT_EQ(s.evict_older_than(60), 0u);
  EXPECT_EQ(s.trim_to_max_size(), 0u);
  EXPECT_TRUE(outside_intact());
  EXPECT_TRUE(std::filesystem::is_symlink(dir_ + "/ab/abcdef")) << "only regular entry files are deleted";
}

TEST_F(PlantedInTheShare, APublishNeverFollowsALinkedShard) {
  auto s = store();
  std::filesystem::create_symlink(outside_, dir_ + "/ab");
  s.put("abcdef", "value");
  EXPECT_TRUE(outside_intact());
  EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::symlink_status(dir_ + "/ab")))
      << "the link is replaced by a real shard directory";
  EXPECT_EQ(s.get("abcdef"), std::optional<std::string>("value"));
}

TEST_F(PlantedInTheShare, ALinkAtAKeyIsAMissNeverRead) {
  auto s = store();
  std::filesystem::create_directories(dir_ + "/ab");
  std::filesystem::create_symlink(outside_ + "/id_rsa", dir_ + "/ab/abcdef");
  EXPECT_EQ(s.get("abcdef"), std::nullopt);
  s.put("abcdef", "value");
  EXPECT_EQ(s.get("abcdef"), std::optional<std::string>("value"));
  EXPECT_TRUE(outside_intact());
}

TEST_F(PlantedInTheShare, AFifoAtAKeyIsAMissThatNeverWaitsAndTheNextPublishReplacesIt) {
  auto s = store();
  std::filesystem::create_directories(dir_ + "/ab");
  ASSERT_EQ(::mkfifo((dir_ + "/ab/abcdef").c_str(), 0666), 0);
  EXPECT_EQ(s.get("abcdef"), std::nullopt);
  s.put("abcdef", "value");
  EXPECT_EQ(s.get("abcdef"), std::optional<std::string>("value"));
}

TEST_F(PlantedInTheShare, ADirectoryAtAKeyIsAMissThatTheNextPublishReplaces) {
  auto s = store();
  std::filesystem::create_directories(dir_ + "/ab/abcdef/inner");
  std::filesystem::create_symlink(outside_, dir_ + "/ab/abcdef/inner/out");
  util::write_file(dir_ + "/ab/abcdef/inner/f", "x");
  EXPECT_EQ(s.get("abcdef"), std::nullopt);
  s.put("abcdef", "value");
  EXPECT_EQ(s.get("abcdef"), std::optional<std::string>("value"));
  EXPECT_TRUE(outside_intact());
}

TEST_F(SharedDirectory, CreatesShardsAndValuesWithTheCacheUmask) {
  auto s = store();
  const mode_t saved = ::umask(022);
  util::set_cache_umask(002);
  s.put("abcdef", "value");
  util::set_cache_umask(-1);
  ::umask(saved);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/ab").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0775u);
  ASSERT_EQ(::stat(s.key_path("abcdef").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0664u);
}

}  // namespace
}  // namespace kache::storage::remote
