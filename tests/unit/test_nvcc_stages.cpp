// nvcc's dry run as the stage cache reads it (compiler/nvcc/stages.hpp): the commands and variables, the
// shell syntax it refuses, and the dependency file nvcc writes from its preprocessed files.
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/nvcc/stages.hpp"
#include "util/fs.hpp"

namespace {

using kache::compiler::nvcc::filter_dependencies;
using kache::compiler::nvcc::parse_dry_run;
using kache::compiler::nvcc::Stage;
using kache::compiler::nvcc::StagePlan;

std::string test_root() { return (std::filesystem::temp_directory_path() / "kache-unit").string(); }

// nvcc 13's dry run of `nvcc -c k.cu -o out/k.o -objtemp -arch=sm_80 -MD -MF out/k.d`, shortened.
const char* kDryRun =
    "#$ _NVVM_BRANCH_=nvvm\n"
    "#$ _SPACE_= \n"
    "#$ CICC_PATH=/cuda/bin/../nvvm/bin\n"
    "#$ PATH=/cuda/bin/../nvvm/bin:/cuda/bin:/usr/bin\n"
    "#$ INCLUDES=\"-I/cuda/bin/../targets/x86_64-linux/include\"  \n"
    "#$ PTXAS_FLAGS=\n"
    "#$ gcc -D__CUDA_ARCH__=800 -D__CUDA_ARCH_LIST__=800 -E -x c++ \"-I/cuda/include\"   -include \"cuda_runtime.h\" "
    "-m64 \"k.cu\" -o \"out/k.o.cpp1.ii\" \n"
    "#$ -- Filter Dependencies -- > out/k.d\n"
    "#$ \"$CICC_PATH/cicc\" --c++17 --orig_src_file_name \"k.cu\" -arch compute_80 --stub_file_name "
    "\"out/k.o.cudafe1.stub.c\"  \"out/k.o.cpp1.ii\" -o \"out/k.o.ptx\"\n"
    "#$ ptxas -arch=sm_80 -m64  \"out/k.o.ptx\"  -o \"out/k.o.cubin\" \n"
    "#$ rm out/k.o.ptx\n";

TEST(NvccStages, ReadsVariablesAndCommandsOfTheDryRun) {
  auto parsed = parse_dry_run(kDryRun, {});
  ASSERT_TRUE(std::holds_alternative<StagePlan>(parsed)) << std::get<std::string>(parsed);
  const StagePlan& plan = std::get<StagePlan>(parsed);
  ASSERT_EQ(plan.variables.size(), 6u);
  EXPECT_EQ(plan.variables[1].second, " ");  // _SPACE_: the value as printed, trailing blank kept
  EXPECT_EQ(plan.variables[4].second, "\"-I/cuda/bin/../targets/x86_64-linux/include\"  ");
  ASSERT_EQ(plan.stages.size(), 5u);
  EXPECT_EQ(plan.stages[0].kind, Stage::Kind::run);
  EXPECT_EQ(plan.stages[0].words.back(), "out/k.o.cpp1.ii");
  EXPECT_EQ(plan.stages[0].words[6], "-I/cuda/include");
  EXPECT_EQ(plan.stages[1].kind, Stage::Kind::filter_dependencies);
  EXPECT_EQ(plan.stages[1].path, "out/k.d");
  EXPECT_EQ(plan.stages[2].kind, Stage::Kind::cicc);
  EXPECT_EQ(plan.stages[2].words[0], "/cuda/bin/../nvvm/bin/cicc");  // $CICC_PATH from the dry run
  EXPECT_EQ(plan.stages[3].kind, Stage::Kind::ptxas);
  EXPECT_EQ(plan.stages[4].kind, Stage::Kind::remove);
}

TEST(NvccStages, ExpandsFromTheEnvironmentWhatTheDryRunDoesNotSet) {
  auto parsed = parse_dry_run("#$ \"$HOME_TOOLS/ptxas\" -arch=sm_90 a.ptx -o a.cubin\n", {"HOME_TOOLS=/opt/t"});
  ASSERT_TRUE(std::holds_alternative<StagePlan>(parsed));
  EXPECT_EQ(std::get<StagePlan>(parsed).stages[0].words[0], "/opt/t/ptxas");
}

TEST(NvccStages, QuotesAndEscapesAsTheShellReadsThem) {
  auto parsed = parse_dry_run("#$ gcc \"-DA=a b\" '-DB=$x' -DC=\\\"q\\\" \"\" -o out.ii\n", {});
  ASSERT_TRUE(std::holds_alternative<StagePlan>(parsed));
  const auto& w = std::get<StagePlan>(parsed).stages[0].words;
  ASSERT_EQ(w.size(), 7u);
  EXPECT_EQ(w[1], "-DA=a b");
  EXPECT_EQ(w[2], "-DB=$x");  // single quotes: no expansion
  EXPECT_EQ(w[3], "-DC=\"q\"");
  EXPECT_EQ(w[4], "");  // a quoted empty word is a word
}

TEST(NvccStages, RunsWholeWhatTheShellWouldInterpret) {
  for (const char* line : {"#$ gcc -E k.cu | tee x\n", "#$ gcc `uname` -c k.cu\n", "#$ gcc $(uname) -c k.cu\n",
                           "#$ gcc -c k*.cu\n", "#$ gcc -c k.cu > log\n", "#$ gcc -c k.cu; rm x\n",
                           "#$ gcc -DX=\"unterminated -c k.cu\n"}) {
    auto parsed = parse_dry_run(line, {});
    ASSERT_TRUE(std::holds_alternative<std::string>(parsed)) << line;
    EXPECT_EQ(std::get<std::string>(parsed), "shell-syntax") << line;
  }
  // An unquoted expansion the shell would split into several words.
  auto split = parse_dry_run("#$ gcc $FLAGS -c k.cu\n", {"FLAGS=-O2 -g"});
  ASSERT_TRUE(std::holds_alternative<std::string>(split));
}

TEST(NvccStages, RunsWholeAroundNvccsOwnMessages) {
  auto parsed = parse_dry_run("#$ PATH=/usr/bin\nnvcc warning : something about the architectures\n", {});
  ASSERT_TRUE(std::holds_alternative<std::string>(parsed));
  EXPECT_EQ(std::get<std::string>(parsed), "nvcc-message");
}

TEST(NvccStages, DependencyFileListsEveryMarkedFileOnceInOrder) {
  kache::util::TempDir dir(test_root());
  const std::string a = kache::util::join_path(dir.path(), "a.cpp1.ii");
  const std::string b = kache::util::join_path(dir.path(), "b.cpp4.ii");
  kache::util::write_file(a,
                          "# 1 \"k.cu\"\n# 1 \"<built-in>\"\n# 1 \"<command-line>\"\n# 1 \"/usr/include/stdc-predef.h\" 1 3 4\n"
                          "# 1 \"inc/only80.h\" 1\nint x;\n# 3 \"k.cu\" 2\n");
  kache::util::write_file(b, "# 1 \"k.cu\"\n# 1 \"/usr/include/stdc-predef.h\" 1 3 4\n# 1 \"inc/host.h\" 1\n");
  auto text = filter_dependencies("out/k.o", {a, b});
  ASSERT_TRUE(text);
  EXPECT_EQ(*text,
            "out/k.o : k.cu \\\n    /usr/include/stdc-predef.h \\\n    inc/only80.h \\\n    inc/host.h\n");
}

TEST(NvccStages, DependencyFileWithoutSystemHeadersLeavesOutWhatGccFlagsSystem) {
  kache::util::TempDir dir(test_root());
  const std::string a = kache::util::join_path(dir.path(), "a.ii");
  kache::util::write_file(a,
                          "# 1 \"k.cu\"\n# 1 \"/usr/include/stdc-predef.h\" 1 3 4\n# 1 \"sys/s.h\" 1 3\n"
                          "# 1 \"usr/u.h\" 1 3 4\n# 2 \"sys/s.h\" 2 3\n# 2 \"k.cu\" 2\n# 1 \"inc/h.h\" 1\n");
  EXPECT_EQ(filter_dependencies("k.o", {a}, true), "k.o : k.cu \\\n    inc/h.h\n");
  EXPECT_EQ(filter_dependencies("k.o", {a}, false),
            "k.o : k.cu \\\n    /usr/include/stdc-predef.h \\\n    sys/s.h \\\n    usr/u.h \\\n    inc/h.h\n");
}

TEST(NvccStages, DependencyFileLeavesOutTheNamesOfLineDirectives) {
  kache::util::TempDir dir(test_root());
  const std::string a = kache::util::join_path(dir.path(), "a.ii");
  kache::util::write_file(a, "# 1 \"k.cu\"\n# 1 \"inc/h.h\" 1\n# 2 \"k.cu\" 2\n# 100 \"grammar.y\"\nint x;\n");
  EXPECT_EQ(filter_dependencies("k.o", {a}), "k.o : k.cu \\\n    inc/h.h\n");
}

TEST(NvccStages, DependencyFileRefusesNamesWhoseSpellingIsNotMeasured) {
  kache::util::TempDir dir(test_root());
  const std::string a = kache::util::join_path(dir.path(), "a.ii");
  kache::util::write_file(a, "# 1 \"k.cu\"\n# 1 \"inc dir/h.h\" 1\n");
  EXPECT_FALSE(filter_dependencies("k.o", {a}));
  kache::util::write_file(a, "# 1 \"k.cu\"\n");
  EXPECT_FALSE(filter_dependencies("my target", {a}));
  EXPECT_FALSE(filter_dependencies("k.o", {a + ".missing"}));
}

}  // namespace
