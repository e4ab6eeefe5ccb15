#pragma once
// Logging through spdlog. KACHE_LOG takes a filter: "debug", "kache=debug", "kache=trace",
// "warn"; output goes to stderr, or to KACHE_LOG_FILE when set (appended; safe with many processes).
// Log lines carry the time. By default (no KACHE_LOG, no KACHE_LOG_FILE) a compile logs warnings only,
// to <cache dir>/kache.log, each distinct warning at most once an hour per cache dir (stamps under
// <cache dir>/warned/), and shows the first warning of each cause in each build on the compile's stderr
// (a terminal or Ninja's pipe alike: Ninja prints it under the command), one line "kache: warning: ...";
// the rest of that build's go to the log only. Not on stderr: a configure check's compile (its stderr is
// its verdict), a compile kache does not serve (see show_pending_warnings) and everything when
// log.warnings = "log".
#include <spdlog/spdlog.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

// cache_dir: where the default warnings go (empty: stderr, as for kache's own commands).
// first_per_build_to_stderr: with a cache_dir, whether the first warning of each cause in each build is
// also printed on stderr (false: log.warnings = "log", or a configure check's compile).
void init_logging(const std::string& filter, const std::string& file, const std::string& cache_dir = "",
                  bool first_per_build_to_stderr = false);
// Whether a compile is a build system's configure check, whose stderr must stay the compiler's alone:
// autoconf's ac_c_werror_flag fails a check on any stderr line, CMake's try_compile FAIL_REGEX matches
// it. Its source is conftest.* (autoconf, Meson) or flag_check.c (the Rust cc crate), or it runs or
// writes below CMake's scratch directories (CMakeFiles/CMakeScratch/, CMakeFiles/CMakeTmp/), CMake's
// compiler identification (CMakeFiles/<version>/CompilerId*/) or Meson's meson-private/.
bool is_configure_check(const std::vector<std::string>& args, const std::string& cwd);
// What makes two warnings the same cause: the text with its variable parts folded (a path-like word
// becomes "<path>", a run of digits "#"), so "cannot store /c/ab/1.o" and "cannot store /c/cd/2.o" are
// one cause, while two remotes' URLs stay two.
std::string warning_cause(std::string_view message);
// A served compile (a hit, or a miss that ran and stored) shows the warnings held for its stderr: the
// first of each cause in its build. Until then none is printed, so a passthrough, an info query
// (--version, -dumpversion), a compile of stdin or to /dev/null keep a stderr that is the compiler's
// alone (the cc crate's flag checks, cgo's, `$(shell cc -dumpversion 2>&1)`), and claim no stamp.
void show_pending_warnings();
// Whether a compile is a build of its own for warnings: it leads its own process group (an interactive
// shell's job) and its stderr is a terminal, i.e. typed by hand.
bool own_build_for_warnings(long pid, long pgrp, bool stderr_is_terminal);
// The name a build's stamps use: build itself, or for a process group's id ("pg<N>", from_process_group)
// also when the group's leader started (start_time_of(N): field 22 of /proc/N/stat), since group
// numbers are reused.
std::string stamp_build_key(const std::string& build, bool from_process_group,
                            const std::function<std::string(long)>& start_time_of);
spdlog::logger& log();
// The newest warning line of <cache_dir>/kache.log ("" when there is none): `kache -s` and doctor repeat
// it, since a build's stderr is often a pipe nobody reads (Ninja's, a CI log's).
std::string latest_logged_warning(const std::string& cache_dir);
// The level a filter gives the "kache" target: comma-separated items, each "LEVEL", "TARGET=LEVEL"
// or the bare target "kache" (= trace); the last item that applies wins, others' targets are ignored.
// Empty means the default (warn). nullopt if the filter is malformed (unknown level, stray token).
std::optional<spdlog::level::level_enum> parse_log_filter(const std::string& filter);

}  // namespace kache::core
