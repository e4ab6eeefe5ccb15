// `kache report --html FILE`: one self-contained page (no script, no network, no CDN): the summary,
// then inline SVG charts drawn here (outcomes per language and compiler, time saved against time
// spent, the slowest misses, why compiles missed, nvcc stage reuse, a timeline of the compiles), each
// with its figures in text beside it, so the page's own text holds what the charts show.
#include <fmt/format.h>

#include <algorithm>
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
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
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
  std::string svg = fmt::format(R"(<svg class="chart" id="{}" width="{}" height="{}" role="img">)", id, kChartWidth,
                                height);
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
  return bar_chart("chart-time", {{"saved by hits", {{m.saved_s, kSavedColour, "seconds saved"}}, seconds_text(m.saved_s)},
                                  {"spent on misses", {{m.miss_s, kMissColour, "seconds"}}, seconds_text(m.miss_s)},
                                  {"spent on hits", {{m.hit_s, kHitColour, "seconds"}}, seconds_text(m.hit_s)},
                                  {"passthrough (kache's part)", {{m.other_s, kPassColour, "seconds"}},
                                   seconds_text(m.other_s)}});
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
    bars.push_back({c.name, {{double(c.count), c.misconfiguration ? kMissColour : kCauseColour, "misses"}},
                    fmt::format("{} misses", c.count)});
  }
  for (const auto& [name, n] : m.reasons) bars.push_back({name, {{double(n), kPassColour, "compiles"}}, std::to_string(n)});
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

const char* outcome_colour(const std::string& outcome) {
  if (outcome == "hit") return kHitColour;
  if (outcome == "miss") return kMissColour;
  if (outcome == "passthrough") return kPassColour;
  return kOtherColour;
}

// Each compile a bar on its row (rows: what ran at once), time left to right.
std::string timeline_chart(const Model& m) {
  const int lane_height = 14, axis = 20;
  const double span_us = std::max<double>(1.0, static_cast<double>(m.end_ms - m.start_ms) * 1000.0);
  const double scale = (kChartWidth - 20) / span_us;
  const int height = static_cast<int>(std::max<std::uint32_t>(m.max_parallel, 1)) * lane_height + axis;
  std::string svg = fmt::format(R"(<svg class="chart" id="chart-timeline" width="{}" height="{}" role="img">)",
                                kChartWidth, height);
  for (std::size_t i = 0; i < m.events.size(); ++i) {
    const auto& e = m.events[i];
    const double x = 10 + static_cast<double>(e.time_ms - m.start_ms) * 1000.0 * scale;
    const double w = std::max(2.0, static_cast<double>(e.wall_us) * scale);
    const std::string title = fmt::format("{} ({}, {}): {}", e.source, e.tool, e.outcome,
                                          seconds_text(static_cast<double>(e.wall_us) / 1e6));
    svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}"><title>{}</title></rect>)", x,
                       static_cast<int>(m.lanes[i]) * lane_height, w, lane_height - 2, outcome_colour(e.outcome),
                       escape(title));
  }
  svg += fmt::format(R"(<text x="10" y="{}">0</text><text x="{}" y="{}" text-anchor="end">{}</text>)", height - 4,
                     kChartWidth - 10, height - 4, seconds_text(span_us / 1e6));
  return svg + "</svg>\n";
}

constexpr const char* kStyle = R"(<style>
body{font-family:sans-serif;margin:24px;color:#212529;background:#fff;max-width:820px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse}td,th{border:1px solid #dee2e6;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}svg.chart text{font-size:12px;fill:#212529}
.fix{color:#495057}.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}
</style>)";

std::string summary_html(const Model& m) {
  std::string out = fmt::format(
      "<table id=\"summary\"><tr><th>Compiles</th><th>Hits</th><th>Misses</th><th>Passthrough</th><th>Errors</th>"
      "<th>Failed</th><th>Hit rate</th><th>Time saved</th><th>Spent on misses</th><th>At most at once</th></tr>"
      "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f} %</td><td>{}</td><td>{}</td>"
      "<td>{}</td></tr></table>\n",
      m.compiles, m.hits, m.misses, m.passthrough, m.errors, m.compile_failed, hit_rate(m), seconds_text(m.saved_s),
      seconds_text(m.miss_s), m.max_parallel);
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
  out += fmt::format("</head><body>\n<h1>kache report: {}</h1>\n", escape(m.selection.description));
  if (m.compiles == 0) return out + "<p>No compiles were recorded for this selection.</p></body></html>\n";
  out += summary_html(m);
  out += "<h2>Outcomes per language</h2>\n" + bar_chart("chart-languages", outcome_bars(m.by_language));
  out += "<h2>Outcomes per compiler</h2>\n" + bar_chart("chart-compilers", outcome_bars(m.by_tool));
  out += "<h2>Time saved and spent</h2>\n" + time_chart(m);
  if (!m.slowest_misses.empty()) out += "<h2>Slowest misses</h2>\n" + slowest_chart(m);
  if (!m.causes.empty() || !m.reasons.empty()) out += "<h2>Why compiles missed or were not cached</h2>\n" + causes_chart(m);
  if (!m.stages.empty()) out += "<h2>nvcc stage reuse (within misses)</h2>\n" + stages_chart(m);
  out += "<h2>Timeline (one row per compile running at once)</h2>\n" + timeline_chart(m);
  return out + "</body></html>\n";
}

}  // namespace kache::commands::report
