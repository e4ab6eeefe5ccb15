#pragma once
// What hipcc runs for one compile, for the key: hipcc is a Perl driver that picks a clang, adds flags
// from its environment and version files and points clang at a bitcode directory. The probe asks hipcc
// itself (HIPCC_VERBOSE=1 and clang's -###, no compile) and keys what the chain reads:
// - the clang line hipcc builds, without what it appends for the user's arguments (its own flags,
//   HIPCC_COMPILE_FLAGS_APPEND, the paths it chose), so the id names no path of the user's;
// - hipcc's own files (the script, hipcc.pl, hipvars.pm, the HIP version files);
// - every program the clang plan runs (clang, lld, clang-offload-bundler) and the clang behind it
//   (gcc's probe: its cc1, config files, system include dirs);
// - every file of the device bitcode directory (a sound first cut: which libraries a target links
//   depends on the target and the flags).
// The headers, resource headers included, are the compile's closure (a listing of every target's).
// Memoized (tool_files' memoized_probe) by hipcc's identity, the command line with stand-ins for the
// compile's own file names (probe_line: a new file with the same flags runs no probe), the working directory,
// the variables hipcc and clang read and the directories hipcc looks for installations in; kept while
// every recorded file keeps its identity and the clang's own memo gives the same id. A hit then runs
// no process.
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/env_table.hpp"
#include "compiler/job_paths.hpp"
#include "compiler/offload/plan.hpp"
#include "compiler/tool_files.hpp"
#include "util/process.hpp"

namespace kache::compiler::offload {

struct HipccToolchain {
  std::string id;           // hex digest; part of every key
  std::string description;  // for logs
  std::string clang;        // the clang hipcc runs
  std::string clang_line;   // hipcc's clang command line (HIPCC_VERBOSE's "hipcc-cmd:")
  std::vector<std::string> include_dirs;  // the clang's system include dirs
  // Every include directory of every cc1 job of the plan (each target's and the host's), in search
  // order, as the jobs spell them: hipcc's and the HIP driver's additions (-isystem $HSA_PATH/include,
  // <resource>/include/cuda_wrappers, <rocm>/include...) come before or among the user's, so the
  // absent-path watch needs them all.
  std::vector<std::string> search_dirs;
  std::string config_include;             // gcc::Toolchain::config_include of that clang
  std::string clang_id;                   // that clang's toolchain id (its memo's answer)
  bool from_memo = false;
  ToolFiles files;
};

// The environment table's route of a driver: hipcc reads env_table.cpp's hipcc rows (hipcc.pl,
// hipvars.pm, Perl) besides clang's HIP rows; clang -x hip only the latter.
EnvRoute env_route(Driver driver);

// The driver's -### failed or printed an error (clang's own sentence, e.g. "cannot find libdevice for
// sm_90" or "unsupported CUDA gpu architecture: sm_90"): the compile cannot succeed as planned.
struct DriverError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether hipcc.pl passes a text inside an argument through without acting on it: none of the patterns
// it matches anywhere in an argument (--genco, --amdhsa-code-object-version=, -Wl,, -fopenmp-targets=).
bool hipcc_inert(std::string_view text);

// The values of the user's line that only name this compile's files (the source, the -o, -MF and -MT
// values, spec 003's depfile and -MT values): the probe asks the driver about a stand-in for each, so
// one memo serves every file compiled with the same flags (a new file runs no probe).
struct ProbeStandIns {
  std::optional<std::size_t> source;     // the source's index in args
  std::vector<compiler::PathValue> values;  // the other values: args[index].substr(offset)
};

// The line the probe asks about: args with each stand-in value replaced by a name of its own with the
// same suffix (the source by an empty file <memo_dir>/probe/kache-probe<suffix>), so hipcc.pl, which looks
// at a value only through its suffix and the patterns hipcc_inert names, adds the same flags. nullopt
// when a value is not plain (a character hipcc would escape or quote, one of those patterns, a leading
// '-' or '@'): then the probe asks about the line as given.
std::optional<std::vector<std::string>> probe_line(const std::vector<std::string>& args, const ProbeStandIns& stand_ins,
                                                   const std::string& memo_dir);

// What hipcc.pl (5.2) appends to its clang line for args, after its own flags (its $toolArgs: each
// argument shell-escaped, targets and --hipcc* swallowed, --genco as --cuda-device-only, -x hip/-x c
// before a source by suffix). nullopt for lines it rewrites otherwise (@files, archives, -use-*lib,
// -fopenmp-targets=). The probe keys the clang line without it: hipcc's additions only, so the
// toolchain id names no path of the user's.
std::optional<std::string> hipcc_tool_args(const std::vector<std::string>& args, bool cxx_as_hip);

// compiler: the resolved hipcc (Driver::hipcc) or clang (Driver::clang, then there is no hipcc line
// and no hipcc files); args: the user's arguments. Throws std::runtime_error when the driver cannot say
// what it runs.
HipccToolchain probe_offload(Driver driver, const std::string& compiler, const std::vector<std::string>& args,
                             const ProbeStandIns& stand_ins, const util::Environment& env, const std::string& cwd,
                             const std::string& memo_dir);

// The value of `--name=value` or `--name="value"` in hipcc's clang line ("" when absent). hipcc.pl
// appends the user's arguments after its own, and clang takes the last of a repeated `--name=`, so the
// last one counts: the probe keys the bitcode directory it names, and doctor states it.
std::string clang_line_value(const std::string& line, std::string_view name);

// The quoted words of one job line of clang's -### output (` "exe" "arg" ...`); empty for other lines.
std::vector<std::string> job_words(const std::string& line);

}  // namespace kache::compiler::offload
