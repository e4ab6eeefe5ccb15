// `kache report --json` (for tools) and `--markdown` (tables for $GITHUB_STEP_SUMMARY and CI comments).
#include <fmt/format.h>

#include <string_view>

#include <nlohmann/json.hpp>

#include "commands/report.hpp"

namespace kache::commands::report {

namespace {

using json = nlohmann::ordered_json;

json groups_json(const std::vector<Group>& groups) {
  json out = json::array();
  for (const auto& g : groups) {
    out.push_back({{"name", g.name},
                   {"compiles", g.compiles},
                   {"hits", g.hits},
                   {"misses", g.misses},
                   {"passthrough", g.passthrough},
                   {"other", g.other}});
  }
  return out;
}

json compiles_json(const Model& m) {
  json out = json::array();
  for (const auto& e : m.events) {
    json j = {{"time_ms", e.time_ms}, {"build", e.build},     {"tool", e.tool},       {"language", e.language},
              {"source", e.source},   {"outcome", e.outcome}, {"wall_us", e.wall_us}, {"cpu_us", e.cpu_us}};
    if (!e.reason.empty()) j["reason"] = e.reason;
    if (!e.cause.empty()) j["cause"] = e.cause;
    if (!e.cause_detail.empty()) j["cause_detail"] = e.cause_detail;
    if (e.miss_cost_ms > 0) j["miss_cost_ms"] = e.miss_cost_ms;
    if (!e.stages.empty()) j["stages"] = e.stages;
    out.push_back(std::move(j));
  }
  return out;
}

json causes_json(const Model& m) {
  json out = json::array();
  for (const auto& c : m.causes) {
    out.push_back({{"cause", c.name},
                   {"misconfiguration", c.misconfiguration},
                   {"count", c.count},
                   {"sentence", c.sentence},
                   {"fix", c.fix},
                   {"examples", c.examples}});
  }
  return out;
}

// A table cell's text: Markdown becomes HTML where it is shown ($GITHUB_STEP_SUMMARY), and a name from
// the log ("x<img src=x onerror=...>-gcc") must stay text there, so HTML's characters are entities and
// no name is put in a code span (where an entity would show as written); emphasis and link brackets
// are backslash-escaped.
std::string escape_cell(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\n':
        out += ' ';
        break;
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '`':
        out += "&#96;";
        break;
      case '*':
      case '[':
      case ']':
      case '\\':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

void markdown_groups(std::string& out, const char* title, const std::vector<Group>& groups) {
  out += fmt::format(
      "\n### {}\n\n| {} | Compiles | Hits | Misses | Passthrough | Other |\n|---|---:|---:|---:|---:|---:|\n", title,
      title == std::string("By language") ? "Language" : "Compiler");
  for (const auto& g : groups) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", escape_cell(g.name), g.compiles, g.hits, g.misses,
                       g.passthrough, g.other);
  }
}

void markdown_details(std::string& out, const Model& m) {
  if (!m.causes.empty()) {
    out +=
        "\n### Why compiles missed\n\n| Cause | Misses | Misconfiguration | What happened | Fix "
        "|\n|---|---:|---|---|---|\n";
    for (const auto& c : m.causes) {
      out += fmt::format("| {} | {} | {} | {} | {} |\n", escape_cell(c.name), c.count, c.misconfiguration ? "yes" : "no",
                         escape_cell(c.sentence), escape_cell(c.fix));
    }
  }
  if (!m.slowest_misses.empty()) {
    out += "\n### Slowest misses\n\n| Source | Compiler | Time |\n|---|---|---:|\n";
    for (const std::size_t i : m.slowest_misses) {
      const auto& e = m.events[i];
      out += fmt::format("| {} | {} | {} |\n", escape_cell(e.source), escape_cell(e.tool),
                         seconds_text(static_cast<double>(e.wall_us) / 1e6));
    }
  }
  if (!m.reasons.empty()) {
    out += "\n### Reasons\n\n| Reason | Count |\n|---|---:|\n";
    for (const auto& [name, n] : m.reasons) out += fmt::format("| {} | {} |\n", escape_cell(name), n);
  }
  if (!m.stages.empty()) {
    out += "\n### nvcc stages\n\n| Stage | Reused | Run | Saved |\n|---|---:|---:|---:|\n";
    for (const auto& s : m.stages) {
      out += fmt::format("| {} | {} | {} | {} |\n", escape_cell(s.kind), s.reused, s.ran,
                         seconds_text(static_cast<double>(s.ms_saved) / 1e3));
    }
  }
}

}  // namespace

std::string render_json(const Model& m) {
  json out;
  out["schema"] = kSchema;
  out["made_ms"] = m.made_ms;
  out["made"] = utc_text(m.made_ms);
  out["version"] = m.version;
  out["cache_dir"] = m.cache_dir;
  out["selection"] = {
      {"description", m.selection.description}, {"build", m.selection.build}, {"since_ms", m.selection.since_ms}};
  out["start_ms"] = m.start_ms;
  out["end_ms"] = m.end_ms;
  out["start"] = m.compiles ? utc_text(m.start_ms) : "";
  out["end"] = m.compiles ? utc_text(m.end_ms) : "";
  out["compiles"] = m.compiles;
  // hits ... compile_failed as kache -s counts them (core::outcome_totals).
  out["hits"] = m.totals.hits;
  // Of hits: compiles without a direct-mode record (a computed #include), found by their preprocessed output.
  const auto pre = m.counts.find("preprocessed_hits");
  out["preprocessed_hits"] = pre == m.counts.end() ? 0 : pre->second;
  out["misses"] = m.totals.misses;
  out["passthrough"] = m.totals.passthrough;
  out["errors"] = m.totals.errors;
  out["compile_failed"] = m.totals.compile_failed;
  out["uncached_after_error"] = m.uncached;
  out["cacheable"] = m.totals.cacheable();
  // null without a cacheable compile: no hit rate, not 0 %.
  if (const auto rate = hit_rate(m))
    out["hit_rate"] = *rate;
  else
    out["hit_rate"] = nullptr;
  // Summed over parallel jobs (CPU time's way), but saved_wall_s: each build's saving divided by its
  // parallelism (its compiles' summed time over the time any of them ran).
  out["time"] = {{"saved_s", m.saved_s},
                 {"saved_wall_s", m.saved_wall_s},
                 {"misses_s", m.miss_s},
                 {"hits_s", m.hit_s},
                 {"other_s", m.other_s}};
  out["builds"] = json::array();
  for (const auto& b : m.builds) {
    out["builds"].push_back({{"build", b.build},
                             {"start_ms", b.start_ms},
                             {"end_ms", b.end_ms},
                             {"compiles", b.events.size()},
                             {"lanes", b.lanes},
                             {"parallelism", b.parallelism()},
                             {"saved_s", b.saved_s}});
  }
  out["max_parallel"] = m.max_parallel;
  // The stats increments of these compiles, summed: the same names and values as kache -s's deltas.
  out["counts"] = m.counts;
  out["by_language"] = groups_json(m.by_language);
  out["by_compiler"] = groups_json(m.by_tool);
  out["causes"] = causes_json(m);
  out["reasons"] = json::object();
  for (const auto& [name, n] : m.reasons) out["reasons"][name] = n;
  out["stages"] = json::array();
  for (const auto& s : m.stages) {
    out["stages"].push_back({{"kind", s.kind}, {"reused", s.reused}, {"run", s.ran}, {"ms_saved", s.ms_saved}});
  }
  out["remote"] = m.remote;
  out["slowest_misses"] = json::array();
  for (const std::size_t i : m.slowest_misses) out["slowest_misses"].push_back(i);
  out["compile_events"] = compiles_json(m);
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string render_markdown(const Model& m) {
  std::string out = fmt::format("## kache report: {}\n\n{}; {}.\n\n", escape_cell(m.selection.description),
                                escape_cell(range_text(m)), escape_cell(provenance_text(m)));
  if (m.compiles == 0) return out + escape_cell(nothing_text(m)) + "\n";
  const core::OutcomeTotals& t = m.totals;
  out +=
      "| Compiles | Hits | Misses | Passthrough | Errors | Failed | Hit rate | Time saved (CPU) | Time saved (wall, "
      "est.) "
      "| Spent on misses (CPU) |\n";
  out += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", m.compiles, t.hits, t.misses,
                     t.passthrough, t.errors, t.compile_failed, rate_text(m), seconds_text(m.saved_s),
                     seconds_text(m.saved_wall_s), seconds_text(m.miss_s));
  out +=
      "\nHit rate: hits of the cacheable compiles (hits and misses). CPU time is summed over parallel jobs; the "
      "wall-clock estimate divides each build's saving by its parallelism. Errors are kache's own, as `kache -s` "
      "counts them.\n";
  if (!m.causes.empty() && m.causes.front().misconfiguration) {
    out +=
        fmt::format("\n**Top cause of misses: {}** ({} misses). {} Fix: {}\n", escape_cell(m.causes.front().name),
                    m.causes.front().count, escape_cell(m.causes.front().sentence), escape_cell(m.causes.front().fix));
  }
  markdown_groups(out, "By language", m.by_language);
  markdown_groups(out, "By compiler", m.by_tool);
  markdown_details(out, m);
  return out;
}

}  // namespace kache::commands::report
