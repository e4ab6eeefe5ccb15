#pragma once
// The explain record every storing miss writes, and the cause finder that reads the records back: the
// engine's half of `kache explain` (commands/explain.cpp prints what these find).
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
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compiler/adapter.hpp"
#include "compiler/job_paths.hpp"
#include "core/manifest.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::engine::explain {
// The engine speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
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

using Fields = std::vector<std::pair<std::string, std::string>>;

// A compile's key fields as a record holds them: a macro definition's value as a digest
// ("-DAPI_KEY=#<16 hex>"), since the cache dir may be read by a group and a define may carry a token;
// two values still differ. Both sides of a comparison go through it.
Fields recorded_fields(const Fields& key_fields);

// The tie (StoredFor) saying which path expansion tied an entry's roots (Pipeline::add_expanded_roots).
constexpr std::string_view kExpandedTie = "expanded";

struct RecordedFile {
  std::string key_path;  // as the key names it (below a root: the root's fixed name)
  std::string path;      // in the build that stored the entry
  std::string digest;    // SHA-256 of the content, hex
};

struct Record {
  std::string key;        // storage key of the entry
  std::string direct;     // direct key (the fields below, hashed)
  std::string source;     // absolute
  std::string output;     // absolute
  std::string toolchain;  // human-readable description of the toolchain id
  std::int64_t created_ns = 0;
  Fields fields;                    // the direct key's fields, in order, then source-content
  std::vector<RecordedFile> files;  // the closure outside the toolchain's include directories
  // The closure inside them (the toolkit's and the host compiler's headers, hundreds of files that
  // change with the toolchain): one digest, so a record stays a few KiB. "" when unknown.
  std::string system_headers;
  // What the miss did with nvcc's stages (nvcc.stages): "reused ptx compute_80", "ran cubin sm_90",
  // "ran whole: depfile-mmd". Empty without the stage cache.
  std::vector<std::string> stages;
  StoredFor stored_for;  // what ties the entry to its checkout (empty: shared by every checkout)
  // The file whose computed #include or __has_include name left the entry without a direct-mode
  // record (no lookup finds it); "" when it has one.
  std::string computed_include_in;
  std::string file;      // where it was read from
};

// Splits a closure into the project's files (recorded one by one) and the toolchain's (one digest).
class ClosureSplit {
 public:
  // GCC names some toolkit headers by resolved paths, a build system's -isystem by lexically normal
  // ones: each directory by every spelling of it.
  explicit ClosureSplit(const std::vector<std::string>& system_dirs)
      : dirs_(compiler::system_dir_spellings(system_dirs)) {}
  // Returns true when the file went into the toolchain digest.
  bool add(const RecordedFile& f) {
    if (std::none_of(dirs_.begin(), dirs_.end(),
                     [&](const std::string& d) { return util::path_starts_with(f.path, d); })) {
      return false;
    }
    hasher_.add_field("file", f.key_path);
    hasher_.add_field("content", f.digest);
    ++count_;
    return true;
  }
  std::string finish() { return fmt::format("{} files, {}", count_, hasher_.finish().hex().substr(0, 16)); }

 private:
  std::vector<std::string> dirs_;
  util::Hasher hasher_;
  std::size_t count_ = 0;
};

// <cache_dir>/explain: where the records and their links are.
std::string explain_root(const std::string& cache_dir);

// The record stored at path (below cache_dir, or a link record() made to one); nullopt when it is not
// one (another schema, damaged, nested too deep, a FIFO or a link others planted).
std::optional<Record> read_record(const std::string& cache_dir, const std::string& path);

// The records linked from a source's directory, oldest first.
std::vector<Record> records_for(const std::string& cache_dir, const std::string& source);

// One way the closest entry differs from the compile being explained.
struct Difference {
  std::string field;               // key field name ("arg", "env:CPATH", "toolchain"), or "header"
  std::string path;                // for "header": the file
  std::optional<std::string> was;  // in the entry; nullopt: absent there
  std::optional<std::string> now;  // in this compile; nullopt: absent now
};

// The recorded closure against another record's (--last) or against the files on disk now.
// Differences name each file by its path in the build being explained (a root's fixed name resolved).
using DigestNow = std::function<std::pair<std::string, std::optional<std::string>>(const RecordedFile&)>;

struct Verdict {
  std::string status;  // "differs", "match", "computed-include", "no-entry", "passthrough", "error"
  std::string source, output, message;
  compiler::Passthrough passthrough;
  std::optional<Record> closest;
  std::size_t records = 0;
  std::vector<Difference> differences;
  std::string toolchain_now;
  std::vector<std::string> stages;  // --last: what the miss did with nvcc's stages
  StoredFor stored_for;             // what ties the explained compile's entry to its checkout
  std::string computed_include_in;  // status computed-include: the file with the computed name
  bool preprocessed_fallback = false;  // status computed-include: cache.preprocessed_fallback
};

// The verdict on an entry no direct lookup can find: `file` computes an #include name.
void say_computed_include(Verdict& v, const std::string& file);

// What would tie this compile's entry to its checkout, given a record's ties.
using StoredForNow = std::function<StoredFor(const Record&)>;

// Picks the record with the fewest differences (then the same output, then the newest) and fills
// the verdict with its differences, a difference in what ties an entry to its checkout included.
void compare(Verdict& v, const std::vector<Record>& candidates, const Fields& now_fields,
             const std::vector<RecordedFile>* now_files, const DigestNow& digest_now,
             const std::string& system_headers_now, const StoredForNow& stored_for_now);

// This build's path for a path as the key names it (a root's fixed name replaced by the root).
std::string path_now(const core::PathRoots& roots, const std::string& key_path);

// A record's ties as this compile would have them, if its object names what the record's did.
StoredFor stored_for_here(const StoredFor& recorded, const compiler::CompileJob& job);

}  // namespace kache::engine::explain
