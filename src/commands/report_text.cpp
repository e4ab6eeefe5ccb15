// `kache report` for a terminal: a short summary first, then the sections.
#include <fmt/format.h>

#include "commands/report.hpp"
#include "util/text.hpp"

namespace kache::commands::report {

namespace {

void groups_section(std::string& out, const char* title, const std::vector<Group>& groups) {
  out += fmt::format("\n{}\n", title);
  for (const auto& g : groups) {
    out += fmt::format("  {:<10} {:>5} compiles  {:>5} hits  {:>5} misses  {:>5} passthrough  {:>3} other\n", g.name,
                       g.compiles, g.hits, g.misses, g.passthrough, g.other);
  }
}

void causes_section(std::string& out, const Model& m) {
  if (m.causes.empty()) return;
  out += "\nWhy compiles missed (misconfigurations first)\n";
  for (const auto& c : m.causes) {
    out += fmt::format("  {:>5}  {}{}: {}\n", c.count, c.misconfiguration ? "MISCONFIGURED " : "", c.name, c.sentence);
    if (!c.fix.empty()) out += fmt::format("         fix: {}\n", c.fix);
    for (const auto& ex : c.examples) out += fmt::format("         e.g. {}\n", ex);
  }
}

void details_section(std::string& out, const Model& m) {
  if (!m.slowest_misses.empty()) {
    out += "\nSlowest misses\n";
    for (const std::size_t i : m.slowest_misses) {
      const auto& e = m.events[i];
      out += fmt::format("  {:>9}  {} ({})\n", seconds_text(static_cast<double>(e.wall_us) / 1e6), e.source, e.tool);
    }
  }
  if (!m.reasons.empty()) {
    out += "\nReasons (not cached, not stored, errors)\n";
    for (const auto& [name, n] : m.reasons) out += fmt::format("  {:>5}  {}\n", n, name);
  }
  if (!m.stages.empty()) {
    out += "\nnvcc stages (beside the compiles: device code reused within misses)\n";
    for (const auto& s : m.stages) {
      out += fmt::format("  {:<6} {} reused, {} run, {} saved\n", s.kind, s.reused, s.ran,
                         seconds_text(static_cast<double>(s.ms_saved) / 1e3));
    }
  }
  if (!m.remote.empty()) {
    out += "\nRemote storage (beside the compiles)\n";
    for (const auto& [name, n] : m.remote) out += fmt::format("  {:<22} {}\n", name.substr(7), n);
  }
}

}  // namespace

std::string render_text(const Model& m) {
  std::string out = fmt::format("kache report: {}\n",
                                m.selection.description.empty() ? "no compiles recorded" : m.selection.description);
  out += fmt::format("  {}; {}\n", range_text(m), provenance_text(m));
  if (m.compiles == 0) return util::terminal_safe(out + nothing_text(m) + "\n", true);
  const core::OutcomeTotals& t = m.totals;
  out +=
      fmt::format("  {} compiles: {} hits, {} misses, {} passthrough, {} failed  (hit rate {} of {} cacheable)\n",
                  m.compiles, t.hits, t.misses, t.passthrough, t.compile_failed, rate_text(m), t.cacheable());
  if (t.errors > 0 || m.uncached > 0) {
    out +=
        fmt::format("  {} errors (kache's own, as kache -s counts them; {} of the compiles ran uncached after one)\n",
                    t.errors, m.uncached);
  } else {
    out += "  0 errors\n";
  }
  out += fmt::format("  time saved by hits {} CPU time (summed over parallel jobs), about {} of wall-clock time\n",
                     seconds_text(m.saved_s), seconds_text(m.saved_wall_s));
  out += fmt::format("  spent on misses {}, on hits {} (CPU time); build span {}, {} at most at once\n",
                     seconds_text(m.miss_s), seconds_text(m.hit_s),
                     seconds_text(static_cast<double>(m.end_ms - m.start_ms) / 1e3), m.max_parallel);
  if (const auto it = m.counts.find("preprocessed_hits"); it != m.counts.end() && it->second > 0) {
    out += fmt::format(
        "  {} of the hits came through the preprocessed fallback (a computed #include: each ran the "
        "preprocessor)\n",
        it->second);
  }
  if (!m.causes.empty() && m.causes.front().misconfiguration) {
    out += fmt::format("  top cause of misses: {} ({} misses) -- {}\n", m.causes.front().name, m.causes.front().count,
                       m.causes.front().fix);
  }
  groups_section(out, "By language", m.by_language);
  groups_section(out, "By compiler", m.by_tool);
  causes_section(out, m);
  details_section(out, m);
  // Sources, tools and causes come from the log, which a file name can fill with escape sequences.
  return util::terminal_safe(out, true);
}

}  // namespace kache::commands::report
