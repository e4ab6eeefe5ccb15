#pragma once
// Every environment variable a compiler driver or the tools it runs read, with what kache does about
// it. One declarative table (env_table.cpp, one commented row per variable and reader) shared by the
// adapters. A row's reader says which route reads it: the host compiler's rows (GCC's driver, cc1plus,
// as, clang) apply to every route; nvcc's to nvcc's; clang's HIP driver's (hip) and the ROCm tools' to
// hipcc's and to `clang -x hip`; hipcc's (hipcc.pl, hipvars.pm, the Perl running them) to hipcc's only.
// A variable two readers treat differently has a row for each: on a route, the most specific reader's
// row decides (hipcc over hip over host).
//
// The set was found from the tools' behaviour, not only their documentation: nvcc 13's tools are
// dynamically linked, so an LD_PRELOAD getenv() hook over `nvcc -c`, `-dc -G`, multi-gencode and
// `-dlink` compiles lists every name nvcc, cicc, cudafe++, ptxas, fatbinary, nvlink, gcc and cc1plus
// ask for; `nvcc --dryrun` and nvcc.profile's `$(VAR)` references add the profile's variables. The
// same hook over hipcc and `clang -x hip` compiles lists what perl, clang, lld and the bundler ask for;
// hipcc.pl and hipvars.pm read Perl's %ENV (no getenv), so their `$ENV{NAME}`s are read from the scripts
// (tests/integration/test_hip_input_audit.py checks both).
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/process.hpp"

namespace kache::compiler {

enum class EnvEffect {
  Keyed,       // value (or "unset") is a key field; the toolchain probe runs without it
  Probe,       // changes what the toolchain probe finds: part of the probe memo's key, and the
               // probe's findings (resolved tools, their content, nvcc.profile's expansion) are keyed
  KeyedProbe,  // both: keyed verbatim and part of the probe memo's key
  Refused,     // set (even empty): the compile passes through with `reason`
  RefusedNonEmpty,  // set and not empty: passes through with `reason`; otherwise keyed (unset apart from empty)
  Modeled,     // the adapter reads it itself (see the row's comment)
  Inert,       // cannot change a cached compile's object, dependency file or output text
};

// Who reads a variable.
enum class EnvReader {
  host,   // the host compiler (gcc, clang) and the programs every driver runs: every route
  nvcc,   // nvcc or its CUDA tools (cicc, cudafe++, ptxas, ...)
  hip,    // clang's HIP driver and the ROCm programs it runs (lld, clang-offload-bundler): hipcc, clang -x hip
  hipcc,  // hipcc.pl, hipvars.pm and the Perl interpreter running them: hipcc only
};

// The compile route an adapter serves: which readers' rows apply to it.
enum class EnvRoute {
  host,       // gcc, g++, clang, clang++
  nvcc,       // nvcc and its host compiler
  clang_hip,  // clang -x hip
  hipcc,      // hipcc, which runs clang -x hip
};

struct EnvRule {
  std::string_view name;
  EnvEffect effect;
  std::string_view reason;  // passthrough reason of a Refused or RefusedNonEmpty row
  EnvReader reader;
};

// "host", "nvcc", "hip" or "hipcc" (kache --list-environment).
std::string_view reader_name(EnvReader reader);

// The whole table, in key order.
std::span<const EnvRule> env_rules();
// The row deciding `name` on `route` (the most specific reader's), or nullptr.
const EnvRule* find_env_rule(std::string_view name, EnvRoute route);

// The key fields of the route's Keyed, KeyedProbe and RefusedNonEmpty rows ("env:NAME" -> "=value" or "unset").
void add_env_key_fields(const util::Environment& env, EnvRoute route,
                        std::vector<std::pair<std::string, std::string>>& out);

struct EnvRefusal {
  std::string reason;
  std::string variable;
};
// The first of the route's Refused rows that is set in env, or RefusedNonEmpty rows set and not empty.
std::optional<EnvRefusal> env_refusal(const util::Environment& env, EnvRoute route);

// env without the table's variables that must not reach the host compiler's or nvcc's toolchain probe
// (everything their host and nvcc rows do not make Probe or KeyedProbe), so the probe's answer depends
// only on what its memo is keyed by.
util::Environment probe_environment(const util::Environment& env);

// The names of the route's Probe and KeyedProbe rows.
std::vector<std::string_view> probe_variables(EnvRoute route);

}  // namespace kache::compiler
