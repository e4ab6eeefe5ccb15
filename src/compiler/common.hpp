#pragma once
// Rules every adapter applies the same way (nvcc's and gcc/clang's), kept in one place.
#include <string>
#include <string_view>
#include <vector>

#include "core/config.hpp"
#include "util/process.hpp"

namespace kache::compiler {

// The allow-list ([cc] extra_allowlist_flags) names arg: the flag itself, or the flag followed by "=value".
bool allowlist_names(const std::vector<std::string>& allowlist, std::string_view arg);

// A miss runs with SOURCE_DATE_EPOCH pinned (nvcc.source_date_epoch, "0" by default), so __DATE__ and
// __TIME__ give identical rebuilds. A build's own value wins; the value is deliberately not keyed
// (spec 000): a hit keeps the date it was built with.
void pin_source_date_epoch(util::Environment& env, const core::Config& cfg);

}  // namespace kache::compiler
