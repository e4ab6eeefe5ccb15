#pragma once
// The event log: one JSON Lines record per compile, what `kache report` reads (issue 32).
//
//   <cache_dir>/events/events.jsonl     appended, one write() with O_APPEND per compile, no lock
//   <cache_dir>/events/events.1.jsonl   the previous file: past kMaxFileBytes the writer that pushed
//                                       it past renames the current file here (replacing the older one),
//                                       so the log never holds more than twice that
//   <cache_dir>/events/mark             "<unix ms> <label>": `kache report --mark`, where
//                                       `kache report --since-mark` starts
//
// A record ("v": 1) holds no secret and no command line (unless events.command_line is set): time,
// build id, tool, language, the source relative to the working directory, outcome and reason, the
// miss's cause, wall and CPU time, the miss cost (a hit: the cost of the miss that stored its entry),
// and the stats increments of the compile ("counts": the same names and values `kache -s` adds up, so
// a report's totals are the statistics' deltas; nvcc stages and remote reads are counters beside the
// compile, never extra hits). Readers skip lines they cannot parse (a write cut short, or nested
// deeper than kMaxEventNesting) and keys they do not know; a new key is a compatible change, a changed
// meaning a new "v".
//
// The cache dir may be shared with a group: every file here is opened through util::Beneath below
// the cache dir (no link followed, no FIFO waited on, regular files only); a file refused is skipped,
// a compile goes on without its record. No argument value is ever written (cause_detail names a flag,
// never its value; the command line only with events.command_line from the user's own configuration).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

inline constexpr int kEventVersion = 1;
// A record nests two deep ("counts" in the record); a deeper line is damage, never parsed.
inline constexpr std::size_t kMaxEventNesting = 8;

struct CompileEvent {
  std::int64_t time_ms = 0;  // when kache started (Unix milliseconds)
  std::string build;         // KACHE_BUILD_ID, else "pg<process group>"
  std::uint32_t pid = 0;
  std::string tool;      // the compiler as named ("nvcc", "g++")
  std::string language;  // "c", "c++", "cuda", "hip", "asm", or "" when unknown
  std::string source;    // relative to the working directory (never the checkout's absolute root)
  std::string outcome;   // "hit", "miss", "passthrough", "error", "compile_failed"
  std::string reason;    // the reason-table name (passthrough.X, error.X, not_stored.X), or ""
  std::string cause;     // a miss's cause (core/reasons.hpp miss_causes), or ""
  std::string cause_detail;
  std::uint64_t wall_us = 0;       // kache's whole run, the compiler included (a passthrough: up to the exec)
  std::uint64_t cpu_us = 0;        // kache's CPU and its children's (the compiler a miss ran)
  std::uint64_t miss_cost_ms = 0;  // a miss: its wall time; a hit: the stored miss's (0: unknown)
  bool direct = true;              // cache.direct_mode
  std::vector<std::string> stages;              // what the miss did with nvcc's stages
  std::map<std::string, std::uint64_t> counts;  // the stats increments of this compile
  std::vector<std::string> command;             // only with events.command_line
};

// The outcome a compile's stats increments describe, and its reason ("passthrough.link"), if any.
std::string event_outcome(const std::map<std::string, std::uint64_t>& counts);
std::string event_reason(const std::map<std::string, std::uint64_t>& counts);
// "cuda", "c++", "c", "hip", "asm" from a key's "language" value or, without one, the source's suffix.
std::string event_language(std::string_view keyed_language, std::string_view source, std::string_view tool);
// The source as a record names it: relative to the working directory ("../src/a.c"; both absolute and
// lexically normal), by string alone (no system call: this runs on every compile).
std::string event_source(std::string_view source, std::string_view cwd);
// KACHE_BUILD_ID when set (non-empty), else "pg<N>": the process group of the build (build_group).
std::string event_build_id(const char* build_id_env);

// What /proc/<pid>/stat says of a process: its name, parent and process group.
struct ProcStat {
  std::string comm;
  long ppid = 0;
  long pgrp = 0;
};
std::optional<ProcStat> parse_proc_stat(std::string_view stat);
// The process group that stands for the build of a compile (pid, its parent ppid, its group pgrp): pgrp,
// unless a build tool gave the command a group of its own (ninja runs each command in a new group: led
// by the compile itself, or by the /bin/sh -c running it), then the group of the process above that
// leader (ninja's: one `ninja` typed at a prompt). stat_of and pgid_of read other processes.
long build_group(long pid, long ppid, long pgrp, const std::function<std::optional<ProcStat>(long)>& stat_of,
                 const std::function<long(long)>& pgid_of);

std::string serialize_event(const CompileEvent& e);  // one line, with its newline
std::optional<CompileEvent> parse_event(std::string_view line);

class EventLog {
 public:
  static constexpr std::uint64_t kMaxFileBytes = 4ull << 20;

  explicit EventLog(std::string cache_dir);
  std::string dir() const;
  // One write with O_APPEND. Never throws: a diagnostic must not fail a build.
  void append(const CompileEvent& e, std::uint64_t max_file_bytes = kMaxFileBytes) const noexcept;
  // What a reading could not use: files refused (a FIFO, a link, a directory, too large: "events.jsonl
  // is a FIFO") and lines that are no record (cut short, foreign, nested too deep).
  struct Unread {
    std::vector<std::string> refused_files;
    std::size_t damaged_lines = 0;
  };
  // Every readable record, oldest first (the rotated file, then the current one).
  std::vector<CompileEvent> read(Unread* unread = nullptr) const;
  void mark(std::int64_t time_ms, const std::string& label) const;
  // The last mark's time and label; nullopt when none was set.
  std::optional<std::pair<std::int64_t, std::string>> last_mark() const;
  // Bytes the log takes on disk.
  std::uint64_t size() const;
  // kache -c: the rotated file goes; kache -C: the whole log.
  void drop_rotated() const;
  void clear() const;

 private:
  std::string cache_dir_;
};

}  // namespace kache::core
