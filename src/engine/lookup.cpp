// The hit path: a manifest's entries verified against the files here, and the first that holds restored.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "engine/pipeline_steps.hpp"
#include "core/depfile.hpp"
#include "core/entry.hpp"
#include "core/entry_format.hpp"
#include "core/log.hpp"
#include "core/manifest.hpp"
#include "core/path_roots.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "core/verified_identities.hpp"
#include "core/watch.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"
#include "util/scoped_file.hpp"

namespace kache::engine::pipeline_steps {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

// Threads for the stat calls of a large closure (see util::stat_identities).
constexpr unsigned kStatThreads = 4;

bool Pipeline::verify(ManifestEntry& entry, bool& refreshed) {
  return verify_files(entry, refreshed) && verify_absent(entry, refreshed);
}

// Every file the entry records is here with the content it had: by its identity, else by content.
bool Pipeline::verify_files(ManifestEntry& entry, bool& refreshed) {
  auto& log = core::log();
  const auto& roots = job_.roots.roots();
  // A path outside every root (the toolkit's and the system's headers: nearly all of a thrust+cub
  // closure) is recorded whole and stat'ed as recorded; only paths below a root are joined, into
  // `joined`, filled before any pointer into it is taken.
  std::vector<std::string> joined;
  for (const auto& f : entry.files) {
    if (f.path.root >= static_cast<int>(roots.size())) return false;
    if (f.path.root >= 0) joined.push_back(job_.roots.join(f.path));
  }
  std::vector<const char*> paths;
  paths.reserve(entry.files.size());
  for (std::size_t i = 0, j = 0; i < entry.files.size(); ++i) {
    const RootedPath& p = entry.files[i].path;
    paths.push_back(p.root >= 0 ? joined[j++].c_str() : p.rest.c_str());
  }
  const auto ids = util::stat_identities(paths, kStatThreads);
  for (std::size_t i = 0; i < entry.files.size(); ++i) {
    auto& f = entry.files[i];
    const char* path = paths[i];  // stays valid: only f's identity and racy flag change below
    const auto& id = ids[i];
    if (!id) {
      log.debug("direct lookup: {} is gone", path);
      return false;
    }
    if (*id == f.identity && !f.racy) continue;
    // The identity moved (or was never trustworthy): the content decides, as verified by an earlier
    // compile of this cache dir under this same identity, or read now.
    if (verified_.verified(VerifiedIdentities::Kind::file, path, *id, f.hash) &&
        !is_racy(*id, util::file_clock_now_ns(), margins_.for_file(path, id->dev))) {
      f.identity = *id;
      f.racy = false;
      refreshed = true;
      continue;
    }
    // The file clock before the read decides whether the identity stands for what is read: a write
    // after the read that lands within the identity's clock tick keeps the identity, so a tick still
    // running when the read began leaves the file racy (a clock read after it would call it settled).
    const std::int64_t read_began = util::file_clock_now_ns();
    // Read as the file stat'ed above: bytes of another file (the path repointed meanwhile) must not be
    // taken for this identity's content, here or in the record of verified identities.
    const std::optional<util::Digest> read = util::hash_file_as(path, *id);
    if (!read) {
      log.debug("direct lookup: {} changed while it was read", path);
      return false;
    }
    const util::Digest& h = *read;
    if (!(h == f.hash)) {
      log.debug("direct lookup: {} changed", path);
      return false;
    }
    f.identity = *id;
    f.racy = is_racy(*id, read_began, margins_.for_file(path, id->dev));
    if (!f.racy) verified_.add(VerifiedIdentities::Kind::file, path, *id, h);
    refreshed = true;
  }
  return true;
}

// Every name found missing when the entry was stored is missing still: its directory is unchanged
// (guarded), or each name is looked up.
bool Pipeline::verify_absent(ManifestEntry& entry, bool& refreshed) {
  auto& log = core::log();
  const auto& roots = job_.roots.roots();
  for (auto& a : entry.absent) {
    if (a.dir.root >= static_cast<int>(roots.size())) return false;
    const std::string dir = job_.roots.join(a.dir);
    if (a.guarded) {
      auto id = util::stat_identity(dir);
      if (id && *id == a.identity) continue;  // no entry created, removed or renamed in it since
      if (a.names.empty()) {
        // Another identity (another machine's toolchain, or a directory touched): the same names
        // prove every name that was missing still is (as verified by an earlier compile of this cache
        // dir under this same identity, or read now).
        if (id && id->is_dir && a.listing &&
            verified_.verified(VerifiedIdentities::Kind::listing, dir, *id, *a.listing) &&
            !is_racy(*id, util::file_clock_now_ns(), margins_.for_file(dir, id->dev))) {
          a.identity = *id;
          refreshed = true;
          continue;
        }
        if (id && id->is_dir && a.listing && same_listing(dir, *a.listing, a.identity, refreshed)) continue;
        log.debug("direct lookup: toolchain directory {} changed", dir);
        return false;
      }
    }
    for (const auto& name : a.names) {
      const std::string path = dir == "/" ? "/" + name : dir + "/" + name;
      if (util::exists(path)) {
        log.debug("direct lookup: {} appeared", path);
        return false;
      }
    }
  }
  return true;
}

// A guarded toolchain directory whose identity moved (another machine's copy of the toolchain): its
// names now against those listed under the guard. When they match and the directory held still while
// they were read, outside the clock tick, its current identity becomes the guard, so that the next
// lookup here is one stat again.
bool Pipeline::same_listing(const std::string& dir, const util::Digest& listing, util::FileIdentity& guard,
                            bool& refreshed) {
  const auto before = util::stat_identity(dir);
  if (!before || !before->is_dir) return false;
  const std::int64_t clock = util::file_clock_now_ns();
  // The names of the directory stat'ed above, unchanged while read (not another one the path reached
  // meanwhile).
  const auto now = listing_digest_as(dir, *before);
  if (!now || !(*now == listing)) {
    core::log().debug("direct lookup: the names in toolchain directory {} changed", dir);
    return false;
  }
  if (!is_racy(*before, clock, margins_.for_file(dir, before->dev))) {
    guard = *before;
    refreshed = true;
    verified_.add(VerifiedIdentities::Kind::listing, dir, *before, listing);
  }
  return true;
}

std::optional<int> Pipeline::try_hit() {
  // Staging beside the destinations checks their normal forms only; a spelling through a directory
  // (rare) is checked as the kernel resolves it. A failure leaves the verdict to miss().
  if ((climbs_out_of_named_dir(job_.output_written) || climbs_out_of_named_dir(job_.depfile_written)) &&
      unwritable_destination()) {
    return std::nullopt;
  }
  std::optional<Manifest> manifest = read_manifest();
  if (!manifest) return std::nullopt;
  const auto count = [&](bool preprocessed) {
    return std::count_if(manifest->entries.begin(), manifest->entries.end(),
                         [&](const ManifestEntry& e) { return e.preprocessed == preprocessed; });
  };
  // cache.direct_mode = false: nothing recorded about the files is trusted (their identities, the names
  // found missing); the compiler lists the dependencies now and their contents give the result key, which
  // an entry must match (the manifest only says which entries this command and source have).
  if (count(false) > 0) {
    std::optional<util::Digest> listed;
    if (!cfg_.direct_mode) {
      listed = listed_result_key();
      if (!listed) return std::nullopt;
    }
    if (auto code = serve(*manifest, listed ? Via::listed : Via::direct, listed)) return code;
  }
  // Only a compile stored without a direct-mode record (a computed #include) has preprocessed entries:
  // any other compile's hit and miss never run the preprocessor here.
  if (count(true) == 0 || !cfg_.preprocessed_fallback) return std::nullopt;
  preprocessed_lookup_ = true;
  const std::int64_t began = util::file_clock_now_ns();
  auto preprocessed = preprocess();
  if (!preprocessed) {
    core::log().debug("preprocessed lookup: {}", preprocessed.error());
    return std::nullopt;
  }
  preprocessed_ = *preprocessed;  // a miss's own preprocessed entry, if this lookup finds none
  preprocessed_began_ = began;
  return serve(*manifest, Via::preprocessed, preprocessed->key);
}

// The first of the manifest's entries (direct or preprocessed, as `via` looks) that holds here, restored:
// a direct entry's files verified, a listed or preprocessed one's result key equal to `key`.
std::optional<int> Pipeline::serve(Manifest& manifest, Via via, const std::optional<util::Digest>& key) {
  for (auto& entry : manifest.entries) {
    if (entry.preprocessed != (via == Via::preprocessed)) continue;
    bool refreshed = false;
    if (via == Via::direct ? !verify(entry, refreshed) : !(entry.result_key == *key)) continue;
    // The recorded result key holds for any checkout (it names files by their fixed root names);
    // path-specific objects are stored under it combined with this build's source identity.
    const std::optional<util::Digest> specific = storage_key(entry);
    if (!specific) continue;  // its object names a root this checkout lacks
    const util::Digest& rk = *specific;
    auto found = store_.get_parts(rk.hex(), util::dirname(job_.output));
    if (!found) {
      core::log().info("cannot read entry: {}", found.error().message);
      return std::nullopt;
    }
    std::optional<storage::Parts>& parts = *found;
    if (!parts) continue;
    Replay replay;
    const Restore restored = restore(*parts, rk, replay);
    if (restored == Restore::no_hit) return std::nullopt;
    if (restored == Restore::next_entry) continue;
    counts_[counter::kHits]++;
    if (via == Via::direct) counts_[counter::kDirectHits]++;
    if (via == Via::preprocessed) counts_[counter::kPreprocessedHits]++;
    if (!job_.output_kind.empty()) counts_[counter::kKindHitsPrefix + job_.output_kind]++;
    core::log().debug("hit{}: {} (result {})", via == Via::preprocessed ? " (preprocessed)" : "", job_.output,
                      rk.hex().substr(0, 16));
    if (refreshed) {
      // Remember the new identities so the next lookup needs no hashing. They are this machine's: the
      // local store keeps them, a remote never gets them (a reader writes nothing back).
      (void)store_.put_local_record(manifest_key_, serialize_manifest(manifest));
    }
    write_all(STDOUT_FILENO, replay.stdout_text);
    write_all(STDERR_FILENO, replay.stderr_text);
    return 0;
  }
  return std::nullopt;
}

// This compile's manifest: the entries stored for its direct key; nullopt when there is none, it
// cannot be read, or it is damaged (then removed).
std::optional<Manifest> Pipeline::read_manifest() {
  storage::StorageLookup data = store_.get_record(manifest_key_);
  if (!data) {
    core::log().info("cannot read manifest: {}", data.error().message);
    count_reason(counts_, ReasonCategory::Error, reason::kStorageRead);
    return std::nullopt;
  }
  if (!*data) return std::nullopt;
  if (is_older_manifest(**data)) return std::nullopt;  // an earlier kache's: a miss, replaced by its store
  try {
    return deserialize_manifest(**data);
  } catch (const std::exception& e) {
    core::log().info("corrupt manifest {}: {}", manifest_key_.substr(0, 12), e.what());
    counts_[counter::kCorrupt]++;
    store_.remove(manifest_key_);
    return std::nullopt;
  }
}

// Restores one stored entry's outputs over the destinations, or says why it cannot: an entry of an older
// format, a damaged one (removed), one without the outputs this compile writes or with roots this
// checkout cannot take is skipped (next_entry); a destination that cannot be written here is no hit.
// replay gets what the hit prints.
Pipeline::Restore Pipeline::restore(storage::Parts& parts, const util::Digest& key, Replay& replay) {
  auto& log = core::log();
  // The object, when the store already wrote it next to the output; removed unless it is used.
  util::UnlinkOnExit body(parts.body_file);
  Decoded<CacheEntryView> viewed =
      body.empty() ? view_entry(parts.value) : view_entry_head(parts.value, parts.body_size);
  if (!viewed) {
    // An entry of an older format is a plain miss (the compile stores a new one); others are damaged.
    if (viewed.error() == FormatError::unknown_format) return Restore::next_entry;
    counts_[counter::kCorrupt]++;
    store_.remove(key.hex());
    return Restore::next_entry;
  }
  const CacheEntryView& ce = *viewed;
  if (!ce.body_is(OutputType::object)) return Restore::next_entry;
  if (!job_.depfile.empty() && !ce.find(OutputType::depfile)) return Restore::next_entry;
  std::vector<PathPatch> patches;
  if (!patches_for_here(ce, patches)) return Restore::next_entry;
  // Every output is staged beside its destination before any is replaced, so a destination nvcc
  // could not write (a missing or read-only directory) fails here with nothing of the user's
  // touched; the miss path then passes the command through and nvcc reports it. Staging is what
  // writing needed anyway: the check costs no extra system call.
  std::string unwritable;
  auto stage = [&](const std::string& dest, std::string_view data) {
    try {
      return util::write_temp_file(util::dirname(dest), util::basename(dest), data);
    } catch (const std::exception& e) {
      unwritable = e.what();
      return std::string();
    }
  };
  util::UnlinkOnExit object_tmp(body.empty() ? stage(job_.output, *ce.find(OutputType::object)) : std::string());
  util::UnlinkOnExit depfile_tmp(
      job_.depfile.empty() || !unwritable.empty()
          ? std::string()
          : stage(job_.depfile, restored_depfile(ce)));
  if (!unwritable.empty()) {
    log.debug("cannot restore here ({}): no hit", unwritable);
    return Restore::no_hit;
  }
  // This checkout's roots where the stored object holds placeholders, before it takes the output's name.
  if (!apply_path_patches(body.empty() ? object_tmp.path() : body.path(), patches, job_.roots)) {
    log.info("cannot write this checkout's paths into the restored object: no hit");
    return Restore::no_hit;
  }
  // The depfile first, as nvcc writes it (while preprocessing) before the object.
  if (!depfile_tmp.empty()) {
    if (!util::rename_replacing(depfile_tmp.path(), job_.depfile)) {
      throw std::system_error(errno, std::generic_category(), "rename to " + job_.depfile);
    }
    depfile_tmp.release();
  }
  const bool streamed = !body.empty();
  util::UnlinkOnExit& object_file = streamed ? body : object_tmp;
  if (!util::rename_replacing(object_file.path(), job_.output)) {
    throw std::system_error(errno, std::generic_category(), "rename to " + job_.output);
  }
  object_file.release();
  if (streamed) log.debug("restored the object by {}", parts.body_copied_by ? parts.body_copied_by : "?");
  // Stored with the path roots as placeholders: this build's own paths, as nvcc would print them here.
  replay.stdout_text = job_.roots.instantiate_text(std::string(ce.stdout_text));
  replay.stderr_text = job_.roots.instantiate_text(std::string(ce.stderr_text));
  if (const auto cost = ce.find(OutputType::miss_cost)) stored_cost_ms_ = parse_miss_cost(*cost);
  return Restore::hit;
}

// The entry's placeholder positions, when every root they stand for can be written here: a root longer
// than a placeholder cannot (the miss then stores an entry for this checkout, with its real path).
bool Pipeline::patches_for_here(const CacheEntryView& ce, std::vector<PathPatch>& patches) const {
  const std::optional<std::string_view> recorded = ce.find(OutputType::path_patches);
  if (!recorded) return true;
  auto parsed = parse_path_patches(*recorded);
  if (!parsed) {
    core::log().info("an entry's path placeholders are unreadable: not a hit");
    return false;
  }
  for (const auto& p : *parsed) {
    if (!job_.roots.patch_text(p.root_name)) {
      core::log().debug("the entry names root {}, which is missing here or longer than {} characters: not a hit",
                        p.root_name, kPlaceholderLength);
      return false;
    }
  }
  patches = std::move(*parsed);
  return true;
}

// The result key of this compile from the compiler's full dependency listing (-M) and the listed files'
// contents, read now; nullopt when the listing fails or a file cannot be hashed (the miss then decides).
std::optional<util::Digest> Pipeline::listed_result_key() {
  compiler::CompileJob listing_job = job_;
  listing_job.depfile_partial = true;  // the adapters' full listing, whatever dependency file the compile writes
  const std::vector<std::string> cmd = adapter_.closure_command(inv_, listing_job);
  if (cmd.empty()) return std::nullopt;
  util::Environment env = inv_.env;
  adapter_.miss_environment(env, cfg_);
  const std::int64_t start = util::file_clock_now_ns();
  const util::ProcessResult deps = util::run_capture(adapter_.program(inv_), cmd, env);
  if (!deps.ok()) return std::nullopt;
  Outcome<HashedClosure> hashed = hash_closure(closure_files(deps.out, ""), start);
  if (!hashed) return std::nullopt;
  return result_key(hashed->files);
}


// The stored depfile with this build's roots and target, wrapped as the compiler wraps it here: the
// roots' lengths differ between checkouts, and the compiler re-wraps its lines when they do.
std::string Pipeline::restored_depfile(const CacheEntryView& ce) const {
  const std::string rooted = job_.roots.instantiate(std::string(*ce.find(OutputType::depfile)), job_.depfile_escaping);
  std::string text = instantiate_target(rooted, job_.depfile_target);
  const std::optional<std::string_view> stored = ce.find(OutputType::depfile_layout);
  const std::optional<DepfileLayout> layout = stored ? parse_layout_name(*stored) : std::nullopt;
  return layout ? rewrap_depfile(text, *layout) : text;
}


}  // namespace kache::engine::pipeline_steps
