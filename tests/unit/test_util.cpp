// Unit tests for src/util: hashing, paths and files, clock, processes.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/parallel.hpp"
#include "util/process.hpp"
#include "util/process_bounded.hpp"
#include "util/shell_words.hpp"
#include "util/text.hpp"

namespace kache::util {
namespace {

std::string test_root() { return (std::filesystem::temp_directory_path() / "kache-unit").string(); }

std::string le64(std::uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// ---------------------------------------------------------------------------------------------- hash

TEST(UtilHash, Sha256KnownVectors) {
  EXPECT_EQ(sha256("abc").hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256("").hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").hex(),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(UtilHash, StreamingEqualsOneShot) {
  Hasher h;
  h.update("a");
  h.update("");
  h.update("bc");
  EXPECT_EQ(h.finish(), sha256("abc"));
}

TEST(UtilHash, AddFieldIsDomainSeparated) {
  Hasher a, b;
  a.add_field("ab", "c");
  b.add_field("a", "bc");
  EXPECT_NE(a.finish(), b.finish());

  Hasher c, d;
  c.add_field("x", "");
  c.add_field("", "y");
  d.add_field("x", "y");
  EXPECT_NE(c.finish(), d.finish());
}

TEST(UtilHash, AddFieldEncodingIsLengthPrefixed) {
  Hasher h;
  h.add_field("name", "value!");
  EXPECT_EQ(h.finish(), sha256(le64(4) + "name" + le64(6) + "value!"));
}

TEST(UtilHash, DigestHexRoundTrip) {
  Digest d = sha256("abc");
  Digest back;
  ASSERT_TRUE(Digest::from_hex(d.hex(), back));
  EXPECT_EQ(back, d);
  std::string upper = d.hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_TRUE(Digest::from_hex(upper, back));
  EXPECT_EQ(back, d);
  EXPECT_FALSE(Digest::from_hex("abc", back));
  EXPECT_FALSE(Digest::from_hex(std::string(64, 'g'), back));
}

TEST(UtilHash, HashFileMatchesContent) {
  TempDir dir(test_root());
  std::string content;
  for (int i = 0; i < 700'000; ++i) content.push_back(static_cast<char>(i * 7 + i / 251));
  const std::string path = join_path(dir.path(), "f");
  write_file(path, content);
  EXPECT_EQ(hash_file(path), sha256(content));
  EXPECT_THROW(hash_file(join_path(dir.path(), "missing")), std::system_error);
}

TEST(UtilHash, XxhMatchesReference) {
  const std::string data = "kache checksum test";
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(data.data(), data.size()));
  std::string expect;
  char buf[3];
  for (unsigned char b : canon.digest) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    expect += buf;
  }
  EXPECT_EQ(xxh128_hex(data), expect);
  EXPECT_EQ(xxh128_hex(data).size(), 32u);
  EXPECT_EQ(xxh64(""), 0x2D06800538D394C2ull);
  EXPECT_NE(xxh64("a"), xxh64("b"));
}

TEST(UtilHash, XxhOfFileMatchesXxhOfContent) {
  TempDir dir(test_root());
  std::string content;
  for (int i = 0; i < 3'000'000; ++i) content.push_back(static_cast<char>(i * 13 + i / 4093));
  const std::string path = join_path(dir.path(), "f");
  write_file(path, content);
  EXPECT_EQ(xxh128_file_hex(path), xxh128_hex(content));
  // One byte changed in the middle, size kept: another digest.
  content[content.size() / 2] ^= 1;
  write_file(path, content);
  EXPECT_EQ(xxh128_file_hex(path), xxh128_hex(content));
  const std::string empty = join_path(dir.path(), "empty");
  write_file(empty, "");
  EXPECT_EQ(xxh128_file_hex(empty), xxh128_hex(""));
  EXPECT_THROW(xxh128_file_hex(join_path(dir.path(), "missing")), std::system_error);
}

TEST(UtilHash, MappedXxhOfVanishedPagesIsNoAnswerNotACrash) {
  // A mapping longer than its file: the pages past the end raise SIGBUS, as they do when a toolchain
  // file is truncated while it is hashed. The hash gives no answer and the process goes on.
  TempDir dir(test_root());
  const std::string path = join_path(dir.path(), "short");
  write_file(path, std::string(100, 'x'));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_FALSE(xxh128_mapped_hex(fd, 4 * page).has_value());
  // The same thread hashes again afterwards, and a whole mapping still answers.
  EXPECT_EQ(xxh128_mapped_hex(fd, 100), xxh128_hex(std::string(100, 'x')));
  ::close(fd);
}

// ---------------------------------------------------------------------------------------------- paths

TEST(UtilPath, LexicallyNormal) {
  EXPECT_EQ(lexically_normal("/a/b/../c"), "/a/c");
  EXPECT_EQ(lexically_normal("/a/./b//c/"), "/a/b/c");
  EXPECT_EQ(lexically_normal("//a///b"), "/a/b");
  EXPECT_EQ(lexically_normal("/.."), "/");
  EXPECT_EQ(lexically_normal("/../a"), "/a");
  EXPECT_EQ(lexically_normal("/"), "/");
  EXPECT_EQ(lexically_normal("a/b/.."), "a");
  EXPECT_EQ(lexically_normal("a/../.."), "..");
  EXPECT_EQ(lexically_normal("../a/./b/"), "../a/b");
  EXPECT_EQ(lexically_normal("./"), ".");
  EXPECT_EQ(lexically_normal(""), ".");
  EXPECT_EQ(lexically_normal("a/.."), ".");
}

TEST(UtilPath, AbsolutePath) {
  EXPECT_EQ(absolute_path("x/../y", "/cwd/d"), "/cwd/d/y");
  EXPECT_EQ(absolute_path("../..", "/a"), "/");
  EXPECT_EQ(absolute_path("/abs/./p/", "/cwd"), "/abs/p");
  EXPECT_EQ(absolute_path(".", "/cwd//d/"), "/cwd/d");
  EXPECT_EQ(absolute_path("f.cu", ""), lexically_normal(current_dir() + "/f.cu"));
}

TEST(UtilPath, DirnameBasenameJoin) {
  EXPECT_EQ(dirname("/a/b"), "/a");
  EXPECT_EQ(dirname("/a/b/"), "/a");
  EXPECT_EQ(dirname("/a"), "/");
  EXPECT_EQ(dirname("a"), ".");
  EXPECT_EQ(dirname("a//b"), "a");
  EXPECT_EQ(dirname("/"), "/");
  EXPECT_EQ(basename("/a/b"), "b");
  EXPECT_EQ(basename("/a/b/"), "b");
  EXPECT_EQ(basename("b"), "b");
  EXPECT_EQ(basename("/"), "/");
  EXPECT_EQ(join_path("/a", "b"), "/a/b");
  EXPECT_EQ(join_path("/a/", "b"), "/a/b");
  EXPECT_EQ(join_path("/a", "/b"), "/b");
  EXPECT_EQ(join_path("", "b"), "b");
  EXPECT_EQ(join_path("a", ""), "a");
}

TEST(UtilPath, PathHasPrefixIsComponentWise) {
  EXPECT_TRUE(path_has_prefix("/a/b/c", "/a/b"));
  EXPECT_TRUE(path_has_prefix("/a/b", "/a/b"));
  EXPECT_TRUE(path_has_prefix("/a/b", "/a/b/"));
  EXPECT_TRUE(path_has_prefix("/a/b/", "/a/b"));
  EXPECT_TRUE(path_has_prefix("/a", "/"));
  EXPECT_FALSE(path_has_prefix("/a/bc", "/a/b"));
  EXPECT_FALSE(path_has_prefix("/a", "/a/b"));
  EXPECT_FALSE(path_has_prefix("/a/b/../c", "/a/b"));
  EXPECT_FALSE(path_has_prefix("/x/a/b", "/a"));
  EXPECT_TRUE(path_has_prefix("/a//b/./c", "/a/b"));
}

// ---------------------------------------------------------------------------------------------- files

TEST(UtilFs, WriteFileAtomicReplacesAndLeavesNoTemp) {
  TempDir dir(test_root());
  const std::string path = join_path(dir.path(), "out.txt");
  write_file_atomic(path, "first");
  EXPECT_EQ(read_file(path), "first");
  const auto before = stat_identity(path);
  write_file_atomic(path, "second, longer");
  EXPECT_EQ(read_file(path), "second, longer");
  // Replaced by rename: a new inode, so readers holding the old file never see a mix.
  EXPECT_NE(stat_identity(path)->ino, before->ino);
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"out.txt"});
  EXPECT_THROW(write_file_atomic(join_path(dir.path(), "no/such/dir/f"), "x"), std::system_error);
}

TEST(UtilFs, WriteTempFileUsesTmpPrefix) {
  TempDir dir(test_root());
  const std::string tmp = write_temp_file(dir.path(), "abc", "data");
  EXPECT_EQ(dirname(tmp), dir.path());
  EXPECT_EQ(basename(tmp).rfind(".tmp.abc.", 0), 0u) << tmp;
  EXPECT_EQ(read_file(tmp), "data");
  EXPECT_NE(write_temp_file(dir.path(), "abc", "data"), tmp);
}

TEST(UtilFs, CopyFileIsAnIndependentCopy) {
  TempDir dir(test_root());
  const std::string src = join_path(dir.path(), "src.bin");
  const std::string dst = join_path(dir.path(), "dst.bin");
  std::string content;
  for (int i = 0; i < 3 * 1024 * 1024 + 17; ++i) content.push_back(static_cast<char>((i * 131) ^ (i >> 9)));
  write_file(src, content);
  write_file(dst, "old content");
  copy_file(src, dst);
  EXPECT_EQ(read_file(dst), content);

  struct stat s1 {
  }, s2{};
  ASSERT_EQ(::stat(src.c_str(), &s1), 0);
  ASSERT_EQ(::stat(dst.c_str(), &s2), 0);
  EXPECT_NE(s1.st_ino, s2.st_ino);  // not a hard link
  EXPECT_EQ(s1.st_nlink, 1u);
  EXPECT_EQ(s2.st_nlink, 1u);
  EXPECT_EQ(
      s2.st_mode & 0777, 0644u & ~[] {
        mode_t m = ::umask(0);
        ::umask(m);
        return m;
      }());

  // Writing through the copy must not touch the source.
  write_file(dst, "changed");
  EXPECT_EQ(read_file(src), content);
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"dst.bin", "src.bin"}));

  const std::string empty = join_path(dir.path(), "empty");
  write_file(empty, "");
  copy_file(empty, dst);
  EXPECT_EQ(read_file(dst), "");
}

TEST(UtilFs, CopyFileErrors) {
  TempDir dir(test_root());
  EXPECT_THROW(copy_file(join_path(dir.path(), "missing"), join_path(dir.path(), "d")), std::system_error);
  write_file(join_path(dir.path(), "s"), "x");
  EXPECT_THROW(copy_file(join_path(dir.path(), "s"), join_path(dir.path(), "no/dir/d")), std::system_error);
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"s"});
}

TEST(UtilFs, StatIdentitySeesContentChangeWithRestoredMtime) {
  TempDir dir(test_root());
  const std::string path = join_path(dir.path(), "f.cu");
  write_file(path, "aaaa");
  const auto before = stat_identity(path);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->size, 4);
  EXPECT_FALSE(before->is_dir);

  // Wait past a kernel clock tick so the ctime can move.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  write_file(path, "bbbb");
  struct timespec times[2];
  times[0].tv_sec = before->mtime_ns / 1'000'000'000;
  times[0].tv_nsec = before->mtime_ns % 1'000'000'000;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);

  const auto after = stat_identity(path);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->size, before->size);
  EXPECT_EQ(after->mtime_ns, before->mtime_ns);
  EXPECT_EQ(after->ino, before->ino);
  EXPECT_GT(after->ctime_ns, before->ctime_ns);
  EXPECT_NE(*after, *before);
}

TEST(UtilFs, StatIdentityFollowsSymlinksAndMisses) {
  TempDir dir(test_root());
  const std::string target = join_path(dir.path(), "t");
  const std::string link = join_path(dir.path(), "l");
  write_file(target, "x");
  ASSERT_EQ(::symlink("t", link.c_str()), 0);
  EXPECT_EQ(stat_identity(link), stat_identity(target));
  EXPECT_FALSE(stat_identity(join_path(dir.path(), "missing")));
  EXPECT_TRUE(stat_identity(dir.path())->is_dir);
  EXPECT_TRUE(exists(link));
  EXPECT_FALSE(exists(join_path(dir.path(), "missing")));
}

TEST(UtilFs, CreateDirectoriesAndTempDir) {
  std::string kept;
  {
    TempDir dir(join_path(test_root(), "nested/parent"), "pfx-");
    kept = dir.path();
    EXPECT_EQ(basename(kept).rfind("pfx-", 0), 0u);
    EXPECT_TRUE(stat_identity(kept)->is_dir);
    const std::string deep = join_path(kept, "a/b/c");
    create_directories(deep);
    create_directories(deep);  // existing is fine
    EXPECT_TRUE(stat_identity(deep)->is_dir);
    write_file(join_path(kept, "file"), "x");
    EXPECT_THROW(create_directories(join_path(kept, "file/sub")), std::system_error);
  }
  EXPECT_FALSE(exists(kept));
}

TEST(UtilFs, TempDirInAMissingParentCreatesNothing) {
  TempDir root(test_root());
  const std::string missing = join_path(root.path(), "nodir/sub");
  EXPECT_THROW(TempDir(missing, ".kache-", TempDir::Parent::must_exist), std::system_error);
  EXPECT_FALSE(exists(join_path(root.path(), "nodir")));
  TempDir inside(root.path(), ".kache-", TempDir::Parent::must_exist);
  EXPECT_TRUE(stat_identity(inside.path())->is_dir);
}

// ---------------------------------------------------------------------------------------------- clock

TEST(UtilClock, NowIsWallClock) {
  const std::int64_t now = now_ns();
  const std::int64_t t = static_cast<std::int64_t>(::time(nullptr)) * 1'000'000'000;
  EXPECT_LT(std::llabs(now - t), 2'000'000'000ll);
}

TEST(UtilClock, FileClockIsTheClockFileTimesComeFrom) {
  TempDir dir(test_root());
  // /tmp-like filesystems are not FAT/HFS: no margin beyond the coarse clock, also for a missing path.
  EXPECT_EQ(file_time_margin_ns(dir.path()), 0);
  EXPECT_EQ(file_time_margin_ns(join_path(dir.path(), "missing/deeper/out.o")), 0);
  // A file written after reading the file clock never has an earlier time, however often we try.
  for (int i = 0; i < 200; ++i) {
    const std::int64_t before = file_clock_now_ns();
    const std::string p = join_path(dir.path(), "f" + std::to_string(i));
    write_file(p, "x");
    auto id = stat_identity(p);
    ASSERT_TRUE(id);
    ASSERT_GE(id->mtime_ns, before) << i;
    ASSERT_GE(id->ctime_ns, before) << i;
  }
}

// ---------------------------------------------------------------------------------------------- process

TEST(UtilProcess, RunCaptureSeparatesStreamsAndExitCode) {
  auto r = run_capture("/bin/sh", {"sh", "-c", "echo out; echo err >&2; exit 3"}, current_environment());
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_FALSE(r.ok());
}

TEST(UtilProcess, ArgvAndEnvironmentArePassedVerbatim) {
  Environment env = {"FOO=bar baz", "PATH=/usr/bin:/bin"};
  auto r = run_capture("/bin/sh", {"sh", "-c", "printf '%s|%s|%s' \"$1\" \"$FOO\" \"$#\"", "sh", "a b;*"}, env);
  EXPECT_EQ(r.out, "a b;*|bar baz|1");
  EXPECT_TRUE(r.ok());
}

TEST(UtilProcess, ChildKilledBySignal) {
  auto r = run_capture("/bin/sh", {"sh", "-c", "echo before; kill -KILL $$; echo after"}, current_environment());
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.out, "before\n");
  EXPECT_FALSE(r.ok());
}

TEST(UtilProcess, LargeOutputOnBothPipesDoesNotDeadlock) {
  // The child fills stderr first, then stdout: reading only stdout until EOF would hang forever.
  // timeout(1) turns such a hang into a failure instead of a stuck test.
  const std::string script = "head -c 6000000 /dev/zero | tr '\\0' e >&2; head -c 5000000 /dev/zero | tr '\\0' o";
  std::string exe = "/bin/sh";
  std::vector<std::string> argv = {"sh", "-c", script};
  if (::access("/usr/bin/timeout", X_OK) == 0) {
    exe = "/usr/bin/timeout";
    argv = {"timeout", "30", "/bin/sh", "-c", script};
  }
  auto r = run_capture(exe, argv, current_environment());
  ASSERT_TRUE(r.ok()) << "exit " << r.exit_code << " signal " << r.term_signal;
  EXPECT_EQ(r.out.size(), 5'000'000u);
  EXPECT_EQ(r.err.size(), 6'000'000u);
  EXPECT_EQ(r.out.find_first_not_of('o'), std::string::npos);
  EXPECT_EQ(r.err.find_first_not_of('e'), std::string::npos);
}

TEST(UtilProcess, BoundedRunWithinItsLimitIsARun) {
  auto r = run_capture_bounded("/bin/sh", {"sh", "-c", "echo out; echo err >&2; exit 3"}, current_environment(), 60'000);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_code, 3);
}

TEST(UtilProcess, BoundedRunKillsTheGroupAtItsLimit) {
  // The shell starts a child that holds the pipes and waits for it: without the limit this never ends.
  auto r = run_capture_bounded("/bin/sh", {"sh", "-c", "echo started; sleep 600 & wait"}, current_environment(), 200);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_FALSE(r.ok());
  // The driver exits at once, its child keeps the pipes: still bounded, and not ok.
  r = run_capture_bounded("/bin/sh", {"sh", "-c", "sleep 600 & exit 0"}, current_environment(), 200);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.ok());
}

TEST(UtilProcess, BoundedRunStopsOutputPastItsLimit) {
  // A child (and its own child) writing forever: stopped once stdout, or stderr, passes the limit,
  // long before the time limit, with at most one read past it kept.
  for (const char* script : {"yes & yes", "yes >&2 & yes >&2"}) {
    BoundedRunOptions bounds{.timeout_ms = 60'000, .max_output = 64 << 10, .null_stdin = false};
    const auto start = std::chrono::steady_clock::now();
    auto r = run_capture_bounded("/bin/sh", {"sh", "-c", std::string(script) + "; wait"}, current_environment(),
                                 bounds);
    EXPECT_TRUE(r.output_exceeded) << script;
    EXPECT_FALSE(r.timed_out) << script;
    EXPECT_FALSE(r.ok());
    EXPECT_LE(r.out.size() + r.err.size(), 2u * (64u << 10) + 64u * 1024u) << script;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << script;
  }
}

TEST(UtilProcess, BoundedRunStdinFromDevNull) {
  const BoundedRunOptions bounds{.timeout_ms = 60'000, .max_output = SIZE_MAX, .null_stdin = true};
  auto r = run_capture_bounded("/bin/sh", {"sh", "-c", "[ /dev/stdin -ef /dev/null ] && echo null"},
                               current_environment(), bounds);
  EXPECT_EQ(r.out, "null\n");
}

TEST(UtilProcess, SpawnFailureThrows) {
  TempDir dir(test_root());
  EXPECT_THROW(run_capture(join_path(dir.path(), "nope"), {"nope"}, current_environment()), std::system_error);
}

// Forks a child that runs fn and returns its raw wait status.
template <typename Fn>
int status_of_child(Fn fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    fn();
    ::_exit(99);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

TEST(UtilProcess, ExitLikeReproducesExitCodeAndSignal) {
  int st = status_of_child([] {
    ProcessResult r;
    r.exit_code = 7;
    exit_like(r);
  });
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);

  st = status_of_child([] {
    // Even with the signal blocked and handled, the process must die by it.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGTERM, SIG_IGN);
    ProcessResult r;
    r.term_signal = SIGTERM;
    exit_like(r);
  });
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGTERM);

  st = status_of_child([] {
    ProcessResult r;
    r.term_signal = SIGKILL;
    exit_like(r);
  });
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
}

TEST(UtilProcess, ExecReplace) {
  int st = status_of_child([] {
    exec_replace("/bin/sh", {"sh", "-c", "exit 5"}, current_environment());
    ::_exit(98);
  });
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 5);

  errno = 0;
  exec_replace("/nonexistent/kache-test", {"x"}, current_environment());
  EXPECT_EQ(errno, ENOENT);
}

class UtilFindExecutable : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"bin1", "bin2", "bin3", "bin4"}) create_directories(join_path(dir_.path(), d));
    make_exe("bin1/tool");
    make_exe("bin2/tool");
    write_file(join_path(dir_.path(), "bin3/tool"), "not executable");
    create_directories(join_path(dir_.path(), "bin4/tool"));  // a directory is no candidate
  }
  void make_exe(const std::string& rel) {
    const std::string p = join_path(dir_.path(), rel);
    write_file(p, "#!/bin/sh\n");
    ASSERT_EQ(::chmod(p.c_str(), 0755), 0);
  }
  std::string p(const std::string& rel) const { return join_path(dir_.path(), rel); }
  TempDir dir_{test_root()};
};

TEST_F(UtilFindExecutable, WalksPathInOrder) {
  const std::string path = p("bin3") + ":" + p("bin4") + ":" + p("bin1") + ":" + p("bin2");
  EXPECT_EQ(find_executable("tool", path), p("bin1/tool"));
  EXPECT_EQ(find_executable("tool", p("bin2") + ":" + p("bin1")), p("bin2/tool"));
  EXPECT_FALSE(find_executable("tool", p("bin3") + ":" + p("bin4")));
  EXPECT_FALSE(find_executable("missing", path));
}

TEST_F(UtilFindExecutable, SkipsTheSameFileEvenThroughSymlinks) {
  const std::string path = p("bin1") + ":" + p("bin2");
  EXPECT_EQ(find_executable("tool", path, p("bin1/tool")), p("bin2/tool"));
  // skip named through a symlink, and a PATH entry whose file is a symlink to it
  ASSERT_EQ(::symlink(p("bin1/tool").c_str(), p("self").c_str()), 0);
  EXPECT_EQ(find_executable("tool", path, p("self")), p("bin2/tool"));
  create_directories(p("bin5"));
  ASSERT_EQ(::symlink(p("bin2/tool").c_str(), p("bin5/tool").c_str()), 0);
  EXPECT_EQ(find_executable("tool", p("bin5") + ":" + p("bin2") + ":" + p("bin1"), p("bin2/tool")), p("bin1/tool"));
  EXPECT_FALSE(find_executable("tool", p("bin1"), p("bin1/tool")));
}

TEST_F(UtilFindExecutable, NameWithSlashAndEmptyEntry) {
  EXPECT_EQ(find_executable(p("bin1/tool"), ""), p("bin1/tool"));
  EXPECT_FALSE(find_executable(p("bin3/tool"), ""));
  EXPECT_FALSE(find_executable(p("bin1/tool"), "", p("bin1/tool")));

  const std::string old = current_dir();
  ASSERT_EQ(::chdir(p("bin2").c_str()), 0);
  auto found = find_executable("tool", p("bin3") + "::" + p("bin1"));
  ASSERT_EQ(::chdir(old.c_str()), 0);
  EXPECT_EQ(found, "./tool");  // empty entry = current directory
}

TEST(UtilProcess, EnvironmentHelpers) {
  ASSERT_EQ(::setenv("KACHE_UNIT_TEST_VAR", "v=1", 1), 0);
  Environment env = current_environment();
  EXPECT_EQ(env_get(env, "KACHE_UNIT_TEST_VAR"), "v=1");
  EXPECT_FALSE(env_get(env, "KACHE_UNIT_TEST"));
  ::unsetenv("KACHE_UNIT_TEST_VAR");

  Environment e = {"A=1", "AB=2", "A=3"};
  EXPECT_EQ(env_get(e, "A"), "1");
  env_set(e, "A", "x");
  EXPECT_EQ(e, (Environment{"A=x", "AB=2"}));
  env_set(e, "C", "");
  EXPECT_EQ(env_get(e, "C"), "");
  EXPECT_EQ(e.size(), 3u);
}

TEST(UtilProcess, SelfExecutable) {
  const std::string self = self_executable();
  EXPECT_EQ(self.front(), '/');
  EXPECT_EQ(basename(self), "kache_unit_tests");
  EXPECT_EQ(stat_identity(self), stat_identity("/proc/self/exe"));
}

}  // namespace
}  // namespace kache::util

namespace kache::util {
namespace {

TEST(UtilParallel, SlicesCoverEveryItemOnce) {
  EXPECT_EQ(slice_count(0, 4, 64), 1u);
  EXPECT_EQ(slice_count(100, 4, 64), 1u);  // too few items for a second thread
  EXPECT_LE(slice_count(10'000, 4, 64), 4u);
  EXPECT_EQ(slice_count(10'000, 1, 64), 1u);
  for (std::size_t count : {0u, 1u, 7u, 1000u}) {
    for (std::size_t slices : {1u, 2u, 3u, 4u}) {
      std::vector<std::atomic<int>> seen(count);
      std::vector<std::atomic<int>> per_slice(slices);
      for_each_slice(count, slices, [&](std::size_t slice, std::size_t begin, std::size_t end) {
        per_slice[slice]++;
        for (std::size_t i = begin; i < end; ++i) seen[i]++;
      });
      for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(seen[i].load(), 1) << count << "/" << slices << " item " << i;
      for (std::size_t s = 0; s < slices; ++s) EXPECT_EQ(per_slice[s].load(), 1) << s;
    }
  }
}

}  // namespace
}  // namespace kache::util

namespace {
using kache::util::ShellGrammar;
using kache::util::ShellWords;
using kache::util::split_shell_words;

std::vector<std::string> raw_words(const ShellWords& w) {
  std::vector<std::string> out;
  for (const auto& word : w.words) out.push_back(word.raw);
  return out;
}
}  // namespace

// The one shell lexer (util/shell_words.hpp): /bin/sh's words for wrapper lines, nvcc's dry run and
// COLLECT_GCC_OPTIONS alike.
TEST(UtilShellWords, QuotesAndEscapesAsShDoes) {
  const ShellWords w = split_shell_words("gcc  \"-DA=a b\"\t'-DB=$x' -DC=\\\"q\\\" \"\" a\\ b \"x\\y\"");
  EXPECT_EQ(w.end, ShellWords::End::complete);
  EXPECT_EQ(w.texts(), (std::vector<std::string>{"gcc", "-DA=a b", "-DB=$x", "-DC=\"q\"", "", "a b", "x\\y"}));
  EXPECT_EQ(raw_words(w), (std::vector<std::string>{"gcc", "\"-DA=a b\"", "'-DB=$x'", "-DC=\\\"q\\\"", "\"\"", "a\\ b",
                                                    "\"x\\y\""}));
}

// GCC's COLLECT_GCC_OPTIONS: every option single-quoted, a quote inside as '\''.
TEST(UtilShellWords, CollectGccOptions) {
  EXPECT_EQ(split_shell_words("'-B' '/opt/bin/' 'x'\\''y' '-D' 'M=\"s\"'").texts(),
            (std::vector<std::string>{"-B", "/opt/bin/", "x'y", "-D", "M=\"s\""}));
}

TEST(UtilShellWords, OpenQuotesAndTrailingBackslashesAreNoCompleteLine) {
  EXPECT_EQ(split_shell_words("a 'b c").end, ShellWords::End::open);
  EXPECT_EQ(raw_words(split_shell_words("a 'b c")), (std::vector<std::string>{"a", "'b c"}));
  EXPECT_EQ(split_shell_words("a \"b").end, ShellWords::End::open);
  EXPECT_EQ(split_shell_words("a b\\").end, ShellWords::End::open);
}

// The first special character is reported, outside quotes only ('`' inside double quotes too), '#' and
// '~' only at a word's start; words go on past it.
TEST(UtilShellWords, SpecialCharactersAreReported) {
  const ShellGrammar wrapper{.specials = ";|&()<>{}", .expand = {}};
  EXPECT_EQ(split_shell_words("exec gcc \"$@\"", wrapper).special, 0);
  EXPECT_EQ(split_shell_words("exec gcc \"a;b\" 'c|d'", wrapper).special, 0);
  const ShellWords piped = split_shell_words("gcc x.c | tee y", wrapper);
  EXPECT_EQ(piped.special, '|');
  EXPECT_EQ(piped.words.size(), 5U);
  const ShellGrammar sh{.specials = "|&;<>()`*?[~#{}", .expand = {}};
  EXPECT_EQ(split_shell_words("gcc a#b c~d", sh).special, 0);
  EXPECT_EQ(split_shell_words("gcc #b", sh).special, '#');
  EXPECT_EQ(split_shell_words("gcc ~/x", sh).special, '~');
  EXPECT_EQ(split_shell_words("gcc \"`id`\"", sh).special, '`');
  EXPECT_EQ(split_shell_words("gcc '`id`'", sh).special, 0);
  EXPECT_EQ(split_shell_words("gcc *.c", sh).special, '*');
}

TEST(UtilShellWords, VariablesExpandWhenTheGrammarHasThem) {
  EXPECT_EQ(split_shell_words("$HOME/x").texts(), (std::vector<std::string>{"$HOME/x"}));  // no expansion asked
  ShellGrammar g;
  g.expand = [](std::string_view name) { return name == "T" ? std::string("/opt/t") : std::string("-O2 -g"); };
  EXPECT_EQ(split_shell_words("\"$T/ptxas\" ${T}/b \\$T", g).texts(),
            (std::vector<std::string>{"/opt/t/ptxas", "/opt/t/b", "$T"}));
  EXPECT_EQ(split_shell_words("gcc \"$FLAGS\"", g).texts(), (std::vector<std::string>{"gcc", "-O2 -g"}));
  EXPECT_EQ(split_shell_words("gcc $FLAGS", g).end, ShellWords::End::unexpandable);  // would be split
  EXPECT_EQ(split_shell_words("gcc $ x", g).end, ShellWords::End::unexpandable);
  EXPECT_EQ(split_shell_words("gcc ${T", g).end, ShellWords::End::unexpandable);
}

TEST(UtilText, TerminalSafeDropsControlCharacters) {
  EXPECT_EQ(kache::util::terminal_safe("a\x1b]0;pwned\x07.c"), "a?]0;pwned?.c");
  EXPECT_EQ(kache::util::terminal_safe("\xc2\x9b" "2J"), "?2J");  // C1 CSI as UTF-8
  EXPECT_EQ(kache::util::terminal_safe("caf\xc3\xa9 \x7f"), "caf\xc3\xa9 ?");
  EXPECT_EQ(kache::util::terminal_safe("one\ntwo"), "one?two");
  EXPECT_EQ(kache::util::terminal_safe("one\ntwo", true), "one\ntwo");
}

TEST(UtilText, JsonNestingIsCountedOutsideStrings) {
  EXPECT_TRUE(kache::util::json_nesting_within("{\"a\":[[1]]}", 3));
  EXPECT_FALSE(kache::util::json_nesting_within("{\"a\":[[1]]}", 2));
  EXPECT_TRUE(kache::util::json_nesting_within("[\"[[[[\\\"[[\"]", 1));
  EXPECT_FALSE(kache::util::json_nesting_within(std::string(600000, '['), 8));
}
