#pragma once
// The direct-mode manifest: for one direct key (toolchain, flags, keyed environment, source), the
// dependency closures of earlier builds and the result each led to. A lookup proves one closure
// still matches the files on disk, without running any process.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/path_roots.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::core {

struct ManifestFile {
  RootedPath path;
  util::Digest hash;
  util::FileIdentity identity;  // when the hash was taken
  // The file's times were within the clock-tick margin of the moment it was hashed (or in the
  // future): a later edit could keep the same identity, so its content is checked on every lookup.
  bool racy = false;
};

// Names that must still be missing in one directory. When `guarded`, an unchanged directory identity
// proves them all missing with one stat (see AbsentGroup in core/watch.hpp); else, or when it moved,
// each name is checked. Guarded with no names (a toolchain directory): the identity must hold, or,
// when `listing` is set (another machine: another identity), the directory's names must be the ones
// listed under the guard (core/watch.hpp listing_digest).
struct AbsentDir {
  RootedPath dir;
  bool guarded = false;
  util::FileIdentity identity;
  std::vector<std::string> names;
  std::optional<util::Digest> listing;
  bool operator==(const AbsentDir&) const = default;
};

struct ManifestEntry {
  std::vector<ManifestFile> files;
  // Paths that did not exist when the entry was made and would change what the compiler reads if they
  // appeared (a header earlier in the search path, a __has_include target, a missing directory).
  std::vector<AbsentDir> absent;
  util::Digest result_key;
  // The object depends on the literal source path (e.g. rdc module ids, internal-linkage name hashes):
  // the result key then includes it.
  bool path_specific = false;
  // A dependency's absolute path lies outside every root and every directory keyed as written (e.g.
  // GCC printed a canonical path for a header found through a relative -isystem): the path recorded is
  // this checkout's own, so the result is stored per checkout (keyed by every root's path). Also set when
  // no scan can tell which roots the object names (compressed debug sections).
  bool checkout_specific = false;
  // The compile expanded __DATE__ (gcc, clang): the result is stored under the day too, so a lookup on
  // another day misses. Serialized as bit 1 of the path_specific byte.
  bool date_keyed = false;
  // The roots (by name: "/kache/src") whose paths the stored object names (__FILE__, assert()): the
  // result is stored under those roots' paths here, and only those, so every build directory of one
  // checkout (and any machine with the checkout at the same path) finds it, and no other checkout does.
  std::vector<std::string> object_roots;
  // A preprocessed-mode entry (issue 39): stored for a compile direct mode cannot record (a computed
  // #include), its result key made from the compiler's preprocessed output, which a lookup runs the
  // preprocessor to compare. It lists no files to verify: direct lookups skip it. Serialized as bit 2 of
  // the path_specific byte, in a manifest of format 8 (a kache reading format 7 would take it for a
  // direct entry whose empty closure always holds).
  bool preprocessed = false;
  std::int64_t created_ns = 0;
};

struct Manifest {
  std::vector<ManifestEntry> entries;  // most recent first
};

inline constexpr std::size_t kMaxManifestEntries = 16;

// Whether a file seen with `id` at file-clock time `now` may still change without its identity
// changing: its mtime or ctime lies in the current clock tick (within `margin` of `now`), or in the
// future (clock skew). Such a record is checked by content on every lookup.
// Times with no fraction of a second come from a file system that stores whole seconds (ext2/3, ext4
// with 128-byte inodes, NFS over those) or two (FAT reached through NFS, SMB or FUSE, whose statfs
// type is not FAT's), whatever its type says: a file rewritten within that span keeps its identity, so
// such an identity is trusted only two seconds after its times. (A nanosecond file system gives both
// times a zero fraction once in 10^18: only two seconds more caution.)
inline std::int64_t coarse_time_margin(const util::FileIdentity& id, std::int64_t margin) {
  constexpr std::int64_t kSecond = 1'000'000'000;
  if (id.mtime_ns % kSecond == 0 && id.ctime_ns % kSecond == 0) return std::max(margin, 2 * kSecond);
  return margin;
}

inline bool is_racy(const util::FileIdentity& id, std::int64_t now, std::int64_t margin) {
  margin = coarse_time_margin(id, margin);
  return id.mtime_ns >= now - margin || id.ctime_ns >= now - margin;
}

std::string serialize_manifest(const Manifest& m);
Manifest deserialize_manifest(std::string_view data);  // throws std::runtime_error when malformed
// Whether data is a manifest of an earlier format ("KMN1".."KMN6"): no damage, only a miss (the next
// store replaces it). Format 7 is current for manifests without preprocessed entries, which are written
// as before (a cache from before stays warm); format 8 is the same with preprocessed entries.
bool is_older_manifest(std::string_view data);
// Puts e first, dropping an older entry with the same result key and the oldest beyond the cap.
void manifest_add(Manifest& m, ManifestEntry e);

}  // namespace kache::core
