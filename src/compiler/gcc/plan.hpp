#pragma once
// Turns a gcc/clang command line into "cache this compile" (a CompilePlan) or "run it unchanged" (a
// Passthrough with a stable reason). The flag knowledge lives in flag_table.cpp as data.
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/adapter.hpp"

namespace kache::compiler::gcc {

enum class Depfile { None, MD, MMD };

struct CompilePlan {
  std::string source;    // as written
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
  struct PathValue {
    std::size_t index;
    std::size_t offset;
  };
  std::vector<PathValue> path_values;
  std::vector<std::string> include_dirs;     // -I/-iquote/-isystem/-idirafter values, in order
  std::vector<std::string> forced_includes;  // -include/-imacros values
  bool has_debug = false;
};

using Plan = std::variant<Passthrough, CompilePlan>;

// args: the arguments after the compiler name. extra_allowlist: [cc] extra_allowlist_flags.
Plan plan(const std::vector<std::string>& args, const std::vector<std::string>& extra_allowlist);

// The language GCC infers from a file name ("" for a linker input or an unknown suffix).
std::string language_of(const std::string& path);

// True if argv0 (a path or bare name) names a GCC-compatible driver: gcc, g++, cc, c++, clang,
// clang++, with a target prefix (x86_64-linux-gnu-gcc) or a version suffix (g++-12, clang++-19).
bool is_gcc_driver(const std::string& argv0);

}  // namespace kache::compiler::gcc
