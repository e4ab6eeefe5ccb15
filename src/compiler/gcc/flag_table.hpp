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
// Rows and matching are the shared format's (compiler/flag_table_format.hpp): an exact spelling
// first; otherwise the longest entry whose name starts the argument (so "-fprofile-use=x" meets the
// -fprofile-use entry, and "-include-pch" is not "-include" with the value "-pch"). A Value entry
// takes its value attached ("-Iinc", "-DX=1") or as the next argument ("-I inc"); a Separate entry
// only as the next argument; a Prefix entry is one argument whatever follows its name ("-std=c++17",
// "-Wl,--as-needed").
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/flag_table_format.hpp"

namespace kache::compiler::gcc {

// The shapes (compiler/flag_table_format.hpp) GCC's rows are written in.
using compiler::Shape;

enum class Effect {
  Keyed,          // keyed verbatim (the whole command line is), no further meaning
  Compile,        // -c
  Output,         // -o
  Language,       // -x: the language of the inputs that follow it
  IncludeDir,     // -I / -iquote / -isystem / -idirafter: a directory searched for headers
  ForcedInclude,  // -include / -imacros: a file read before the source, looked up in the cwd first
  Define,         // -D: a macro for the source, keyed verbatim (forwarded by nvcc -Xcompiler: hidden input)
  Debug,          // -g...: debug info names paths (the prefix maps cover them)
  DepMD,          // -MD: the dependency file, system headers included
  DepMMD,         // -MMD: the dependency file without system headers
  DepFile,        // -MF
  DepTarget,      // -MT / -MQ
  DriverPrefix,   // -B: where the driver looks for its passes (cc1plus, as), specs and <prefix>/include
  Refuse,         // passthrough with the entry's reason
};

struct GccFlag {
  std::string_view name;
  Shape shape;
  Effect effect;
  std::string_view reason = {};  // Effect::Refuse only

  // The shared format's view of the row (match_row).
  std::span<const std::string_view> spellings() const { return {&name, 1}; }
  unsigned match_forms() const { return forms_of(shape); }
};

const std::vector<GccFlag>& flag_table();

struct FlagMatch {
  const GccFlag* flag = nullptr;
  // The value of a Value/Separate entry: attached (in this argument) or nullopt (the next argument).
  std::optional<std::string_view> attached;
};

// Matches arg against the table by the shared rule (compiler::match_row). A driver whose flags extend
// GCC's (clang's offload modes, hipcc) passes flag_table() with its own rows added.
std::optional<FlagMatch> find_flag(const std::vector<GccFlag>& table, std::string_view arg);
std::optional<FlagMatch> find_flag(std::string_view arg);  // in flag_table()

// What the table makes of one argument, as a word: "unknown", "keyed", "refused:<reason>", or the
// effect's name ("include-dir", "output", ...). The hidden `kache --classify-gcc-flags ARG...` prints
// it for each argument; tests/integration/test_flag_table_coverage.py asks it about every option the
// installed compilers document.
std::string classify_flag(std::string_view arg);
int print_flag_classes(int argc, char** argv);

}  // namespace kache::compiler::gcc
