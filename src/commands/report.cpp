// `kache report`: the model every form renders, the selection of a build's compiles, and the command.
#include "commands/report.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
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

void add_to_group(std::vector<Group>& groups, const std::string& name, const CompileEvent& e) {
  auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.name == name; });
  if (it == groups.end()) it = groups.insert(groups.end(), Group{name});
  it->compiles++;
  if (e.outcome == "hit") it->hits++;
  else if (e.outcome == "miss") it->misses++;
  else if (e.outcome == "passthrough") it->passthrough++;
  else it->other++;
}

// The most compiles that ran at once: a sweep over starts and ends.
std::uint32_t max_parallel(const std::vector<CompileEvent>& events) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (const auto& e : events) {
    const std::int64_t start_us = e.time_ms * 1000;
    edges.emplace_back(start_us, 1);
    edges.emplace_back(start_us + static_cast<std::int64_t>(e.wall_us), -1);
  }
  std::sort(edges.begin(), edges.end());  // an end sorts before a start at the same time
  int running = 0, most = 0;
  for (const auto& [t, d] : edges) most = std::max(most, running += d);
  return static_cast<std::uint32_t>(most);
}

// Each compile on the first row free at its start (greedy interval packing): as many rows as the most
// compiles that ran at once.
std::vector<std::uint32_t> assign_lanes(const std::vector<CompileEvent>& events) {
  std::vector<std::int64_t> lane_free_us;  // when each row's last compile ended
  std::vector<std::uint32_t> lanes;
  for (const auto& e : events) {  // oldest first
    const std::int64_t start = e.time_ms * 1000, end = start + static_cast<std::int64_t>(e.wall_us);
    std::size_t lane = 0;
    while (lane < lane_free_us.size() && lane_free_us[lane] > start) ++lane;
    if (lane == lane_free_us.size()) lane_free_us.push_back(0);
    lane_free_us[lane] = end;
    lanes.push_back(static_cast<std::uint32_t>(lane));
  }
  return lanes;
}

void add_times(Model& m, const CompileEvent& e) {
  const double wall_s = static_cast<double>(e.wall_us) / 1e6;
  if (e.outcome == "hit") {
    m.hit_s += wall_s;
    m.saved_s += std::max(0.0, static_cast<double>(e.miss_cost_ms) / 1e3 - wall_s);
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
  std::sort(m.reasons.begin(), m.reasons.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
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
    if (e.outcome == "hit") m.hits++;
    if (e.outcome == "miss") m.misses++;
    if (e.outcome == "passthrough") m.passthrough++;
    if (e.outcome == "error") m.errors++;
    if (e.outcome == "compile_failed") m.compile_failed++;
    for (const auto& [name, value] : e.counts) m.counts[name] += value;
    add_to_group(m.by_language, e.language.empty() ? "other" : e.language, e);
    add_to_group(m.by_tool, e.tool, e);
    add_times(m, e);
    add_cause(m, e);
    m.start_ms = m.start_ms == 0 ? e.time_ms : std::min(m.start_ms, e.time_ms);
    m.end_ms = std::max(m.end_ms, e.time_ms + static_cast<std::int64_t>(e.wall_us / 1000));
  }
  add_direct_mode_off(m);
  sort_causes(m.causes);
  add_summaries(m);
  pick_slowest_misses(m);
  m.max_parallel = max_parallel(m.events);
  m.lanes = assign_lanes(m.events);
  return m;
}

double hit_rate(const Model& m) {
  const std::uint64_t lookups = m.hits + m.misses;
  return lookups == 0 ? 0.0 : 100.0 * static_cast<double>(m.hits) / static_cast<double>(lookups);
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
  bool all = false, json = false, markdown = false, mark = false;
};

// The compiles a request covers: a build id, a window, every event, or by default those since the
// last mark (kache report --mark), else the build of the newest event.
Selection select(const Request& r, const core::EventLog& log, const std::vector<CompileEvent>& events) {
  Selection s;
  if (!r.build.empty()) {
    s.build = r.build;
    s.description = "build " + r.build;
  } else if (!r.since.empty()) {
    std::int64_t age = 0;
    if (!core::parse_age(r.since, age)) {
      throw std::runtime_error(fmt::format("'{}' is not an age (examples: 10m, 2h, 600s)", r.since));
    }
    s.since_ms = util::now_ns() / 1000000 - age * 1000;
    s.description = "the last " + r.since;
  } else if (r.all) {
    s.description = "every recorded compile";
  } else if (auto mark = log.last_mark()) {
    s.since_ms = mark->first;
    s.description = mark->second.empty() ? "since the last mark" : "since mark " + mark->second;
  } else if (!events.empty()) {
    s.build = events.back().build;
    s.description = "build " + s.build + " (the newest)";
  }
  return s;
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
    fmt::print("Marked: the next kache report starts here{}.\n", r.mark_label.empty() ? "" : " (" + r.mark_label + ")");
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
  const Model m = build_model(std::move(events), std::move(selection));
  if (!r.html.empty()) write_output(r.html, render_html(m));
  if (!r.trace.empty()) write_output(r.trace, render_trace(m));
  if (r.json) fmt::print("{}\n", render_json(m));
  else if (r.markdown) fmt::print("{}", util::terminal_safe(render_markdown(m), true));
  else if (r.html.empty() && r.trace.empty()) fmt::print("{}", render_text(m));
  if (!config.events) fmt::print(stderr, "kache: note: events.enabled is false: compiles are not recorded.\n");
  return 0;
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
  add_row(app, "report", "--mark", r.mark);
  add_row(app, "report", "--label", r.mark_label);
  require_every_row(app, "report");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "kache report: {}; run 'kache report --help' for usage.\n", e.what());
    return 1;
  }
  try {
    return carry_out(r);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kache report: {}.\n", e.what());
    return 1;
  }
}

}  // namespace kache::commands::report
