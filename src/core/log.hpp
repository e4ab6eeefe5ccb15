#pragma once
// Logging through spdlog. KACHE_LOG takes a filter: "debug", "kache=debug", "kache=trace",
// "warn"; output goes to stderr, or to KACHE_LOG_FILE when set (appended; safe with many processes).
// Nothing is logged by default except warnings about kache's own configuration.
#include <spdlog/spdlog.h>

#include <optional>
#include <string>

namespace kache::core {

void init_logging(const std::string& filter, const std::string& file);
spdlog::logger& log();
// The level a filter gives the "kache" target: comma-separated items, each "LEVEL", "TARGET=LEVEL"
// or the bare target "kache" (= trace); the last item that applies wins, others' targets are ignored.
// Empty means the default (warn). nullopt if the filter is malformed (unknown level, stray token).
std::optional<spdlog::level::level_enum> parse_log_filter(const std::string& filter);

}  // namespace kache::core
