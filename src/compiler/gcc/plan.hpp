#pragma once
// Turns a gcc/clang command line into "cache this compile" (a CompilePlan) or "run it unchanged" (a
// Passthrough with a stable reason). The flag knowledge lives in flag_table.cpp as data.
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/adapter.hpp"
#include "compiler/job_paths.hpp"

namespace kache::compiler::gcc {

enum class Depfile { None, MD, MMD };

struct CompilePlan {
  std::string source;    // as written
  std::size_t source_index = 0;  // its index in the arguments
  std::string language;  // c, c++ or assembler-with-cpp
  std::string output;    // as written, or the implied <source basename>.o
  bool output_implied = false;
  Depfile depfile = Depfile::None;
  std::string depfile_path;  // -MF as written, or the implied <output minus suffix>.d; "" without -MD/-MMD
  bool depfile_implied = false;
  bool has_dep_target = false;  // -MT / -MQ given
  // Where the planner found the options a miss rewrites or drops: the index of the option's own
  // argument, and whether its value is attached to it ("-ox") or the next argument ("-o x"). A value
  // that merely looks like one of them ("-MT -ofoo", "-Xlinker -o") is never touched.
  struct ArgRef {
    std::size_t index;
    bool attached;
  };
  std::optional<ArgRef> output_arg, depfile_arg;
  std::vector<ArgRef> dep_target_args;     // -MT / -MQ
  std::vector<std::size_t> dep_flag_args;  // -MD / -MMD / -MP
  // The command line with the source replaced by "<source>" and the -o value by "<output>".
  std::vector<std::string> keyed_args;
  // Path-valued options in keyed_args (-I, -isystem, -iquote, -idirafter, -include, -imacros, -MF,
  // -MT, -MQ): the index of the argument holding the value and where the value starts in it, so the
  // adapter keys an absolute path under a root by the root's name (README "Checkouts at other paths").
  using PathValue = compiler::PathValue;
  std::vector<PathValue> path_values;
  std::vector<std::string> include_dirs;     // -I/-iquote/-isystem/-idirafter values, in order
  std::vector<std::string> forced_includes;  // -include/-imacros values
  std::vector<std::string> driver_prefixes;  // -B values, in order
  std::vector<std::string> machine_native;   // -march=native, -mtune=native, -mcpu=native as given
  bool has_debug = false;
};

using Plan = std::variant<Passthrough, CompilePlan>;

// A driver whose options extend GCC's (clang's offload route, hipcc): its rows are read before the gcc
// table's, so a row of its own wins over the gcc row of the same spelling (the gcc table refuses the
// offload flags), and what it reads (targets, device-only, its depfile form) it keeps for its own plan.
class PlanExtension {
 public:
  virtual ~PlanExtension() = default;
  struct Consumed {
    std::size_t last;                     // the last argument the option took
    std::optional<Passthrough> refusal;  // the option makes the compile a passthrough
  };
  // args[i] read through the extension's rows; nullopt when none matches (the gcc table reads it).
  virtual std::optional<Consumed> scan(const std::vector<std::string>& args, std::size_t i) = 0;
  // One of its options compiles without -c (hipcc --genco).
  virtual bool compiles() const = 0;
  // The language the driver compiles a source in: given the -x in force ("" when none) and the
  // language GCC infers from its suffix. "" leaves GCC's rules to decide.
  virtual std::string language(const std::string& source, const std::string& x_language,
                               const std::string& suffix_language) const = 0;
};

// args: the arguments after the compiler name. extra_allowlist: [cc] extra_allowlist_flags.
// extension: the rows of a driver that extends GCC's (nullptr: plain gcc/clang).
Plan plan(const std::vector<std::string>& args, const std::vector<std::string>& extra_allowlist,
          PlanExtension* extension = nullptr);

// The language GCC infers from a file name ("" for a linker input or an unknown suffix).
std::string language_of(const std::string& path);

// True if argv0 (a path or bare name) names a GCC-compatible driver: gcc, g++, cc, c++, clang,
// clang++, with a target prefix (x86_64-linux-gnu-gcc) or a version suffix (g++-12, clang++-19).
bool is_gcc_driver(const std::string& argv0);

}  // namespace kache::compiler::gcc
