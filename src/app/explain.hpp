#pragma once
// `kache explain`: which key field made a compile miss.
//
// A miss that stores an entry also writes a small record of that entry's key fields (the same named
// fields KACHE_LOG=kache=trace prints: flags, keyed environment variables, the toolchain id, paths),
// what the miss did with nvcc's stages (reused, ran), the source's digest and the closure as (path, digest) pairs, never file contents; the headers
// inside the toolchain's include directories (hundreds for a thrust TU) as one digest and a count,
// so a record stays a few KiB:
//
//   <cache_dir>/explain/<k0>/<k1k2>/<storage key>.json                  the record, stored by the local
//                                                                       store beside its entry's shard:
//                                                                       counted in the cache size and
//                                                                       evicted with the entry
//   <cache_dir>/explain/<sha256(source path)[:16]>/<storage key>.json   a symbolic link to it, at most
//                                                                       kRecordsPerSource per source
//   <cache_dir>/explain/p-<sha256(keyed source, content)[:16]>/<key>.json  the same link by a name every
//                                                                       checkout of the source shares
//   <cache_dir>/explain/last                                            the last stored miss's record
//
// Only a storing miss writes here (a miss already ran nvcc for seconds); a hit never touches it.
// `kache explain -- nvcc ARGS...` computes the same fields for a command as a lookup would (planning
// and the memoized toolchain probe; no compile) and compares them with the records of the same
// source, field by field, against the closest one. `kache explain --last` does the same for the last
// stored miss against the other records of its source.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/adapter.hpp"
#include "core/manifest.hpp"

namespace kache::app::explain {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

// Records kept per source: enough for the configurations of one file a build tree compiles (debug,
// release, a few architecture sets) without letting one file fill the directory.
constexpr std::size_t kRecordsPerSource = 8;

// Writes the record of an entry just stored through store_record (which returns the path it was stored
// at, below cache_dir), and links it from the source's directory. Failures are logged and ignored: it
// is a diagnostic.
// stored_for: what ties an entry stored per checkout to this one, as (what, path here) pairs: a root's
// name and its path ("/kache/src", "/w/p/src"), "source" and the source's real path (-rdc), or "every
// root" and the roots' paths. Empty for an entry every checkout shares.
using StoreRecord = std::function<std::string(std::string_view text)>;
using StoredFor = std::vector<std::pair<std::string, std::string>>;
void record(const std::string& cache_dir, const compiler::CompileJob& job, const std::string& direct_key,
            const std::string& storage_key, const std::vector<ManifestFile>& files,
            const std::vector<std::string>& stages, const StoredFor& stored_for,
            const StoreRecord& store_record, const std::string& computed_include_in = "") noexcept;

// The source's real path, which nvcc's -rdc module id and cudafe++'s _INTERNAL_ names hash (measured,
// nvcc 13: the same id through a symbolic link, from any working directory or spelling); its path as
// given when it cannot be resolved.
std::string real_source_path(const compiler::CompileJob& job);

// What ties an entry to this checkout, as record() takes it (empty for an entry every checkout shares).
// expanded: the path expansion that tied roots (Pipeline::add_expanded_roots), "" when none did; kept
// as the tie "expanded", which names no path and so never differs between builds.
StoredFor ties_of(const ManifestEntry& entry, const compiler::CompileJob& job, const std::string& expanded = "");

// Why a miss missed, as a row of core/reasons.hpp's miss causes with a detail ("-DBUILD_TIME"): the
// closest entry recorded for its source, compared field by field and file by file (files: the miss's
// hashed closure); without one, the closest entry of the same source (as keyed, same content) in another
// checkout, where an absolute path that differs is a path keyed per checkout; else a new source. Reads
// those records (a few KiB each; a miss only). Never throws. preprocessed_lookup: the lookup ran the
// preprocessed fallback, so a computed #include is not why it missed (the preprocessed output changed:
// the headers that differ say how).
struct Cause {
  std::string name, detail;
};
Cause miss_cause(const std::string& cache_dir, const compiler::CompileJob& job, const std::string& source_digest,
                 const std::vector<ManifestFile>& files, bool preprocessed_lookup = false) noexcept;

// The `kache explain` command; args are the words after "explain". Returns the exit status.
int run(const std::vector<std::string>& args);

}  // namespace kache::app::explain
