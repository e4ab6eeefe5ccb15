// Unit tests for the worker's input root and outputs (remote_exec/input_root.hpp): whatever names and
// sizes the server sends, files land below the action's directory or the action fails with a reason;
// outputs are never read through a link; the work dir is the worker's own.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "remote_exec/client.hpp"
#include "remote_exec/input_root.hpp"
#include "util/fs.hpp"

namespace kache::remote_exec {
namespace {

namespace fs = std::filesystem;

// Directories by a name of the test's choosing (as "digest hash"), file contents by their digest.
class MapSource final : public InputSource {
 public:
  BlobDigest add_directory(InputDirectory d) {
    const std::string id = content_digest("dir" + std::to_string(directories.size()));
    directories[id] = std::move(d);
    return {id, 1};
  }
  BlobDigest add_blob(const std::string& bytes) {
    const BlobDigest d{content_digest(bytes), static_cast<std::int64_t>(bytes.size())};
    blobs[d.hash] = bytes;
    return d;
  }
  std::optional<InputDirectory> directory(const BlobDigest& digest) override {
    auto it = directories.find(digest.hash);
    if (it == directories.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> blob(const BlobDigest& digest) override {
    auto it = blobs.find(digest.hash);
    if (it == blobs.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, InputDirectory> directories;
  std::map<std::string, std::string> blobs;
};

class InputRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::make_unique<util::TempDir>((fs::temp_directory_path() / "kache-unit").string(), "input-root-",
                                            util::TempDir::Parent::create);
    action_ = base_->path() + "/action";
    outside_ = base_->path() + "/outside";
    fs::create_directories(action_);
    fs::create_directories(outside_);
  }
  std::string materialize(const BlobDigest& root) {
    util::Beneath dir(action_);
    return materialize_input_root(dir, root, source_);
  }
  bool outside_untouched() const { return fs::is_empty(outside_); }

  std::unique_ptr<util::TempDir> base_;
  std::string action_, outside_;
  MapSource source_;
};

TEST_F(InputRootTest, WritesATreeBelowTheActionDirectory) {
  InputDirectory sub;
  sub.files.push_back({"h.h", source_.add_blob("#define H 1\n"), false});
  InputDirectory root;
  root.files.push_back({"run.sh", source_.add_blob("#!/bin/sh\n"), true});
  root.directories.push_back({"inc", source_.add_directory(sub)});
  EXPECT_EQ(materialize(source_.add_directory(root)), "");
  EXPECT_EQ(util::read_file(action_ + "/inc/h.h"), "#define H 1\n");
  EXPECT_TRUE(fs::status(action_ + "/run.sh").permissions() != fs::perms::none &&
              (fs::status(action_ + "/run.sh").permissions() & fs::perms::owner_exec) != fs::perms::none);
}

TEST_F(InputRootTest, MalformedRootsAreReasonsNeverCrashes) {
  const BlobDigest x = source_.add_blob("x");
  const BlobDigest empty_dir = source_.add_directory({});
  std::vector<InputDirectory> roots(6);
  roots[0].files.push_back({"a", x, false});
  roots[0].directories.push_back({"a", empty_dir});  // a file and a directory of one name
  roots[1].files = {{"a", x, false}, {"a", x, false}};
  roots[2].directories.push_back({"..", empty_dir});
  roots[3].files.push_back({"d/e", x, false});
  roots[4].files.push_back({"", x, false});
  roots[5].files.push_back({"big", {x.hash, kMaxBlobBytes + 1}, false});
  for (std::size_t i = 0; i < roots.size(); ++i) {
    fs::remove_all(action_);
    fs::create_directories(action_);
    EXPECT_NE(materialize(source_.add_directory(roots[i])), "") << "case " << i;
  }
  EXPECT_TRUE(outside_untouched());
}

TEST_F(InputRootTest, ADirectoryThatContainsItselfStopsAtTheDepthBound) {
  InputDirectory loop;
  const std::string id = content_digest("loop");
  loop.directories.push_back({"again", {id, 1}});
  source_.directories[id] = loop;
  const std::string why = materialize({id, 1});
  EXPECT_NE(why.find("deeper"), std::string::npos) << why;
}

TEST_F(InputRootTest, ALinkPlantedInTheActionDirectoryIsNeverFollowed) {
  fs::create_directory_symlink(outside_, action_ + "/inc");
  fs::create_symlink(outside_ + "/profile", action_ + "/a.c");
  InputDirectory sub;
  sub.files.push_back({"h.h", source_.add_blob("evil"), false});
  InputDirectory root;
  root.directories.push_back({"inc", source_.add_directory(sub)});
  EXPECT_NE(materialize(source_.add_directory(root)), "");
  InputDirectory file_root;
  file_root.files.push_back({"a.c", source_.add_blob("evil"), false});
  EXPECT_NE(materialize(source_.add_directory(file_root)), "");
  EXPECT_TRUE(outside_untouched());
}

TEST_F(InputRootTest, OutputsAreReadOnlyAsRegularFiles) {
  util::write_file(outside_ + "/secret", "secret");
  fs::create_symlink(outside_ + "/secret", action_ + "/out.o");
  util::write_file(action_ + "/real.o", "object");
  util::Beneath dir(action_);
  std::string error;
  EXPECT_EQ(read_output(dir, "out.o", &error), std::nullopt);
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  EXPECT_EQ(read_output(dir, "real.o", &error), "object");
  EXPECT_EQ(error, "");
  EXPECT_EQ(read_output(dir, "missing.o", &error), std::nullopt);
  EXPECT_EQ(error, "") << "an output the command did not write is no error";
}

TEST_F(InputRootTest, TheWorkDirIsTheWorkersOwn) {
  std::string why;
  const std::string fresh = base_->path() + "/fresh/work";
  ASSERT_TRUE(open_work_dir(fresh, &why).has_value()) << why;
  EXPECT_EQ(fs::status(fresh).permissions() & fs::perms::all, fs::perms::owner_all);
  const std::string shared = base_->path() + "/shared";
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::all);
  EXPECT_FALSE(open_work_dir(shared, &why).has_value());
  EXPECT_NE(why.find("remove it"), std::string::npos) << why;
  fs::create_directory_symlink(fresh, base_->path() + "/link");
  EXPECT_FALSE(open_work_dir(base_->path() + "/link", &why).has_value()) << "a link is not the worker's directory";
}

TEST(RelativeInside, RefusesAbsoluteAndClimbingPaths) {
  EXPECT_TRUE(relative_inside(""));
  EXPECT_TRUE(relative_inside("a/b.o"));
  EXPECT_FALSE(relative_inside("/etc/passwd"));
  EXPECT_FALSE(relative_inside("a/../../b"));
  EXPECT_FALSE(relative_inside(std::string_view("a\0b", 3)));
  EXPECT_FALSE(plain_name("."));
  EXPECT_FALSE(plain_name(""));
  EXPECT_TRUE(plain_name("a.c"));
}

}  // namespace
}  // namespace kache::remote_exec
