// The hipcc probe's memo per flags (offload/toolchain.hpp): stand-ins for the compile's own names, and
// the tail hipcc.pl appends for the arguments (its $toolArgs), which the toolchain id leaves out.
#include <gtest/gtest.h>

#include <filesystem>

#include "compiler/offload/toolchain.hpp"

namespace {

using kache::compiler::offload::hipcc_tool_args;
using kache::compiler::offload::probe_line;
using kache::compiler::offload::ProbeStandIns;

// hipcc 5.2.3's line for `hipcc --genco --offload-arch=gfx90a -I../inc ../src/k.hip -o k.hsaco -###`
// ends in exactly this (measured with HIPCC_VERBOSE=1).
TEST(HipccToolArgs, ReDerivesWhatHipccAppends) {
  const auto tail = hipcc_tool_args({"--genco", "--offload-arch=gfx90a", "-I../inc", "../src/k.hip", "-o", "k.hsaco",
                                     "-###"},
                                    true);
  ASSERT_TRUE(tail);
  EXPECT_EQ(*tail, R"( --cuda-device-only -I../inc -x hip ../src/k.hip -o "k.hsaco" -\#\#\#)");
}

TEST(HipccToolArgs, LanguageBySuffixUnlessGiven) {
  EXPECT_EQ(*hipcc_tool_args({"-c", "a.cpp"}, true), " -c -x hip a.cpp");
  EXPECT_EQ(*hipcc_tool_args({"-c", "a.cpp"}, false), " -c a.cpp");
  EXPECT_EQ(*hipcc_tool_args({"-c", "a.c"}, true), " -c -x c a.c");
  EXPECT_EQ(*hipcc_tool_args({"-x", "hip", "-c", "a.cpp"}, true), " -x hip -c a.cpp");
  EXPECT_EQ(*hipcc_tool_args({"--hipcc-func-supp", "-DX=a b"}, true), R"( -DX=a\ b)");
}

TEST(HipccToolArgs, LinesHipccRewritesOtherwiseAreNotDerived) {
  EXPECT_FALSE(hipcc_tool_args({"-c", "@rsp"}, true));
  EXPECT_FALSE(hipcc_tool_args({"-c", "a.hip", "lib.a"}, true));
  EXPECT_FALSE(hipcc_tool_args({"-c", "a.hip", "-use-staticlib"}, true));
}

TEST(ProbeLine, StandInsKeepTheSuffixAndOnlyPlainValuesAreReplaced) {
  const std::string memo = std::filesystem::temp_directory_path() / "kache-probe-line-test";
  std::filesystem::remove_all(memo);
  ProbeStandIns s;
  s.source = 2;
  s.values = {{4, 0}, {5, 3}};
  const auto line = probe_line({"--genco", "-I/x", "/w/src/k.hip", "-o", "k.hsaco", "-MFk.d"}, s, memo);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, (std::vector<std::string>{"--genco", "-I/x", memo + "/probe/kache-probe.hip", "-o",
                                             "kache-probe-0.hsaco", "-MFkache-probe-1.d"}));
  EXPECT_TRUE(std::filesystem::exists(memo + "/probe/kache-probe.hip"));
  // A value hipcc would escape, quote or act on: the line as given.
  EXPECT_FALSE(probe_line({"--genco", "-I/x", "/w/src/k.hip", "-o", "k$x.hsaco", "-MFk.d"}, s, memo));
  EXPECT_FALSE(probe_line({"--genco", "-I/x", "/w/src/a--genco.hip", "-o", "k.hsaco", "-MFk.d"}, s, memo));
  EXPECT_FALSE(probe_line({"--genco", "-I/x", "/w/src/k.hip", "-o", "k.hsaco", "-MFk.d"}, s, ""));
  std::filesystem::remove_all(memo);
}

}  // namespace
