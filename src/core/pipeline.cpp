#include "core/pipeline.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/registry.hpp"
#include "core/depfile.hpp"
#include "core/entry.hpp"
#include "core/explain.hpp"
#include "core/log.hpp"
#include "core/manifest.hpp"
#include "core/outcome.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "core/verified_identities.hpp"
#include "core/watch.hpp"
#include "storage/layered.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/lock.hpp"
#include "util/parallel.hpp"
#include "util/process.hpp"
#include "util/scoped_file.hpp"
#include "util/text.hpp"

namespace kache::core {

namespace {

using Counts = std::map<std::string, std::uint64_t>;

void write_all(int fd, std::string_view data) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += static_cast<std::size_t>(n);
  }
}

void add_real_paths(std::vector<std::string>& dirs) {
  const std::size_t n = dirs.size();
  for (std::size_t i = 0; i < n; ++i) {
    char buf[PATH_MAX];
    if (::realpath(dirs[i].c_str(), buf) == nullptr) continue;
    std::string real = buf;
    if (std::find(dirs.begin(), dirs.end(), real) == dirs.end()) dirs.push_back(std::move(real));
  }
}

// Whether a path as spelled climbs out of a directory it names ("nodir/../a.o"): the kernel needs
// that directory to exist, though the path's normal form ("a.o") no longer names it.
bool climbs_out_of_named_dir(std::string_view path) {
  bool named = false;
  for (std::string_view rest = path; !rest.empty();) {
    const std::size_t slash = rest.find('/');
    const std::string_view c = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (c == "..") {
      if (named) return true;
    } else if (!c.empty() && c != ".") {
      named = true;
    }
  }
  return false;
}

// Whether a path has a "." or ".." component: its spelling and its meaning can differ.
bool has_dot_component(std::string_view path) {
  for (std::string_view rest = path; !rest.empty();) {
    const std::size_t slash = rest.find('/');
    const std::string_view c = rest.substr(0, slash);
    if (c == "." || c == "..") return true;
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  return false;
}

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

class Pipeline {
 public:
  Pipeline(const Invocation& inv, const Config& cfg, compiler::Adapter& adapter, Counts& counts)
      : inv_(inv),
        cfg_(cfg),
        adapter_(adapter),
        counts_(counts),
        store_(storage::open_storage(cfg)),
        verified_(util::join_path(cfg.cache_dir, "identities")) {}

  // Returns the exit code, or nullopt when the invocation must run unchanged (passthrough_ is set).
  std::optional<int> run();
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
  std::optional<util::Digest> listed_result_key();
  bool verify(ManifestEntry& entry, bool& refreshed);
  bool same_listing(const std::string& dir, const util::Digest& listing, util::FileIdentity& guard, bool& refreshed);
  util::Digest result_key(const std::vector<ManifestFile>& files) const;
  util::Digest storage_key(const ManifestEntry& entry) const;
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
  };
  struct HashedClosure {
    std::vector<ManifestFile> files;
    std::vector<std::string> has_include;  // #include and __has_include names found in the closure
    bool opaque = false;                   // a computed name: no direct-mode record is possible
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
  int miss();
  compiler::MissPaths miss_paths(const std::string& scratch_dir) const;
  Outcome<Compiled> compile(const compiler::MissPaths& paths);
  int compile_failed(const Failure& failure);
  std::vector<std::string> closure_files(const std::string& closure_text, const std::string& dep_text);
  Outcome<std::string_view> hash_input(const std::string& path, util::ReadBuffer& buffer, ManifestFile& f,
                                       std::int64_t start);
  bool is_system(const std::string& path) const;
  void hash_slice(const std::vector<std::string>& closure, std::size_t begin, std::size_t end, std::int64_t start,
                  ClosureSlice& out);
  Outcome<HashedClosure> hash_closure(const std::vector<std::string>& closure, std::int64_t start);
  Installed install_outputs(const compiler::MissPaths& paths, const std::string& scratch_dir,
                            const util::ProcessResult& r, const std::string& dep_text, std::string object);
  Outcome<std::string> shareable_object(const std::string& object, const std::string& scratch_dir) const;
  bool patches_for_here(const CacheEntryView& ce, std::vector<PathPatch>& patches) const;
  Outcome<Done> toolchain_held() const;
  Outcome<Done> templatable_depfile(const std::string& dep_text) const;
  std::string restored_depfile(const CacheEntryView& ce) const;
  Outcome<Done> no_precompiled_header(const std::vector<std::string>& closure) const;
  Outcome<Done> add_assembler_inputs(const compiler::MissPaths& paths, const Compiled& compiled,
                                     std::vector<std::string>& closure) const;
  Outcome<Done> no_unpinned_time(const Installed& installed, const Compiled& compiled,
                                 const std::vector<ManifestFile>& files) const;
  ManifestEntry describe_entry(std::vector<ManifestFile> files, const std::vector<std::string>& closure,
                               const std::string& object, bool checkout_specific) const;
  bool record_direct_lookup(ManifestEntry& entry, const std::vector<std::string>& closure,
                            const std::vector<std::string>& has_include, bool opaque, std::int64_t start);
  bool record_named_targets(ManifestEntry& entry, const std::vector<std::string>& present, std::int64_t start);
  // Takes the object out of installed.
  CacheEntry cache_entry(const std::string& dep_text, Installed& installed) const;
  void store_result(ManifestEntry entry, const CacheEntry& ce, bool recorded, const std::string& per_checkout);
  storage::StorageStatus add_to_manifest(ManifestEntry entry);

  const Invocation& inv_;
  const Config& cfg_;
  compiler::Adapter& adapter_;
  Counts& counts_;
  storage::LayeredStorage store_;
  compiler::CompileJob job_;
  compiler::Passthrough passthrough_;
  util::Digest direct_;
  std::string manifest_key_;
  Margins margins_;
  VerifiedIdentities verified_;  // shared across this cache dir's compiles; flushed when the pipeline ends
};

std::optional<int> Pipeline::run() {
  auto prepared = adapter_.prepare(inv_, cfg_);
  if (auto* p = std::get_if<compiler::Passthrough>(&prepared)) {
    passthrough_ = *p;
    return std::nullopt;
  }
  job_ = std::move(std::get<compiler::CompileJob>(prepared));
  if (!util::exists(job_.source)) {
    // The compiler says so itself; the user's error, not kache's.
    count_reason(counts_, ReasonCategory::CompileFailed, reason::kCompileFailed);
    passthrough_ = {std::string(reason::kCompileFailed), job_.source + " does not exist"};
    return std::nullopt;
  }
  for (auto check : {&Pipeline::special_source, &Pipeline::special_destination, &Pipeline::destination_through_link}) {
    if (auto why = (this->*check)()) {
      passthrough_ = std::move(*why);
      return std::nullopt;
    }
  }
  direct_ = direct_key();
  manifest_key_ = util::sha256("manifest\n" + direct_.hex()).hex();
  // cache.direct_mode = false looks up too, by the dependency listing (try_hit).
  if (auto code = try_hit()) return code;
  return miss();
}

util::Digest Pipeline::direct_key() {
  util::Hasher h;
  h.add_field("kache-key", "direct-v1");
  auto& log = core::log();
  for (const auto& [name, value] : job_.key_fields) {
    h.add_field(name, value);
    log.trace("key field {} = {}", name, value);
  }
  const util::Digest source = util::hash_file(job_.source);
  h.add_field("source-content", source.hex());
  log.trace("key field source-content = {}", source.hex());
  util::Digest d = h.finish();
  log.trace("direct key = {}", d.hex());
  return d;
}

util::Digest Pipeline::result_key(const std::vector<ManifestFile>& files) const {
  util::Hasher h;
  h.add_field("kache-key", "result-v1");
  h.add_field("direct", direct_.hex());
  for (const auto& f : files) {
    h.add_field("file", job_.roots.key_form(f.path));
    h.add_field("content", f.hash.hex());
  }
  return h.finish();
}

util::Digest Pipeline::storage_key(const ManifestEntry& entry) const {
  if (!entry.path_specific && !entry.checkout_specific) return entry.result_key;
  util::Hasher h;
  h.add_field("kache-key", "specific-v1");
  h.add_field("result", entry.result_key.hex());
  // Objects whose symbol names hash the source path (cudafe++'s _INTERNAL_ names, rdc module ids)
  // are stored per source identity.
  if (entry.path_specific) h.add_field("source-identity", job_.source_identity);
  if (entry.checkout_specific) {
    for (const auto& root : job_.roots.roots()) h.add_field("root", root.path);
  }
  return h.finish();
}

// Why a file the entry records makes it specific to this checkout: it lies outside every path root and
// every directory the key names literally. nullopt when it does not. A path below a root is joined to
// each checkout's own root as spelled. Elsewhere "." and ".." count by what they mean, not by their
// spelling: "/p/x/../inc/h.h" lies in a literal "-I/p/inc" when the kernel resolves "/p/x/.." to "/p"
// (x is no symbolic link); through a link it is taken as the compiler opened it (the real path of its
// directory), and one whose directory cannot be resolved stays specific.
std::optional<std::string> Pipeline::outside_roots(const std::string& path) const {
  if (!job_.roots.enabled()) return std::nullopt;  // literal keys already name this checkout's paths
  if (job_.roots.split(path).root >= 0) return std::nullopt;
  auto in_literal_dir = [&](const std::string& p) {
    return std::any_of(job_.literal_dirs.begin(), job_.literal_dirs.end(),
                       [&](const std::string& d) { return util::path_starts_with(p, d); });
  };
  if (in_literal_dir(path)) return std::nullopt;
  if (!has_dot_component(path)) return std::string("it lies outside the path roots");
  char spelled_dir[PATH_MAX], normal_dir[PATH_MAX];
  if (::realpath(util::dirname(path).c_str(), spelled_dir) == nullptr) {
    return fmt::format("its directory cannot be resolved ({})", std::strerror(errno));
  }
  const std::string normal = util::lexically_normal(path);
  if (::realpath(util::dirname(normal).c_str(), normal_dir) != nullptr && std::strcmp(spelled_dir, normal_dir) == 0) {
    if (in_literal_dir(normal)) return std::nullopt;
    return fmt::format("it lies outside the path roots (as {})", normal);
  }
  const std::string resolved = util::join_path(spelled_dir, util::basename(path));
  if (in_literal_dir(resolved)) return std::nullopt;
  return fmt::format("a '..' in it passes through a symbolic link, and {} (as the compiler opened it) lies outside "
                     "the path roots",
                     resolved);
}

// Threads for the stat calls of a large closure (see util::stat_identities).
constexpr unsigned kStatThreads = 4;
// Threads hashing a miss's closure.
constexpr std::size_t kHashThreads = 4;

bool Pipeline::verify(ManifestEntry& entry, bool& refreshed) {
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
  auto& log = core::log();
  // Staging beside the destinations checks their normal forms only; a spelling through a directory
  // (rare) is checked as the kernel resolves it. A failure leaves the verdict to miss().
  if ((climbs_out_of_named_dir(job_.output_written) || climbs_out_of_named_dir(job_.depfile_written)) &&
      unwritable_destination()) {
    return std::nullopt;
  }
  storage::StorageLookup data = store_.get_record(manifest_key_);
  if (!data) {
    log.info("cannot read manifest: {}", data.error().message);
    count_reason(counts_, ReasonCategory::Error, reason::kStorageRead);
    return std::nullopt;
  }
  if (!*data) return std::nullopt;
  Manifest manifest;
  try {
    manifest = deserialize_manifest(**data);
  } catch (const std::exception& e) {
    log.info("corrupt manifest {}: {}", manifest_key_.substr(0, 12), e.what());
    counts_[counter::kCorrupt]++;
    store_.remove(manifest_key_);
    return std::nullopt;
  }
  // cache.direct_mode = false: nothing recorded about the files is trusted (their identities, the names
  // found missing); the compiler lists the dependencies now and their contents give the result key, which
  // an entry must match (the manifest only says which entries this command and source have).
  std::optional<util::Digest> listed;
  if (!cfg_.direct_mode && !manifest.entries.empty()) {
    listed = listed_result_key();
    if (!listed) return std::nullopt;
  }
  for (auto& entry : manifest.entries) {
    bool refreshed = false;
    if (listed ? !(entry.result_key == *listed) : !verify(entry, refreshed)) continue;
    // The recorded result key holds for any checkout (it names files by their fixed root names);
    // path-specific objects are stored under it combined with this build's source identity.
    const util::Digest rk = storage_key(entry);
    auto found = store_.get_parts(rk.hex(), util::dirname(job_.output));
    if (!found) {
      log.info("cannot read entry: {}", found.error().message);
      return std::nullopt;
    }
    std::optional<storage::Parts>& parts = *found;
    if (!parts) continue;
    // The object, when the store already wrote it next to the output; removed unless it is used.
    util::UnlinkOnExit body(parts->body_file);
    Decoded<CacheEntryView> viewed =
        body.empty() ? view_entry(parts->value) : view_entry_head(parts->value, parts->body_size);
    if (!viewed) {
      // An entry of an older format is a plain miss (the compile stores a new one); others are damaged.
      if (viewed.error() == FormatError::unknown_format) continue;
      counts_[counter::kCorrupt]++;
      store_.remove(rk.hex());
      continue;
    }
    const CacheEntryView& ce = *viewed;
    if (!ce.body_is(OutputType::object)) continue;
    if (!job_.depfile.empty() && !ce.find(OutputType::depfile)) continue;
    std::vector<PathPatch> patches;
    if (!patches_for_here(ce, patches)) continue;
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
      return std::nullopt;
    }
    // This checkout's roots where the stored object holds placeholders, before it takes the output's name.
    if (!apply_path_patches(body.empty() ? object_tmp.path() : body.path(), patches, job_.roots)) {
      log.info("cannot write this checkout's paths into the restored object: no hit");
      return std::nullopt;
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
    if (streamed) log.debug("restored the object by {}", parts->body_copied_by ? parts->body_copied_by : "?");
    counts_[counter::kHits]++;
    if (!listed) counts_[counter::kDirectHits]++;
    if (!job_.output_kind.empty()) counts_[counter::kKindHitsPrefix + job_.output_kind]++;
    log.debug("hit: {} (result {})", job_.output, rk.hex().substr(0, 16));
    if (refreshed) {
      // Remember the new identities so the next lookup needs no hashing. They are this machine's: the
      // local store keeps them, a remote never gets them (a reader writes nothing back).
      (void)store_.put_local_record(manifest_key_, serialize_manifest(manifest));
    }
    // Stored with the path roots as placeholders: this build's own paths, as nvcc would print them here.
    write_all(STDOUT_FILENO, job_.roots.instantiate_text(std::string(ce.stdout_text)));
    write_all(STDERR_FILENO, job_.roots.instantiate_text(std::string(ce.stderr_text)));
    return 0;
  }
  return std::nullopt;
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
  const util::ProcessResult deps = util::run_capture(inv_.compiler_path, cmd, env);
  if (!deps.ok()) return std::nullopt;
  Outcome<HashedClosure> hashed = hash_closure(closure_files(deps.out, ""), start);
  if (!hashed) return std::nullopt;
  return result_key(hashed->files);
}

std::optional<compiler::Passthrough> Pipeline::unwritable_destination() const {
  // As spelled, not normalized: "nodir/../a.o" fails in nvcc when nodir is missing.
  for (const std::string* path : {&job_.output_written, &job_.depfile_written}) {
    if (path->empty()) continue;
    const std::string dir = util::dirname(util::join_path(inv_.cwd, *path));
    if (::access(dir.c_str(), W_OK | X_OK) == 0) continue;
    const bool missing = errno == ENOENT || errno == ENOTDIR;
    return compiler::Passthrough{std::string(missing ? reason::kOutputDirMissing : reason::kOutputDirUnwritable), dir};
  }
  return std::nullopt;
}

// A hit or a miss renames a new file over the output and the depfile; the compiler opens them
// instead, writing through a device (/dev/null) or a FIFO, and through a symlink or not as it
// chooses (nvcc -ptx writes through, GNU as replaces it). Where the path names anything but a regular
// file the rename would replace it (as root, /dev/null itself), so the compiler runs unchanged.
std::optional<compiler::Passthrough> Pipeline::special_destination() const {
  for (const auto& [normal, written] : {std::pair{&job_.output, &job_.output_written},
                                        std::pair{&job_.depfile, &job_.depfile_written}}) {
    for (const std::string* path : {normal, written}) {
      if (path->empty()) continue;
      const std::string full = util::join_path(inv_.cwd, *path);
      struct stat st {};
      if (::lstat(full.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) continue;  // nothing there yet: a new file is made
        return compiler::Passthrough{std::string(reason::kOutputSpecial), full + ": " + std::strerror(errno)};
      }
      if (!S_ISREG(st.st_mode)) return compiler::Passthrough{std::string(reason::kOutputSpecial), full};
    }
  }
  return std::nullopt;
}

// A source that is no regular file (a pipe, /dev/stdin, <(...), a FIFO, a socket, a device) can be read
// once: hashing it for the key would leave the compiler an empty (or, for a FIFO without a writer yet,
// a blocking) input. Checked by stat before anything opens it.
std::optional<compiler::Passthrough> Pipeline::special_source() const {
  if (job_.source.empty()) return std::nullopt;
  struct stat st {};
  if (::stat(job_.source.c_str(), &st) != 0) return std::nullopt;  // missing: the compile says so itself
  if (S_ISREG(st.st_mode)) return std::nullopt;
  return compiler::Passthrough{std::string(reason::kSourceSpecial), job_.source};
}

// kache writes the output and depfile at their lexical normal forms; the compiler opens them as
// spelled, and the kernel resolves "lnk/../obj/a.o" from wherever the symlink lnk points. Where the
// spelled directory resolves elsewhere than the normal form's, the compiler runs unchanged.
std::optional<compiler::Passthrough> Pipeline::destination_through_link() const {
  for (const auto& [normal, written] : {std::pair{&job_.output, &job_.output_written},
                                        std::pair{&job_.depfile, &job_.depfile_written}}) {
    if (written->empty() || !climbs_out_of_named_dir(*written)) continue;
    char spelled[PATH_MAX];
    char lexical[PATH_MAX];
    // A directory missing as spelled is the compiler's to report (unwritable_destination); one that
    // exists as spelled but not under the normal form is another directory too.
    if (::realpath(util::dirname(util::join_path(inv_.cwd, *written)).c_str(), spelled) == nullptr) continue;
    if (::realpath(util::dirname(*normal).c_str(), lexical) == nullptr ||
        std::string_view(spelled) != std::string_view(lexical)) {
      return compiler::Passthrough{std::string(reason::kOutputPathThroughLink), *written + " resolves to " + spelled};
    }
  }
  return std::nullopt;
}

int Pipeline::compile_failed(const Failure& failure) {
  // Let the compiler speak for itself: rerun the user's own command unchanged, so exit status,
  // stdout and stderr are exactly what it gives without kache. The user's error, not kache's.
  core::log().debug("{}: running the original command", failure.detail);
  count_reason(counts_, failure.category, failure.name);
  passthrough_ = {std::string(failure.name), ""};
  return -1;
}

// A miss, step by step: run the compiler into a scratch directory next to the output, hash what it
// read, install its outputs (the build goes on whatever happens next), then decide whether the result
// may be stored, describe it, record what a direct lookup must check, and store it. A step that fails
// names its reason (reasons.hpp); only the compile's own failure changes what the user gets.
int Pipeline::miss() {
  // nvcc fails, creating nothing, when it cannot write an output where it was asked to; kache must
  // neither create that directory nor make the compile succeed: nvcc runs and says so itself.
  if (auto why = unwritable_destination()) {
    passthrough_ = std::move(*why);
    return -1;
  }
  util::TempDir scratch(util::dirname(job_.output), ".kache-", util::TempDir::Parent::must_exist);
  const compiler::MissPaths paths = miss_paths(scratch.path());
  Outcome<Compiled> compiled = compile(paths);
  if (!compiled) return compile_failed(compiled.failure());
  std::string object = util::read_file(paths.object);
  if (job_.debug_placeholders && has_compressed_sections(object)) {
    // Placeholders inside compressed bytes cannot be replaced in place (the toolchain compresses debug
    // sections by default, or a flag kache does not see asked for it): the user's command gives the
    // object a plain compile gives.
    passthrough_ = {std::string(reason::kCompressedDebug), paths.object};
    return -1;
  }
  counts_[counter::kMisses]++;
  if (!job_.output_kind.empty()) counts_[counter::kKindMissesPrefix + job_.output_kind]++;

  const std::string dep_text = util::read_file(paths.depfile);
  std::vector<std::string> closure = closure_files(compiled->closure_text, dep_text);
  Outcome<Done> assembler = add_assembler_inputs(paths, *compiled, closure);
  Outcome<HashedClosure> hashed = assembler ? hash_closure(closure, compiled->start) : assembler.failure();
  // What the input audit (tests/integration/test_input_audit.py) checks every file a miss opened against.
  if (core::log().should_log(spdlog::level::trace)) {
    for (const auto& c : closure) core::log().trace("closure file {}", c);
  }
  Installed installed = install_outputs(paths, scratch.path(), compiled->result, dep_text, std::move(object));

  Outcome<Done> toolchain = hashed ? toolchain_held() : hashed.failure();
  Outcome<Done> depfile = toolchain ? templatable_depfile(dep_text) : toolchain.failure();
  Outcome<Done> headers = depfile ? no_precompiled_header(closure) : depfile.failure();
  Outcome<Done> times = headers ? no_unpinned_time(installed, *compiled, hashed->files) : headers.failure();
  Outcome<std::string> storable = times ? shareable_object(installed.object, scratch.path()) : times.failure();
  if (storable) {
    ManifestEntry entry = describe_entry(std::move(hashed->files), closure, installed.object, !storable->empty());
    const bool recorded = record_direct_lookup(entry, closure, hashed->has_include, hashed->opaque, compiled->start);
    store_result(std::move(entry), cache_entry(dep_text, installed), recorded, *storable);
  } else {
    count_reason(counts_, storable.failure().category, storable.failure().name);
    core::log().debug("miss: not stored ({}): {} -- {}", storable.failure().name, job_.output,
                      reason_sentence(storable.failure().category, storable.failure().name));
  }
  write_all(STDOUT_FILENO, installed.stdout_text);
  write_all(STDERR_FILENO, installed.stderr_text);
  return 0;
}

compiler::MissPaths Pipeline::miss_paths(const std::string& scratch_dir) const {
  compiler::MissPaths paths;
  paths.scratch_dir = scratch_dir;
  const std::string& object_name = job_.scratch_object_name;
  paths.object = util::join_path(scratch_dir, object_name.empty() ? util::basename(job_.output) : object_name);
  paths.depfile = util::join_path(scratch_dir, "deps.d");
  paths.assembler_depfile = util::join_path(scratch_dir, "as.d");
  // The direct key: equal for the same compile wherever it is built (so two misses give the same
  // object), different for any two TUs that differ in anything keyed (two util.c of one project must
  // not share -flto section names).
  paths.seed = direct_.hex().substr(0, 16);
  return paths;
}

Outcome<Pipeline::Compiled> Pipeline::compile(const compiler::MissPaths& paths) {
  auto& log = core::log();
  const std::vector<std::string> argv = adapter_.miss_command(inv_, job_, paths);
  util::Environment env = inv_.env;
  adapter_.miss_environment(env, cfg_);
  if (log.should_log(spdlog::level::debug)) log.debug("miss: running {}", fmt::join(argv, " "));

  Compiled out;
  // Read from the clock file times come from: a file modified from here on has a time >= start.
  out.start = util::file_clock_now_ns();
  auto failed = [](const util::ProcessResult& r, std::string_view what) {
    return Failure{ReasonCategory::CompileFailed, reason::kCompileFailed,
                   fmt::format("{} failed (exit {}, signal {})", what, r.exit_code, r.term_signal)};
  };
  if (auto cmd = adapter_.closure_command(inv_, job_); !cmd.empty()) {
    log.debug("miss: listing dependencies with {}", fmt::join(cmd, " "));
    util::ProcessResult deps = util::run_capture(inv_.compiler_path, cmd, env);
    // The listing preprocesses the user's code: it fails where the compile would (a missing header).
    if (!deps.ok()) return failed(deps, "the dependency listing");
    out.closure_text = std::move(deps.out);
  }
  out.wall_start = std::time(nullptr);
  if (auto cmd = adapter_.preprocess_command(inv_, job_); !cmd.empty()) {
    // The assembler cannot list what it opens: what the preprocessed source asks of it decides.
    log.debug("miss: checking the assembler's inputs with {}", fmt::join(cmd, " "));
    util::ProcessResult pre = util::run_capture(inv_.compiler_path, cmd, env);
    out.assembler_unchecked = !pre.ok() || may_read_assembler_inputs(pre.out);
    out.preprocessed = std::move(pre.out);
  }
  out.result = util::run_capture(inv_.compiler_path, argv, env);
  out.wall_end = std::time(nullptr);
  if (!out.result.ok()) return failed(out.result, "the compile");
  return out;
}

// The files GNU as opened on its own (.incbin, .include), from the list it wrote (-Wa,--MD), join the
// closure: hashed and keyed like any header. Its own input (the compiler's temporary .s, deleted by
// now, or "-" under -pipe) is skipped; anything else that cannot be listed keeps the result unstored.
Outcome<Done> Pipeline::add_assembler_inputs(const compiler::MissPaths& paths, const Compiled& compiled,
                                             std::vector<std::string>& closure) const {
  using AI = compiler::CompileJob::AssemblerInputs;
  auto unlisted = [](std::string detail) {
    return Failure{ReasonCategory::NotStored, reason::kAssemblerInputs, std::move(detail)};
  };
  if (job_.assembler_inputs == AI::checked && compiled.assembler_unchecked) {
    return unlisted("the preprocessed source may make the assembler open a file");
  }
  if (job_.assembler_inputs != AI::listed) return Done{};
  if (!util::exists(paths.assembler_depfile)) return unlisted("the assembler wrote no dependency list");
  Depfile listed;
  try {
    listed = parse_depfile(util::read_file(paths.assembler_depfile));
  } catch (const std::exception& e) {
    return unlisted(std::string("the assembler's dependency list cannot be read: ") + e.what());
  }
  const std::string cwd = util::lexically_normal(inv_.cwd);
  const std::string temp_dir = util::lexically_normal(util::env_get(inv_.env, "TMPDIR").value_or("/tmp"));
  for (const auto& dep : listed.deps) {
    if (dep == "-") continue;
    const std::string path = util::join_path(cwd, dep);
    if (!util::exists(path)) {
      // The compiler's temporary assembly (TMPDIR/ccXXXXXX.s), removed once assembled.
      if (dep.ends_with(".s") && util::dirname(util::lexically_normal(path)) == temp_dir) continue;
      // The name of a `.file` directive (the source's base name as GCC writes it, or a prefix-mapped
      // path): listed, never opened.
      if (util::basename(dep) == util::basename(job_.source)) continue;
      return unlisted(path + ", listed by the assembler, cannot be read");
    }
    const std::string normal = util::lexically_normal(path);
    const bool known = std::any_of(closure.begin(), closure.end(),
                                   [&](const std::string& c) { return util::lexically_normal(c) == normal; });
    if (!known) closure.push_back(path);
  }
  return Done{};
}

std::vector<std::string> Pipeline::closure_files(const std::string& closure_text, const std::string& dep_text) {
  // Everything the compile read, as nvcc listed it.
  const Depfile deps = parse_depfile(closure_text.empty() ? dep_text : closure_text);
  const std::string cwd = util::lexically_normal(inv_.cwd);

  // GCC names some headers by resolved paths (the toolkit's include/ is reached through a symlink and
  // ".."), so each directory is also known by its real path. Only a miss needs these.
  for (auto* dirs : {&job_.search_dirs, &job_.system_dirs, &job_.literal_dirs}) add_real_paths(*dirs);

  std::vector<std::string> closure;
  // Kept as nvcc spelled it (only made absolute): "../src/../include/h.cuh" stays below the build
  // directory's root, so another checkout resolves it to its own header, as nvcc would there.
  for (const auto& dep : deps.deps) closure.push_back(util::join_path(cwd, dep));
  return closure;
}

// Hashes one input into f and returns its bytes (valid until buffer's next read): a file missing,
// changing while read, or modified during the compile is not recorded.
Outcome<std::string_view> Pipeline::hash_input(const std::string& path, util::ReadBuffer& buffer, ManifestFile& f,
                                               std::int64_t start) {
  auto before = util::stat_identity(path);
  if (!before || before->is_dir) {
    return Failure{ReasonCategory::NotStored, reason::kClosureUnreadable, path + " cannot be read"};
  }
  const std::string_view content = buffer.read(path);
  auto after = util::stat_identity(path);
  if (!after || !(*after == *before)) {
    return Failure{ReasonCategory::NotStored, reason::kInputChanged, path + " changed while it was hashed"};
  }
  f.path = job_.roots.split(path);
  f.hash = util::sha256(content);
  f.identity = *after;
  // Modified during the compile, or just before it by less than file times can trail the clock:
  // the object may come from another version than the one hashed. A time in the future is clock
  // skew, not a change; such a file is only trusted by content later on.
  const std::int64_t now = util::now_ns();
  const std::int64_t margin = coarse_time_margin(*after, margins_.for_file(path, after->dev));
  for (std::int64_t t : {after->mtime_ns, after->ctime_ns}) {
    if (t > now) {
      f.racy = true;
    } else if (t >= start - margin) {
      return Failure{ReasonCategory::NotStored, reason::kInputChanged, path + " was modified during the compile"};
    }
  }
  return content;
}

bool Pipeline::is_system(const std::string& path) const {
  return std::any_of(job_.system_dirs.begin(), job_.system_dirs.end(),
                     [&](const std::string& d) { return util::path_starts_with(path, d); });
}

// Hashes closure[begin, end) into out, stopping at the first file that cannot be recorded.
void Pipeline::hash_slice(const std::vector<std::string>& closure, std::size_t begin, std::size_t end,
                          std::int64_t start, ClosureSlice& out) {
  util::ReadBuffer buffer;  // one buffer for every file of the slice
  for (std::size_t i = begin; i < end; ++i) {
    const std::string& path = closure[i];
    ManifestFile f;
    auto content = hash_input(path, buffer, f, start);
    if (!content) {
      out.failed_at = i;
      out.failure = content.failure();
      return;
    }
    scan_has_include(*content, out.hashed.has_include, out.hashed.opaque);
    // The project's own #include names (see scan_include_names); the toolchain's headers change
    // only with the toolchain, which its identity keys.
    if (!is_system(path)) scan_include_names(*content, out.hashed.has_include, out.hashed.opaque);
    // Inputs no dependency list names (.incbin, __TIMESTAMP__, #pragma GCC dependency): never stored,
    // so never served. Where the tools list or check the assembler's inputs, they decide those.
    const bool assembler_markers = job_.assembler_inputs == compiler::CompileJob::AssemblerInputs::scanned;
    std::string_view hidden = scan_hidden_inputs(*content, assembler_markers);
    if (hidden.empty() && names_pragma_dependency(*content)) hidden = kPragmaDependency;
    if (!hidden.empty()) {
      out.failed_at = i;
      out.failure = Failure{ReasonCategory::NotStored, hidden,
                            path + " names an input outside the dependency list (" + std::string(hidden) + ")"};
      return;
    }
    out.hashed.files.push_back(std::move(f));
  }
}

Outcome<Pipeline::HashedClosure> Pipeline::hash_closure(const std::vector<std::string>& closure, std::int64_t start) {
  // Hashing the closure (reading, SHA-256, the __has_include scan) is most of what a miss adds to
  // nvcc's own time; files are independent, so slices go to a few threads. Each slice stops at its
  // first failure; the earliest failure in closure order decides, as a sequential loop would.
  constexpr std::size_t kFilesPerThread = 64;
  std::vector<ClosureSlice> slices(util::slice_count(closure.size(), kHashThreads, kFilesPerThread));
  util::for_each_slice(closure.size(), slices.size(), [&](std::size_t slice, std::size_t begin, std::size_t end) {
    hash_slice(closure, begin, end, start, slices[slice]);
  });
  HashedClosure all;
  for (auto& sl : slices) {
    if (sl.failed_at != SIZE_MAX) {
      core::log().debug("not storing: {}", sl.failure->detail);
      return std::move(*sl.failure);
    }
    std::move(sl.hashed.files.begin(), sl.hashed.files.end(), std::back_inserter(all.files));
    all.has_include.insert(all.has_include.end(), sl.hashed.has_include.begin(), sl.hashed.has_include.end());
    all.opaque = all.opaque || sl.hashed.opaque;
  }
  return all;
}

Pipeline::Installed Pipeline::install_outputs(const compiler::MissPaths& paths, const std::string& scratch_dir,
                                              const util::ProcessResult& r, const std::string& dep_text,
                                              std::string object) {
  Installed out;
  out.object = std::move(object);
  // The user gets this checkout's paths where the debug maps wrote placeholders; the entry keeps them.
  if (job_.debug_placeholders) {
    out.patches = job_.roots.find_placeholders(out.object);
    if (!apply_path_patches(paths.object, out.patches, job_.roots)) {
      throw std::runtime_error("cannot write this checkout's paths into " + paths.object);
    }
  }
  // Install the outputs first: the build goes on even if storing fails.
  out.stdout_text = r.out;
  out.stderr_text = r.err;
  util::replace_all(out.stdout_text, scratch_dir, util::dirname(job_.output));
  util::replace_all(out.stderr_text, scratch_dir, util::dirname(job_.output));
  if (!job_.depfile.empty()) util::write_file_replacing(job_.depfile, dep_text);
  if (!util::rename_replacing(paths.object, job_.output)) util::copy_file(paths.object, job_.output);
  return out;
}

// An object that still names one of this checkout's roots (or the scratch directory) would carry
// this build's paths into another's: not stored. A compile whose object is expected to name its roots
// (-lineinfo: object_names_roots) may name those the key holds; one it names beyond them makes the
// entry specific to this checkout (the value returned).
// The toolchain the key's id was read from is the one that ran this compile: every file of it keeps
// the identity it had when its content was read, and every bare program name resolves to the same
// file. A driver or ptxas replaced during the probe or the compile built this object; stored under the
// id of what was read, a later compile with that toolchain back would get it. A few stats, on misses
// only. (A file rewritten within the clock tick after the probe read it keeps its identity: its memo
// is not written, but this check cannot see it.)
Outcome<Done> Pipeline::toolchain_held() const {
  if (!job_.toolchain_files.still_valid()) {
    return Failure{ReasonCategory::NotStored, reason::kInputChanged, "the toolchain changed during the compile"};
  }
  return Done{};
}

// Returns "" when the object may be shared between checkouts, else why it is stored for this checkout only.
// kache adds no -fmacro-prefix-map (issue 27, beyond spec 000's host prefix maps): __FILE__ and assert()
// print the real path, as a plain compile does. Rewriting such a string in the stored object is unsound
// (its length is baked into code: sizeof, constexpr lengths, offsets), so an object that names a root
// is stored per checkout (the storage key folds the roots in). Debug names come through placeholders,
// which the scan below does not see as roots.
Outcome<std::string> Pipeline::shareable_object(const std::string& object, const std::string& scratch_dir) const {
  // kache's scratch directory is no build's path: an object naming it is never served.
  if (object.find(scratch_dir) != std::string::npos) {
    return Failure{ReasonCategory::NotStored, reason::kPathInObject, scratch_dir};
  }
  std::string per_checkout;
  if (job_.roots.enabled()) {
    for (const std::size_t i : job_.roots.roots_in(object)) {
      const auto& root = job_.roots.roots()[i];
      // -lineinfo: a root the key names literally may appear in a stored object.
      if (job_.object_names_roots &&
          std::find(job_.keyed_roots.begin(), job_.keyed_roots.end(), root.path) != job_.keyed_roots.end()) {
        continue;
      }
      core::log().debug("the object names {}: the entry is specific to this checkout", root.path);
      per_checkout = std::string(reason::kPathInObject);
    }
  }
  // A root inside compressed debug sections is invisible to the scan above.
  if (per_checkout.empty() && has_compressed_sections(object)) {
    core::log().debug("the object has compressed sections: the entry is specific to this checkout");
    per_checkout = std::string(reason::kCompressedDebug);
  }
  return per_checkout;
}

// A precompiled header the compiler read instead of a header leaves no trace in its dependency list (the
// header is not named either), so no key could describe it: the result is used, not stored.
Outcome<Done> Pipeline::no_precompiled_header(const std::vector<std::string>& closure) const {
  if (!job_.precompiled_headers_searched) return Done{};
  std::vector<std::string> dirs = job_.search_dirs;
  dirs.insert(dirs.end(), job_.system_dirs.begin(), job_.system_dirs.end());
  dirs.push_back(util::lexically_normal(inv_.cwd));
  for (const auto& c : closure) dirs.push_back(util::dirname(c));
  if (auto pch = first_precompiled_header(dirs)) {
    return Failure{ReasonCategory::NotStored, reason::kPrecompiledHeader, "a precompiled header lies at " + *pch};
  }
  return Done{};
}

namespace {
// The local time of t as strftime formats it with `format` ("" when it cannot).
std::string local_time(std::time_t t, const char* format) {
  std::tm tm{};
  if (::localtime_r(&t, &tm) == nullptr) return "";
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

// __DATE__ and __TIME__ are the compile's wall clock unless SOURCE_DATE_EPOCH pins them (kache pins it,
// but clang 14 ignores it), and __TIMESTAMP__ is the mtime of the file using it (GCC 12 does not pin
// it). However the macro was spelled (pasted, wrapped), its expansion is a string of a known shape:
// the outputs are searched for "hh:mm:ss" within the compile's seconds (with the matching __DATE__ or
// alone) and for a closure file's mtime as __TIMESTAMP__ prints it; so is the preprocessed source where
// the miss made one (clang), which holds each expansion whatever the code does with it (`__TIME__[7]`). Found: a later hit would replay a
// stale time, so not stored. A false match (the object holding such a string for another reason) only
// costs the store.
Outcome<Done> Pipeline::no_unpinned_time(const Installed& installed, const Compiled& compiled,
                                         const std::vector<ManifestFile>& files) const {
  std::unordered_set<std::string> times;  // __TIME__ values the wall clock went through
  std::unordered_set<std::string> dates;  // __DATE__ values
  for (std::time_t t = compiled.wall_start - 1; t <= compiled.wall_end + 1; ++t) {
    times.insert(local_time(t, "%H:%M:%S"));
    dates.insert(local_time(t, "%b %e %Y"));
  }
  std::unordered_set<std::string> stamps;  // __TIMESTAMP__ values of the closure's files
  for (const auto& f : files) stamps.insert(local_time(f.identity.mtime_ns / 1000000000, "%a %b %e %H:%M:%S %Y"));
  auto holds_time = [&](std::string_view text) -> std::optional<std::string> {
    for (const auto& d : dates) {
      if (!d.empty() && text.find(d) != std::string_view::npos) return "__DATE__ " + d;
    }
    // Every "dd:dd:dd": a __TIME__ of the compile, or the time part of a file's __TIMESTAMP__.
    for (std::size_t c = text.find(':', 2); c != std::string_view::npos; c = text.find(':', c + 1)) {
      if (c + 6 > text.size() || text[c + 3] != ':') continue;
      const std::string_view hms = text.substr(c - 2, 8);
      if (!is_digit(hms[0]) || !is_digit(hms[1]) || !is_digit(hms[3]) || !is_digit(hms[4]) || !is_digit(hms[6]) ||
          !is_digit(hms[7])) {
        continue;
      }
      if (times.count(std::string(hms))) return "__TIME__ " + std::string(hms);
      if (c >= 13 && c + 11 <= text.size() && stamps.count(std::string(text.substr(c - 13, 24)))) {
        return "__TIMESTAMP__ " + std::string(text.substr(c - 13, 24));
      }
    }
    return std::nullopt;
  };
  for (const std::string* out :
       {&installed.object, &installed.stdout_text, &installed.stderr_text, &compiled.preprocessed}) {
    if (auto found = holds_time(*out)) {
      return Failure{ReasonCategory::NotStored, reason::kUnpinnedTime, "the output holds " + *found};
    }
  }
  return Done{};
}

// The key leaves the depfile's target out when it is templated: a depfile whose rule does not start
// with it (never seen: nvcc writes -MT verbatim) would hand one build's target to another.
Outcome<Done> Pipeline::templatable_depfile(const std::string& dep_text) const {
  if (!job_.depfile.empty() && !job_.depfile_target.empty() &&
      templatize_target(dep_text, job_.depfile_target) == dep_text) {
    return Failure{ReasonCategory::NotStored, reason::kDepfileTarget,
                   "the dependency file does not start with its target " + job_.depfile_target};
  }
  return Done{};
}

ManifestEntry Pipeline::describe_entry(std::vector<ManifestFile> files, const std::vector<std::string>& closure,
                                       const std::string& object, bool checkout_specific) const {
  ManifestEntry entry;
  entry.files = std::move(files);
  entry.path_specific = job_.path_specific;
  for (const auto& marker : adapter_.path_specific_markers()) {
    if (object.find(marker) != std::string::npos) entry.path_specific = true;
  }
  entry.result_key = result_key(entry.files);
  entry.checkout_specific = checkout_specific;
  for (const auto& c : closure) {
    if (auto why = outside_roots(c)) {
      entry.checkout_specific = true;
      core::log().debug("{}: {}; the entry is specific to this checkout", c, *why);
      break;
    }
  }
  entry.created_ns = util::now_ns();
  return entry;
}

// Adds to entry what a direct lookup must find unchanged (the #include and __has_include targets that
// exist outside the closure) and must find still missing (the paths searched before each header).
// Returns false when no direct-mode record can be made for this compile; entry is then stored for
// result lookups only.
bool Pipeline::record_direct_lookup(ManifestEntry& entry, const std::vector<std::string>& closure,
                                    const std::vector<std::string>& has_include, bool opaque, std::int64_t start) {
  auto& log = core::log();
  if (opaque) {
    log.debug("a computed __has_include or #include: no direct-mode record for this compile");
    return false;
  }
  std::vector<std::string> searched;
  searched.reserve(closure.size());
  // The source is named on the command line, not searched for: nothing can shadow it.
  for (const auto& c : closure) {
    if (util::lexically_normal(c) != job_.source) searched.push_back(c);
  }
  Observations observed;
  std::vector<std::string> present;
  const std::vector<std::string> absent =
      watch_set(searched, job_.search_dirs, job_.system_dirs, has_include, &observed, &present,
                job_.precompiled_headers_searched);
  if (!record_named_targets(entry, present, start)) return false;
  auto trusted = [&](const std::string& dir, const util::FileIdentity& id, std::int64_t clock) {
    return !is_racy(id, clock, margins_.for_file(dir, id.dev));
  };
  auto groups = group_absent(absent, job_.system_dirs, trusted, &observed);
  if (!groups) {
    // A watched path appeared while this ran: no record can claim it missing. The result itself
    // is still right for the closure nvcc read (its key names those files' contents).
    log.debug("a watched path appeared during the compile: no direct-mode record for this compile");
    return false;
  }
  for (auto& g : *groups) {
    AbsentDir a;
    a.dir = job_.roots.split(g.dir);
    a.guarded = g.guard.has_value();
    if (g.guard) a.identity = *g.guard;
    a.listing = g.listing;
    for (auto& name : g.names) {
      if (!entry.checkout_specific) {
        if (auto why = outside_roots(g.dir + "/" + name)) {
          entry.checkout_specific = true;
          log.debug("{}/{} (watched absent): {}; the entry is specific to this checkout", g.dir, name, *why);
        }
      }
      a.names.push_back(std::move(name));
    }
    entry.absent.push_back(std::move(a));
  }
  return true;
}

// A __has_include or #include target that exists but is not in the closure: its existence decides a
// __has_include test, and an #include target skipped as a #pragma once duplicate is included once its
// content differs. Recorded like a closure file (deleted or edited: the entry no longer verifies); not
// part of the result key, the object does not depend on its content.
bool Pipeline::record_named_targets(ManifestEntry& entry, const std::vector<std::string>& present, std::int64_t start) {
  util::ReadBuffer buffer;
  for (const auto& p : present) {
    ManifestFile f;
    if (auto hashed = hash_input(p, buffer, f, start); !hashed) {
      core::log().debug("a named target cannot be recorded ({}): no direct-mode record for this compile",
                        hashed.failure().detail);
      return false;
    }
    core::log().trace("closure file {} (named, not read)", p);
    if (!entry.checkout_specific) {
      if (auto why = outside_roots(p)) {
        entry.checkout_specific = true;
        core::log().debug("{} (named, not read): {}; the entry is specific to this checkout", p, *why);
      }
    }
    entry.files.push_back(std::move(f));
  }
  return true;
}

// The stored depfile with this build's roots and target, wrapped as the compiler wraps it here: the
// roots' lengths differ between checkouts, and the compiler re-wraps its lines when they do.
std::string Pipeline::restored_depfile(const CacheEntryView& ce) const {
  std::string text =
      instantiate_target(job_.roots.instantiate(std::string(*ce.find(OutputType::depfile))), job_.depfile_target);
  const std::optional<std::string_view> stored = ce.find(OutputType::depfile_layout);
  const std::optional<DepfileLayout> layout = stored ? parse_layout_name(*stored) : std::nullopt;
  return layout ? rewrap_depfile(text, *layout) : text;
}

CacheEntry Pipeline::cache_entry(const std::string& dep_text, Installed& installed) const {
  CacheEntry ce;
  if (!job_.depfile.empty()) {
    ce.outputs.push_back(
        {OutputType::depfile, job_.roots.templatize(templatize_target(dep_text, job_.depfile_target))});
    // Only a layout that reproduces this text exactly is stored: anything else restores as stored.
    if (const auto layout = depfile_layout_of(dep_text, job_.depfile_layouts)) {
      ce.outputs.push_back({OutputType::depfile_layout, std::string(layout_name(*layout))});
    }
  }
  // The object as the compiler wrote it, with its placeholders: it names no checkout (spec 000).
  if (!installed.patches.empty()) {
    ce.outputs.push_back({OutputType::path_patches, serialize_path_patches(installed.patches)});
  }
  ce.outputs.push_back({OutputType::object, std::move(installed.object)});  // last: the body a store keeps apart
  // Diagnostics name this checkout's files; a hit elsewhere prints its own (as its depfile does).
  ce.stdout_text = job_.roots.templatize_text(installed.stdout_text);
  ce.stderr_text = job_.roots.templatize_text(installed.stderr_text);
  return ce;
}

// Stores the result, and (when the entry was recorded for direct lookups) adds it to the manifest.
// A failure costs only the store: the outputs are already installed.
void Pipeline::store_result(ManifestEntry entry, const CacheEntry& ce, bool recorded, const std::string& per_checkout) {
  auto& log = core::log();
  std::string failure;
  try {
    const std::string key = storage_key(entry).hex();
    storage::StorageStatus stored = store_.put_parts(key, serialize_entry_head(ce), entry_body(ce));
    if (stored) {
      explain::record(cfg_.cache_dir, job_, direct_.hex(), key, entry.files,
                      [&](std::string_view text) { return store_.local().put_explain_record(key, text); });
      if (recorded) stored = add_to_manifest(std::move(entry));
    }
    if (!stored && stored.error().kind == storage::StorageFailure::Kind::timeout) {
      // The store's lock is held by a process that does not let go (cache.lock_timeout): the result
      // is installed; storing it is left to the next miss.
      count_reason(counts_, ReasonCategory::NotStored, reason::kLockTimeout);
      log.info("miss: not stored ({}): {}", stored.error().message, job_.output);
      return;
    }
    if (!stored) failure = stored.error().message;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty()) {
    count_reason(counts_, ReasonCategory::Error, reason::kStorageWrite);
    log.info("miss: could not store {}: {}", job_.output, failure);
    return;
  }
  counts_[counter::kStored]++;
  if (!per_checkout.empty()) {
    counts_[counter::kStoredPerCheckoutPrefix + per_checkout]++;
    log.debug("miss: stored {} for this checkout only ({})", job_.output, per_checkout);
    return;
  }
  log.debug("miss: stored {}", job_.output);
}

storage::StorageStatus Pipeline::add_to_manifest(ManifestEntry entry) {
  Manifest manifest;
  storage::StorageLookup current = store_.get_record(manifest_key_);
  if (!current) return current.error();
  if (*current) {
    try {
      manifest = deserialize_manifest(**current);
    } catch (const std::exception&) {
      // A damaged manifest is replaced by one holding this entry.
    }
  }
  manifest_add(manifest, std::move(entry));
  return store_.put_record(manifest_key_, serialize_manifest(manifest));
}

// The cache dir grants write permission to others (sticky or not: anyone may create a shard in it).
bool world_writable(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return false;
  return (st.st_mode & S_IWOTH) != 0;
}

[[noreturn]] void run_unchanged(const Invocation& inv) {
  std::fflush(stdout);
  std::fflush(stderr);
  util::exec_replace(inv.compiler_path, inv.argv(), inv.env);
  std::fprintf(stderr, "kache: cannot run %s: %s\n", inv.compiler_path.c_str(), std::strerror(errno));
  std::_Exit(127);
}

}  // namespace

int run_compiler(const Invocation& inv, const Config& cfg) {
  auto& log = core::log();
  StatsFile stats(cfg.cache_dir);
  Counts counts;
  auto pass = [&](std::string_view name, const std::string& detail) {
    // A failed compile was counted where it failed (compile_failed), and is the user's to read.
    if (name != reason::kCompileFailed) {
      count_reason(counts, ReasonCategory::Passthrough, name);
      log.debug("passthrough ({}){}{} -- {}", name, detail.empty() ? "" : ": ", detail,
                reason_sentence(ReasonCategory::Passthrough, name));
    }
    stats.add(counts);
    run_unchanged(inv);
  };
  if (cfg.disable) pass(reason::kDisabled, "");
  if (cfg.cache_dir_refused) pass(reason::kCacheDirRefused, "");
  if (!cfg.allow_world_writable && world_writable(cfg.cache_dir)) {
    // Anyone could plant an entry there (an object with code of theirs): never read from it.
    log.warn(
        "the cache directory {} is writable by every user, so kache does not use it; run `chmod o-w {}` "
        "(or set cache.allow_world_writable = true if every user of this machine is trusted)",
        cfg.cache_dir, cfg.cache_dir);
    pass(reason::kCacheWorldWritable, cfg.cache_dir);
  }
  auto adapter = compiler::find_adapter(inv.compiler_arg);
  if (!adapter) pass(reason::kUnsupportedCompiler, inv.compiler_arg);

  std::optional<Pipeline> pipeline;
  try {
    pipeline.emplace(inv, cfg, *adapter, counts);
    std::optional<int> code = pipeline->run();
    if (pipeline->corrupt_found() > 0) counts[counter::kCorrupt] += pipeline->corrupt_found();
    pipeline->add_storage_counts(counts);
    if (!code || *code < 0) pass(pipeline->passthrough().reason, pipeline->passthrough().detail);
    stats.add(counts);
    if (log.should_log(spdlog::level::debug)) {
      // kache's own cost (all its threads, not the compiler it ran): what a cache adds to a compile.
      // CLOCK_PROCESS_CPUTIME_ID is exact; getrusage's times can be tick-sampled.
      timespec ts{};
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      log.debug("own CPU time {:.2f} ms", ts.tv_sec * 1e3 + ts.tv_nsec / 1e6);
    }
    return *code;
  } catch (const std::exception& e) {
    // Nothing of the user's has been touched yet unless the compile ran; either way running the
    // real compiler now gives the build what it asked for.
    log.info("internal error ({}): running the compiler uncached", e.what());
    count_reason(counts, ReasonCategory::Error, reason::kInternal);
    stats.add(counts);
    run_unchanged(inv);
  }
}

}  // namespace kache::core
