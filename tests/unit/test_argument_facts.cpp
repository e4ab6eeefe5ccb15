// The facts of a compile's command line (compiler/argument_facts.hpp), the one reading every later step
// shares: debug info and what it records, the user's prefix maps, LTO, coverage, the character sets.
// Where two of the readings it replaced disagreed, the case is pinned here with the reading kept.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/argument_facts.hpp"

namespace kache::compiler {
namespace {

ArgumentFacts facts(const std::vector<std::string>& args, const std::string& appended = "",
                    const std::string& prepended = "") {
  return read_argument_facts(args, {prepended, appended});
}

// The miss's -frandom-seed is left out exactly where the object records the command line.
TEST(ArgumentFacts, RecordsCommandLine) {
  EXPECT_FALSE(facts({"-c", "a.c", "-O2"}).records_command_line());
  EXPECT_TRUE(facts({"-c", "a.c", "-g"}).records_command_line());  // GCC's default -grecord-gcc-switches
  EXPECT_FALSE(facts({"-c", "a.c", "-g"}).records_command_line(false));  // clang's default: off
  EXPECT_TRUE(facts({"-c", "a.c", "-g", "-grecord-command-line"}).records_command_line(false));
  EXPECT_TRUE(facts({"-c", "a.c", "-ggdb3"}).records_command_line());
  EXPECT_FALSE(facts({"-c", "a.c", "-g", "-gno-record-gcc-switches"}).records_command_line());
  EXPECT_FALSE(facts({"-c", "a.c", "-g", "-g0"}).records_command_line());
  EXPECT_TRUE(facts({"-c", "a.c", "-frecord-gcc-switches"}).records_command_line());
  EXPECT_FALSE(facts({"-c", "a.c", "-frecord-gcc-switches", "-fno-record-gcc-switches"}).records_command_line());
  EXPECT_TRUE(facts({"-c", "a.cu", "-Xcompiler", "-O2,-frecord-gcc-switches"}).records_command_line());
  EXPECT_TRUE(facts({"-c", "a.cu", "-Xcompiler=-g"}).records_command_line());
  EXPECT_TRUE(facts({"-c", "a.cu", "--debug"}).records_command_line());
  EXPECT_FALSE(facts({"-c", "a.cu", "-gencode", "arch=compute_75,code=sm_75", "-gpu-architecture=sm_90"})
                   .records_command_line());
}

// -gz: the gcc table reads it as a debug option (Effect::Debug), and so does the working-directory fact
// (the remote glue keeps such a compile here, as before). What the object records is read otherwise:
// -gz only compresses, no DW_AT_producer comes of it alone (pinned before this file, kept).
TEST(ArgumentFacts, GzIsADebugOptionThatRecordsNoCommandLine) {
  const ArgumentFacts gz = facts({"-c", "a.c", "-gz", "-gno-column-info"});
  EXPECT_TRUE(gz.debug_option);
  EXPECT_TRUE(gz.names_working_directory());
  EXPECT_FALSE(gz.debug_info);
  EXPECT_FALSE(gz.records_command_line());
  EXPECT_TRUE(gz.compressed_debug);
}

// The working directory in the object: debug info as the gcc table reads it (a -g option but -g0 and the
// -gno-* negations, which the remote glue's own scan counted), and coverage notes.
TEST(ArgumentFacts, NamesTheWorkingDirectory) {
  EXPECT_FALSE(facts({"-c", "a.c", "-O2"}).names_working_directory());
  EXPECT_TRUE(facts({"-c", "a.c", "-g"}).names_working_directory());
  EXPECT_TRUE(facts({"-c", "a.c", "-g", "-g0"}).names_working_directory());  // any -g seen: kept as it was
  EXPECT_TRUE(facts({"-c", "a.c", "-ggdb1"}).names_working_directory());
  EXPECT_FALSE(facts({"-c", "a.c", "-g0"}).names_working_directory());
  EXPECT_FALSE(facts({"-c", "a.c", "-gno-column-info"}).names_working_directory());  // the table's reading
  EXPECT_FALSE(facts({"-c", "a.cu", "-gencode", "arch=compute_75,code=sm_75"}).names_working_directory());
  for (const char* a : {"--coverage", "-fprofile-arcs", "-ftest-coverage", "-fprofile-generate=dir",
                        "-fprofile-instr-generate", "-fcoverage-mapping"}) {
    EXPECT_TRUE(facts({"-c", "a.c", a}).names_working_directory()) << a;
  }
}

TEST(ArgumentFacts, TheUsersDebugMapsAndCompressedDebugAreSeen) {
  EXPECT_TRUE(facts({"-g", "-ffile-prefix-map=/a=."}).user_debug_maps);
  EXPECT_TRUE(facts({"-fdebug-prefix-map=/a=/b"}).user_debug_maps);
  EXPECT_TRUE(facts({"-fdebug-compilation-dir=."}).user_debug_maps);
  EXPECT_TRUE(facts({"-Xcompiler", "-O2,-ffile-prefix-map=/a=."}).user_debug_maps);  // nvcc's list
  EXPECT_TRUE(facts({"-c"}, "-Xcompiler -fdebug-prefix-map=/a=/b").user_debug_maps);  // NVCC_APPEND_FLAGS
  EXPECT_FALSE(facts({"-fmacro-prefix-map=/a=/b", "-g"}).user_debug_maps);  // __FILE__ only: no rule of kache's
  EXPECT_TRUE(facts({"-g", "-gz"}).compressed_debug);
  EXPECT_TRUE(facts({"-gz=zlib"}).compressed_debug);
  EXPECT_TRUE(facts({"-Wa,--compress-debug-sections=zlib"}).compressed_debug);
  EXPECT_TRUE(facts({"-Xcompiler", "-gz"}).compressed_debug);
  EXPECT_FALSE(facts({"-gz=none"}).compressed_debug);
  EXPECT_FALSE(facts({"-g", "-gzip-like"}).compressed_debug);
}

// NVCC_PREPEND_FLAGS is read by every fact the flag variables reach (before, only the macro check read it:
// a -gz or -flto there left the placeholders on).
TEST(ArgumentFacts, BothFlagVariablesAreRead) {
  EXPECT_TRUE(facts({"-c"}, "", "-Xcompiler -gz").compressed_debug);
  EXPECT_TRUE(facts({"-c"}, "", "-Xcompiler -flto").lto);
  EXPECT_TRUE(facts({"-c"}, "", "-Xcompiler -fexec-charset=cp1252").foreign_charset);
  EXPECT_TRUE(facts({"-c"}, "", "-Xcompiler -g3").macro_debug_info);
  EXPECT_TRUE(facts({"-c"}, "", "-Xcompiler -ffile-prefix-map=/a=.").prefix_map_prepended);
  EXPECT_FALSE(facts({"-c"}, "-Xcompiler -ffile-prefix-map=/a=.").prefix_map_prepended);
  EXPECT_FALSE(facts({"-c", "-Xcompiler", "-fno-lto"}, "", "-Xcompiler -flto").lto);  // the arguments come later
}

TEST(ArgumentFacts, ExecutionCharacterSetsTheObjectScanCannotReadAreSeen) {
  EXPECT_FALSE(facts({"-c", "-fexec-charset=UTF-8", "-fwide-exec-charset=utf-16be"}).foreign_charset);
  EXPECT_FALSE(facts({"-fwide-exec-charset=UTF-32LE", "-fexec-charset=utf8"}).foreign_charset);
  EXPECT_TRUE(facts({"-fexec-charset=IBM1047"}).foreign_charset);
  EXPECT_TRUE(facts({"-fwide-exec-charset=EBCDIC-US"}).foreign_charset);
  EXPECT_TRUE(facts({"-Xcompiler", "-O2,-fexec-charset=latin1"}).foreign_charset);  // nvcc's list
  EXPECT_TRUE(facts({"-c"}, "-Xcompiler -fexec-charset=cp1252").foreign_charset);   // NVCC_APPEND_FLAGS
}

// One LTO reading: the assembler listing's own scan took any -flto... spelling (-flto-partition=one
// alone) for LTO, which enables none.
TEST(ArgumentFacts, LinkTimeOptimization) {
  EXPECT_TRUE(facts({"-c", "-flto"}).lto);
  EXPECT_TRUE(facts({"-flto=auto"}).lto);
  EXPECT_TRUE(facts({"-Xcompiler", "-O2,-flto"}).lto);
  EXPECT_TRUE(facts({"-c"}, "-Xcompiler=-flto=thin").lto);
  EXPECT_FALSE(facts({"-flto", "-fno-lto"}).lto);
  EXPECT_FALSE(facts({"-flto-partition=one", "-ffat-lto-objects"}).lto);
  EXPECT_TRUE(facts({"-c", "-Wa,--MD,x.d"}).assembler_depfile);
  EXPECT_FALSE(facts({"-c", "-MD"}).assembler_depfile);
}

// The preprocessed fallback's refusal (issue 39): level-3 debug info holds every #define, which no
// preprocessed output does; the DWARF version (-gdwarf-3) is no level.
TEST(ArgumentFacts, MacroDebugInfoIsAskedByLevelThreeAndFdebugMacro) {
  for (const char* a : {"-g3", "-ggdb3", "-gstabs+3", "-fdebug-macro"}) EXPECT_TRUE(facts({a}).macro_debug_info) << a;
  EXPECT_TRUE(facts({"-Xcompiler=-O2,-g3"}).macro_debug_info);
  EXPECT_TRUE(facts({}, "-Xcompiler -g3").macro_debug_info);
  for (const char* a : {"-g", "-g2", "-gdwarf-3", "-O3", "-ggdb", "-g13x"}) {
    EXPECT_FALSE(facts({a}).macro_debug_info) << a;
  }
}

TEST(ArgumentFacts, PrefixMaps) {
  const auto rule = parse_prefix_map("-ffile-prefix-map=/w/one=./x=y");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule->option, "-ffile-prefix-map=");
  EXPECT_EQ(rule->old_path, "/w/one");  // split at the first '='
  EXPECT_EQ(rule->new_path, "./x=y");
  EXPECT_FALSE(parse_prefix_map("-fdebug-prefix-map=/a"));
  EXPECT_FALSE(parse_prefix_map("-I/w/one"));
  EXPECT_FALSE(parse_prefix_map("-fdebug-prefix-map=/a=b")->maps_macros());
  EXPECT_TRUE(is_prefix_map("-fmacro-prefix-map=x"));
  EXPECT_EQ(macro_map_olds({"-fmacro-prefix-map=/a=b", "-fdebug-prefix-map=/c=d", "-ffile-prefix-map=/e=f"}),
            (std::vector<std::string>{"/a", "/e"}));
  EXPECT_EQ(facts({"-Xcompiler", "-O2,-fdebug-prefix-map=/c=d,-fmacro-prefix-map=/a=b", "-ffile-prefix-map=/e=f"})
                .debug_map_olds,
            (std::vector<std::string>{"/c", "/e"}));
}

TEST(ArgumentFacts, TheLastColourOptionIsTheUsers) {
  EXPECT_EQ(facts({"-c"}).colour_option, "");
  EXPECT_EQ(facts({"-fdiagnostics-color=always", "-fno-color-diagnostics"}).colour_option, "-fno-color-diagnostics");
}

// The command line's macros for the paste scan (engine/miss.cpp) and the explain cause (a define that
// changed): the key's words, read from the keyed fields.
TEST(ArgumentFacts, MacroDefinitions) {
  EXPECT_EQ(macro_definitions({"-DA=1", "-D", "B", "-Xcompiler", "-O2,-DC", "-Xcompiler=-DD", "--define-macro=E", "x-DF"}),
            "#define A=1\n#define \n#define B\n#define C\n#define D\n#define E\n");  // "-D" alone too
  EXPECT_EQ(macro_definitions({"-Xcompiler -DP=q"}), "#define P=q\n");  // NVCC_APPEND_FLAGS' field
  EXPECT_TRUE(defines_macro("-DX"));
  EXPECT_TRUE(defines_macro("--define-macro=X"));
  EXPECT_TRUE(defines_macro("-O2,-DX"));
  EXPECT_TRUE(defines_macro("-Xcompiler=-DX"));
  EXPECT_FALSE(defines_macro("-UX"));
  EXPECT_FALSE(defines_macro("x-DX"));
}

// The offload route a clang command line takes (registry.cpp reads these before any plan).
TEST(ArgumentFacts, CudaAndHipInputs) {
  EXPECT_TRUE(names_cuda_input({"-c", "k.cu"}));
  EXPECT_TRUE(names_cuda_input({"-x", "cuda", "-c", "k.cpp"}));
  EXPECT_TRUE(names_cuda_input({"-xcuda", "-c", "k.cpp"}));
  EXPECT_FALSE(names_cuda_input({"-x", "c++", "-c", "k.cu"}));  // -x before the source decides
  EXPECT_FALSE(names_cuda_input({"-c", "k.cpp"}));
  EXPECT_TRUE(names_hip_input({"-c", "k.hip"}));
  EXPECT_TRUE(names_hip_input({"-x", "hip", "-c", "k.cpp"}));
  EXPECT_TRUE(names_hip_input({"-xhip", "-c", "k.cpp"}));
  EXPECT_TRUE(names_hip_input({"--offload-arch=gfx90a", "-c", "k.cpp"}));
  EXPECT_FALSE(names_hip_input({"-c", "k.cu"}));
  EXPECT_EQ(cuda_paths({"--cuda-path=/opt/a", "-c", "--cuda-path=/opt/b"}), (std::vector<std::string>{"/opt/a", "/opt/b"}));
  EXPECT_TRUE(skips_cuda_wrapper_headers({"-c", "-nocudainc"}));
  EXPECT_FALSE(skips_cuda_wrapper_headers({"-c", "-nocudalib"}));
}

TEST(ArgumentNames, NameAFlagNeverItsValue) {
  EXPECT_EQ(argument_name("-DAPI_KEY=\"t1\""), "-DAPI_KEY");
  EXPECT_EQ(argument_name("-D API_KEY=\"t1\""), "-DAPI_KEY");
  EXPECT_EQ(argument_name("--define-macro=API_KEY=t1"), "-DAPI_KEY");
  EXPECT_EQ(argument_name("-Xcompiler=-O2,-DAPI_KEY=t1"), "-DAPI_KEY");
  EXPECT_EQ(argument_name("-Xcompiler -DAPI_KEY=t1"), "-DAPI_KEY");
  EXPECT_EQ(argument_name("-Wp,-DAPI_KEY=t1"), "-DAPI_KEY");
  EXPECT_EQ(argument_name("-std=c++17"), "-std");
  EXPECT_EQ(argument_name("-I/home/me/secret"), "-I");
  EXPECT_EQ(argument_name("-Isecret_dir"), "-I");
  EXPECT_EQ(argument_name("-isystemsecret"), "-isystem");
  EXPECT_EQ(argument_name("-Wl,--secret"), "-Wl");
  EXPECT_EQ(argument_name("-O2"), "-O2");
  EXPECT_EQ(argument_name("API_KEY=t1"), "a value");
}

TEST(ArgumentNames, DefineValuesAreDigestedApart) {
  const std::string one = without_define_values("-DAPI_KEY=\"t1\"");
  EXPECT_TRUE(one.starts_with("-DAPI_KEY=#")) << one;
  EXPECT_EQ(one.find("t1"), std::string::npos);
  EXPECT_NE(one, without_define_values("-DAPI_KEY=\"t2\""));
  EXPECT_EQ(one, without_define_values("-DAPI_KEY=\"t1\""));
  EXPECT_EQ(without_define_values("-DNDEBUG"), "-DNDEBUG");
  EXPECT_EQ(without_define_values("-O2"), "-O2");
  EXPECT_EQ(without_define_values("-Xcompiler=-O2,-DK=secret").find("secret"), std::string::npos);
}

}  // namespace
}  // namespace kache::compiler
