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

}  // namespace kache::compiler
