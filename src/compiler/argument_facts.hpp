#pragma once
// The facts about a compile's command line that the steps after its plan read: debug info and what it
// records, the user's prefix maps, link-time optimization, coverage, the execution character sets, the
// diagnostics colour. One reading per compile (ccache's ArgsInfo is the model), carried on the
// CompileJob; this file is the only place outside the flag tables (compiler/*/flag_table.cpp) that
// tests flag spellings, so the steps that read a fact agree on what it means.
//
// The facts over-approximate on purpose: an option is also seen inside the comma lists that reach the
// host compiler or the assembler (nvcc's -Xcompiler a,b; -Wa,x) and in the flag variables (nvcc's
// NVCC_PREPEND_FLAGS and NVCC_APPEND_FLAGS), where a plan has not classified it.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::compiler {

// The flag variables a driver reads besides its arguments, each as its text (nvcc: NVCC_PREPEND_FLAGS,
// NVCC_APPEND_FLAGS; empty for gcc and clang).
struct FlagVariables {
  std::string prepended;
  std::string appended;
};

struct ArgumentFacts {
  // A -g option other than -g0 and the -gno-* negations, as the gcc table reads them (Effect::Debug, -gz
  // included; nvcc's -gencode/-gpu-architecture are no debug options): the object's debug info may name
  // the working directory (DW_AT_comp_dir). Set by any such option, whatever follows it.
  bool debug_option = false;
  // Debug info the object records its command line with: -g... and --debug up to a later -g0, where -gz
  // only compresses (a test pins this reading, which is not the table's: test_argument_facts).
  bool debug_info = false;
  // The last -f[no-]record-gcc-switches / clang's -f[no-]record-command-line: .GCC.command.line.
  bool records_switches = false;
  // The last -g[no-]record-gcc-switches / -g[no-]record-command-line; nullopt: the compiler's default.
  std::optional<bool> debug_records_switches;
  // -g3, -ggdb3 and the other level-3 spellings, clang's -fdebug-macro: #define lines in the debug info.
  bool macro_debug_info = false;
  // -gz (but -gz=none), --compress-debug-sections for the assembler: compressed debug sections.
  bool compressed_debug = false;
  // The user's own debug path mapping: -ffile-prefix-map, -fdebug-prefix-map, clang's
  // -fdebug-compilation-dir/-ffile-compilation-dir (issue 27).
  bool user_debug_maps = false;
  // The OLD of every -ffile-prefix-map=OLD=NEW and -fdebug-prefix-map=OLD=NEW in the arguments (comma lists
  // split), as written: what debug info's working directory is mapped from.
  std::vector<std::string> debug_map_olds;
  // NVCC_PREPEND_FLAGS names a prefix map: it would come before kache's rules and lose to them.
  bool prefix_map_prepended = false;
  // Link-time optimization: the last of -flto, -flto=<n|auto|thin|full> and -fno-lto.
  bool lto = false;
  // The user asks GNU as for its own dependency file (-Wa,--MD...).
  bool assembler_depfile = false;
  // Coverage or profile instrumentation, whose notes name the working directory (--coverage,
  // -fprofile-arcs, -ftest-coverage, -fprofile-generate..., -fprofile-instr-generate..., -fcoverage-mapping).
  bool coverage = false;
  // -fexec-charset other than UTF-8, or -fwide-exec-charset other than UTF-16/UTF-32/UCS-2/UCS-4 in either
  // byte order: string literals the object scan cannot read (CompileJob::foreign_charset).
  bool foreign_charset = false;
  // The user's last -f[no-]diagnostics-color[=...] or -f[no-]color-diagnostics; empty when none.
  std::string colour_option;

  // Whether the object records its command line: -frecord-gcc-switches, or debug info recording the
  // switches. debug_record_default: whether debug info records them unless told (GCC's
  // -grecord-gcc-switches is on by default; clang's -grecord-command-line is off).
  bool records_command_line(bool debug_record_default = true) const {
    return records_switches || (debug_info && debug_records_switches.value_or(debug_record_default));
  }
  // Whether the compile's bytes name its working directory (debug info's DW_AT_comp_dir, coverage notes).
  bool names_working_directory() const { return debug_option || coverage; }
};

// The facts of a command line: args (without the program) and the driver's flag variables.
// macro_debug_info, compressed_debug, user_debug_maps, lto and foreign_charset read the arguments and
// both flag variables; prefix_map_prepended reads NVCC_PREPEND_FLAGS; the others read the arguments only.
ArgumentFacts read_argument_facts(const std::vector<std::string>& args, const FlagVariables& variables = {});

// Whether an option the gcc table reads as debug info (Effect::Debug, -gz included) asks for it: all but
// -g0 and the -gno-* negations. The plans' has_debug and ArgumentFacts::debug_option read it so.
bool debug_option_enables(std::string_view option);

// A -ffile-prefix-map=OLD=NEW, -fmacro-prefix-map=OLD=NEW or -fdebug-prefix-map=OLD=NEW argument, split
// at the first '=' after the option as GCC and clang split it.
struct PrefixMap {
  std::string_view option;  // "-ffile-prefix-map=", with its '='
  std::string_view old_path;
  std::string_view new_path;
  bool maps_macros() const { return option != "-fdebug-prefix-map="; }  // __FILE__ and its kin
};
std::optional<PrefixMap> parse_prefix_map(std::string_view arg);
// Whether arg is a prefix-map option, whatever its value.
bool is_prefix_map(std::string_view arg);
// The OLD of every macro-mapping rule (-fmacro-prefix-map, -ffile-prefix-map) among whole arguments, in order.
std::vector<std::string> macro_map_olds(const std::vector<std::string>& args);

// Whether a clang command line compiles CUDA (the route registry.cpp picks before any plan): an -x option
// names cuda, or a .cu source comes before any -x.
bool names_cuda_input(const std::vector<std::string>& args);
// The installations a clang CUDA command line names (--cuda-path=DIR), in order.
std::vector<std::string> cuda_paths(const std::vector<std::string>& args);
// Whether a clang CUDA command line leaves out clang's CUDA wrapper headers (-nocudainc).
bool skips_cuda_wrapper_headers(const std::vector<std::string>& args);
// Whether a clang command line compiles HIP: -x hip (-xhip), --offload-arch=..., or a .hip source.
bool names_hip_input(const std::vector<std::string>& args);

// The macros a keyed command line's words define (-DNAME=VALUE, -D NAME=VALUE, --define-macro, nvcc's
// comma lists, the NVCC_*_FLAGS fields), as #define lines: everything after each -D, an
// over-approximation (what a ## paste on the command line may build).
std::string macro_definitions(const std::vector<std::string>& keyed_words);
// Whether one keyed argument defines a macro: -D..., --define-macro..., or a -D inside a comma list or
// after '=' (nvcc's -Xcompiler=...,-DX).
bool defines_macro(std::string_view arg);
// What names an argument without its value, for the event log and the reports, which never hold a
// value (a define may carry a token): "-DAPI_KEY" for -DAPI_KEY="t1", -D API_KEY=..., --define-macro
// API_KEY=..., -Xcompiler -DAPI_KEY=... and -Xcompiler=-O2,-DAPI_KEY=...; "-std" for -std=c++17, "-I" for
// -I/abs/path and -Iinc, "-Wl" for -Wl,--foo; "a value" for a word that is no flag. Any other flag is
// named as written up to the first '=', ',', '/' or space ("-O2").
std::string argument_name(std::string_view arg);
// An argument with every macro definition's value replaced by a digest of it ("-DAPI_KEY=#<16 hex>"),
// so that a record can tell two values apart without holding either.
std::string without_define_values(std::string_view arg);

}  // namespace kache::compiler
