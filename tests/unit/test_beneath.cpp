// Unit tests for util::Beneath: what others plant below a shared root (a link at any component, a FIFO,
// a directory where a file belongs) is refused, never followed, never waited on.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "util/beneath.hpp"
#include "util/fs.hpp"

namespace kache::util {
namespace {

namespace fs = std::filesystem;

class BeneathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::make_unique<TempDir>((fs::temp_directory_path() / "kache-unit").string(), "beneath-");
    root_ = base_->path() + "/root";
    outside_ = base_->path() + "/outside";
    fs::create_directories(root_ + "/d");
    fs::create_directories(outside_);
    std::ofstream(root_ + "/d/file") << "inside";
    std::ofstream(outside_ + "/secret") << "outside";
  }
  std::unique_ptr<TempDir> base_;
  std::string root_, outside_;
};

TEST_F(BeneathTest, ReadsRegularFilesBelowTheRoot) {
  Beneath b(root_);
  std::string refused;
  EXPECT_EQ(b.read_regular("d/file", &refused), "inside");
  EXPECT_EQ(b.read_regular(root_ + "/d/file"), std::nullopt) << "absolute paths are not relative";
  EXPECT_EQ(b.relative(root_ + "/d/file"), "d/file");
  EXPECT_EQ(b.relative(outside_ + "/secret"), std::nullopt);
  EXPECT_EQ(b.read_regular("d/missing", &refused), std::nullopt);
}

TEST_F(BeneathTest, RefusesALinkAtTheLastComponent) {
  fs::create_symlink(outside_ + "/secret", root_ + "/d/link");
  Beneath b(root_);
  std::string refused;
  EXPECT_EQ(b.read_regular("d/link", &refused), std::nullopt);
  EXPECT_EQ(refused, "a symbolic link");
  refused.clear();
  EXPECT_LT(b.open_regular("d/link", O_WRONLY | O_APPEND, 0666, &refused).get(), 0);
  EXPECT_EQ(refused, "a symbolic link");
  std::ifstream in(outside_ + "/secret");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "outside");
}

TEST_F(BeneathTest, RefusesALinkAboveTheFile) {
  fs::create_directory_symlink(outside_, root_ + "/shard");
  Beneath b(root_);
  std::string refused;
  EXPECT_EQ(b.read_regular("shard/secret", &refused), std::nullopt);
  EXPECT_FALSE(refused.empty());
  EXPECT_LT(b.open_regular("shard/new", O_WRONLY | O_CREAT | O_EXCL, 0600, &refused).get(), 0);
  EXPECT_FALSE(fs::exists(outside_ + "/new"));
  EXPECT_FALSE(b.create_directories("shard/x", 0777, &refused));
  EXPECT_FALSE(fs::exists(outside_ + "/x"));
  EXPECT_EQ(b.lstat("shard/secret"), std::nullopt);
  EXPECT_FALSE(b.unlink_file("shard/secret"));
  EXPECT_TRUE(fs::exists(outside_ + "/secret"));
}

TEST_F(BeneathTest, TheWalkWithoutOpenat2RefusesTheSameLinks) {
  fs::create_directory_symlink(outside_, root_ + "/shard");
  fs::create_symlink(outside_ + "/secret", root_ + "/d/link");
  beneath_allow_openat2(false);
  Beneath b(root_);
  std::string refused;
  EXPECT_EQ(b.read_regular("shard/secret", &refused), std::nullopt);
  EXPECT_EQ(b.read_regular("d/link", &refused), std::nullopt);
  EXPECT_EQ(refused, "a symbolic link");
  EXPECT_EQ(b.read_regular("d/file"), "inside");
  beneath_allow_openat2(true);
}

TEST_F(BeneathTest, AFifoNeverWaits) {
  ASSERT_EQ(::mkfifo((root_ + "/d/fifo").c_str(), 0666), 0);
  Beneath b(root_);
  std::string refused;
  EXPECT_EQ(b.read_regular("d/fifo", &refused), std::nullopt);
  EXPECT_EQ(refused, "a FIFO");
  refused.clear();
  EXPECT_LT(b.open_regular("d/fifo", O_WRONLY | O_APPEND, 0666, &refused).get(), 0);
  EXPECT_EQ(refused, "a FIFO");
}

TEST_F(BeneathTest, ADirectoryWhereAFileBelongsIsRefused) {
  fs::create_directories(root_ + "/d/entry");
  Beneath b(root_);
  std::string refused;
  EXPECT_EQ(b.read_regular("d/entry", &refused), std::nullopt);
  EXPECT_EQ(refused, "a directory");
  EXPECT_FALSE(b.unlink_file("d/entry"));
  EXPECT_TRUE(fs::is_directory(root_ + "/d/entry"));
}

TEST_F(BeneathTest, UnlinkRemovesALinkNotItsTarget) {
  fs::create_symlink(outside_ + "/secret", root_ + "/d/link");
  Beneath b(root_);
  EXPECT_TRUE(b.unlink_file("d/link"));
  EXPECT_FALSE(fs::is_symlink(root_ + "/d/link"));
  EXPECT_TRUE(fs::exists(outside_ + "/secret"));
  EXPECT_TRUE(b.unlink_file("d/file"));
  EXPECT_FALSE(fs::exists(root_ + "/d/file"));
}

TEST_F(BeneathTest, RenameReplacesALinkInsteadOfWritingThroughIt) {
  fs::create_symlink(outside_ + "/secret", root_ + "/d/key");
  Beneath b(root_);
  UniqueFd fd = b.open_regular("d/tmp", O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd.get(), 0);
  ASSERT_EQ(::write(fd.get(), "new", 3), 3);
  b.rename("d/tmp", "d/key");
  EXPECT_EQ(b.read_regular("d/key"), "new");
  std::ifstream in(outside_ + "/secret");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "outside");
}

TEST_F(BeneathTest, WriteAtomicReplacesALinkAndRefusesALinkedDirectory) {
  fs::create_symlink(outside_ + "/secret", root_ + "/d/memo");
  fs::create_symlink(outside_, root_ + "/linked");
  Beneath b(root_);
  EXPECT_TRUE(b.write_atomic("d/memo", "memo"));
  EXPECT_FALSE(fs::is_symlink(root_ + "/d/memo"));
  EXPECT_EQ(b.read_regular("d/memo"), "memo");
  std::string refused;
  EXPECT_FALSE(b.write_atomic("linked/memo", "memo", 0666, &refused));
  EXPECT_FALSE(refused.empty());
  EXPECT_FALSE(fs::exists(outside_ + "/memo"));
  std::ifstream in(outside_ + "/secret");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "outside");
  // No temporary file is left behind, whatever happened.
  for (const auto& e : fs::directory_iterator(root_ + "/d")) EXPECT_FALSE(e.path().filename().string().starts_with(".tmp."));
}

TEST_F(BeneathTest, CreateDirectoriesAppliesTheModeAndRefusesAFile) {
  Beneath b(root_);
  const mode_t old = ::umask(002);
  EXPECT_TRUE(b.create_directories("a/b/c", 0777));
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0775u);
  std::string refused;
  EXPECT_FALSE(b.create_directories("d/file/x", 0777, &refused));
  EXPECT_EQ(refused, "no directory");
}

TEST_F(BeneathTest, ReadRegularIsBounded) {
  Beneath b(root_);
  std::string refused;
  EXPECT_EQ(b.read_regular("d/file", &refused, 3), std::nullopt);
  EXPECT_EQ(refused, "too large");
}

TEST_F(BeneathTest, WriteAtomicFollowsTheUmask) {
  fs::create_symlink(outside_ + "/secret", root_ + "/d/key");
  fs::create_symlink(outside_, root_ + "/linked");
  Beneath b(root_);
  const mode_t old = ::umask(002);
  EXPECT_TRUE(b.write_atomic("d/key", "new"));
  ::umask(old);
  EXPECT_EQ(b.read_regular("d/key"), "new");
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/d/key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0664u) << "0666 less the umask";
  EXPECT_FALSE(b.write_atomic("linked/key", "x"));
  EXPECT_FALSE(fs::exists(outside_ + "/key"));
  std::ifstream in(outside_ + "/secret");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), "outside");
  for (const auto& e : fs::directory_iterator(root_ + "/d")) EXPECT_FALSE(e.path().filename().string().starts_with(".tmp."));
}

TEST_F(BeneathTest, RemoveTreeNeverEntersALink) {
  fs::create_directories(root_ + "/tree/sub");
  std::ofstream(root_ + "/tree/sub/f") << "x";
  fs::create_symlink(outside_, root_ + "/tree/sub/out");
  fs::create_symlink(outside_, root_ + "/tree/out");
  Beneath b(root_);
  EXPECT_TRUE(b.remove_tree("tree"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ + "/tree")));
  EXPECT_TRUE(fs::exists(outside_ + "/secret"));
  fs::create_symlink(outside_, root_ + "/top");
  EXPECT_TRUE(b.remove_tree("top")) << "a link is removed itself";
  EXPECT_TRUE(fs::exists(outside_ + "/secret"));
}

TEST_F(BeneathTest, WriteAtomicReplacesWhatStandsThereWithoutFollowingIt) {
  Beneath b(root_);
  fs::create_symlink(outside_ + "/secret", root_ + "/d/link");
  EXPECT_TRUE(b.write_atomic("d/link", "new"));
  EXPECT_EQ(read_file(outside_ + "/secret"), "outside") << "the link's target was written";
  EXPECT_EQ(b.read_regular("d/link"), "new");
  ASSERT_EQ(::mkfifo((root_ + "/d/fifo").c_str(), 0600), 0);
  EXPECT_TRUE(b.write_atomic("d/fifo", "replaced"));  // never opened: a FIFO would wait for a reader
  EXPECT_EQ(b.read_regular("d/fifo"), "replaced");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ + "/d"), fs::directory_iterator()), 3) << "a temporary stayed";
}

TEST_F(BeneathTest, KachesOwnFilesReplaceAPlantInsteadOfFailing) {
  ASSERT_EQ(::mkfifo((root_ + "/d/journal").c_str(), 0600), 0);
  fs::create_symlink(outside_ + "/secret", root_ + "/d/lock");
  fs::create_directories(root_ + "/d/size/inner");
  fs::create_symlink(outside_, root_ + "/d/size/inner/out");
  Beneath b(root_);
  std::string refused;
  EXPECT_GE(b.open_replacing_plant("d/journal", O_WRONLY | O_APPEND, 0666, &refused).get(), 0) << refused;
  EXPECT_GE(b.open_replacing_plant("d/lock", O_RDWR, 0666, &refused).get(), 0) << refused;
  EXPECT_TRUE(b.write_atomic("d/size", "1 1\n"));
  EXPECT_EQ(b.read_regular("d/size"), "1 1\n");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root_ + "/d/journal")));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root_ + "/d/lock")));
  EXPECT_EQ(read_file(outside_ + "/secret"), "outside");
  EXPECT_FALSE(b.remove_plant("d/file")) << "a regular file is no plant";
  EXPECT_EQ(b.read_regular("d/file"), "inside");
}

}  // namespace
}  // namespace kache::util
