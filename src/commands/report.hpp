#pragma once
// `kache report`: what a build got from the cache (issue 32), from the event log (core/events.hpp).
//
// One model, five renderers: text for a terminal (report_text.cpp), JSON for tools and Markdown for
// $GITHUB_STEP_SUMMARY (report_json.cpp), one self-contained HTML file with inline SVG charts
// (report_html.cpp) and Chrome trace-event JSON for Perfetto or chrome://tracing (report_trace.cpp).
// Counts are honest: one compile is one compile; nvcc's stages and remote reads are reported beside,
// never as extra hits. The totals are the sums of the events' counts, so they equal the deltas of
// `kache -s` over the same compiles.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/events.hpp"
#include "core/stats.hpp"

namespace kache::commands::report {

inline constexpr const char* kSchema = "kache-report-1";

// Which compiles a report covers.
struct Selection {
  std::string build;          // a build id: only its events
  std::int64_t since_ms = 0;  // only events from then on
  std::string description;    // in words, for the report's title
};

// Compiles of one language or one tool.
struct Group {
  std::string name;
  std::uint64_t compiles = 0, hits = 0, misses = 0, passthrough = 0, other = 0;
};

// Misses of one cause (core/reasons.hpp MissCause), with a few of the sources and details.
struct CauseRow {
  std::string name, sentence, fix;
  bool misconfiguration = false;
  std::uint64_t count = 0;
  std::vector<std::string> examples;  // "src/a.c (-DBUILD_TIME)"
};

struct StageRow {
  std::string kind;  // "ptx" (cicc), "cubin" (ptxas)
  std::uint64_t reused = 0, ran = 0, ms_saved = 0;
};

// One build's compiles, drawn on a timeline of their own: builds hours apart share no time axis.
struct BuildTimeline {
  std::string build;
  std::int64_t start_ms = 0, end_ms = 0;  // its first start, its last end
  std::vector<std::size_t> events;        // indexes into Model::events, oldest first
  std::uint32_t lanes = 0;                // rows: the most of its compiles that ran at once
  double job_s = 0;                       // its compiles' wall times, summed over parallel jobs
  double busy_s = 0;                      // the time at least one of its compiles ran
  double saved_s = 0;                     // its hits' saving, summed over parallel jobs
  // How many compiles ran at once on average while any ran; 1 for a build with no measured time.
  double parallelism() const { return busy_s > 0 && job_s > busy_s ? job_s / busy_s : 1.0; }
};

struct Model {
  Selection selection;
  std::int64_t made_ms = 0;                // when the report was made
  std::string version;                     // kache's
  std::string cache_dir;                   // whose event log it read
  std::vector<core::CompileEvent> events;  // oldest first
  std::int64_t start_ms = 0, end_ms = 0;   // the first start, the last end
  std::uint64_t compiles = 0;
  // hits, misses, passthrough, errors and compile_failed are core::outcome_totals of `counts`: the same
  // definition as kache -s, so both say the same of the same compiles.
  core::OutcomeTotals totals;
  std::uint64_t uncached = 0;                   // compiles that ran uncached after kache's own error (outcome "error")
  std::map<std::string, std::uint64_t> counts;  // every event's counts summed: kache -s's deltas
  std::vector<Group> by_language, by_tool;
  // Times summed over compiles (CPU time's way: two parallel jobs of 1 s are 2 s), except saved_wall_s.
  double saved_s = 0;                       // hits: the stored miss's cost less the hit's own time
  double saved_wall_s = 0;                  // saved_s of each build divided by its parallelism: the wall clock it saved
  double miss_s = 0;                        // misses: their wall time (the compiler's and kache's)
  double hit_s = 0;                         // hits: their wall time (what the cache cost them)
  double other_s = 0;                       // passthroughs, errors, failed compiles: kache's part before the compiler
  std::uint32_t max_parallel = 0;           // the most compiles of one build running at once
  std::vector<BuildTimeline> builds;        // by first start
  std::vector<std::uint32_t> lanes;         // per event: a row of its build's timeline no other compile overlaps in
  std::vector<std::size_t> slowest_misses;  // indexes into events, slowest first (at most 10)
  std::vector<std::pair<std::string, std::uint64_t>> reasons;  // passthrough./error./not_stored., most first
  std::vector<CauseRow> causes;                                // misconfigurations first, then by count
  std::vector<StageRow> stages;
  std::map<std::string, std::uint64_t> remote;  // remote_* counters summed
};

Model build_model(std::vector<core::CompileEvent> events, Selection selection);
// Percent of the cacheable compiles (hits and misses) that hit; none without a cacheable compile.
std::optional<double> hit_rate(const Model& m);
// "87.5 %", or "n/a" without a cacheable compile (as kache -s shows it).
std::string rate_text(const Model& m);
// A log's times, saturating where a hostile value (wall_us up to 2^64 - 1) would overflow: a time in
// microseconds, start + wall_us in microseconds, and a compile's end in milliseconds.
std::int64_t ms_to_us(std::int64_t ms);
std::int64_t end_us(std::int64_t start_us, std::uint64_t wall_us);
std::int64_t end_ms(std::int64_t time_ms, std::uint64_t wall_us);
// "12.3 s", "450 ms"
std::string seconds_text(double s);
// "2026-12-08 01:02:03 UTC" of a Unix time in milliseconds.
std::string utc_text(std::int64_t ms);
// "compiles from 2026-12-08 01:02:03 to 01:04:10 UTC", "report made ... by kache 0.1.0, cache dir /c":
// the words every form prints under its title.
std::string range_text(const Model& m);
// What a report of no compiles says: "No compile of build X was recorded." for a build.
std::string nothing_text(const Model& m);
std::string provenance_text(const Model& m);

std::string render_text(const Model& m);
std::string render_json(const Model& m);
std::string render_markdown(const Model& m);
std::string render_html(const Model& m);
std::string render_trace(const Model& m);

// The misconfigurations among recent events (the last `window` compiles), for `kache doctor`: a cause
// and its count, worst first.
std::vector<CauseRow> recent_misconfigurations(const std::string& cache_dir, std::size_t window);

// The `kache report` command; args are the words after "report". Returns the exit status.
int run(const std::vector<std::string>& args);

}  // namespace kache::commands::report
