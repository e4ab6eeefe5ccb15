#pragma once
// Turns an nvcc command line into either "cache this compile" (a CompilePlan) or "run it unchanged"
// (a Passthrough with a stable reason). The flag knowledge itself lives in flag_table.cpp as data.
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/adapter.hpp"

namespace kache::compiler::nvcc {

using compiler::Passthrough;


enum class Mode { Compile, DeviceCompile, CompileRdc };  // -c, -dc, -c -rdc=true
enum class Depfile { None, MD, MMD };                    // -MD/-MMD (both need -MF)
// A standalone device output (-fatbin, -cubin, -ptx) instead of an object; None: -c / -dc.
enum class DeviceOutput { None, Fatbin, Cubin, Ptx };

// "fatbin", "cubin", "ptx"; "" for None.
const char* device_output_name(DeviceOutput kind);

struct CompilePlan {
  Mode mode = Mode::Compile;  // with a device output: Compile, or CompileRdc for -rdc=true
  bool rdc() const { return mode != Mode::Compile; }
  DeviceOutput device_output = DeviceOutput::None;

  std::string source;  // as written
  std::string output;  // -o value as written
  Depfile depfile = Depfile::None;
  std::string depfile_path;                  // -MF value as written (set iff depfile != None)
  std::vector<std::string> depfile_targets;  // -MT values, in order (empty: nvcc's default target)

  // Everything the key must see, verbatim and in order, with the source argument replaced by
  // "<source>" and the -o value by "<output>" (the pipeline keys those two normalized).
  std::vector<std::string> keyed_args;
  // Where keyed_args hold a path value of the user's (-I, -isystem, -include, -MF, -MT, -Xcompiler): the
  // argument's index, the offset of the value inside it ("-I/x" and "--include-path=/x" hold it
  // inline), the flag as written and what the value is (from the flag's table entry).
  enum class PathKind {
    Path,         // one path (-include)
    List,         // a comma list of directories (-I, -isystem)
    Depfile,      // the dependency file (-MF)
    Target,       // a dependency target (-MT)
    HostOptions,  // a -Xcompiler value: its -f*-prefix-map rules name paths
  };
  struct PathArg {
    std::size_t index = 0;
    std::size_t offset = 0;
    std::string flag;
    PathKind kind = PathKind::Path;
  };
  std::vector<PathArg> path_args;
  // Where the options a miss or a closure listing rewrites stand in args (the user's), every occurrence:
  // the option's index, and whether its value is the next argument ("-o x") or after '=' ("-o=x").
  struct ArgRef {
    std::size_t index = 0;
    std::string name;  // the spelling as written
    bool separate = true;
  };
  std::vector<ArgRef> output_args;      // -o / --output-file
  std::vector<ArgRef> depfile_args;     // -MF / --dependency-output
  std::vector<ArgRef> dep_target_args;  // -MT / --dependency-target-name
  std::vector<std::size_t> mode_args;   // -c, -dc, -MD, -MMD (and their long spellings)
  // -I / -isystem directories as written, each comma list split, NVCC_*_FLAGS' included, in order.
  std::vector<std::string> include_dirs;
  bool has_forced_include = false;  // -include / --pre-include, NVCC_*_FLAGS' included
  bool has_objtemp = false;         // -objtemp / --objdir-as-tempdir among the user's arguments
  // The user's own arguments (without NVCC_*_FLAGS), untouched: what a miss runs, plus kache's additions.
  std::vector<std::string> args;

  std::string prepend_flags;               // NVCC_PREPEND_FLAGS verbatim ("" if unset)
  std::string append_flags;                // NVCC_APPEND_FLAGS verbatim
  std::optional<std::string> ccbin;        // -ccbin / --compiler-bindir value (last one wins)
  std::vector<std::string> gpu_arch_args;  // the -arch/-code/-gencode arguments (for logs and probes)

  // The object embeds absolute paths no prefix map reaches (-lineinfo writes the source path into
  // device code). The nvcc adapter keys the source's resolved path for it (see has_lineinfo).
  bool path_literal = false;
  bool has_lineinfo = false;
  bool has_debug = false;  // -g (host debug info names paths; prefix maps cover it)
};

using Plan = std::variant<Passthrough, CompilePlan>;

struct PlanOptions {
  std::vector<std::string> extra_allowlist;  // [cc] extra_allowlist_flags
  std::string prepend_flags;                 // NVCC_PREPEND_FLAGS
  std::string append_flags;                  // NVCC_APPEND_FLAGS
  // nvcc.cache_device_outputs: false restores spec 000's passthrough of -fatbin/-cubin/-ptx (output-kind).
  bool cache_device_outputs = true;
};

// args: the arguments after the compiler name.
Plan plan(const std::vector<std::string>& args, const PlanOptions& options);

// True if argv0 (a path or bare name) names nvcc: "nvcc", "/usr/local/cuda/bin/nvcc", "nvcc.exe".
bool is_nvcc(const std::string& argv0);

// Splits NVCC_*_FLAGS the way nvcc does (whitespace separated, no quote processing).
std::vector<std::string> split_env_flags(const std::string& value);

}  // namespace kache::compiler::nvcc
