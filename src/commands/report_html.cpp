// `kache report --html FILE`: one self-contained page (no script, no network, no CDN): the summary,
// then inline SVG charts drawn here (outcomes per language and compiler, time saved against time
// spent, the slowest misses, why compiles missed, nvcc stage reuse, a timeline of the compiles), each
// with its figures in text beside it, so the page's own text holds what the charts show.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "commands/report.hpp"

namespace kache::commands::report {

namespace {

// Outcome colours, used by the charts only (a test finds the charts by them).
constexpr const char* kHitColour = "#2f9e44";
constexpr const char* kMissColour = "#e03131";
constexpr const char* kPassColour = "#868e96";
constexpr const char* kOtherColour = "#343a40";
constexpr const char* kSavedColour = "#1c7ed6";
constexpr const char* kCauseColour = "#f08c00";

constexpr int kChartWidth = 760, kLabelWidth = 220, kRowHeight = 22;

// The one way text reaches the page (element text, attribute values, SVG <title> and <text>): every
// name in it (a source, a compiler "x<img onerror=...>-gcc", a build id) came from the event log, which
// others may write.
std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct Segment {
  double value;
  const char* colour;
  std::string name;
};
struct Bar {
  std::string label;
  std::vector<Segment> segments;
  std::string figure;  // printed after the bar
};

// Horizontal bars, each of stacked segments, scaled to the longest bar.
std::string bar_chart(const std::string& id, const std::vector<Bar>& bars) {
  double longest = 0;
  for (const auto& b : bars) {
    double total = 0;
    for (const auto& s : b.segments) total += s.value;
    longest = std::max(longest, total);
  }
  const int height = static_cast<int>(bars.size()) * kRowHeight + 8;
  const double scale = longest > 0 ? (kChartWidth - kLabelWidth - 240) / longest : 0;  // room for the figure
  std::string svg =
      fmt::format(R"(<svg class="chart" id="{}" width="{}" height="{}" role="img">)", id, kChartWidth, height);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const int y = static_cast<int>(i) * kRowHeight + 4;
    svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", kLabelWidth - 8, y + 15,
                       escape(bars[i].label));
    double x = kLabelWidth;
    for (const auto& s : bars[i].segments) {
      const double w = s.value * scale;
      if (w <= 0) continue;
      svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}"><title>{}: {}</title></rect>)",
                         x, y, w, kRowHeight - 6, s.colour, escape(s.name), s.value);
      x += w;
    }
    svg += fmt::format(R"(<text x="{:.1f}" y="{}">{}</text>)", x + 6, y + 15, escape(bars[i].figure));
  }
  return svg + "</svg>\n";
}

std::vector<Bar> outcome_bars(const std::vector<Group>& groups) {
  std::vector<Bar> bars;
  for (const auto& g : groups) {
    bars.push_back({g.name,
                    {{double(g.hits), kHitColour, "hits"},
                     {double(g.misses), kMissColour, "misses"},
                     {double(g.passthrough), kPassColour, "passthrough"},
                     {double(g.other), kOtherColour, "errors and failed compiles"}},
                    fmt::format("{} hits, {} misses, {} passthrough", g.hits, g.misses, g.passthrough)});
  }
  return bars;
}

std::string time_chart(const Model& m) {
  return bar_chart("chart-time",
                   {{"saved by hits (CPU)", {{m.saved_s, kSavedColour, "seconds saved"}}, seconds_text(m.saved_s)},
                    {"spent on misses", {{m.miss_s, kMissColour, "seconds"}}, seconds_text(m.miss_s)},
                    {"spent on hits", {{m.hit_s, kHitColour, "seconds"}}, seconds_text(m.hit_s)},
                    {"passthrough (kache's part)", {{m.other_s, kPassColour, "seconds"}}, seconds_text(m.other_s)}});
}

std::string slowest_chart(const Model& m) {
  std::vector<Bar> bars;
  for (const std::size_t i : m.slowest_misses) {
    const auto& e = m.events[i];
    const double s = static_cast<double>(e.wall_us) / 1e6;
    bars.push_back({e.source, {{s, kMissColour, "seconds"}}, seconds_text(s) + " (" + e.tool + ")"});
  }
  return bar_chart("chart-slowest", bars);
}

std::string causes_chart(const Model& m) {
  std::vector<Bar> bars;
  for (const auto& c : m.causes) {
    bars.push_back({c.name,
                    {{double(c.count), c.misconfiguration ? kMissColour : kCauseColour, "misses"}},
                    fmt::format("{} misses", c.count)});
  }
  for (const auto& [name, n] : m.reasons)
    bars.push_back({name, {{double(n), kPassColour, "compiles"}}, std::to_string(n)});
  return bar_chart("chart-causes", bars);
}

std::string stages_chart(const Model& m) {
  std::vector<Bar> bars;
  for (const auto& s : m.stages) {
    bars.push_back({s.kind,
                    {{double(s.reused), kHitColour, "reused"}, {double(s.ran), kMissColour, "run"}},
                    fmt::format("{} reused, {} run", s.reused, s.ran)});
  }
  return bar_chart("chart-stages", bars);
}

// A bar's class names its outcome, so the page tells hits, misses and passthroughs apart without colour.
const char* outcome_class(const std::string& outcome) {
  if (outcome == "hit" || outcome == "miss" || outcome == "passthrough") return outcome.c_str();
  return "error";
}

const char* outcome_colour(const std::string& outcome) {
  if (outcome == "hit") return kHitColour;
  if (outcome == "miss") return kMissColour;
  if (outcome == "passthrough") return kPassColour;
  return kOtherColour;
}

// A round step for a time axis of span_s seconds: the smallest of 1-2-5 steps (then minutes, hours)
// that puts at most kMaxTicks ticks on it.
constexpr int kMaxTicks = 8;
double tick_step_s(double span_s) {
  static constexpr double kSteps[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,  1,    2,    5,
                                      10,    15,    30,    60,   120,  300,  600, 900, 1800, 3600, 7200, 21600};
  for (const double step : kSteps) {
    if (span_s / step <= kMaxTicks) return step;
  }
  return 86400 * std::ceil(span_s / 86400 / kMaxTicks);
}

// A tick's label: "0", "250 ms", "5 s", "1 min", "1 min 30 s", "2 h".
std::string tick_text(double t_s) {
  if (t_s == 0) return "0";
  if (t_s < 1) return fmt::format("{:.0f} ms", t_s * 1e3);
  if (t_s < 60) return fmt::format("{:g} s", t_s);
  const auto whole = static_cast<long long>(std::llround(t_s));
  if (whole % 3600 == 0) return fmt::format("{} h", whole / 3600);
  if (whole % 60 == 0) return fmt::format("{} min", whole / 60);
  return fmt::format("{} min {} s", whole / 60, whole % 60);
}

// At most this many bars per timeline: a build of 100000 compiles is a page a browser can open.
constexpr std::size_t kMaxBars = 2000;

// The compiles a timeline draws: all of them, or the kMaxBars longest (in time order).
std::vector<std::size_t> drawn_events(const Model& m, const BuildTimeline& build) {
  std::vector<std::size_t> drawn = build.events;
  if (drawn.size() <= kMaxBars) return drawn;
  std::nth_element(drawn.begin(), drawn.begin() + kMaxBars, drawn.end(), [&](std::size_t a, std::size_t b) {
    return m.events[a].wall_us != m.events[b].wall_us ? m.events[a].wall_us > m.events[b].wall_us : a < b;
  });
  drawn.resize(kMaxBars);
  std::sort(drawn.begin(), drawn.end());
  return drawn;
}

// One build's compiles, each a bar on its row (a row: a job slot, what ran at once, as in a Gantt
// chart), time left to right from the build's first start, with a tick at every round step.
std::string timeline_chart(const Model& m, const BuildTimeline& build, std::size_t number) {
  constexpr int kLaneHeight = 14, kAxis = 24, kLeft = 10, kRight = 20;
  const double span_s = std::max(0.001, static_cast<double>(build.end_ms - build.start_ms) / 1e3);
  const double step = tick_step_s(span_s);
  const double axis_s = std::ceil(span_s / step - 1e-9) * step;  // the axis ends on a tick
  const double scale = (kChartWidth - kLeft - kRight) / axis_s;  // pixels per second
  const int lanes_px = static_cast<int>(std::max<std::uint32_t>(build.lanes, 1)) * kLaneHeight;
  const std::string label = fmt::format("Timeline of build {}: {} compiles over {}, at most {} at once", build.build,
                                        build.events.size(), seconds_text(span_s), build.lanes);
  std::string svg = fmt::format(
      R"(<svg class="chart timeline" id="chart-timeline-{}" width="{}" height="{}" role="img" aria-label="{}">)"
      "<title>{}</title>",
      number, kChartWidth, lanes_px + kAxis, escape(label), escape(label));
  for (int t = 0; t * step <= axis_s + 1e-9; ++t) {
    const double x = kLeft + t * step * scale;
    svg += fmt::format(R"(<line class="tick" x1="{:.1f}" y1="0" x2="{:.1f}" y2="{}" stroke="#dee2e6"/>)"
                       R"(<text class="tick" x="{:.1f}" y="{}" text-anchor="{}">{}</text>)",
                       x, x, lanes_px + 4, x, lanes_px + 17, t == 0 ? "start" : "middle", tick_text(t * step));
  }
  for (const std::size_t i : drawn_events(m, build)) {
    const auto& e = m.events[i];
    const double x = kLeft + static_cast<double>(e.time_ms - build.start_ms) / 1e3 * scale;
    const double w = std::max(2.0, static_cast<double>(e.wall_us) / 1e6 * scale);
    const std::string title =
        fmt::format("{} ({}, {}): {}", e.source, e.tool, e.outcome, seconds_text(static_cast<double>(e.wall_us) / 1e6));
    svg += fmt::format(
        R"(<rect class="{}" x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}"><title>{}</title></rect>)",
        outcome_class(e.outcome), x, static_cast<int>(m.lanes[i]) * kLaneHeight, w, kLaneHeight - 2,
        outcome_colour(e.outcome), escape(title));
  }
  return svg + "</svg>\n";
}

std::string timelines(const Model& m) {
  std::string out =
      fmt::format("<h2>Timeline{} (one row per job running at once)</h2>\n", m.builds.size() > 1 ? "s" : "");
  for (std::size_t b = 0; b < m.builds.size(); ++b) {
    const BuildTimeline& build = m.builds[b];
    out += fmt::format(
        "<h3>Build {}</h3>\n<p>{} compiles from {}, span {}, {} at most at once (parallelism {:.1f}).</p>\n",
        escape(build.build), build.events.size(), utc_text(build.start_ms),
        seconds_text(static_cast<double>(build.end_ms - build.start_ms) / 1e3), build.lanes, build.parallelism());
    if (build.events.size() > kMaxBars) {
      out += fmt::format("<p class=\"note\">The {} longest compiles are drawn; {} shorter ones are left out.</p>\n",
                         kMaxBars, build.events.size() - kMaxBars);
    }
    out += timeline_chart(m, build, b + 1);
  }
  return out;
}

constexpr const char* kStyle = R"(<style>
body{font-family:sans-serif;margin:24px;color:#212529;background:#fff;max-width:820px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse}td,th{border:1px solid #dee2e6;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}svg.chart text{font-size:12px;fill:#212529}
.fix{color:#495057}.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}
</style>)";

std::string summary_html(const Model& m) {
  const core::OutcomeTotals& t = m.totals;
  std::string out = fmt::format(
      "<table id=\"summary\"><tr><th>Compiles</th><th>Hits</th><th>Misses</th><th>Passthrough</th><th>Errors</th>"
      "<th>Failed</th><th>Hit rate</th><th>Time saved (CPU)</th><th>Time saved (wall, est.)</th>"
      "<th>Spent on misses (CPU)</th><th>At most at once</th></tr>"
      "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
      "<td>{}</td><td>{}</td></tr></table>\n",
      m.compiles, t.hits, t.misses, t.passthrough, t.errors, t.compile_failed, rate_text(m), seconds_text(m.saved_s),
      seconds_text(m.saved_wall_s), seconds_text(m.miss_s), m.max_parallel);
  out +=
      "<p class=\"note\">Hit rate: hits of the cacheable compiles (hits and misses). CPU time is summed over "
      "parallel jobs; the wall-clock estimate divides each build's saving by its parallelism. Errors are "
      "kache's own, as <code>kache -s</code> counts them.</p>\n";
  out += fmt::format(
      "<p class=\"legend\"><span style=\"background:{}\"></span>hit<span style=\"background:{}\"></span>miss"
      "<span style=\"background:{}\"></span>passthrough<span style=\"background:{}\"></span>error or failed</p>\n",
      kHitColour, kMissColour, kPassColour, kOtherColour);
  for (const auto& c : m.causes) {
    if (!c.misconfiguration) continue;
    out += fmt::format("<p><b>{}</b> ({} misses): {} <span class=\"fix\">Fix: {}</span></p>\n", escape(c.name), c.count,
                       escape(c.sentence), escape(c.fix));
  }
  return out;
}

}  // namespace

std::string render_html(const Model& m) {
  // No script runs, whatever the log holds: the page needs none (inline styles alone).
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
      "<title>kache report</title>";
  out += kStyle;
  out += fmt::format("</head><body>\n<h1>kache report: {}</h1>\n<p id=\"provenance\">{}; {}.</p>\n",
                     escape(m.selection.description), escape(range_text(m)), escape(provenance_text(m)));
  if (m.compiles == 0) return out + "<p>" + escape(nothing_text(m)) + "</p></body></html>\n";
  out += summary_html(m);
  out += "<h2>Outcomes per language</h2>\n" + bar_chart("chart-languages", outcome_bars(m.by_language));
  out += "<h2>Outcomes per compiler</h2>\n" + bar_chart("chart-compilers", outcome_bars(m.by_tool));
  out += "<h2>Time saved and spent (CPU time: summed over parallel jobs)</h2>\n" + time_chart(m);
  if (!m.slowest_misses.empty()) out += "<h2>Slowest misses</h2>\n" + slowest_chart(m);
  if (!m.causes.empty() || !m.reasons.empty())
    out += "<h2>Why compiles missed or were not cached</h2>\n" + causes_chart(m);
  if (!m.stages.empty()) out += "<h2>nvcc stage reuse (within misses)</h2>\n" + stages_chart(m);
  out += timelines(m);
  return out + "</body></html>\n";
}

}  // namespace kache::commands::report
