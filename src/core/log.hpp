#pragma once
// Logging through spdlog. KACHE_LOG takes a filter: "debug", "kache=debug", "kache=trace",
// "warn"; output goes to stderr, or to KACHE_LOG_FILE when set (appended; safe with many processes).
// Nothing is logged by default except warnings about kache's own configuration.
#include <spdlog/spdlog.h>
#include <string>

namespace kache::core {

void init_logging(const std::string& filter, const std::string& file);
spdlog::logger& log();

}  // namespace kache::core
