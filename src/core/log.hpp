#pragma once
// Logging through spdlog. KACHE_LOG takes a filter: "debug", "kache=debug", "kache=trace",
// "warn"; output goes to stderr, or to KACHE_LOG_FILE when set (appended; safe with many processes).
// Log lines carry the time. By default (no KACHE_LOG, no KACHE_LOG_FILE) a compile logs warnings only,
// to <cache dir>/kache.log and never to the compile's stderr, each distinct warning at most once an hour
// per cache dir (stamps under <cache dir>/warned/); when stderr is a terminal that line is shown there too.
#include <spdlog/spdlog.h>

#include <optional>
#include <string>

namespace kache::core {

// cache_dir: where the default warnings go (empty: stderr, as for kache's own commands).
void init_logging(const std::string& filter, const std::string& file, const std::string& cache_dir = "");
spdlog::logger& log();
// The newest warning line of <cache_dir>/kache.log ("" when there is none): `kache -s` and doctor repeat
// it, since a build's stderr is often a pipe nobody reads (Ninja's, a CI log's).
std::string latest_logged_warning(const std::string& cache_dir);
// The level a filter gives the "kache" target: comma-separated items, each "LEVEL", "TARGET=LEVEL"
// or the bare target "kache" (= trace); the last item that applies wins, others' targets are ignored.
// Empty means the default (warn). nullopt if the filter is malformed (unknown level, stray token).
std::optional<spdlog::level::level_enum> parse_log_filter(const std::string& filter);

}  // namespace kache::core
