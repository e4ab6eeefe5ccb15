// Unit tests for the toolchain probe's files: XXH3-128 content digests, their memo, and the probe lock.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "compiler/tool_files.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/lock.hpp"
#include "util/scoped_file.hpp"

namespace kache::compiler {
namespace {

std::string id_of(ToolFiles& t, const std::string& cwd, const std::string& memo_dir,
                  const std::vector<std::pair<std::string, std::string>>& roles) {
  ProbeFiles files(t, cwd, memo_dir);
  for (const auto& [role, path] : roles) files.add(role, path);
  util::Hasher h;
  files.hash_into(h);
  return h.finish().hex();
}

std::string expected_id(const std::vector<std::pair<std::string, std::string>>& role_contents) {
  util::Hasher h;
  for (const auto& [role, content] : role_contents) h.add_field("file:" + role, util::xxh128_hex(content));
  return h.finish().hex();
}

TEST(ProbeFiles, DigestsAreXxh3OfTheContentInRoleOrder) {
  util::TempDir dir("/tmp", "kache-probe-files-");
  const std::string a = util::join_path(dir.path(), "a"), b = util::join_path(dir.path(), "b");
  std::string big(5'000'000, 'x');
  big[2'500'000] = 'y';
  util::write_file(a, big);
  util::write_file(b, "tool b");
  ToolFiles t;
  EXPECT_EQ(id_of(t, dir.path(), "", {{"tool:b", b}, {"tool:a", a}}),
            expected_id({{"tool:a", big}, {"tool:b", "tool b"}}));
  EXPECT_EQ(t.files.size(), 2u);
}

TEST(ProbeFiles, OneFileUnderTwoNamesHasOneDigest) {
  util::TempDir dir("/tmp", "kache-probe-files-");
  const std::string real = util::join_path(dir.path(), "ptxas-real");
  const std::string link = util::join_path(dir.path(), "ptxas");
  util::write_file(real, "ptxas content");
  std::filesystem::create_symlink(real, link);
  ToolFiles t;
  EXPECT_EQ(id_of(t, dir.path(), "", {{"tool:ptxas", link}, {"real:ptxas", real}}),
            expected_id({{"real:ptxas", "ptxas content"}, {"tool:ptxas", "ptxas content"}}));
}

// A file written just now may change again within the clock tick without a new identity: no memo is
// written for it. The tests that expect one let the tick pass.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

TEST(ProbeFiles, ContentMemoIsNotWrittenForAFileChangedWithinTheClockTick) {
  util::TempDir dir("/tmp", "kache-probe-files-");
  const std::string memo_dir = util::join_path(dir.path(), "toolchains");
  const std::string tool = util::join_path(dir.path(), "ptxas");
  util::write_file(tool, "ptxas");
  ToolFiles t;
  ProbeFiles files(t, dir.path(), memo_dir);
  files.add("tool:ptxas", tool);
  const auto id = util::stat_identity(tool);
  ASSERT_TRUE(id);
  files.digest_pending();
  // Both answers are taken first and the tick checked after: a file still within its tick now was
  // within it while they were taken (checking first let a slow, sanitized run cross the tick between
  // the check and the answers).
  const bool memo_written = util::exists(util::join_path(memo_dir, "content"));
  const bool settled = t.settled(util::file_clock_now_ns());
  if (!identity_is_racy(tool, *id, util::file_clock_now_ns())) GTEST_SKIP() << "the clock tick passed before the check";
  EXPECT_FALSE(memo_written);
  EXPECT_FALSE(settled);
  settle();
  EXPECT_TRUE(t.settled(util::file_clock_now_ns()));
}

TEST(ProbeFiles, ContentMemoIsReadByIdentityAndNotConsultedForAChangedFile) {
  util::TempDir dir("/tmp", "kache-probe-files-");
  const std::string memo_dir = util::join_path(dir.path(), "toolchains");
  const std::string tool = util::join_path(dir.path(), "cicc");
  util::write_file(tool, "cicc one");
  settle();
  ToolFiles t1;
  const std::string first = id_of(t1, dir.path(), memo_dir, {{"tool:cicc", tool}});
  EXPECT_EQ(first, expected_id({{"tool:cicc", "cicc one"}}));
  // The memo holds the digest: a probe with it reads the memo, not the file (shown by a memo edited
  // to another digest of the same format).
  const std::string content_dir = util::join_path(memo_dir, "content");
  std::vector<std::string> memos;
  for (const auto& e : std::filesystem::directory_iterator(content_dir)) memos.push_back(e.path().string());
  ASSERT_EQ(memos.size(), 1u);
  EXPECT_EQ(util::read_file(memos[0]), util::xxh128_hex("cicc one"));
  util::write_file(memos[0], util::xxh128_hex("memoized"));
  ToolFiles t2;
  EXPECT_EQ(id_of(t2, dir.path(), memo_dir, {{"tool:cicc", tool}}), expected_id({{"tool:cicc", "memoized"}}));
  // A digest of another length (SHA-256's 64 hex characters, an older format) is not one.
  util::write_file(memos[0], std::string(64, 'a'));
  ToolFiles t3;
  EXPECT_EQ(id_of(t3, dir.path(), memo_dir, {{"tool:cicc", tool}}), first);
  // New content: another identity, so the memo is not consulted.
  util::write_file(tool, "cicc number two");
  settle();
  ToolFiles t4;
  EXPECT_EQ(id_of(t4, dir.path(), memo_dir, {{"tool:cicc", tool}}), expected_id({{"tool:cicc", "cicc number two"}}));
}

TEST(ProbeLock, HoldsAFreeLockAndGivesUpOnAHeldOne) {
  util::TempDir dir("/tmp", "kache-probe-lock-");
  const std::string memo_dir = util::join_path(dir.path(), "toolchains");
  util::create_directories(memo_dir);
  const std::string memo = util::join_path(memo_dir, "memo");
  const std::string lock_path = memo + ".lock";
  {
    ProbeLock lock(memo_dir, memo);
    EXPECT_TRUE(lock.held());
    util::UniqueFd other(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_GE(other.get(), 0);
    EXPECT_NE(::flock(other.get(), LOCK_EX | LOCK_NB), 0);  // held by `lock`
  }
  util::UniqueFd holder(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_GE(holder.get(), 0);
  EXPECT_EQ(::flock(holder.get(), LOCK_EX | LOCK_NB), 0);  // released with `lock`
  const std::int64_t saved = util::lock_timeout_ms();
  util::set_lock_timeout_ms(30);
  {
    // Waits out the lock timeout (no sooner: a bound on waiting, not on speed), then gives up holding
    // nothing.
    const auto began = std::chrono::steady_clock::now();
    ProbeLock waited(memo_dir, memo);
    EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(30));
    EXPECT_FALSE(waited.held());
  }
  util::set_lock_timeout_ms(saved);
  {
    ProbeLock none("", "");  // no cache dir: nothing to lock
    EXPECT_FALSE(none.held());
  }
}

// What another user of a shared cache dir plants among the memos is no memo, no lock and no place to
// write: a FIFO is never waited on, a link never followed (tests/integration/test_planted_paths.py
// plants them at every path a compile opens).
TEST(MemoFiles, APlantedFifoLinkOrDirectoryIsNoMemoAndNoLock) {
  util::TempDir dir("/tmp", "kache-memo-files-");
  const std::string memo_dir = util::join_path(dir.path(), "toolchains");
  const std::string outside = util::join_path(dir.path(), "outside");
  util::create_directories(memo_dir);
  util::create_directories(outside);
  util::write_file(util::join_path(outside, "secret"), "secret");
  ASSERT_EQ(::mkfifo(util::join_path(memo_dir, "fifo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink(util::join_path(outside, "secret").c_str(), util::join_path(memo_dir, "link").c_str()), 0);
  util::create_directories(util::join_path(memo_dir, "dir"));
  for (const char* name : {"fifo", "link", "dir"}) {
    const std::string path = util::join_path(memo_dir, name);
    EXPECT_EQ(read_memo_file(memo_dir, path), std::nullopt) << name;
  }
  ASSERT_EQ(::mkfifo(util::join_path(memo_dir, "m.lock").c_str(), 0600), 0);
  EXPECT_FALSE(ProbeLock(memo_dir, util::join_path(memo_dir, "m")).held());
  // A write replaces the planted link by a file of its own; the file it named is untouched.
  write_memo_file(memo_dir, util::join_path(memo_dir, "link"), "memo");
  EXPECT_EQ(read_memo_file(memo_dir, util::join_path(memo_dir, "link")), "memo");
  EXPECT_EQ(util::read_file(util::join_path(outside, "secret")), "secret");
  // A memo dir that is a link elsewhere is neither read nor written.
  const std::string linked = util::join_path(dir.path(), "linked");
  ASSERT_EQ(::symlink(outside.c_str(), linked.c_str()), 0);
  write_memo_file(linked, util::join_path(linked, "content/key"), "memo");
  EXPECT_FALSE(util::exists(util::join_path(outside, "content")));
  EXPECT_EQ(read_memo_file(linked, util::join_path(linked, "secret")), std::nullopt);
  // A probe's scratch directory goes to the memo dir only while it is a real directory.
  EXPECT_EQ(probe_scratch_parent(memo_dir), memo_dir);
  EXPECT_EQ(probe_scratch_parent(linked), "/tmp");
  EXPECT_EQ(probe_scratch_parent(""), "/tmp");
  // A new cache dir's first compile writes its memo: the cache dir is created on the way.
  const std::string fresh = util::join_path(dir.path(), "new-cache/toolchains");
  write_memo_file(fresh, util::join_path(fresh, "content/key"), "memo");
  EXPECT_EQ(read_memo_file(fresh, util::join_path(fresh, "content/key")), "memo");
}

// A memo of every field kind the toolchain memos keep.
struct SampleMemo {
  std::string id, description;
  std::vector<std::string> dirs;
  ToolFiles tools;
  std::vector<std::pair<std::string, std::string>> env;

  template <typename Self, typename Visit>
  static void fields(Self& m, Visit&& visit) {
    visit(m.id);
    visit(m.description);
    visit(m.dirs);
    visit(m.tools);
    visit(m.env);
  }
};

// The one memo writer keeps the bytes the hand-written serializers wrote (a version, then each field as
// util::Writer writes it), so memos written before read back, and reads back what it wrote.
TEST(ToolchainMemo, OneWriterKeepsTheBytesAndReadsThemBack) {
  SampleMemo m;
  m.id = "abc";
  m.description = "nvcc 13.0; host gcc";
  m.dirs = {"/usr/include", "/opt/cuda/include"};
  m.tools.search_path = "/usr/bin:/bin";
  m.env = {{"MYFLAG", "=1"}, {"OTHER", "unset"}};
  const std::string bytes = write_memo(7, m);

  util::Writer by_hand;
  by_hand.u32(7);
  by_hand.str(m.id);
  by_hand.str(m.description);
  by_hand.u32(2);
  for (const auto& d : m.dirs) by_hand.str(d);
  m.tools.write(by_hand);
  by_hand.u32(2);
  for (const auto& [name, value] : m.env) {
    by_hand.str(name);
    by_hand.str(value);
  }
  EXPECT_EQ(bytes, by_hand.take());

  const SampleMemo back = read_memo<SampleMemo>(7, bytes);
  EXPECT_EQ(back.id, m.id);
  EXPECT_EQ(back.description, m.description);
  EXPECT_EQ(back.dirs, m.dirs);
  EXPECT_EQ(back.tools.search_path, m.tools.search_path);
  EXPECT_EQ(back.env, m.env);
  EXPECT_THROW(read_memo<SampleMemo>(8, bytes), std::runtime_error);
  EXPECT_THROW(read_memo<SampleMemo>(7, bytes.substr(0, bytes.size() - 3)), std::runtime_error);
}

}  // namespace
}  // namespace kache::compiler
