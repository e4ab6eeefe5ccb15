// Fuzzes the event log's reader (core/events.hpp): arbitrary bytes as one line of
// <cache_dir>/events/events.jsonl. Properties: parsing never throws, and a record that parses writes
// back to a line that parses to the same fields (the format round-trips).
#include <string>

#include "core/events.hpp"
#include "fuzz_check.hpp"

using namespace kache;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::optional<core::CompileEvent> e = core::parse_event(kache::fuzz::as_view(data, size));
  if (!e) return 0;
  const std::string line = core::serialize_event(*e);
  KACHE_FUZZ_CHECK(!line.empty() && line.back() == '\n');
  const std::optional<core::CompileEvent> again = core::parse_event(std::string_view(line).substr(0, line.size() - 1));
  KACHE_FUZZ_CHECK(again.has_value());
  KACHE_FUZZ_CHECK(again->counts == e->counts && again->outcome == e->outcome && again->wall_us == e->wall_us);
  return 0;
}
