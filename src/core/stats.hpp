#pragma once
// Persistent counters shared by every kache process using one cache dir.
//
// Two files in the cache dir:
//   stats          the compacted totals, "name value" lines, replaced whole by rename;
//   stats.journal  one record per kache process, appended with a single O_APPEND write:
//                  "@k1 <xxh64 of the payload, 16 hex> name value name value ...\n".
// The hot path (every hit) is open + flock(LOCK_SH) + write + lseek + close: no read-modify-write and no
// exclusive lock, so concurrent processes never wait for each other. The shared flock only keeps a
// record from being written while a compaction (LOCK_EX on the journal: fold the journal into `stats`,
// then truncate it) or a reset runs; a writer blocked behind one appends to the truncated journal and
// is counted. A reader takes LOCK_SH too, so it never sees a record both folded and still journalled.
// A record that is cut short (crash, full disk) or damaged fails its checksum and is ignored.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/reasons.hpp"

namespace kache::core {

struct StatsSnapshot {
  std::map<std::string, std::uint64_t> counters;  // e.g. "hits", "misses", "passthrough", "errors"
  std::uint64_t get(const std::string& name) const;
};

// Well-known counter names. Passthrough reasons are counted as "passthrough" plus
// "passthrough.<reason>"; errors as "errors" plus "error.<what>"; misses not stored as
// "not_stored.<why>" (count_reason below); every reason is a row of core/reasons.cpp.
namespace counter {
inline constexpr const char* kHits = "hits";
inline constexpr const char* kMisses = "misses";
inline constexpr const char* kPassthrough = "passthrough";
inline constexpr const char* kErrors = "errors";
inline constexpr const char* kStored = "stored";
inline constexpr const char* kCorrupt = "corrupt_entries";
inline constexpr const char* kDirectHits = "direct_hits";
// Hits of the preprocessed-mode fallback (issue 39): compiles without a direct-mode record (a computed
// #include), found by their preprocessed output; also counted in "hits", never in "direct_hits".
inline constexpr const char* kPreprocessedHits = "preprocessed_hits";
// Compiles that failed on the user's code (the command then ran unchanged): not kache's errors.
inline constexpr const char* kCompileFailed = "compile_failed";
// Hits and misses of outputs other than objects, per kind, on top of hits/misses: "hits.fatbin",
// "misses.ptx" (the kind as CompileJob::output_kind names it).
inline constexpr const char* kKindHitsPrefix = "hits.";
inline constexpr const char* kKindMissesPrefix = "misses.";
// Results stored for this checkout only (also counted in "stored"), by why (issue 27):
// "stored_per_checkout.path-in-object" (the object names a root: __FILE__, assert(), the user's own
// prefix maps, a root too long for a placeholder), "stored_per_checkout.compressed-debug" (compressed
// debug sections, which no scan can see into).
inline constexpr const char* kStoredPerCheckoutPrefix = "stored_per_checkout.";
// nvcc.stages (issue 24), per kind ("ptx": cicc, "cubin": ptxas): stages a miss reused, ran, and the
// milliseconds the reused ones took when they ran; misses nvcc ran whole, by why.
inline constexpr const char* kStageHitsPrefix = "stage_hits.";
inline constexpr const char* kStageMissesPrefix = "stage_misses.";
inline constexpr const char* kStageMsSavedPrefix = "stage_ms_saved.";
inline constexpr const char* kStagesWholePrefix = "stages_whole.";
// Remote execution (docs/remote-execution.md): stages that ran on a remote worker, per kind
// ("remote_ran.ptx"), and those that ran here instead, by why ("remote_fallback.unreachable").
inline constexpr const char* kRemoteRanPrefix = "remote_ran.";
inline constexpr const char* kRemoteFallbackPrefix = "remote_fallback.";
}  // namespace counter

// What `kache -s` and `kache report` call hits, misses, passthrough, errors and failed compiles, read
// from counters (the totals, or a report's summed increments): one definition for both. `errors` are
// kache's own failures (a store that could not be written or read, a remote that failed, an internal
// error), most of them inside a compile that still hit or missed, so they are counted beside the
// compiles, never as a share of them.
struct OutcomeTotals {
  std::uint64_t hits = 0, misses = 0, passthrough = 0, errors = 0, compile_failed = 0;
  // Cacheable compiles: those kache looked up (hits and misses); passthroughs and failed compiles are not.
  std::uint64_t cacheable() const { return hits + misses; }
  // Percent of the cacheable compiles that hit; nullopt without any.
  std::optional<double> hit_rate() const;
};
OutcomeTotals outcome_totals(const std::map<std::string, std::uint64_t>& counters);

// Counts one reason (reasons.hpp) in increments: "passthrough" and "passthrough.<name>", "errors" and
// "error.<name>", "not_stored.<name>", or "compile_failed". A name the table lacks is counted the same.
void count_reason(std::map<std::string, std::uint64_t>& increments, ReasonCategory category, std::string_view name);

class StatsFile {
 public:
  // A journal longer than this is folded into the totals by the process that pushed it past.
  static constexpr std::uint64_t kCompactAt = 64 * 1024;

  explicit StatsFile(std::string cache_dir);
  // Adds the given increments (one journal record). Never throws: a failure to count must not fail a build.
  void add(const std::map<std::string, std::uint64_t>& increments) noexcept;
  // Totals plus every complete journal record.
  StatsSnapshot read() const;
  // Folds the journal into the totals and empties it (kache -s does this; add() when the journal is long).
  void compact();
  void zero();

 private:
  std::string dir_;
};

}  // namespace kache::core
