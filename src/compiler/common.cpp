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

bool records_command_line(const std::vector<std::string>& args, bool debug_record_default) {
  bool switches = false;  // -f[no-]record-gcc-switches / clang's -f[no-]record-command-line, the last one
  bool debug = false;     // -g..., up to a later -g0
  bool debug_record = debug_record_default;  // -g[no-]record-gcc-switches / -g[no-]record-command-line
  auto apply = [&](std::string_view a) {
    if (a == "-frecord-gcc-switches" || a == "-frecord-command-line") switches = true;
    else if (a == "-fno-record-gcc-switches" || a == "-fno-record-command-line") switches = false;
    else if (a == "-grecord-gcc-switches" || a == "-grecord-command-line") debug_record = true;
    else if (a == "-gno-record-gcc-switches" || a == "-gno-record-command-line") debug_record = false;
    else if (a == "-g0") debug = false;
    // nvcc's -gencode, -gen-opt-lto, -gpu-architecture are no debug options; -gz only compresses.
    else if ((a.starts_with("-g") && !a.starts_with("-gen") && !a.starts_with("-gpu") && !a.starts_with("-gno-") &&
              !a.starts_with("-gz")) ||
             a == "--debug")
      debug = true;
  };
  for (const std::string& arg : args) {
    std::string_view rest = arg;
    while (true) {
      const std::size_t comma = rest.find(',');
      apply(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (const std::size_t eq = arg.find('='); eq != std::string::npos) apply(std::string_view(arg).substr(eq + 1));
  }
  return switches || (debug && debug_record);
}

std::string diagnostics_colour_flag(const std::vector<std::string>& args, const util::Environment& env, bool clang,
                                    bool stderr_is_terminal) {
  std::string_view chosen;  // the user's last colour option
  for (const std::string& a : args) {
    if (a.starts_with("-fdiagnostics-color") || a.starts_with("-fno-diagnostics-color") ||
        a == "-fcolor-diagnostics" || a == "-fno-color-diagnostics") {
      chosen = a;
    }
  }
  if (!chosen.empty() && chosen != "-fdiagnostics-color=auto") return "";
  if (!stderr_is_terminal) return "";
  const auto term = util::env_get(env, "TERM");
  if (!term || term->empty() || *term == "dumb") return "";
  if (!clang) {
    if (const auto colors = util::env_get(env, "GCC_COLORS"); colors && colors->empty()) return "";
  } else {
    if (const auto no_color = util::env_get(env, "NO_COLOR"); no_color && !no_color->empty()) return "";
    if (records_command_line(args)) return "";
  }
  return "-fdiagnostics-color=always";
}

}  // namespace kache::compiler
