// The path roots the adapters build for a job (compiler/job_paths.hpp): the build root as the compiler
// spells the working directory ($PWD), and the user's prefix maps keyed by the roots (issue 35). The
// command-line facts that turn the debug placeholders off (issue 27): test_argument_facts.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "compiler/job_paths.hpp"
#include "util/fs.hpp"

namespace kache::compiler {
namespace {

TEST(JobPaths, TheBuildRootIsSpelledAsPwdWhenItNamesTheWorkingDirectory) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "kache-job-paths";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "real" / "build");
  std::filesystem::create_directory_symlink(dir / "real", dir / "link");
  const std::string real = (dir / "real" / "build").string(), link = (dir / "link" / "build").string();
  EXPECT_EQ(compiler_pwd(real, {"PWD=" + link}), link);
  EXPECT_EQ(compiler_pwd(real, {}), real);                            // no $PWD
  EXPECT_EQ(compiler_pwd(real, {"PWD=link/build"}), real);            // relative
  // Not lexically normal: taken as spelled, as GCC and clang write it (issue 35 item 5).
  EXPECT_EQ(compiler_pwd(real, {"PWD=" + link + "/"}), link + "/");
  EXPECT_EQ(compiler_pwd(real, {"PWD=" + link + "/../build"}), link + "/../build");
  EXPECT_EQ(compiler_pwd(real, {"PWD=" + link + "/../nowhere"}), real);  // names no directory
  EXPECT_EQ(compiler_pwd(real, {"PWD=" + dir.string()}), real);       // another directory
  // The output directory (the cwd) dedups with the build root under either spelling, so the key's
  // cwd and output fields read as in a checkout reached without a symlink.
  const auto roots = standard_roots(real, real + "/../src/a.c", real + "/a.o", {}, nullptr, link);
  EXPECT_EQ(roots.roots()[0].path, link);
  EXPECT_EQ(roots.key_form(real), "/kache/build");
  EXPECT_EQ(roots.key_form(real + "/a.o"), "/kache/build/a.o");
  EXPECT_EQ(roots.key_form(link + "/x.h"), "/kache/build/x.h");
  // A trailing slash is no part of the root: the placeholder stands for the directory.
  const auto slashed = standard_roots(real, real + "/../src/a.c", real + "/out/a.o", {}, nullptr, link + "//");
  EXPECT_EQ(slashed.roots()[0].path, link);
  EXPECT_EQ(slashed.roots()[2].path, link + "/out");
  EXPECT_EQ(slashed.key_form(link + "/x.h"), "/kache/build/x.h");
  std::filesystem::remove_all(dir);
}

// Issue 35: the user's prefix map whose old path is a root (the checkout as a base dir) is keyed by the
// root's name, so two checkouts given the same recipe key alike; gcc's own arguments and nvcc's
// -Xcompiler values alike.
TEST(JobPaths, AUsersPrefixMapIsKeyedByTheRootItsOldPathIs) {
  const auto one = standard_roots("/w/one/build", "/w/one/src/a.c", "/w/one/build/a.o", {"/w/one"}, nullptr);
  const auto two = standard_roots("/w/two/build", "/w/two/src/a.c", "/w/two/build/a.o", {"/w/two"}, nullptr);
  for (const char* kind : {"-ffile-prefix-map=", "-fmacro-prefix-map=", "-fdebug-prefix-map="}) {
    const auto a = key_prefix_map_rule(std::string(kind) + "/w/one=.", one);
    const auto b = key_prefix_map_rule(std::string(kind) + "/w/two=.", two);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->form, std::string(kind) + "/kache/base0=.");
    EXPECT_EQ(a->form, b->form);
  }
  EXPECT_EQ(key_prefix_map_rule("-ffile-prefix-map=/elsewhere=.", one)->form, "-ffile-prefix-map=/elsewhere=.");
  EXPECT_FALSE(key_prefix_map_rule("-ffile-prefix-map", one));
  EXPECT_FALSE(key_prefix_map_rule("-I/w/one/include", one));
  EXPECT_EQ(keyed_args({"-O2", "-ffile-prefix-map=/w/one=."}, {}, one),
            (std::vector<std::string>{"-O2", "-ffile-prefix-map=/kache/base0=."}));
}

// Issue 35: an include dir is literal as spelled ("<p>/x/../../Common", as CMake passes
// include_directories(../../Common) on) and as it resolves, so a path climbing out of its spelling is
// literal too.
TEST(JobPaths, ALiteralDirIsKnownAsSpelledAndAsNormal) {
  CompileJob job;
  add_literal_dir(job, "/p/Samples/x/../../Common/");
  add_literal_dir(job, "/p/Common");
  add_literal_dir(job, "relative/dir");
  EXPECT_EQ(job.literal_dirs, (std::vector<std::string>{"/p/Samples/x/../../Common", "/p/Common"}));
}

// Issue 35 (ggml on the GPU machine): nvcc.profile's "<toolkit>/bin/../targets/.../cccl" is also known
// as "<toolkit>/targets/.../cccl" (CMake's -isystem) and by its real path; a "bin/.." whose bin is a
// link elsewhere is not read past, and a directory that does not exist adds nothing.
TEST(JobPaths, AToolchainDirIsKnownByEverySpellingOfIt) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "kache-dir-spellings";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "real" / "bin");
  std::filesystem::create_directories(dir / "real" / "targets" / "inc");
  std::filesystem::create_directories(dir / "other" / "bin");
  std::filesystem::create_directories(dir / "other" / "targets" / "inc");
  std::filesystem::create_directory_symlink(dir / "real", dir / "tk");
  std::filesystem::create_directory_symlink(dir / "other" / "bin", dir / "real" / "linkbin");
  const std::string d = dir.string();
  EXPECT_EQ(system_dir_spellings({d + "/tk/bin/../targets/inc/", d + "/missing/../x"}),
            (std::vector<std::string>{d + "/tk/bin/../targets/inc", d + "/missing/../x", d + "/tk/targets/inc",
                                      d + "/real/targets/inc"}));
  // linkbin/.. is other/, not real/: the lexical form would name another directory, so only the real path.
  EXPECT_EQ(system_dir_spellings({d + "/tk/linkbin/../targets/inc"}),
            (std::vector<std::string>{d + "/tk/linkbin/../targets/inc", d + "/other/targets/inc"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kache::compiler
