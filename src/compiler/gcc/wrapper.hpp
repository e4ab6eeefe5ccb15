#pragma once
// A compiler that is a wrapper script (`exec /opt/gcc/bin/g++-real -B/opt/gcc/bin/ "$@"`, Spack's
// compiler wrappers, environment modules, vendor toolchains) is read by what it does, not by its text:
// kache runs it with the compile's own arguments and `-###`, which makes the driver at the end of the
// chain print every pass it would run and, for GCC, the options it received (COLLECT_GCC_OPTIONS). The
// options the wrapper added before and after the compile's own are taken from there, and the reading
// is accepted only when the real driver, run with the compile's arguments plus those options, prints
// the same passes with the same arguments (temporary names aside). The compile is then planned, keyed
// and, on a miss, run as that equivalent command: the object and the diagnostics are the compiler's,
// and what the wrapper does besides (its own stderr lines, set -x, umask) is not part of either.
//
// A wrapper that mentions a variable the compiler reads (CPATH, GCC_EXEC_PREFIX, LD_LIBRARY_PATH, ...)
// may set it for the driver, which -### does not show: such a compile passes through
// (wrapper-environment). A clang wrapper is accepted when it adds nothing (clang's -### shows no driver
// options).
//
// The reading is memoized per wrapper path, the compile's arguments and the whole environment the
// wrapper inherits (bar a few variables a build tool changes per job), and holds while every script of
// the chain and every path they name keeps its identity; a chain that can read what no list names
// (ScriptChain::unpinned) is read again on every compile.
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/adapter.hpp"
#include "compiler/env_table.hpp"
#include "compiler/tool_files.hpp"
#include "core/invocation.hpp"

namespace kache::compiler::gcc {

struct ResolvedWrapper {
  std::string driver;              // the program the wrapper runs in the end, absolute
  std::string driver_arg;          // its argv[0] as the wrapper spelled it (GCC finds its passes from it)
  std::vector<std::string> args;   // the arguments it receives for this compile
  std::vector<std::string> added;  // what the wrapper added, for logs and doctor
  bool from_memo = false;
};

// inv.compiler_path is a #! script. route: whose environment rows decide which variables the compiler
// reads. memo_dir "": no memo.
std::variant<Passthrough, ResolvedWrapper> resolve_wrapper(const core::Invocation& inv, EnvRoute route,
                                                           const std::string& memo_dir);

// A host compiler nvcc runs that is a wrapper script, read for its toolchain id: what it prints for
// `args -###` (normalized), the driver it runs in the end and the options it added. nullopt when the
// run fails or names no driver.
struct WrapperDryRun {
  std::string driver;
  std::string text;
  std::vector<std::string> added;
};
std::optional<WrapperDryRun> wrapper_dry_run(const std::string& wrapper, const std::vector<std::string>& args,
                                             const util::Environment& env, const std::string& cwd);

// A variable the compiler reads on `route` that the chain mentions (it may set it unseen), or nullopt.
std::optional<std::string> compiler_variable(const ScriptChain& chain, EnvRoute route);

// The -### text with GCC's temporary file names (<dir>/ccXXXXXX.<suffix>) made one placeholder, so two
// runs of the same command compare equal.
std::string normalized_dry_run(std::string_view text);

// The words of a COLLECT_GCC_OPTIONS value, which GCC single-quotes ('-B' '/opt/bin/' 'x'\''y'), as
// /bin/sh splits them (util/shell_words.hpp).
std::vector<std::string> collect_options(std::string_view value);

}  // namespace kache::compiler::gcc
