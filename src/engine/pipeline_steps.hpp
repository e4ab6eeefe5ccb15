#pragma once
// The pipeline's own header, private to app/ (and its unit test): the class whose steps pipeline.cpp (the
// run: plan -> key -> look up -> restore | run -> verify -> store), lookup.cpp (the hit path) and miss.cpp
// (run, verify, store) define.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/pipeline_store.hpp"
#include "compiler/adapter.hpp"
#include "core/config.hpp"
#include "core/entry.hpp"
#include "core/expansion_scan.hpp"
#include "core/invocation.hpp"
#include "core/manifest.hpp"
#include "core/outcome.hpp"
#include "core/stats.hpp"
#include "core/verified_identities.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"
#include "util/result.hpp"

namespace kache::engine::pipeline_steps {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

using Counts = std::map<std::string, std::uint64_t>;

// Writes all of data to fd (a hit's or a miss's replayed stdout and stderr).
void write_all(int fd, std::string_view data);
// Adds each directory's real path to dirs, where it differs.
void add_real_paths(std::vector<std::string>& dirs);
// Whether a path as spelled climbs out of a directory it names ("nodir/../a.o"): the kernel needs
// that directory to exist, though the path's normal form ("a.o") no longer names it.
bool climbs_out_of_named_dir(std::string_view path);
// Whether a path has a "." or ".." component: its spelling and its meaning can differ.
bool has_dot_component(std::string_view path);

// The margin by which file times can trail the clock, per filesystem (st_dev).
class Margins {
 public:
  std::int64_t for_file(const std::string& path, std::uint64_t dev) {
    std::lock_guard<std::mutex> lock(mu_);  // the closure is hashed from several threads
    auto it = by_dev_.find(dev);
    if (it != by_dev_.end()) return it->second;
    const std::int64_t m = util::file_time_margin_ns(path);
    by_dev_.emplace(dev, m);
    return m;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::uint64_t, std::int64_t> by_dev_;
};

// __DATE__ as GCC and clang expand it at time t without SOURCE_DATE_EPOCH: "Dec  6 2026", local time.
std::string date_macro_text(std::time_t t);

class Pipeline {
 public:
  Pipeline(const Invocation& inv, const Config& cfg, compiler::Adapter& adapter, Counts& counts, PipelineStore& store)
      : inv_(inv),
        cfg_(cfg),
        adapter_(adapter),
        counts_(counts),
        store_(store),
        verified_(util::join_path(cfg.cache_dir, "identities")) {}

  // Returns the exit code, or nullopt when the invocation must run unchanged (passthrough_ is set).
  std::optional<int> run();
  // What the event log records of this compile beyond its counts (issue 32; core/events.hpp).
  struct EventFacts {
    std::string source;    // relative to the working directory; empty before a job was planned
    std::string language;  // the key's "language" field, if any
    std::uint64_t miss_cost_ms = 0;  // a miss: its own wall time; a hit: the stored miss's
    std::string cause, cause_detail;
    std::vector<std::string> stages;
  };
  EventFacts event_facts() const;
  const compiler::Passthrough& passthrough() const { return passthrough_; }
  int corrupt_found() const { return store_.corrupt_found(); }
  void add_storage_counts(Counts& counts) const {
    store_.add_counts(counts);
    // The stores count values read (a manifest and an object are two); `remote hits` counts compiles
    // served from a remote: one per hit, and values read are `remote reads`.
    if (const auto it = counts.find("remote_hits"); it != counts.end() && it->second > 0) {
      counts["remote_reads"] += it->second;
      it->second = counts[counter::kHits] > 0 ? 1 : 0;
    }
  }

 private:
  util::Digest direct_key();
  std::optional<int> try_hit();
  // How a lookup proves an entry: its files verified (direct), or its result key equal to one made now
  // from the compiler's dependency listing (listed: cache.direct_mode = false) or from its preprocessed
  // output (preprocessed: the fallback for compiles without a direct-mode record, issue 39).
  enum class Via { direct, listed, preprocessed };
  std::optional<int> serve(Manifest& manifest, Via via, const std::optional<util::Digest>& key);
  std::optional<Manifest> read_manifest();
  // What restore() made of one stored entry.
  enum class Restore { hit, next_entry, no_hit };
  // What a hit prints: the stored compile's stdout and stderr, with this build's paths.
  struct Replay {
    std::string stdout_text, stderr_text;
  };
  Restore restore(storage::Parts& parts, const util::Digest& key, Replay& replay);
  std::optional<util::Digest> listed_result_key();
  bool verify(ManifestEntry& entry, bool& refreshed);
  bool verify_files(ManifestEntry& entry, bool& refreshed);
  bool verify_absent(ManifestEntry& entry, bool& refreshed);
  bool same_listing(const std::string& dir, const util::Digest& listing, util::FileIdentity& guard, bool& refreshed);
  util::Digest result_key(const std::vector<ManifestFile>& files) const;
  std::optional<util::Digest> storage_key(const ManifestEntry& entry) const;
  std::optional<std::string> outside_roots(const std::string& path) const;
  std::optional<compiler::Passthrough> unwritable_destination() const;
  std::optional<compiler::Passthrough> special_destination() const;
  std::optional<compiler::Passthrough> special_source() const;
  std::optional<compiler::Passthrough> destination_through_link() const;

  // The steps of a miss, in the order miss() takes them.
  struct Compiled {
    util::ProcessResult result;
    std::string closure_text;  // the adapter's full dependency listing; empty: the miss's depfile is it
    std::int64_t start = 0;    // the file clock before the compiler started
    // The wall clock (whole seconds) before the first and after the last process of the miss: the
    // times __DATE__/__TIME__ can have taken when SOURCE_DATE_EPOCH is not honoured.
    std::time_t wall_start = 0, wall_end = 0;
    // AssemblerInputs::checked: the preprocessed source may make the assembler open a file (or could
    // not be checked).
    bool assembler_unchecked = false;
    // That check's preprocessed source: every time macro expanded, however its result is used.
    std::string preprocessed;
    // The time macros the compile expanded, as the adapter read them from that run (nullopt: unknown).
    std::optional<compiler::TimeMacros> time_macros = compiler::TimeMacros::none;
  };
  struct HashedClosure {
    std::vector<ManifestFile> files;
    std::vector<std::string> has_include;  // #include and __has_include names found in the closure
    bool opaque = false;                   // a computed name: no direct-mode record is possible
    std::string opaque_file;               // the first file with one (explain and the report name it)
    // The paths the compile may have expanded (core/expansion_scan.hpp; read from the project's files
    // and the key's values, see add_expanded_roots): the closure indices of files that may expand their
    // own name, and whether the main source's or any file's name may be expanded.
    std::vector<std::size_t> expands_here;
    std::vector<std::string> path_macros;  // macros whose bodies expand __FILE__ (resolve_path_macros)
    bool expands_base = false;
    bool expands_anywhere = false;
    std::string expansion;  // the first found, "<spelling> in <file>", for explain
    PasteScans pastes;      // what the project's files may build with ##
    std::string paste_file;  // the first file with a ## that may build a __has_include
  };
  struct ClosureSlice {
    HashedClosure hashed;
    std::size_t failed_at = SIZE_MAX;
    std::optional<Failure> failure;
  };
  struct Installed {
    std::string object;  // the object's bytes as the compiler wrote them (placeholders, not yet this checkout's roots)
    std::vector<PathPatch> patches;  // where those placeholders lie (replaced in the installed file)
    std::string stdout_text, stderr_text;
  };
  // Why a stored entry is for this checkout only ("" when it is shared), and what ties it here: the
  // roots (by name) its object names, or every root (a scan cannot tell).
  struct PerCheckout {
    std::string why;
    std::vector<std::string> roots;
    bool all_roots = false;
    std::string expanded;  // the expansion that tied roots beyond those the object names (explain)
  };
  int miss();
  compiler::MissPaths miss_paths(const std::string& scratch_dir) const;
  Outcome<Compiled> compile(const compiler::MissPaths& paths);
  util::ProcessResult run_miss(const compiler::MissPaths& paths, const std::vector<std::string>& argv,
                               const util::Environment& env);
  std::optional<util::ProcessResult> run_remote_compile(const compiler::MissPaths& paths,
                                                        const std::vector<std::string>& argv,
                                                        const util::Environment& env);
  int compile_failed(const Failure& failure);
  std::vector<std::string> closure_files(const std::string& closure_text, const std::string& dep_text);
  Outcome<std::string_view> hash_input(const std::string& path, util::ReadBuffer& buffer, ManifestFile& f,
                                       std::int64_t start);
  bool is_system(const std::string& path) const;
  void hash_slice(const std::vector<std::string>& closure, std::size_t begin, std::size_t end, std::int64_t start,
                  ClosureSlice& out);
  Outcome<HashedClosure> hash_closure(const std::vector<std::string>& closure, std::int64_t start);
  void note_expansions(const std::string& path, std::size_t index, std::string_view content,
                       HashedClosure& out) const;
  void weigh_expansions(HashedClosure& all) const;
  void resolve_path_macros(const std::vector<std::string>& closure, HashedClosure& all) const;
  void add_expanded_roots(const std::vector<std::string>& closure, const HashedClosure& hashed,
                          PerCheckout& per_checkout) const;
  bool macro_mapped(const std::string& path) const;
  Installed install_outputs(const compiler::MissPaths& paths, const std::string& scratch_dir,
                            const util::ProcessResult& r, const std::string& dep_text, std::string object);
  Outcome<PerCheckout> shareable_object(const std::string& object, const std::string& scratch_dir) const;
  // The roots bytes name that the key does not hold (the object scan of shareable_object).
  void add_unkeyed_roots(std::string_view bytes, PerCheckout& per_checkout) const;
  bool patches_for_here(const CacheEntryView& ce, std::vector<PathPatch>& patches) const;
  Outcome<Done> toolchain_held() const;
  Outcome<Done> templatable_depfile(const std::string& dep_text) const;
  std::string restored_depfile(const CacheEntryView& ce) const;
  Outcome<Done> no_precompiled_header(const std::vector<std::string>& closure) const;
  Outcome<Done> add_assembler_inputs(const compiler::MissPaths& paths, const Compiled& compiled,
                                     std::vector<std::string>& closure) const;
  Outcome<bool> keyable_time_macros(const Compiled& compiled) const;
  Outcome<Done> no_unpinned_time(bool date_keyed, const Installed& installed, const Compiled& compiled,
                                 const std::vector<ManifestFile>& files) const;
  ManifestEntry describe_entry(std::vector<ManifestFile> files, const std::vector<std::string>& closure,
                               const std::string& object, const PerCheckout& per_checkout) const;
  bool record_direct_lookup(ManifestEntry& entry, const std::vector<std::string>& closure,
                            const std::vector<std::string>& has_include, bool opaque, std::int64_t start);
  bool record_named_targets(ManifestEntry& entry, const std::vector<std::string>& present, std::int64_t start);
  // Takes the object out of installed.
  CacheEntry cache_entry(const std::string& dep_text, Installed& installed) const;
  // Whether a lookup can find the entry (a direct-mode or a preprocessed record was made), and the file
  // whose computed #include name left it without a direct-mode record ("" when none did).
  struct Unrecorded {
    bool in_manifest = true;
    std::string computed_include_in;
  };
  void store_result(ManifestEntry entry, const CacheEntry& ce, const Unrecorded& unrecorded,
                    const PerCheckout& per_checkout);
  storage::StorageStatus add_to_manifest(ManifestEntry entry);

  // The preprocessed-mode fallback (issue 39; preprocessed.cpp): what the compile's preprocessing gives.
  struct Preprocessed {
    util::Digest key;                // the result key its outputs make (with the direct key)
    std::vector<std::string> files;  // the files its line markers name: absolute, lexically normal
  };
  util::Result<Preprocessed, std::string> preprocess();
  // Makes entry a preprocessed entry (its result key the preprocessing's) when the files the
  // preprocessing names are exactly the closure the compile read, unchanged since hashed; false (and
  // entry unchanged) when not.
  bool record_preprocessed(ManifestEntry& entry, const std::vector<std::string>& closure);

  // Why this miss missed (core/reasons.hpp MissCause), decided before its own record is stored.
  void decide_miss_cause(const std::vector<ManifestFile>& files);
  std::uint64_t elapsed_ms() const;

  const Invocation& inv_;
  const Config& cfg_;
  compiler::Adapter& adapter_;
  Counts& counts_;
  PipelineStore& store_;  // the stores of the configuration (LayeredPipelineStore), or a test's
  compiler::CompileJob job_;
  compiler::Passthrough passthrough_;
  util::Digest direct_;
  std::string manifest_key_;
  Margins margins_;
  // What the miss's stages did (reused, ran, ran whole), for `kache explain`.
  std::vector<std::string> stage_notes_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  util::Digest source_digest_;      // the source's content, as the direct key hashed it
  std::uint64_t stored_cost_ms_ = 0;  // a hit: what the miss that stored the entry took
  std::string cause_, cause_detail_;
  bool preprocessed_lookup_ = false;
  // A remote action built this result and the execution service is not trusted: stored locally only.
  bool local_only_ = false;  // the lookup ran the preprocessed fallback (and it missed)
  // What that lookup's preprocessing gave, and the file clock before it began (the miss's start then).
  std::optional<Preprocessed> preprocessed_;
  std::int64_t preprocessed_began_ = 0;
  VerifiedIdentities verified_;  // shared across this cache dir's compiles; flushed when the pipeline ends
};

}  // namespace kache::engine::pipeline_steps
