#pragma once
// The GCC-compatible drivers' flags as data (gcc, g++, cc, c++, clang, clang++). Each GccFlag names
// the spellings of one option, how it takes a value, and what it means for caching; the planner
// (plan.cpp) only interprets the table, so a reviewer judges soundness by reading flag_table.cpp, one
// commented entry per flag or flag family.
//
// The table is closed: every option kache caches with is listed by its spelling (or, for an option
// taking "=value", by "name="), and an argument no entry matches is an unknown flag (passthrough,
// unless [cc] extra_allowlist_flags names it). Open families are few and documented in their rows
// (Shape::Family: -W warnings, -m machine switches, -fno-/-gno- negations); refused entries may be
// prefixes freely, as refusing more is always sound.
//
// Matching: an exact spelling first; otherwise the longest entry whose name starts the argument (so
// "-fprofile-use=x" meets the -fprofile-use entry, and "-include-pch" is not "-include" with the
// value "-pch"). A Value entry takes its value attached ("-Iinc", "-DX=1") or as the next argument
// ("-I inc"); a Separate entry only as the next argument; a Prefix entry is one argument whatever
// follows its name ("-std=c++17", "-Wl,--as-needed").
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::compiler::gcc {

enum class Shape {
  Exact,     // the argument is exactly the name
  Prefix,    // the name starts the argument; nothing else is consumed. Kept (not refused) only for
             // "name=value" and "name,list" spellings (the name ends in '=' or ',')
  Family,    // like Prefix, for a documented open family of options (-W..., -m..., -fno-...)
  Value,     // the name with its value attached, or the name alone and the value in the next argument
  Separate,  // the name alone, its value in the next argument ("--param" also takes "--param=v")
};

enum class Effect {
  Keyed,          // keyed verbatim (the whole command line is), no further meaning
  Compile,        // -c
  Output,         // -o
  Language,       // -x: the language of the inputs that follow it
  IncludeDir,     // -I / -iquote / -isystem / -idirafter: a directory searched for headers
  ForcedInclude,  // -include / -imacros: a file read before the source, looked up in the cwd first
  Debug,          // -g...: debug info names paths (the prefix maps cover them)
  DepMD,          // -MD: the dependency file, system headers included
  DepMMD,         // -MMD: the dependency file without system headers
  DepFile,        // -MF
  DepTarget,      // -MT / -MQ
  Refuse,         // passthrough with the entry's reason
};

struct GccFlag {
  std::string_view name;
  Shape shape;
  Effect effect;
  std::string_view reason = {};  // Effect::Refuse only
};

const std::vector<GccFlag>& flag_table();

struct FlagMatch {
  const GccFlag* flag = nullptr;
  // The value of a Value/Separate entry: attached (in this argument) or nullopt (the next argument).
  std::optional<std::string_view> attached;
};

std::optional<FlagMatch> find_flag(std::string_view arg);

// What the table makes of one argument, as a word: "unknown", "keyed", "refused:<reason>", or the
// effect's name ("include-dir", "output", ...). The hidden `kache --classify-gcc-flags ARG...` prints
// it for each argument; tests/integration/test_flag_table_coverage.py asks it about every option the
// installed compilers document.
std::string classify_flag(std::string_view arg);
int print_flag_classes(int argc, char** argv);

}  // namespace kache::compiler::gcc
