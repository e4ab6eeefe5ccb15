// Unit tests for the event log (core/events.hpp) and the report model built on it (commands/report.hpp).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "commands/report.hpp"
#include "core/events.hpp"
#include "core/reasons.hpp"
#include "util/fs.hpp"

namespace kache::core {
namespace {

std::string test_root() { return (std::filesystem::temp_directory_path() / "kache-unit").string(); }

CompileEvent event(std::string outcome, std::int64_t t_ms, std::uint64_t wall_us) {
  CompileEvent e;
  e.time_ms = t_ms;
  e.build = "b1";
  e.tool = "gcc";
  e.language = "c";
  e.source = "src/a.c";
  e.outcome = outcome;
  e.wall_us = wall_us;
  e.counts[outcome == "hit" ? "hits" : outcome == "miss" ? "misses" : "passthrough"] = 1;
  return e;
}

TEST(Events, RecordRoundTrips) {
  CompileEvent e = event("miss", 1765000000123, 2500000);
  e.cause = "volatile-define";
  e.cause_detail = "-DBUILD_TIME";
  e.miss_cost_ms = 2500;
  e.direct = false;
  e.stages = {"ran ptx compute_80"};
  e.counts["stage_misses.ptx"] = 1;
  const std::string line = serialize_event(e);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // one line
  const auto back = parse_event(std::string_view(line).substr(0, line.size() - 1));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->time_ms, e.time_ms);
  EXPECT_EQ(back->cause_detail, e.cause_detail);
  EXPECT_EQ(back->counts, e.counts);
  EXPECT_EQ(back->stages, e.stages);
  EXPECT_FALSE(back->direct);
  EXPECT_TRUE(back->command.empty());
}

// Paths are bytes: quotes, backslashes, control characters and bytes that are no UTF-8 keep the line JSON.
// /proc/<pid>/stat as Linux writes it; comm may hold spaces and parentheses.
TEST(Events, ProcStatIsRead) {
  auto s = parse_proc_stat("4242 (sh) S 4200 4242 4100 34816 4242 4194304 ...");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->comm, "sh");
  EXPECT_EQ(s->ppid, 4200);
  EXPECT_EQ(s->pgrp, 4242);
  s = parse_proc_stat("7 (a (b) c) R 1 7 7 0");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->comm, "a (b) c");
  EXPECT_EQ(s->ppid, 1);
  EXPECT_FALSE(parse_proc_stat("7 (x"));
  EXPECT_FALSE(parse_proc_stat("7 (x) R"));
}

// ninja gives every command a process group of its own (led by /bin/sh -c, or by the compile the shell
// exec'd): the build is the group above that leader, ninja's; make's commands share make's group.
TEST(Events, TheBuildGroupLooksPastAGroupMadeForOneCommand) {
  const std::map<long, ProcStat> procs = {{200, {"sh", 100, 200}}, {300, {"make", 90, 90}}};
  auto stat_of = [&](long pid) -> std::optional<ProcStat> {
    auto it = procs.find(pid);
    return it == procs.end() ? std::nullopt : std::optional<ProcStat>(it->second);
  };
  auto pgid_of = [](long pid) { return pid == 100 ? 100L : pid == 300 ? 90L : -1L; };
  EXPECT_EQ(build_group(201, 200, 200, stat_of, pgid_of), 100);  // ninja(100) -> sh(200, own group) -> kache
  EXPECT_EQ(build_group(202, 100, 202, stat_of, pgid_of), 100);  // ninja(100) -> kache (the shell exec'd it)
  EXPECT_EQ(build_group(301, 300, 90, stat_of, pgid_of), 90);    // make's job group: kept
  EXPECT_EQ(build_group(302, 300, 300, stat_of, [](long) { return 300L; }), 300);  // make -> kache, make leads
  EXPECT_EQ(build_group(401, 999, 401, stat_of, [](long) { return -1L; }), 401);  // nothing above: its own
}

TEST(Events, AnySourceBytesKeepTheLineJson) {
  CompileEvent e = event("hit", 1, 1);
  e.source = "dir \"q\"\\x\n\t\x01/\xc3\xa9t\xe9.c";  // a quote, a backslash, controls, UTF-8 é, a Latin-1 é
  e.command = {"gcc", "-DX=\"1\""};
  const std::string line = serialize_event(e);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const auto back = parse_event(std::string_view(line).substr(0, line.size() - 1));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->source, "dir \"q\"\\x\n\t\x01/\xc3\xa9t\xef\xbf\xbd.c");  // the stray byte as U+FFFD
  EXPECT_EQ(back->command, e.command);
}

TEST(Events, DamagedAndFutureLinesAreSkipped) {
  EXPECT_FALSE(parse_event("{\"v\":1,\"outcome\":\"hit\""));  // cut short
  EXPECT_FALSE(parse_event("{\"v\":2,\"outcome\":\"hit\"}"));  // another format
  EXPECT_FALSE(parse_event("[1,2]"));
  EXPECT_TRUE(parse_event("{\"v\":1,\"outcome\":\"hit\",\"t\":\"not a number\"}"));  // a bad field falls back
}

TEST(Events, OutcomeAndReasonFromCounts) {
  EXPECT_EQ(event_outcome({{"hits", 1}, {"remote_reads", 2}}), "hit");
  EXPECT_EQ(event_outcome({{"misses", 1}, {"not_stored", 0}, {"not_stored.input-changed", 1}}), "miss");
  EXPECT_EQ(event_reason({{"misses", 1}, {"not_stored.input-changed", 1}}), "not_stored.input-changed");
  EXPECT_EQ(event_outcome({{"passthrough", 1}, {"passthrough.link", 1}}), "passthrough");
  EXPECT_EQ(event_reason({{"passthrough", 1}, {"passthrough.link", 1}}), "passthrough.link");
  EXPECT_EQ(event_outcome({{"compile_failed", 1}}), "compile_failed");
  EXPECT_EQ(event_language("", "../src/k.cu", "nvcc"), "cuda");
  EXPECT_EQ(event_language("c++", "x.c", "g++"), "c++");
  EXPECT_EQ(event_language("", "a.cc", "g++"), "c++");
  EXPECT_EQ(event_source("/p/src/a.c", "/p/build"), "../src/a.c");
  EXPECT_EQ(event_source("/p/build/gen/a.c", "/p/build/"), "gen/a.c");
  EXPECT_EQ(event_source("/p/bc/a.c", "/p/b"), "../bc/a.c");
  EXPECT_EQ(event_source("/x/a.c", "/p/b/c"), "../../../x/a.c");
  EXPECT_EQ(event_source("/x/a.c", "/"), "x/a.c");
  EXPECT_EQ(event_build_id("ci-7"), "ci-7");
  EXPECT_EQ(event_build_id(""), "pg" + std::to_string(::getpgrp()));
}

// Processes appending at once lose no record and tear none: each line is one write with O_APPEND.
TEST(Events, ConcurrentAppendsKeepEveryLine) {
  util::TempDir dir(test_root());
  constexpr int kProcesses = 4, kEach = 200;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      EventLog log(dir.path());
      for (int i = 0; i < kEach; ++i) log.append(event("hit", 1000 + i, 10));
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  }
  EXPECT_EQ(EventLog(dir.path()).read().size(), static_cast<std::size_t>(kProcesses * kEach));
}

TEST(Events, RotationBoundsTheLog) {
  util::TempDir dir(test_root());
  EventLog log(dir.path());
  const std::uint64_t line = serialize_event(event("hit", 1, 1)).size();
  for (int i = 0; i < 50; ++i) log.append(event("hit", i, 1), 10 * line);
  // At most the current file (up to the limit and one line) and the one before it.
  EXPECT_LE(log.size(), 2 * 11 * line);
  const auto events = log.read();
  EXPECT_GE(events.size(), 10u);
  EXPECT_EQ(events.back().time_ms, 49);  // the newest is kept
  log.drop_rotated();
  EXPECT_LE(log.size(), 11 * line);
  log.clear();
  EXPECT_TRUE(log.read().empty());
}

TEST(Events, MarkRoundTrips) {
  util::TempDir dir(test_root());
  EventLog log(dir.path());
  EXPECT_FALSE(log.last_mark());
  log.mark(1765000000000, "nightly 12");
  const auto mark = log.last_mark();
  ASSERT_TRUE(mark);
  EXPECT_EQ(mark->first, 1765000000000);
  EXPECT_EQ(mark->second, "nightly 12");
}

TEST(Events, ALineNestedDeepIsDamageNotACrash) {
  // 600 KB of "[[[[" crashed report and doctor: the recursive parser ran out of stack.
  EXPECT_FALSE(parse_event(std::string(600000, '[')));
  EXPECT_FALSE(parse_event("{\"v\":1,\"outcome\":\"hit\",\"counts\":" + std::string(600000, '[')));
  const std::string nine = std::string(kMaxEventNesting, '[') + std::string(kMaxEventNesting, ']');
  EXPECT_FALSE(parse_event("{\"v\":1,\"outcome\":\"hit\",\"x\":" + nine + "}"));
  // Brackets inside a string are text, not nesting.
  EXPECT_TRUE(parse_event("{\"v\":1,\"outcome\":\"hit\",\"src\":\"" + std::string(100, '[') + "\"}"));
}

TEST(Events, PlantedFilesAreSkippedNotFollowedOrWaitedOn) {
  util::TempDir dir(test_root());
  util::TempDir elsewhere(test_root());
  EventLog log(dir.path());
  log.append(event("hit", 1, 1));
  const std::string current = dir.path() + "/events/events.jsonl";
  const std::string target = elsewhere.path() + "/victim";
  util::write_file(target, "");
  std::filesystem::remove(current);
  std::filesystem::create_symlink(target, current);
  log.append(event("hit", 2, 1));  // refused: the link is not followed
  EXPECT_EQ(util::read_file(target), "");
  EventLog::Unread unread;
  EXPECT_TRUE(log.read(&unread).empty());
  ASSERT_EQ(unread.refused_files.size(), 1u);
  EXPECT_EQ(unread.refused_files[0], "events/events.jsonl is a symbolic link");
  std::filesystem::remove(current);
  ASSERT_EQ(::mkfifo(current.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((dir.path() + "/events/mark").c_str(), 0600), 0);
  log.append(event("hit", 3, 1));  // returns at once: a FIFO is never opened for writing
  EXPECT_TRUE(log.read().empty());
  EXPECT_FALSE(log.last_mark());
  log.mark(5, "after");  // replaces the FIFO
  EXPECT_EQ(log.last_mark()->second, "after");
}

TEST(MissCauses, EveryNamedCauseIsARowWithASentence) {
  for (const std::string_view name :
       {cause::kPerCheckoutEntry, cause::kAbsolutePath, cause::kToolchainChanged, cause::kVolatileDefine,
        cause::kVolatileTime, cause::kRemoteFailed, cause::kDirectModeOff, cause::kFlagsChanged,
        cause::kEnvironmentChanged, cause::kSourceChanged, cause::kHeaderChanged, cause::kEntryGone,
        cause::kNewSource}) {
    const MissCause* c = find_miss_cause(name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_FALSE(c->sentence.empty());
    if (c->misconfiguration) {
      EXPECT_FALSE(c->fix.empty()) << name;
    }
  }
  EXPECT_EQ(cause_of_counter("not_stored.unpinned-time")->name, cause::kVolatileTime);
  // A cold miss stored per checkout missed because its source was new, not because of where it is stored.
  EXPECT_EQ(cause_of_counter("stored_per_checkout.path-in-object"), nullptr);
  EXPECT_EQ(cause_of_counter("hits"), nullptr);
}

}  // namespace
}  // namespace kache::core

namespace kache::commands::report {
namespace {

using core::CompileEvent;

CompileEvent at(std::string outcome, std::int64_t t_ms, std::uint64_t wall_us, std::string cause = "") {
  CompileEvent e;
  e.time_ms = t_ms;
  e.build = "b1";
  e.tool = outcome == "miss" ? "nvcc" : "gcc";
  e.language = outcome == "miss" ? "cuda" : "c";
  e.source = "s" + std::to_string(t_ms);
  e.outcome = outcome;
  e.wall_us = wall_us;
  e.cause = std::move(cause);
  e.counts[outcome == "hit" ? "hits" : outcome == "miss" ? "misses" : "passthrough"] = 1;
  if (outcome == "miss") e.counts["stage_hits.ptx"] = 2;  // beside the compile, never a hit
  if (outcome == "hit") e.miss_cost_ms = 1000;
  return e;
}

TEST(ReportModel, CountsCompilesOnceAndMisconfigurationsFirst) {
  std::vector<CompileEvent> events = {at("miss", 1000, 500000, "new-source"), at("miss", 1100, 400000, "new-source"),
                                      at("miss", 1200, 300000, "volatile-define"), at("hit", 1300, 10000),
                                      at("passthrough", 1400, 1000)};
  events.push_back(at("hit", 5000, 10000));
  events.back().build = "b2";
  const Model m = build_model(events, Selection{"b1", 0, "build b1"});
  EXPECT_EQ(m.compiles, 5u);
  EXPECT_EQ(m.totals.hits, 1u);
  EXPECT_EQ(m.totals.misses, 3u);
  EXPECT_EQ(m.counts.at("hits"), 1u);  // stage reuse is not a hit
  EXPECT_EQ(m.counts.at("stage_hits.ptx"), 6u);
  ASSERT_EQ(m.causes.size(), 2u);
  EXPECT_EQ(m.causes[0].name, "volatile-define");  // one misconfiguration before two cold misses
  EXPECT_EQ(m.causes[1].count, 2u);
  EXPECT_EQ(m.max_parallel, 4u);  // 1000..1500, 1100..1500, 1200..1500 and the hit at 1300 overlap
  EXPECT_EQ(m.lanes[0], 0u);
  EXPECT_EQ(m.lanes[2], 2u);
  EXPECT_NEAR(m.saved_s, 0.99, 1e-9);
  EXPECT_EQ(m.slowest_misses.front(), 0u);
}

// kache -s counts an error inside a compile that still missed (the store could not be written, a remote
// failed); the report counted only compiles whose outcome was "error", and said 0 where -s said 4.
TEST(ReportModel, ErrorsAreCountedAsKacheDashSCountsThem) {
  std::vector<CompileEvent> events = {at("miss", 1000, 500000), at("miss", 1100, 400000), at("hit", 1300, 10000)};
  for (auto* e : {&events[0], &events[1]}) {
    e->counts["errors"] = 1;
    e->counts["error.remote-failed"] = 1;
  }
  CompileEvent uncached = at("passthrough", 1400, 1000);
  uncached.outcome = "error";
  uncached.counts = {{"errors", 1}, {"error.internal", 1}};
  events.push_back(uncached);
  const Model m = build_model(events, Selection{});
  EXPECT_EQ(m.totals.errors, 3u);
  EXPECT_EQ(m.totals.errors, core::outcome_totals(m.counts).errors);
  EXPECT_EQ(m.uncached, 1u);
  EXPECT_EQ(m.totals.misses, 2u);
  ASSERT_TRUE(hit_rate(m).has_value());
  EXPECT_NEAR(*hit_rate(m), 100.0 / 3.0, 1e-9);
}

// Each build on its own timeline: rows restart per build, and a build's parallelism (its compiles'
// summed time over the time any ran) turns its CPU-time saving into a wall-clock estimate.
TEST(ReportModel, EachBuildHasItsOwnTimelineAndParallelism) {
  std::vector<CompileEvent> events = {at("hit", 1000, 100000), at("hit", 1000, 100000), at("hit", 1000, 100000),
                                      at("hit", 1000, 100000)};
  CompileEvent later = at("miss", 3600000, 500000);
  later.build = "b2";
  events.push_back(later);
  const Model m = build_model(events, Selection{});
  ASSERT_EQ(m.builds.size(), 2u);
  EXPECT_EQ(m.builds[0].lanes, 4u);
  EXPECT_EQ(m.builds[1].lanes, 1u);
  EXPECT_EQ(m.lanes[4], 0u);  // the second build starts on row 0 again
  EXPECT_NEAR(m.builds[0].parallelism(), 4.0, 1e-9);
  EXPECT_NEAR(m.saved_s, 4 * 0.9, 1e-9);
  EXPECT_NEAR(m.saved_wall_s, 0.9, 1e-9);
  EXPECT_EQ(m.builds[1].start_ms, 3600000);
}

TEST(ReportModel, DirectModeOffIsAMisconfigurationRow) {
  std::vector<CompileEvent> events = {at("miss", 1000, 500000, "new-source"), at("hit", 2000, 10000)};
  events[1].direct = false;
  const Model m = build_model(events, Selection{});
  ASSERT_EQ(m.causes.size(), 2u);
  EXPECT_EQ(m.causes[0].name, "direct-mode-off");
  EXPECT_EQ(m.causes[0].count, 1u);
}

// A hostile log's wall_us of 2^63 or more overflowed start + wall_us (undefined behaviour; in practice an
// end before the start, which freed the row at once and drew the next compile over it).
TEST(ReportModel, AHostileWallTimeSaturatesInsteadOfOverflowing) {
  std::vector<CompileEvent> events = {at("miss", 1000, (std::uint64_t{1} << 63) + 5), at("miss", 2000, 1000)};
  const Model m = build_model(events, Selection{});
  ASSERT_EQ(m.builds.size(), 1u);
  EXPECT_EQ(m.builds[0].lanes, 2u);  // the first compile never ends: the second is on a row of its own
  EXPECT_EQ(m.lanes[1], 1u);
  EXPECT_GE(m.builds[0].end_ms, m.builds[0].start_ms);
  EXPECT_GE(m.end_ms, m.start_ms);
  EXPECT_GT(m.builds[0].busy_s, 0.0);
  EXPECT_EQ(end_us(1000, ~std::uint64_t{0}), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(end_ms(std::numeric_limits<std::int64_t>::max() - 5, ~std::uint64_t{0}),
            std::numeric_limits<std::int64_t>::max());
  EXPECT_NO_THROW(render_html(m));
  EXPECT_NO_THROW(render_trace(m));
}

// The lowest free row, as the scan over rows chose it: a row freed earlier is reused before a later one.
TEST(ReportModel, EachCompileTakesTheLowestFreeRow) {
  std::vector<CompileEvent> events = {at("miss", 0, 5000000), at("miss", 0, 1000000), at("miss", 0, 1000000),
                                      at("miss", 2000, 1000), at("miss", 2000, 1000)};
  const Model m = build_model(events, Selection{});
  EXPECT_EQ(m.lanes, (std::vector<std::uint32_t>{0, 1, 2, 1, 2}));
}

// No cacheable compile is no hit rate: JSON null, "n/a" in the other forms, as kache -s shows it; never 0 %.
TEST(ReportModel, NoCacheableCompileIsNoHitRateNotZero) {
  const Model m = build_model({at("passthrough", 1000, 1000)}, Selection{});
  EXPECT_FALSE(hit_rate(m).has_value());
  EXPECT_EQ(rate_text(m), "n/a");
  EXPECT_NE(render_json(m).find("\"hit_rate\": null"), std::string::npos);
  EXPECT_NE(render_markdown(m).find("| n/a |"), std::string::npos);
  EXPECT_NE(render_text(m).find("hit rate n/a"), std::string::npos);
  EXPECT_NE(render_html(m).find("<td>n/a</td>"), std::string::npos);
  EXPECT_EQ(render_markdown(m).find("0.0 %"), std::string::npos);
}

// A cause this kache does not know is free text from the log: in Markdown it is a table cell's text,
// never a raw code span that a backtick closes (and HTML or a pipe then breaks out of).
TEST(ReportModel, AHostileCauseNameStaysTextInMarkdown) {
  const std::string hostile = "x`|<img src=x onerror=alert(1)>|[y](http://e.example)`";
  const Model m = build_model({at("miss", 1000, 1000, hostile)}, Selection{});
  const std::string md = render_markdown(m);
  EXPECT_EQ(md.find("<img"), std::string::npos) << md;
  EXPECT_EQ(md.find('`'), md.find("`kache -s`")) << md;  // the one code span is kache's own words
  EXPECT_EQ(md.find("[y](http"), std::string::npos) << md;  // a link's brackets are escaped: text, not a link
  EXPECT_NE(md.find("\\[y\\](http"), std::string::npos) << md;
  const auto row = md.find("| x&#96;");
  ASSERT_NE(row, std::string::npos) << md;
  const std::string line = md.substr(row, md.find('\n', row) - row);
  std::size_t cells = 0;
  for (std::size_t i = 0; i < line.size(); ++i) cells += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
  EXPECT_EQ(cells, 6u) << line;  // five cells, as the header
}

// A timeline draws at most 2000 bars and says how many compiles it left out.
TEST(ReportModel, ATimelineOfManyCompilesIsBounded) {
  std::vector<CompileEvent> events;
  for (int i = 0; i < 2500; ++i) events.push_back(at("hit", 1000 + i, 1000 + static_cast<std::uint64_t>(i)));
  const Model m = build_model(events, Selection{});
  const std::string html = render_html(m);
  std::size_t bars = 0;
  for (auto at_ = html.find("<rect class=\"hit\""); at_ != std::string::npos; at_ = html.find("<rect class=\"hit\"", at_ + 1))
    ++bars;
  EXPECT_EQ(bars, 2000u);
  EXPECT_NE(html.find("500 shorter ones are left out"), std::string::npos);
}

}  // namespace
}  // namespace kache::commands::report
