// Fuzzes the stats file reader: arbitrary bytes as <cache_dir>/stats, read back through StatsFile.
// Properties: reading never throws for any content, an add() on top of any content is counted
// exactly (or saturates), and what add() writes reads back the same.
#include <unistd.h>

#include <string>

#include "core/stats.hpp"
#include "fuzz_check.hpp"
#include "util/fs.hpp"

using namespace kache;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    std::string d = "/tmp/kache-fuzz-stats." + std::to_string(::getpid());
    util::create_directories(d);
    return d;
  }();
  util::write_file(util::join_path(dir, "stats"), kache::fuzz::as_view(data, size));
  core::StatsFile stats(dir);
  const core::StatsSnapshot before = stats.read();
  stats.add({{"hits", 1}, {"passthrough.fuzz", 2}});
  const core::StatsSnapshot after = stats.read();
  const std::uint64_t h = before.get("hits");
  KACHE_FUZZ_CHECK(after.get("hits") == (h == UINT64_MAX ? h : h + 1));
  for (const auto& [name, value] : before.counters) {
    if (name == "hits" || name == "passthrough.fuzz") continue;
    KACHE_FUZZ_CHECK(after.get(name) == value);
  }
  // A second read of what add() wrote gives the same counters (the format round-trips).
  KACHE_FUZZ_CHECK(stats.read().counters == after.counters);
  return 0;
}
