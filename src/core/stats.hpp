#pragma once
// Persistent counters shared by every kache process using one cache dir.
// Stored in <cache_dir>/stats as "name value" lines, updated under an flock so that concurrent
// processes (make -j, ninja) never lose a count.
#include <cstdint>
#include <map>
#include <string>

namespace kache::core {

struct StatsSnapshot {
  std::map<std::string, std::uint64_t> counters;  // e.g. "hits", "misses", "passthrough", "errors"
  std::uint64_t get(const std::string& name) const;
};

// Well-known counter names. Passthrough reasons are counted as "passthrough" plus
// "passthrough.<reason>"; errors as "errors" plus "error.<what>"; misses not stored as
// "not_stored.<why>".
namespace counter {
inline constexpr const char* kHits = "hits";
inline constexpr const char* kMisses = "misses";
inline constexpr const char* kPassthrough = "passthrough";
inline constexpr const char* kErrors = "errors";
inline constexpr const char* kStored = "stored";
inline constexpr const char* kCorrupt = "corrupt_entries";
inline constexpr const char* kDirectHits = "direct_hits";
// Compiles that failed on the user's code (the command then ran unchanged): not kache's errors.
inline constexpr const char* kCompileFailed = "compile_failed";
}  // namespace counter

class StatsFile {
 public:
  explicit StatsFile(std::string cache_dir);
  // Adds the given increments atomically. Never throws: a failure to count must not fail a build.
  void add(const std::map<std::string, std::uint64_t>& increments) noexcept;
  StatsSnapshot read() const;
  void zero();

 private:
  std::string dir_;
};

}  // namespace kache::core
