#pragma once
// nvcc's flags as data. Each FlagSpec names every spelling nvcc accepts for one option, how its
// value may be written, and what it means for caching. The planner (plan.cpp) only interprets this
// table; a reviewer judges soundness by reading flag_table.cpp, one justified line per entry.
//
// Spellings (measured with nvcc 13.0 --dryrun): an option has a short name taken with one dash and a
// long name taken with two ("-dc" / "--device-c"); many short names equal the long ones, so both
// "-use_fast_math" and "--use_fast_math" exist. Anything else ("--arch", "-device-c") is rejected by
// nvcc, so the table lists exact spellings and leaves the rest unknown. Every valued option takes
// "-opt value" and "-opt=value"; only -I -D -U -L -l -O -t also take the value attached ("-O3").
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/flag_table_format.hpp"
#include "compiler/gcc/host_rules.hpp"
#include "compiler/nvcc/plan.hpp"

namespace kache::compiler::nvcc {

enum class Arity { None, Value };

// The ways to write a value are the shared format's (compiler/flag_table_format.hpp): kSeparate,
// kEquals, and kAttached for the entry's short (single-dash) names only.
using compiler::Form;
using compiler::kAttached;
using compiler::kEquals;
using compiler::kSeparate;

enum class Effect {
  Keyed,           // keyed verbatim; no further meaning to the planner
  Compile,         // -c
  DeviceCompile,   // -dc (implies relocatable device code)
  DeviceOutput,    // -fatbin / -cubin / -ptx: a standalone device file instead of an object (kind by name)
  LinkTimeOpt,     // -dlto / -lto / -gen-opt-lto: device code as NVVM IR for a device link
  Rdc,             // -rdc=<true|false>, last one wins
  Output,          // -o, last one wins
  Language,        // -x <c|c++|cu>, last one wins, applies to every input wherever it stands
  HostCompiler,    // -ccbin, last one wins
  IncludeDir,      // -I / -isystem: comma lists of directories searched for headers (CompilePlan::include_dirs)
  ForcedInclude,   // -include: a file read before the source, looked up in the cwd first
  ObjTemp,         // -objtemp: intermediates beside the object (a miss adds it when absent)
  GpuArch,         // -arch / -code / -gencode: collected into gpu_arch_args; "native" refused
  HostOptions,     // -Xcompiler: every host flag inside is classified by the gcc table (gcc/host_rules.cpp)
  PtxasOptions,    // -Xptxas: every ptxas flag inside is checked against kPtxasFlagRules
  CudafeOptions,   // -Xcudafe: diagnostic options only
  LinkOptions,     // -Xnvlink / -Xlinker: read only when linking, never with -c / -dc
  HostDebug,       // -g: sets has_debug
  LineInfo,        // -lineinfo: sets has_lineinfo and path_literal
  DepWithCompile,  // -MD
  DepNonSystem,    // -MMD (wins over -MD in either order, measured)
  DepOutput,       // -MF, last one wins
  DepTarget,       // -MT, all kept in order
  Refuse,          // passthrough with FlagSpec::reason
};

struct FlagSpec {
  std::vector<std::string_view> names;  // exact spellings, dashes included
  Arity arity = Arity::None;
  unsigned forms = 0;  // Form bits; kSeparate | kEquals for every valued option
  Effect effect = Effect::Keyed;
  std::string_view reason;  // Effect::Refuse only: the stable passthrough reason
  // false: nvcc knows the flag and so does the table (for its effect and its spellings), but it is
  // not built in: it caches only when the extra allow-list names it, matched the way the spec says
  // for unknown flags (the flag alone or "flag=value"; a separate value is another argument).
  bool builtin = true;
  // Accepted inside NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS (codegen tuning and diagnostics only).
  bool env_ok = false;
  // The value names a file or directory (a comma list for -I/-isystem; for -Xcompiler, the old path of
  // a -f*-prefix-map rule): the adapter keys it root-normalized when it is absolute and below a mapped
  // root (see NvccAdapter::prepare).
  bool path_value = false;

  // Builders that keep the table readable.
  FlagSpec& value(unsigned f = kSeparate | kEquals) {
    arity = Arity::Value;
    forms = f;
    return *this;
  }
  FlagSpec& does(Effect e) {
    effect = e;
    return *this;
  }
  FlagSpec& refuse(std::string_view r) {
    effect = Effect::Refuse;
    reason = r;
    return *this;
  }
  FlagSpec& env() {
    env_ok = true;
    return *this;
  }
  FlagSpec& path() {
    path_value = true;
    return *this;
  }
  FlagSpec& allowlist_only() {
    builtin = false;
    return *this;
  }

  // The shared format's view of the entry (match_row).
  std::span<const std::string_view> spellings() const { return names; }
  unsigned match_forms() const { return arity == Arity::Value ? forms : 0; }
};

// The built-in table.
const std::vector<FlagSpec>& flag_table();

// How one argument matched an entry.
struct FlagMatch {
  const FlagSpec* spec = nullptr;
  std::string_view name;                         // the spelling that matched
  Form form = kSeparate;                         // kSeparate: the argument is exactly the name
  std::optional<std::string_view> inline_value;  // for kEquals / kAttached
};

// Finds arg in table by the shared rule (compiler::match_row): an exact spelling first, then the
// longest name taking "name=value" or an attached value, so "-lineinfo" is never read as
// "-l ineinfo" nor "-Ofc" as "-O fc".
std::optional<FlagMatch> find_flag(const std::vector<FlagSpec>& table, std::string_view arg);

// Checks for flags nvcc hands to another tool. Each returns the refusal for the first offending
// flag, or nullopt. The host compiler's flags (-Xcompiler) are GCC knowledge: the gcc table classifies
// them (compiler/gcc/host_rules.hpp).
using compiler::FlagRefusal;
using compiler::is_machine_native;
using compiler::split_option_list;
using gcc::check_host_options;
using gcc::hidden_host_input;
std::optional<FlagRefusal> check_ptxas_options(std::string_view value);
std::optional<FlagRefusal> check_cudafe_options(std::string_view value);

// The planner over an explicit table, so tests can check the behaviour of non-built-in entries
// if they were built in. plan() calls it with flag_table().
Plan plan_with_table(const std::vector<FlagSpec>& table, const std::vector<std::string>& args,
                     const PlanOptions& options);

}  // namespace kache::compiler::nvcc
