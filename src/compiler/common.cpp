#include "compiler/common.hpp"

#include <algorithm>

namespace kache::compiler {

bool allowlist_names(const std::vector<std::string>& allowlist, std::string_view arg) {
  return std::any_of(allowlist.begin(), allowlist.end(), [&](const std::string& e) {
    return !e.empty() && (arg == e || (arg.size() > e.size() && arg.starts_with(e) && arg[e.size()] == '='));
  });
}

void pin_source_date_epoch(util::Environment& env, const core::Config& cfg) {
  if (cfg.nvcc_source_date_epoch != "passthrough" && !util::env_get(env, "SOURCE_DATE_EPOCH")) {
    util::env_set(env, "SOURCE_DATE_EPOCH", cfg.nvcc_source_date_epoch);
  }
}

std::string diagnostics_colour_flag(const ArgumentFacts& facts, const util::Environment& env, bool clang,
                                    bool stderr_is_terminal) {
  const std::string& chosen = facts.colour_option;
  if (!chosen.empty() && chosen != "-fdiagnostics-color=auto") return "";
  if (!stderr_is_terminal) return "";
  const auto term = util::env_get(env, "TERM");
  if (!term || term->empty() || *term == "dumb") return "";
  if (!clang) {
    if (const auto colors = util::env_get(env, "GCC_COLORS"); colors && colors->empty()) return "";
  } else {
    if (const auto no_color = util::env_get(env, "NO_COLOR"); no_color && !no_color->empty()) return "";
    if (facts.records_command_line()) return "";
  }
  return "-fdiagnostics-color=always";
}

}  // namespace kache::compiler
