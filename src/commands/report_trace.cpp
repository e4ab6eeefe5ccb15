// `kache report --trace FILE`: Chrome trace-event JSON ("JSON Object Format": traceEvents), which
// Perfetto and chrome://tracing open. One complete span ("ph": "X") per compile, on the timeline row
// the report gives it (rows show what ran at once), its category the outcome and its colour one of the
// viewer's reserved names; what a miss did with nvcc's stages is an instant event inside its span.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands/report.hpp"

namespace kache::commands::report {

namespace {

using json = nlohmann::ordered_json;

// The viewers' reserved colour names (catapult's color scheme).
const char* colour_of(const std::string& outcome) {
  if (outcome == "hit") return "good";
  if (outcome == "miss") return "terrible";
  if (outcome == "passthrough") return "grey";
  return "black";
}

json span(const Model& m, std::size_t i, int pid) {
  const auto& e = m.events[i];
  json args = {{"tool", e.tool},
               {"language", e.language},
               {"source", e.source},
               {"outcome", e.outcome},
               {"cpu_ms", static_cast<double>(e.cpu_us) / 1e3}};
  if (!e.reason.empty()) args["reason"] = e.reason;
  if (!e.cause.empty()) args["cause"] = e.cause;
  if (!e.cause_detail.empty()) args["cause_detail"] = e.cause_detail;
  if (e.miss_cost_ms > 0) args["miss_cost_ms"] = e.miss_cost_ms;
  return {{"name", e.source.empty() ? e.tool : e.source},
          {"cat", e.outcome},
          {"ph", "X"},
          {"ts", (e.time_ms - m.start_ms) * 1000},
          {"dur", std::max<std::uint64_t>(e.wall_us, 1)},
          {"pid", pid},
          {"tid", m.lanes[i] + 1},
          {"cname", colour_of(e.outcome)},
          {"args", std::move(args)}};
}

}  // namespace

// Each build a process of its own (its timeline: builds hours apart are not rows of one), each of its
// rows a thread.
std::string render_trace(const Model& m) {
  json events = json::array();
  for (std::size_t b = 0; b < m.builds.size(); ++b) {
    const BuildTimeline& build = m.builds[b];
    const int pid = static_cast<int>(b) + 1;
    events.push_back(
        {{"name", "process_name"},
         {"ph", "M"},
         {"pid", pid},
         {"args", {{"name", fmt::format("kache: build {} ({})", build.build, utc_text(build.start_ms))}}}});
    for (std::uint32_t lane = 0; lane < build.lanes; ++lane) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", lane + 1},
                        {"args", {{"name", "compiles, row " + std::to_string(lane + 1)}}}});
    }
    for (const std::size_t i : build.events) {
      events.push_back(span(m, i, pid));
      const auto& e = m.events[i];
      for (const auto& stage : e.stages) {
        // No per-stage times are recorded: each stage note is an instant at the end of its miss.
        events.push_back({{"name", stage},
                          {"cat", "stage"},
                          {"ph", "i"},
                          {"s", "t"},
                          {"ts", end_us(ms_to_us(e.time_ms - m.start_ms), e.wall_us)},
                          {"pid", pid},
                          {"tid", m.lanes[i] + 1}});
      }
    }
  }
  json out = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"schema", kSchema},
                {"selection", m.selection.description},
                {"start_ms", m.start_ms},
                {"start", m.compiles ? utc_text(m.start_ms) : ""},
                {"made", utc_text(m.made_ms)},
                {"version", m.version},
                {"cache_dir", m.cache_dir},
                {"compiles", m.compiles}}}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace kache::commands::report
