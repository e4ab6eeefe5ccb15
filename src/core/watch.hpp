#pragma once
// Which paths must stay absent for a recorded dependency closure to still be what the compiler reads.
//
// The compiler picks the first match along its include search path. A recorded header h found in
// search directory S as S/rel would be shadowed if T/rel appeared in another search directory T, or if
// a header named by a __has_include appeared anywhere on the path. For each such candidate the nearest
// missing ancestor is recorded (a missing directory stands for everything below it); a lookup then only
// has to confirm those paths still do not exist. Candidates in every other search directory are taken,
// not only earlier ones: that over-approximates (a harmless extra miss), never under-approximates.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

// Targets of literal __has_include(<x>) / __has_include("x") (and _next, and macro wrappers such as
// _CCCL_HAS_INCLUDE(<x>)) in a file's text. Sets `opaque` when a __has_include takes a computed
// argument outside a #define: then no finite watch list is known to be complete.
void scan_has_include(std::string_view text, std::vector<std::string>& names, bool& opaque);

// closure: absolute paths of every file the compile read, as the compiler spelled them.
// search_dirs: absolute directories of the include search path, spelled as given (cwd-joined).
// system_dirs: directories whose content belongs to the toolchain (their files' own directories are
// not added as quote-include directories).
struct WatchSet {
  std::vector<std::string> absent;  // must still not exist
  // Toolchain directories whose identity (mtime/ctime/inode) must be unchanged: adding any entry to a
  // directory changes it, so one stat stands for every candidate below it that does not exist. Used
  // only for system directories, which no build writes into (a build directory's mtime moves with every
  // object written, so project directories get per-path absent checks instead).
  std::vector<std::string> dirs;
};

// not_before_ns: a directory whose mtime or ctime is at or after this moment may still change within
// the same clock tick, so its candidates are recorded as absent paths instead.
WatchSet watch_set(const std::vector<std::string>& closure, const std::vector<std::string>& search_dirs,
                   const std::vector<std::string>& system_dirs, const std::vector<std::string>& has_include_names,
                   std::int64_t not_before_ns);

}  // namespace kache::core
