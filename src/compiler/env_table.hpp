#pragma once
// Every environment variable a compiler driver or the tools it runs read, with what kache does about
// it. One declarative table (env_table.cpp, one commented row per variable) shared by the adapters:
// rows marked nvcc_only concern nvcc's own driver and tools; the rest are the host compiler's (GCC's
// driver, cc1plus, as) and apply to a future gcc/clang adapter too.
//
// The set was found from the tools' behaviour, not only their documentation: nvcc 13's tools are
// dynamically linked, so an LD_PRELOAD getenv() hook over `nvcc -c`, `-dc -G`, multi-gencode and
// `-dlink` compiles lists every name nvcc, cicc, cudafe++, ptxas, fatbinary, nvlink, gcc and cc1plus
// ask for; `nvcc --dryrun` and nvcc.profile's `$(VAR)` references add the profile's variables.
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
  Modeled,     // the adapter reads it itself (see the row's comment)
  Inert,       // cannot change a cached compile's object, dependency file or output text
};

struct EnvRule {
  std::string_view name;
  EnvEffect effect;
  std::string_view reason;  // passthrough reason of a Refused row
  bool nvcc_only;           // read by nvcc or its CUDA tools, not by a host compiler
};

// The whole table, in key order.
std::span<const EnvRule> env_rules();
const EnvRule* find_env_rule(std::string_view name);

// The key fields of the Keyed and KeyedProbe rows ("env:NAME" -> "=value" or "unset").
void add_env_key_fields(const util::Environment& env, bool nvcc, std::vector<std::pair<std::string, std::string>>& out);

struct EnvRefusal {
  std::string reason;
  std::string variable;
};
// The first Refused row that is set in env.
std::optional<EnvRefusal> env_refusal(const util::Environment& env, bool nvcc);

// env without the table's variables that must not reach the toolchain probe (everything but the Probe
// and KeyedProbe rows), so the probe's answer depends only on what its memo is keyed by.
util::Environment probe_environment(const util::Environment& env);

// The names of the Probe and KeyedProbe rows.
std::vector<std::string_view> probe_variables(bool nvcc);

}  // namespace kache::compiler
