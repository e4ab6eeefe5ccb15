// `kache report`: the model every form renders, the selection of a build's compiles, and the command.
#include "commands/report.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <utility>

#include "commands/options.hpp"
#include "core/config.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "storage/open.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/text.hpp"

namespace kache::commands::report {
using core::CompileEvent;

namespace {

constexpr std::size_t kSlowest = 10;
constexpr std::size_t kExamples = 3;
// Exit statuses: 1 is a failure (--fail-under not met, an unreadable log); a command line that is wrong
// is 2, so a CI job can tell a gate that failed from a recipe that is wrong.
constexpr int kUsageError = 2;

void add_to_group(std::vector<Group>& groups, const std::string& name, const CompileEvent& e) {
  auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.name == name; });
  if (it == groups.end()) it = groups.insert(groups.end(), Group{name});
  it->compiles++;
  if (e.outcome == "hit")
    it->hits++;
  else if (e.outcome == "miss")
    it->misses++;
  else if (e.outcome == "passthrough")
    it->passthrough++;
  else
    it->other++;
}

// What a hit saved: the stored miss's cost less the hit's own time; 0 for any other compile.
double saving_s(const CompileEvent& e) {
  if (e.outcome != "hit") return 0;
  return std::max(0.0, static_cast<double>(e.miss_cost_ms) / 1e3 - static_cast<double>(e.wall_us) / 1e6);
}

// The rows of one build's timeline: each compile on the lowest row free at its start. Two heaps (rows
// busy by their end, rows free by number) make it O(N log N) where a scan of the rows was O(N * rows).
struct LanePacker {
  using Busy = std::pair<std::int64_t, std::uint32_t>;  // (end, row)
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> free;
  std::uint32_t rows = 0;
  std::uint32_t place(std::int64_t start, std::int64_t end) {
    while (!busy.empty() && busy.top().first <= start) {
      free.push(busy.top().second);
      busy.pop();
    }
    std::uint32_t lane = rows;
    if (!free.empty()) {
      lane = free.top();
      free.pop();
    } else {
      ++rows;
    }
    busy.emplace(end, lane);
    return lane;
  }
};

}  // namespace

// A log's time in microseconds, clamped where a hostile value would overflow.
std::int64_t ms_to_us(std::int64_t ms) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / 1000;
  return std::clamp(ms, -kMax, kMax) * 1000;
}

// start + wall_us in microseconds, saturating: a hostile log's wall_us (up to 2^64 - 1) must not overflow.
std::int64_t end_us(std::int64_t start_us, std::uint64_t wall_us) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  if (start_us >= 0 && wall_us > static_cast<std::uint64_t>(kMax - start_us)) return kMax;
  if (wall_us > static_cast<std::uint64_t>(kMax)) return start_us + kMax;  // start_us < 0: no overflow
  return start_us + static_cast<std::int64_t>(wall_us);
}

std::int64_t end_ms(std::int64_t time_ms, std::uint64_t wall_us) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  const std::uint64_t ms = wall_us / 1000;
  if (time_ms >= 0 && ms > static_cast<std::uint64_t>(kMax - time_ms)) return kMax;
  return time_ms + static_cast<std::int64_t>(ms);  // ms < 2^54: no overflow for a negative time_ms
}

namespace {

// The builds of the selection, each on its own timeline: its compiles, each on the first row free at
// its start (greedy interval packing, oldest first: as many rows as the most compiles of the build that
// ran at once), and the time at least one of them ran (the union of their spans).
void lay_out_builds(Model& m) {
  std::map<std::string, std::size_t> index_of;
  std::vector<LanePacker> packers;        // per build
  std::vector<std::int64_t> busy_until_us;  // per build: the end of the union so far
  m.lanes.assign(m.events.size(), 0);
  for (std::size_t i = 0; i < m.events.size(); ++i) {  // oldest first
    const CompileEvent& e = m.events[i];
    auto [it, added] = index_of.try_emplace(e.build, m.builds.size());
    const std::int64_t start = ms_to_us(e.time_ms);
    if (added) {
      m.builds.push_back({e.build, e.time_ms, e.time_ms, {}, 0, 0, 0, 0});
      packers.emplace_back();
      busy_until_us.push_back(start);
    }
    BuildTimeline& b = m.builds[it->second];
    const std::int64_t end = end_us(start, e.wall_us);
    const std::uint32_t lane = packers[it->second].place(start, end);
    m.lanes[i] = lane;
    b.lanes = std::max(b.lanes, lane + 1);
    b.events.push_back(i);
    b.end_ms = std::max(b.end_ms, end_ms(e.time_ms, e.wall_us));
    b.job_s += static_cast<double>(e.wall_us) / 1e6;
    std::int64_t& busy_until = busy_until_us[it->second];
    b.busy_s += static_cast<double>(end - std::max(start, std::min(busy_until, end))) / 1e6;
    busy_until = std::max(busy_until, end);
    b.saved_s += saving_s(e);
  }
  for (const BuildTimeline& b : m.builds) {
    m.max_parallel = std::max(m.max_parallel, b.lanes);
    m.saved_wall_s += b.saved_s / b.parallelism();
  }
}

void add_times(Model& m, const CompileEvent& e) {
  const double wall_s = static_cast<double>(e.wall_us) / 1e6;
  if (e.outcome == "hit") {
    m.hit_s += wall_s;
    m.saved_s += saving_s(e);
  } else if (e.outcome == "miss") {
    m.miss_s += wall_s;
  } else {
    m.other_s += wall_s;
  }
}

void add_cause(Model& m, const CompileEvent& e) {
  if (e.outcome != "miss" || e.cause.empty()) return;
  auto it = std::find_if(m.causes.begin(), m.causes.end(), [&](const CauseRow& c) { return c.name == e.cause; });
  if (it == m.causes.end()) {
    CauseRow row{e.cause, "A cause this kache does not know.", "", false, 0, {}};
    if (const core::MissCause* c = core::find_miss_cause(e.cause)) {
      row.sentence = std::string(c->sentence);
      row.fix = std::string(c->fix);
      row.misconfiguration = c->misconfiguration;
    }
    it = m.causes.insert(m.causes.end(), std::move(row));
  }
  it->count++;
  if (it->examples.size() < kExamples) {
    it->examples.push_back(e.cause_detail.empty() ? e.source : fmt::format("{} ({})", e.source, e.cause_detail));
  }
}

// cache.direct_mode off slows every lookup rather than missing it: one row for the compiles it touched.
void add_direct_mode_off(Model& m) {
  const auto off = static_cast<std::uint64_t>(
      std::count_if(m.events.begin(), m.events.end(), [](const CompileEvent& e) { return !e.direct; }));
  if (off == 0) return;
  const core::MissCause* c = core::find_miss_cause(core::cause::kDirectModeOff);
  m.causes.push_back({std::string(c->name), std::string(c->sentence), std::string(c->fix), true, off, {}});
}

// Misconfigurations first, then the most frequent.
void sort_causes(std::vector<CauseRow>& causes) {
  std::sort(causes.begin(), causes.end(), [](const CauseRow& a, const CauseRow& b) {
    if (a.misconfiguration != b.misconfiguration) return a.misconfiguration;
    return a.count != b.count ? a.count > b.count : a.name < b.name;
  });
}

void add_summaries(Model& m) {
  for (const auto& [name, value] : m.counts) {
    for (const std::string_view prefix : {"passthrough.", "error.", "not_stored."}) {
      if (name.starts_with(prefix) && value > 0) m.reasons.emplace_back(name, value);
    }
    if (name.starts_with("remote_") && value > 0) m.remote[name] = value;
  }
  std::sort(m.reasons.begin(), m.reasons.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::map<std::string, StageRow> stages;
  auto take = [&](std::string_view prefix, std::uint64_t StageRow::*field) {
    for (const auto& [name, value] : m.counts) {
      if (name.size() > prefix.size() && name.starts_with(prefix)) stages[name.substr(prefix.size())].*field += value;
    }
  };
  take(core::counter::kStageHitsPrefix, &StageRow::reused);
  take(core::counter::kStageMissesPrefix, &StageRow::ran);
  take(core::counter::kStageMsSavedPrefix, &StageRow::ms_saved);
  for (auto& [kind, row] : stages) {
    row.kind = kind;
    m.stages.push_back(row);
  }
}

void pick_slowest_misses(Model& m) {
  for (std::size_t i = 0; i < m.events.size(); ++i) {
    if (m.events[i].outcome == "miss") m.slowest_misses.push_back(i);
  }
  std::sort(m.slowest_misses.begin(), m.slowest_misses.end(),
            [&](std::size_t a, std::size_t b) { return m.events[a].wall_us > m.events[b].wall_us; });
  if (m.slowest_misses.size() > kSlowest) m.slowest_misses.resize(kSlowest);
}

}  // namespace

Model build_model(std::vector<CompileEvent> events, Selection selection) {
  Model m;
  m.selection = std::move(selection);
  for (auto& e : events) {
    if (!m.selection.build.empty() && e.build != m.selection.build) continue;
    if (e.time_ms < m.selection.since_ms) continue;
    m.events.push_back(std::move(e));
  }
  // By time, equal times in log order: std::sort with the position as tie-break, not std::stable_sort
  // (libstdc++ 12's stable_sort takes std::get_temporary_buffer, which clang 19 warns is deprecated).
  std::vector<std::size_t> order(m.events.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return m.events[a].time_ms != m.events[b].time_ms ? m.events[a].time_ms < m.events[b].time_ms : a < b;
  });
  std::vector<CompileEvent> by_time;
  by_time.reserve(order.size());
  for (const std::size_t i : order) by_time.push_back(std::move(m.events[i]));
  m.events = std::move(by_time);
  for (const auto& e : m.events) {
    m.compiles++;
    if (e.outcome == "error") m.uncached++;
    for (const auto& [name, value] : e.counts) m.counts[name] += value;
    add_to_group(m.by_language, e.language.empty() ? "other" : e.language, e);
    add_to_group(m.by_tool, e.tool, e);
    add_times(m, e);
    add_cause(m, e);
    m.start_ms = m.start_ms == 0 ? e.time_ms : std::min(m.start_ms, e.time_ms);
    m.end_ms = std::max(m.end_ms, end_ms(e.time_ms, e.wall_us));
  }
  m.totals = core::outcome_totals(m.counts);
  add_direct_mode_off(m);
  sort_causes(m.causes);
  add_summaries(m);
  pick_slowest_misses(m);
  lay_out_builds(m);
  m.version = KACHE_VERSION;
  return m;
}

std::optional<double> hit_rate(const Model& m) { return m.totals.hit_rate(); }

std::string rate_text(const Model& m) {
  const std::optional<double> rate = hit_rate(m);
  return rate ? fmt::format("{:.1f} %", *rate) : "n/a";
}

std::string nothing_text(const Model& m) {
  return m.selection.build.empty() ? "No compiles were recorded for this selection."
                                   : "No compile of build " + m.selection.build + " was recorded.";
}

std::string utc_text(std::int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

std::string range_text(const Model& m) {
  if (m.compiles == 0) return "no compiles";
  const std::string start = utc_text(m.start_ms), end = utc_text(m.end_ms);
  // The end's date only where it differs from the start's.
  const bool same_day = start.substr(0, 10) == end.substr(0, 10);
  return fmt::format("compiles from {} to {}", start.substr(0, start.size() - 4), same_day ? end.substr(11) : end);
}

std::string provenance_text(const Model& m) {
  return fmt::format("report made {} by kache {}, cache dir {}", utc_text(m.made_ms), m.version, m.cache_dir);
}

std::string seconds_text(double s) {
  if (s < 1.0) return fmt::format("{:.0f} ms", s * 1e3);
  if (s < 120.0) return fmt::format("{:.1f} s", s);
  return fmt::format("{:.1f} min", s / 60.0);
}

std::vector<CauseRow> recent_misconfigurations(const std::string& cache_dir, std::size_t window) {
  std::vector<CompileEvent> events = core::EventLog(cache_dir).read();
  if (events.size() > window) events.erase(events.begin(), events.end() - static_cast<std::ptrdiff_t>(window));
  Model m = build_model(std::move(events), {});
  std::vector<CauseRow> out;
  for (auto& c : m.causes) {
    if (c.misconfiguration) out.push_back(std::move(c));
  }
  return out;
}

namespace {

struct Request {
  std::string build, since, html, trace, mark_label;
  bool all = false, json = false, markdown = false, mark = false, since_mark = false;
  double fail_under = -1;  // a hit rate in percent; negative: none given
};

// A command line that is wrong: exit 2, where a gate that failed is 1.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The compiles a request covers: a build id, a window, every event, those since the last mark, or by
// default the job's own build (KACHE_BUILD_ID, when set) else the build of the newest event. A mark
// never changes the default: a report that silently meant "since some mark set long ago" misled every
// later reader (issue 42). Nor does a restored log: a CI job that sets KACHE_BUILD_ID and records no
// compile (its launcher dropped, its build dead early) is judged by its own empty build, never by the
// newest build of the cache it restored.
Selection select(const Request& r, const core::EventLog& log, const std::vector<CompileEvent>& events) {
  Selection s;
  const char* job_build = std::getenv("KACHE_BUILD_ID");
  if (!r.build.empty()) {
    s.build = r.build;
    s.description = "build " + r.build;
  } else if (!r.since.empty()) {
    std::int64_t age = 0;
    if (!core::parse_age(r.since, age)) {
      throw UsageError(fmt::format("--since '{}' is not an age (examples: 10m, 2h, 600s)", r.since));
    }
    s.since_ms = util::now_ns() / 1000000 - age * 1000;
    s.description = "the last " + r.since;
  } else if (r.all) {
    s.description = "every recorded compile";
  } else if (r.since_mark) {
    const auto mark = log.last_mark();
    if (!mark) throw UsageError("no mark was set: `kache report --mark` sets one before the build");
    s.since_ms = mark->first;
    s.description = fmt::format("every compile since the last mark{} ({})",
                                mark->second.empty() ? "" : ", " + mark->second, utc_text(mark->first));
  } else if (job_build != nullptr && *job_build != '\0') {
    s.build = job_build;
    s.description = "build " + s.build + " (this job's KACHE_BUILD_ID)";
  } else if (!events.empty()) {
    s.build = events.back().build;
    s.description = "build " + s.build + " (the newest)";
  }
  return s;
}

// --fail-under: 1 when the hit rate of the report's cacheable compiles is below the bar, with one
// sentence on stderr (the report itself is printed either way). No cacheable compile is no hit rate:
// kache was not in the build's way at all (its launcher dropped, the build died first), which fails any
// bar, 0 included.
int gate(const Model& m, double fail_under) {
  const std::optional<double> rate = m.totals.hit_rate();
  if (rate && *rate >= fail_under) return 0;
  if (rate) {
    fmt::print(stderr,
               "kache report: the hit rate {:.1f} % ({} hits of {} cacheable compiles) is below --fail-under {:g}.\n",
               *rate, m.totals.hits, m.totals.cacheable(), fail_under);
  } else if (m.compiles == 0 && !m.selection.build.empty()) {
    fmt::print(stderr, "kache report: no compile of build {} was recorded, so it fails --fail-under {:g}.\n",
               util::terminal_safe(m.selection.build), fail_under);
  } else {
    fmt::print(
        stderr,
        "kache report: no cacheable compile was recorded ({}), so there is no hit rate to hold to --fail-under {:g}.\n",
        util::terminal_safe(m.selection.description.empty() ? "no compiles" : m.selection.description), fail_under);
  }
  return 1;
}

void write_output(const std::string& path, const std::string& text) {
  util::write_file_atomic(path, text);
  fmt::print(stderr, "kache: wrote {}\n", path);
}

int carry_out(const Request& r) {
  const core::Config config = core::load_config(storage::remote_url_schemes());
  const core::EventLog log(config.cache_dir);
  if (r.mark) {
    log.mark(util::now_ns() / 1000000, r.mark_label);
    fmt::print("Marked: kache report --since-mark starts here{}.\n",
               r.mark_label.empty() ? "" : " (" + r.mark_label + ")");
    return 0;
  }
  core::EventLog::Unread unread;
  std::vector<CompileEvent> events = log.read(&unread);
  for (const auto& refused : unread.refused_files) {
    fmt::print(stderr, "kache: the event log was unreadable ({} in {}); that file is skipped.\n",
               util::terminal_safe(refused), util::terminal_safe(config.cache_dir));
  }
  if (unread.damaged_lines > 0) {
    fmt::print(stderr, "kache: note: {} damaged line{} of the event log skipped.\n", unread.damaged_lines,
               unread.damaged_lines == 1 ? "" : "s");
  }
  Selection selection = select(r, log, events);
  Model m = build_model(std::move(events), std::move(selection));
  m.made_ms = util::now_ns() / 1000000;
  m.cache_dir = config.cache_dir;
  if (!r.html.empty()) write_output(r.html, render_html(m));
  if (!r.trace.empty()) write_output(r.trace, render_trace(m));
  if (r.json)
    fmt::print("{}\n", render_json(m));
  else if (r.markdown)
    fmt::print("{}", util::terminal_safe(render_markdown(m), true));
  else if (r.html.empty() && r.trace.empty())
    fmt::print("{}", render_text(m));
  if (!config.events) fmt::print(stderr, "kache: note: events.enabled is false: compiles are not recorded.\n");
  return r.fail_under >= 0 ? gate(m, r.fail_under) : 0;
}

}  // namespace

int run(const std::vector<std::string>& args) {
  CLI::App app{"kache report: what a build got from the cache, from the event log.", "kache report"};
  Request r;
  set_help_row(app, "report");
  add_row(app, "report", "--build", r.build);
  add_row(app, "report", "--since", r.since);
  add_row(app, "report", "--all", r.all);
  add_row(app, "report", "--json", r.json);
  add_row(app, "report", "--markdown", r.markdown);
  add_row(app, "report", "--html", r.html);
  add_row(app, "report", "--trace", r.trace);
  add_row(app, "report", "--since-mark", r.since_mark);
  add_row(app, "report", "--fail-under", r.fail_under)
      ->check(CLI::Validator(
          [](const std::string& value) -> std::string {
            double percent = -1;
            const bool number = CLI::detail::lexical_cast(value, percent);
            return number && percent >= 0 && percent <= 100
                       ? ""
                       : "'" + value + "' is not a percent from 0 to 100 (e.g. 80)";
          },
          ""));
  add_row(app, "report", "--mark", r.mark);
  add_row(app, "report", "--label", r.mark_label);
  require_every_row(app, "report");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "kache report: {}; run 'kache report --help' for usage.\n", e.what());
    return kUsageError;
  }
  // One range at most: --build silently won over the others.
  if (int(!r.build.empty()) + int(!r.since.empty()) + int(r.all) + int(r.since_mark) > 1) {
    fmt::print(stderr,
               "kache report: --build, --since, --all and --since-mark each choose the compiles: give one; run "
               "'kache report --help' for usage.\n");
    return kUsageError;
  }
  try {
    return carry_out(r);
  } catch (const UsageError& e) {
    fmt::print(stderr, "kache report: {}; run 'kache report --help' for usage.\n", e.what());
    return kUsageError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kache report: {}.\n", e.what());
    return 1;
  }
}

}  // namespace kache::commands::report
