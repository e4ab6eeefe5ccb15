// The gcc/clang planner and its flag table: which drivers it claims, what caches, what passes
// through and why, the implied output and dependency file, and what the key sees. Command lines
// follow what CMake, Meson and makefiles pass.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "compiler/common.hpp"
#include "compiler/gcc/adapter.hpp"
#include "compiler/gcc/flag_table.hpp"
#include "compiler/gcc/host_rules.hpp"
#include "compiler/gcc/plan.hpp"
#include "core/reasons.hpp"

namespace {

using namespace kache::compiler::gcc;
using Args = std::vector<std::string>;

std::string reason(const Args& args, const Args& allow = {}) {
  Plan p = plan(args, allow);
  if (auto* pt = std::get_if<kache::compiler::Passthrough>(&p)) return pt->reason;
  return "cached";
}

CompilePlan cached(const Args& args) {
  Plan p = plan(args, {});
  if (auto* pt = std::get_if<kache::compiler::Passthrough>(&p)) {
    ADD_FAILURE() << "passthrough " << pt->reason << ": " << pt->detail;
    return {};
  }
  return std::get<CompilePlan>(p);
}

TEST(GccDriver, NamesItClaims) {
  for (const char* n : {"gcc", "g++", "cc", "c++", "clang", "clang++", "g++-12", "clang++-19", "gcc-12.2",
                        "/usr/bin/c++", "x86_64-linux-gnu-gcc-12", "aarch64-linux-gnu-g++", "/opt/llvm/bin/clang-19"}) {
    EXPECT_TRUE(is_gcc_driver(n)) << n;
  }
  for (const char* n : {"nvcc", "kache", "c++filt", "clang-cl", "ccache", "nvc++", "gcc-ar", "clang-format", "icc"}) {
    EXPECT_FALSE(is_gcc_driver(n)) << n;
  }
}

TEST(GccPlan, CMakeCompile) {
  CompilePlan p = cached({"-DFOO=1", "-I/w/include", "-isystem", "/w/ext", "-O2", "-g", "-std=gnu++17", "-fPIC", "-MD",
                          "-MT", "CMakeFiles/x.dir/a.cpp.o", "-MF", "CMakeFiles/x.dir/a.cpp.o.d", "-o",
                          "CMakeFiles/x.dir/a.cpp.o", "-c", "/w/src/a.cpp"});
  EXPECT_EQ(p.language, "c++");
  EXPECT_EQ(p.output, "CMakeFiles/x.dir/a.cpp.o");
  EXPECT_EQ(p.depfile, Depfile::MD);
  EXPECT_EQ(p.depfile_path, "CMakeFiles/x.dir/a.cpp.o.d");
  EXPECT_TRUE(p.has_dep_target);
  EXPECT_TRUE(p.has_debug);
  EXPECT_EQ(p.include_dirs, (Args{"/w/include", "/w/ext"}));
  EXPECT_EQ(p.keyed_args.back(), "<source>");
  EXPECT_EQ(p.keyed_args[p.keyed_args.size() - 3], "<output>");
}

TEST(GccPlan, MesonCompile) {
  CompilePlan p = cached({"-Ilibm.a.p", "-I.", "-I..", "-fdiagnostics-color=always", "-D_FILE_OFFSET_BITS=64", "-Wall",
                          "-Winvalid-pch", "-O0", "-g", "-MD", "-MQ", "libm.a.p/a.c.o", "-MF", "libm.a.p/a.c.o.d", "-o",
                          "libm.a.p/a.c.o", "-c", "../a.c"});
  EXPECT_EQ(p.language, "c");
}

TEST(GccPlan, ImpliedOutputAndDepfile) {
  CompilePlan p = cached({"-c", "src/dir/x.cpp", "-MMD"});
  EXPECT_TRUE(p.output_implied);
  EXPECT_EQ(p.output, "x.o");
  EXPECT_EQ(p.depfile, Depfile::MMD);
  EXPECT_EQ(p.depfile_path, "x.d");
  EXPECT_TRUE(p.depfile_implied);
  EXPECT_EQ(cached({"-c", "x.c", "-MD", "-o", "out/y.obj"}).depfile_path, "out/y.d");
  EXPECT_EQ(cached({"-c", "x.c", "-MD", "-o", "out.d/y"}).depfile_path, "out.d/y.d");
  EXPECT_EQ(cached({"-c", "x.c", "-oout/z.o"}).output, "out/z.o");
  EXPECT_EQ(cached({"-c", "x.c", "-oout/z.o"}).keyed_args[2], "-o<output>");
}

TEST(GccPlan, ArgumentPositionsForTheMiss) {
  CompilePlan p = cached({"-c", "x.c", "-MD", "-MT", "-ofoo", "-MFdeps.d", "-o", "x.o"});
  ASSERT_TRUE(p.output_arg);
  EXPECT_EQ(p.output_arg->index, 6u);
  EXPECT_FALSE(p.output_arg->attached);
  ASSERT_TRUE(p.depfile_arg);
  EXPECT_EQ(p.depfile_arg->index, 5u);
  EXPECT_TRUE(p.depfile_arg->attached);
  ASSERT_EQ(p.dep_target_args.size(), 1u);
  EXPECT_EQ(p.dep_target_args[0].index, 3u);
}

TEST(GccPlan, Languages) {
  EXPECT_EQ(cached({"-c", "x.cc"}).language, "c++");
  EXPECT_EQ(cached({"-c", "x.C"}).language, "c++");
  EXPECT_EQ(cached({"-c", "x.S"}).language, "assembler-with-cpp");
  EXPECT_EQ(cached({"-x", "c++", "-c", "x.c"}).language, "c++");
  EXPECT_EQ(cached({"-c", "x.c", "-x", "c++"}).language, "c");  // -x applies to inputs after it
  EXPECT_EQ(reason({"-c", "x.s"}), "language");
  EXPECT_EQ(reason({"-c", "x.i"}), "language");
  EXPECT_EQ(reason({"-c", "x.m"}), "language");
  EXPECT_EQ(reason({"-c", "x.f90"}), "language");
  EXPECT_EQ(reason({"-c", "x.h"}), "pch");
  EXPECT_EQ(reason({"-x", "c++-header", "-c", "x.hpp"}), "pch");
  EXPECT_EQ(reason({"-x", "cuda", "-c", "x.cpp"}), "clang-cuda");
  EXPECT_EQ(reason({"-c", "k.cu"}), "clang-cuda");
  EXPECT_EQ(reason({"-c", "x.cpp", "--cuda-gpu-arch=sm_90"}), "clang-cuda");
}

TEST(GccPlan, PassthroughReasons) {
  EXPECT_EQ(reason({"x.c", "-o", "prog"}), "link");
  EXPECT_EQ(reason({"-c", "a.c", "b.c"}), "multiple-sources");
  EXPECT_EQ(reason({"-c"}), "no-source");
  // An empty argument names no file (found by fuzz_gcc_plan), with or without -x.
  EXPECT_EQ(reason({"-x", "c++", "-c", ""}), "no-source");
  EXPECT_EQ(reason({"-c", "a.c", ""}), "no-source");
  EXPECT_EQ(reason({"-E", "a.c"}), "preprocess");
  EXPECT_EQ(reason({"-c", "a.c", "-M"}), "dependency-only");
  EXPECT_EQ(reason({"-c", "a.c", "-MM", "-MF", "x.d"}), "dependency-only");
  EXPECT_EQ(reason({"-c", "a.c", "-MD", "-MG"}), "dependency-only");
  EXPECT_EQ(reason({"-S", "a.c"}), "output-kind");
  EXPECT_EQ(reason({"-c", "a.c", "-o", "-"}), "output-kind");
  EXPECT_EQ(reason({"-c", "a.c", "-o", "a.o", "-MD", "-MF", "-"}), "output-kind");  // dependencies to stdout
  EXPECT_EQ(reason({"-c", "a.c", "-o", "a.o", "-MMD", "-MF-"}), "output-kind");
  EXPECT_EQ(reason({"-c", "a.c", "-fsyntax-only"}), "output-kind");
  EXPECT_EQ(reason({"-c", "a.c", "-include-pch", "p.pch"}), "pch");
  EXPECT_EQ(reason({"-c", "a.c", "-fprofile-use=x.profdata"}), "profile-use");
  EXPECT_EQ(reason({"-c", "a.c", "-fauto-profile"}), "profile-use");
  EXPECT_EQ(reason({"-c", "a.c", "-fprofile-generate"}), "profiling");
  EXPECT_EQ(reason({"-c", "a.c", "--coverage"}), "coverage");
  // Keyed by what the driver expands it to on this processor (gcc::native_expansion).
  EXPECT_EQ(reason({"-c", "a.c", "-march=native"}), "cached");
  EXPECT_EQ(reason({"-c", "a.c", "-mtune=native", "-march=native"}, {"-march"}), "cached");
  EXPECT_EQ(reason({"-c", "@rsp"}), "response-file");
  EXPECT_EQ(reason({"-c", "a.c", "-save-temps=obj"}), "save-temps");
  EXPECT_EQ(reason({"-c", "a.c", "-gsplit-dwarf"}), "split-dwarf");
  EXPECT_EQ(reason({"-c", "a.c", "-Wp,-MD,x.d"}), "hidden-input");
  EXPECT_EQ(reason({"-c", "a.c", "-Xclang", "-load"}), "hidden-input");
  // -B is keyed with what the toolchain probe finds there (a wrapper compiler adds it).
  EXPECT_EQ(reason({"-c", "a.c", "-B/opt/bin"}), "cached");
  EXPECT_EQ(reason({"-c", "a.c", "--sysroot=/sr"}), "sysroot");
  EXPECT_EQ(reason({"-c", "a.c", "--target=aarch64-linux-gnu"}), "cross-target");
  EXPECT_EQ(reason({"-c", "a.c", "-fplugin=x.so"}), "plugin");
  EXPECT_EQ(reason({"-c", "a.c", "-fmodules-ts"}), "modules");
  EXPECT_EQ(reason({"-c", "a.c", "-MF", "x.d"}), "depfile-modifier");
  EXPECT_EQ(reason({"-c", "a.c", "-o", "a.o", "-o", "b.o"}), "multiple-outputs");
  EXPECT_EQ(reason({"-c", "a.c", "-"}), "stdin");
  EXPECT_EQ(reason({"--version"}), "informational");
  EXPECT_EQ(reason({"-print-prog-name=cc1"}), "informational");
  // A phase reason wins over a refused flag elsewhere on the line.
  EXPECT_EQ(reason({"-E", "a.c", "-fplugin=x.so"}), "preprocess");
}

TEST(GccPlan, UnknownFlagsAndTheAllowList) {
  EXPECT_EQ(reason({"-c", "a.c", "-C"}), "unknown-flag");
  EXPECT_EQ(reason({"-c", "a.c", "-C"}, {"-C"}), "cached");
  EXPECT_EQ(reason({"-c", "a.c", "--frobnicate=3"}, {"--frobnicate"}), "cached");
  // The table is closed: an -f option it does not list passes through, naming the option, unless
  // allow-listed (before, a catch-all "-f" entry keyed every one, -fbranch-probabilities included).
  EXPECT_EQ(reason({"-c", "a.c", "-frobnicate"}), "unknown-flag");
  EXPECT_EQ(std::get<kache::compiler::Passthrough>(plan({"-c", "a.c", "-frobnicate"}, {})).detail, "-frobnicate");
  EXPECT_EQ(reason({"-c", "a.c", "-frobnicate"}, {"-frobnicate"}), "cached");
  EXPECT_EQ(reason({"-c", "a.c", "-frobnicate=2"}, {"-frobnicate"}), "cached");
}

// Options that read a file kache does not hash, or write one a hit would not restore, pass through.
TEST(GccPlan, FileOptionsPassThrough) {
  for (const char* flag : {"-fbranch-probabilities", "-fprofile-use", "-fprofile-use=x.gcda", "-fauto-profile=x.afdo",
                           "-fbasic-block-sections=list=x.txt", "-fprebuilt-module-path=m", "-fmodule-file=m.pcm",
                           "-fsanitize-ignorelist=x.txt", "-fprofile-instr-use=x.profdata", "-fcoverage-mapping",
                           "-foptimization-record-file=x.yaml", "-fproc-stat-report=x", "-fthin-link-bitcode=x.bc",
                           "-fdump-tree-all", "-fstack-usage", "-fcallgraph-info", "-ftest-coverage", "--coverage",
                           "-save-stats", "-fprofile-arcs", "-gen-cdb-fragment-path", "-fdiagnostics-format=sarif-file",
                           "-fsave-optimization-record", "-ftime-trace"}) {
    EXPECT_NE(reason({"-c", "a.c", flag, "x"}), "cached") << flag;
  }
  EXPECT_EQ(reason({"-c", "a.c", "-mllvm", "-info-output-file=x"}), "hidden-input");
}

// What real builds pass stays cached (CMake, Meson, autotools and distribution defaults).
TEST(GccPlan, CommonOptionsAreCached) {
  for (const char* flag :
       {"-fPIC", "-fPIE", "-fno-omit-frame-pointer", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
        "-fstack-protector-strong", "-fstack-clash-protection", "-fcf-protection", "-fexceptions", "-fno-rtti",
        "-fdiagnostics-color=always", "-fcolor-diagnostics", "-fmacro-prefix-map=/a=b", "-ffile-prefix-map=/a=.",
        "-fdebug-prefix-map=/a=b", "-fopenmp", "-fsanitize=address,undefined", "-std=c++17", "-Wall", "-Werror=format",
        "-O2", "-Ofast", "-g", "-ggdb3", "-gdwarf-4", "-gz=zlib", "-gno-column-info", "-march=x86-64-v3", "-m64",
        "-pipe", "-pthread", "-flto", "-flto=auto", "-ffunction-sections", "-fdata-sections", "-funroll-loops",
        "-ftree-vectorize", "-fno-strict-aliasing", "-fwrapv", "-ffast-math", "-fasynchronous-unwind-tables",
        "-grecord-gcc-switches", "-fdiagnostics-urls=never", "-fmessage-length=0", "-ftemplate-depth=1024"}) {
    EXPECT_EQ(reason({"-c", "a.c", flag}), "cached") << flag;
  }
}

TEST(GccFlagTable, LongestEntryWins) {
  EXPECT_EQ(find_flag("-fprofile-use=x")->flag->reason, "profile-use");
  EXPECT_EQ(find_flag("-fno-exceptions")->flag->effect, Effect::Keyed);
  EXPECT_EQ(find_flag("-include-pch")->flag->reason, "pch");
  EXPECT_EQ(find_flag("-includefoo.h")->flag->effect, Effect::ForcedInclude);
  EXPECT_EQ(*find_flag("-includefoo.h")->attached, "foo.h");
  EXPECT_EQ(find_flag("-Wl,--as-needed")->flag->effect, Effect::Keyed);
  EXPECT_EQ(find_flag("-Wa,-adhln=x")->flag->reason, "assembler-options");
  EXPECT_EQ(*find_flag("--param=max-inline-insns-single=10")->attached, "max-inline-insns-single=10");
  EXPECT_FALSE(find_flag("--paramx").has_value());
  EXPECT_FALSE(find_flag("-Q").has_value());
  EXPECT_FALSE(find_flag("-fbogus-option").has_value());
  EXPECT_EQ(find_flag("-fbranch-probabilities")->flag->reason, "profile-use");
  EXPECT_EQ(find_flag("-gen-cdb-fragment-path")->flag->reason, "side-output");  // not a -g debug option
  EXPECT_EQ(find_flag("-fbasic-block-sections=all")->flag->effect, Effect::Keyed);
  EXPECT_EQ(find_flag("-fbasic-block-sections=list=x")->flag->reason, "hidden-input");
}

// The table's own shape: no catch-all beyond the documented families, no spelling twice, every
// refusal a named passthrough reason, and what each shape allows.
TEST(GccFlagTable, WellFormed) {
  const std::set<std::string> families = {"-W", "-m", "-fno-", "-gno-"};
  std::set<std::string> seen;
  for (const GccFlag& f : flag_table()) {
    const std::string name(f.name);
    EXPECT_TRUE(name.size() >= 2 && name[0] == '-') << name;
    EXPECT_TRUE(seen.insert(name).second) << "duplicate spelling " << name;
    if (f.effect == Effect::Refuse) {
      EXPECT_NE(kache::core::find_reason(kache::core::ReasonCategory::Passthrough, f.reason), nullptr) << name << " " << f.reason;
    } else {
      EXPECT_TRUE(f.reason.empty()) << name;
    }
    if (f.shape == Shape::Family) {
      EXPECT_TRUE(families.count(name)) << "undocumented family " << name;
      EXPECT_NE(f.effect, Effect::Refuse) << name;  // a refused prefix is a plain Prefix row
    }
    // A kept Prefix row is "name=value" or "name,list": nothing else may hide behind its name.
    if (f.shape == Shape::Prefix && f.effect != Effect::Refuse) {
      EXPECT_TRUE(name.ends_with('=') || name.ends_with(',')) << "open prefix " << name;
    }
  }
  // No catch-all for the option letters a family would otherwise swallow ("-g" and "-O" are exact rows).
  for (const char* catch_all : {"-f", "-g", "-O", "-X", "-i", "-d"}) {
    const auto m = find_flag(std::string(catch_all) + "kache-unlisted");
    EXPECT_FALSE(m && m->flag->effect != Effect::Refuse) << catch_all << " matches " << m->flag->name;
  }
  EXPECT_GT(seen.size(), 400u);
}

TEST(HostRules, NvccXcompilerRulesUnchanged) {
  EXPECT_FALSE(check_host_options("-fPIC,-Wall").has_value());
  EXPECT_EQ(check_host_options("-I/x")->reason, "hidden-input");
  EXPECT_EQ(check_host_options("-march=native")->reason, "machine-native");
  bool debug = false;
  EXPECT_FALSE(check_host_options("-g -O2", &debug).has_value());
  EXPECT_TRUE(debug);
}

}  // namespace

TEST(MissFlags, DiagnosticsColourAsOnTheTerminal) {
  const kache::util::Environment term = {"TERM=xterm"};
  auto diagnostics_colour_flag = [](const std::vector<std::string>& args, const kache::util::Environment& env,
                                    bool clang, bool terminal) {
    return kache::compiler::diagnostics_colour_flag(kache::compiler::read_argument_facts(args), env, clang, terminal);
  };
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c"}, term, false, true), "-fdiagnostics-color=always");
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c"}, term, false, false), "");  // not a terminal
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c"}, {"TERM=dumb"}, false, true), "");
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c"}, {}, false, true), "");
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c"}, {"TERM=xterm", "GCC_COLORS="}, false, true), "");
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c"}, {"TERM=xterm", "GCC_COLORS="}, true, true),
            "-fdiagnostics-color=always");  // clang ignores GCC_COLORS
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c"}, {"TERM=xterm", "NO_COLOR=1"}, true, true), "");
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c", "-fno-diagnostics-color"}, term, false, true), "");
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c", "-fdiagnostics-color=auto"}, term, false, true),
            "-fdiagnostics-color=always");
  EXPECT_EQ(diagnostics_colour_flag({"-c", "a.c", "-frecord-gcc-switches"}, term, true, true), "");
}

namespace {
using kache::compiler::TimeMacros;
using kache::compiler::gcc::reported_time_macros;

TEST(GccTimeMacros, ReadFromTheCompilersDateTimeWarnings) {
  const std::string gcc_date =
      "a.c:4:17: warning: macro \"__DATE__\" might prevent reproducible builds [-Wdate-time]\n";
  const std::string gcc_stamp =
      "a.c:3:1: warning: macro \"__TIMESTAMP__\" might prevent reproducible builds [-Wdate-time]\n";
  const std::string clang_any =
      "a.c:3:10: warning: expansion of date or time macro is not reproducible [-Wdate-time]\n";
  EXPECT_EQ(reported_time_macros("", "int x;\n", false), TimeMacros::none);
  EXPECT_EQ(reported_time_macros("a.c:1:1: warning: unused [-Wunused]\n", "", false), TimeMacros::none);
  EXPECT_EQ(reported_time_macros(gcc_date, "", false), TimeMacros::date);
  EXPECT_EQ(reported_time_macros(gcc_date + gcc_stamp, "", false), TimeMacros::time);
  EXPECT_EQ(reported_time_macros(clang_any, "", true), TimeMacros::time);  // clang does not name the macro
  // A pragma that can silence the warning: nothing the run says can be believed.
  EXPECT_EQ(reported_time_macros("", "#pragma clang diagnostic ignored \"-Wdate-time\"\n", true), std::nullopt);
  EXPECT_EQ(reported_time_macros("", "  #pragma GCC diagnostic ignored \"-Weverything\"\n", false), std::nullopt);
  EXPECT_EQ(reported_time_macros("", "#pragma GCC diagnostic ignored \"-Wunused\"\n", false), TimeMacros::none);
}
}  // namespace
