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

#include <fmt/format.h>

#include "compiler/adapter.hpp"
#include "core/depfile.hpp"
#include "core/entry.hpp"
#include "core/log.hpp"
#include "core/manifest.hpp"
#include "core/stats.hpp"
#include "core/watch.hpp"
#include "storage/local/local_storage.hpp"
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
      : inv_(inv), cfg_(cfg), adapter_(adapter), counts_(counts),
        store_({cfg.cache_dir, cfg.max_size, cfg.compression_level, cfg.compression}) {}

  // Returns the exit code, or nullopt when the invocation must run unchanged (passthrough_ is set).
  std::optional<int> run();
  const compiler::Passthrough& passthrough() const { return passthrough_; }
  int corrupt_found() const { return store_.corrupt_found(); }

 private:
  util::Digest direct_key();
  std::optional<int> try_hit();
  bool verify(ManifestEntry& entry, bool& refreshed);
  util::Digest result_key(const std::vector<ManifestFile>& files) const;
  util::Digest storage_key(const ManifestEntry& entry) const;
  bool outside_roots(const std::string& path) const;
  std::optional<compiler::Passthrough> unwritable_destination() const;
  int compile_failed(const util::ProcessResult& r, const char* what);
  int miss();

  const Invocation& inv_;
  const Config& cfg_;
  compiler::Adapter& adapter_;
  Counts& counts_;
  storage::LocalStorage store_;
  compiler::CompileJob job_;
  compiler::Passthrough passthrough_;
  util::Digest direct_;
  std::string manifest_key_;
  Margins margins_;
};

std::optional<int> Pipeline::run() {
  auto prepared = adapter_.prepare(inv_, cfg_);
  if (auto* p = std::get_if<compiler::Passthrough>(&prepared)) {
    passthrough_ = *p;
    return std::nullopt;
  }
  job_ = std::move(std::get<compiler::CompileJob>(prepared));
  direct_ = direct_key();
  manifest_key_ = util::sha256("manifest\n" + direct_.hex()).hex();
  if (cfg_.direct_mode) {
    if (auto code = try_hit()) return code;
  }
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

bool Pipeline::outside_roots(const std::string& path) const {
  if (!job_.roots.enabled()) return false;  // literal keys already name this checkout's paths
  if (job_.roots.split(path).root >= 0) return false;
  for (const auto& d : job_.literal_dirs) {
    if (util::path_starts_with(path, d)) return false;
  }
  return true;
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
    // The identity moved (or was never trustworthy): the content decides.
    util::Digest h;
    try {
      h = util::hash_file(path);
    } catch (const std::exception&) {
      return false;
    }
    if (!(h == f.hash)) {
      log.debug("direct lookup: {} changed", path);
      return false;
    }
    const std::int64_t now = util::file_clock_now_ns();
    const std::int64_t margin = margins_.for_file(path, id->dev);
    f.identity = *id;
    f.racy = is_racy(*id, now, margin);
    refreshed = true;
  }
  for (const auto& a : entry.absent) {
    if (a.dir.root >= static_cast<int>(roots.size())) return false;
    const std::string dir = job_.roots.join(a.dir);
    if (a.guarded) {
      auto id = util::stat_identity(dir);
      if (id && *id == a.identity) continue;  // no entry created, removed or renamed in it since
      if (a.names.empty()) {
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

std::optional<int> Pipeline::try_hit() {
  auto& log = core::log();
  // Staging beside the destinations checks their normal forms only; a spelling through a directory
  // (rare) is checked as the kernel resolves it. A failure leaves the verdict to miss().
  if ((climbs_out_of_named_dir(job_.output_written) || climbs_out_of_named_dir(job_.depfile_written)) &&
      unwritable_destination()) {
    return std::nullopt;
  }
  std::optional<std::string> data;
  try {
    data = store_.get(manifest_key_);
  } catch (const std::exception& e) {
    log.info("cannot read manifest: {}", e.what());
    counts_["errors"]++;
    counts_["error.storage-read"]++;
    return std::nullopt;
  }
  if (!data) return std::nullopt;
  Manifest manifest;
  try {
    manifest = deserialize_manifest(*data);
  } catch (const std::exception& e) {
    log.info("corrupt manifest {}: {}", manifest_key_.substr(0, 12), e.what());
    counts_[counter::kCorrupt]++;
    store_.remove(manifest_key_);
    return std::nullopt;
  }
  for (auto& entry : manifest.entries) {
    bool refreshed = false;
    if (!verify(entry, refreshed)) continue;
    // The recorded result key holds for any checkout (it names files by their fixed root names);
    // path-specific objects are stored under it combined with this build's source identity.
    const util::Digest rk = storage_key(entry);
    std::optional<storage::Storage::Parts> parts;
    try {
      parts = store_.get_parts(rk.hex(), util::dirname(job_.output));
    } catch (const std::exception& e) {
      log.info("cannot read entry: {}", e.what());
      return std::nullopt;
    }
    if (!parts) continue;
    // The object, when the store already wrote it next to the output; removed unless it is used.
    util::UnlinkOnExit body(parts->body_file);
    CacheEntryView ce;
    try {
      ce = body.empty() ? view_entry(parts->value) : view_entry_head(parts->value, parts->body_size);
    } catch (const std::exception&) {
      counts_[counter::kCorrupt]++;
      store_.remove(rk.hex());
      continue;
    }
    if (!job_.depfile.empty() && !ce.depfile_template) continue;
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
    util::UnlinkOnExit object_tmp(body.empty() ? stage(job_.output, ce.object) : std::string());
    util::UnlinkOnExit depfile_tmp(job_.depfile.empty() || !unwritable.empty()
                                       ? std::string()
                                       : stage(job_.depfile, instantiate_target(job_.roots.instantiate(std::string(*ce.depfile_template)),
                                                                  job_.depfile_target)));
    if (!unwritable.empty()) {
      log.debug("cannot restore here ({}): no hit", unwritable);
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
    counts_[counter::kDirectHits]++;
    log.debug("hit: {} (result {})", job_.output, rk.hex().substr(0, 16));
    if (refreshed) {
      // Remember the new identities so the next lookup needs no hashing.
      try {
        store_.put_uncompressed(manifest_key_, serialize_manifest(manifest));
      } catch (const std::exception&) {
      }
    }
    // Stored with the path roots as placeholders: this build's own paths, as nvcc would print them here.
    write_all(STDOUT_FILENO, job_.roots.instantiate_text(std::string(ce.stdout_text)));
    write_all(STDERR_FILENO, job_.roots.instantiate_text(std::string(ce.stderr_text)));
    return 0;
  }
  return std::nullopt;
}

std::optional<compiler::Passthrough> Pipeline::unwritable_destination() const {
  // As spelled, not normalized: "nodir/../a.o" fails in nvcc when nodir is missing.
  for (const std::string* path : {&job_.output_written, &job_.depfile_written}) {
    if (path->empty()) continue;
    const std::string dir = util::dirname(util::join_path(inv_.cwd, *path));
    if (::access(dir.c_str(), W_OK | X_OK) == 0) continue;
    const bool missing = errno == ENOENT || errno == ENOTDIR;
    return compiler::Passthrough{missing ? "output-dir-missing" : "output-dir-unwritable", dir};
  }
  return std::nullopt;
}

int Pipeline::compile_failed(const util::ProcessResult& r, const char* what) {
  // Let the compiler speak for itself: rerun the user's own command unchanged, so exit status,
  // stdout and stderr are exactly what it gives without kache. The user's error, not kache's.
  core::log().debug("{} failed (exit {}, signal {}): running the original command", what, r.exit_code, r.term_signal);
  counts_[counter::kCompileFailed]++;
  passthrough_ = {"compile-failed", ""};
  return -1;
}

int Pipeline::miss() {
  auto& log = core::log();
  // nvcc fails, creating nothing, when it cannot write an output where it was asked to; kache must
  // neither create that directory nor make the compile succeed: nvcc runs and says so itself.
  if (auto why = unwritable_destination()) {
    passthrough_ = std::move(*why);
    return -1;
  }
  util::TempDir scratch(util::dirname(job_.output), ".kache-", util::TempDir::Parent::must_exist);
  compiler::MissPaths paths;
  paths.scratch_dir = scratch.path();
  paths.object = util::join_path(scratch.path(), util::basename(job_.output));
  paths.depfile = util::join_path(scratch.path(), "deps.d");
  // Depends only on the (normalized) source, so the same file gives the same object wherever it is built.
  paths.seed = util::sha256(job_.roots.key_form(job_.source)).hex().substr(0, 16);
  const std::vector<std::string> argv = adapter_.miss_command(inv_, job_, paths);
  util::Environment env = inv_.env;
  adapter_.miss_environment(env, cfg_);
  if (log.should_log(spdlog::level::debug)) log.debug("miss: running {}", fmt::join(argv, " "));

  // Read from the clock file times come from: a file modified from here on has a time >= start.
  const std::int64_t start = util::file_clock_now_ns();
  std::string closure_text;
  if (auto cmd = adapter_.closure_command(inv_, job_); !cmd.empty()) {
    log.debug("miss: listing dependencies with {}", fmt::join(cmd, " "));
    util::ProcessResult deps = util::run_capture(inv_.compiler_path, cmd, env);
    // The listing preprocesses the user's code: it fails where the compile would (a missing header).
    if (!deps.ok()) return compile_failed(deps, "the dependency listing");
    closure_text = std::move(deps.out);
  }
  util::ProcessResult r = util::run_capture(inv_.compiler_path, argv, env);
  if (!r.ok()) return compile_failed(r, "the compile");
  counts_[counter::kMisses]++;

  // Everything the compile read, as nvcc listed it.
  const std::string dep_text = util::read_file(paths.depfile);
  const Depfile deps = parse_depfile(closure_text.empty() ? dep_text : closure_text);
  const std::string cwd = util::lexically_normal(inv_.cwd);

  // GCC names some headers by resolved paths (the toolkit's include/ is reached through a symlink and
  // ".."), so each directory is also known by its real path. Only a miss needs these.
  for (auto* dirs : {&job_.search_dirs, &job_.system_dirs, &job_.literal_dirs}) add_real_paths(*dirs);

  ManifestEntry entry;
  std::string not_stored;
  std::vector<std::string> closure, has_include;
  bool opaque = false;
  // Kept as nvcc spelled it (only made absolute): "../src/../include/h.cuh" stays below the build
  // directory's root, so another checkout resolves it to its own header, as nvcc would there.
  for (const auto& dep : deps.deps) closure.push_back(util::join_path(cwd, dep));

  // Hashing the closure (reading, SHA-256, the __has_include scan) is most of what a miss adds to
  // nvcc's own time; files are independent, so slices go to a few threads. Each slice stops at its
  // first failure; the earliest failure in closure order decides, as a sequential loop would.
  struct Slice {
    std::vector<ManifestFile> files;
    std::vector<std::string> has_include;
    bool opaque = false;
    std::size_t failed_at = SIZE_MAX;
    std::string reason, why;
  };
  // Hashes one input into f and returns its bytes (valid until buffer's next read), or sets
  // reason/why: a file missing, changing while read, or modified during the compile is not recorded.
  auto hash_input = [&](const std::string& path, util::ReadBuffer& buffer, ManifestFile& f, std::string& reason,
                        std::string& why) -> std::optional<std::string_view> {
    auto before = util::stat_identity(path);
    if (!before || before->is_dir) {
      reason = "closure-unreadable";
      why = path + " cannot be read";
      return std::nullopt;
    }
    const std::string_view content = buffer.read(path);
    auto after = util::stat_identity(path);
    if (!after || !(*after == *before)) {
      reason = "input-changed";
      why = path + " changed while it was hashed";
      return std::nullopt;
    }
    f.path = job_.roots.split(path);
    f.hash = util::sha256(content);
    f.identity = *after;
    // Modified during the compile, or just before it by less than file times can trail the clock:
    // the object may come from another version than the one hashed. A time in the future is clock
    // skew, not a change; such a file is only trusted by content later on.
    const std::int64_t now = util::now_ns();
    const std::int64_t margin = margins_.for_file(path, after->dev);
    for (std::int64_t t : {after->mtime_ns, after->ctime_ns}) {
      if (t > now) {
        f.racy = true;
      } else if (t >= start - margin) {
        reason = "input-changed";
        why = path + " was modified during the compile";
        return std::nullopt;
      }
    }
    return content;
  };
  auto is_system = [&](const std::string& path) {
    return std::any_of(job_.system_dirs.begin(), job_.system_dirs.end(),
                       [&](const std::string& d) { return util::path_starts_with(path, d); });
  };
  auto hash_slice = [&](std::size_t begin, std::size_t end, Slice& out) {
    util::ReadBuffer buffer;  // one buffer for every file of the slice
    for (std::size_t i = begin; i < end; ++i) {
      const std::string& path = closure[i];
      ManifestFile f;
      auto content = hash_input(path, buffer, f, out.reason, out.why);
      if (!content) {
        out.failed_at = i;
        return;
      }
      scan_has_include(*content, out.has_include, out.opaque);
      // The project's own #include names (see scan_include_names); the toolchain's headers change
      // only with the toolchain, which its identity keys.
      if (!is_system(path)) scan_include_names(*content, out.has_include, out.opaque);
      // Inputs no dependency list names (.incbin, __TIMESTAMP__): never stored, so never served.
      if (std::string_view hidden = scan_hidden_inputs(*content); !hidden.empty()) {
        out.failed_at = i;
        out.reason = hidden;
        out.why = path + " names an input outside the dependency list (" + std::string(hidden) + ")";
        return;
      }
      out.files.push_back(std::move(f));
    }
  };
  {
    constexpr std::size_t kFilesPerThread = 64;
    std::vector<Slice> slices(util::slice_count(closure.size(), kHashThreads, kFilesPerThread));
    util::for_each_slice(closure.size(), slices.size(), [&](std::size_t slice, std::size_t begin, std::size_t end) {
      hash_slice(begin, end, slices[slice]);
    });
    for (auto& sl : slices) {
      if (sl.failed_at != SIZE_MAX) {
        not_stored = sl.reason;
        log.debug("not storing: {}", sl.why);
        break;
      }
      std::move(sl.files.begin(), sl.files.end(), std::back_inserter(entry.files));
      has_include.insert(has_include.end(), sl.has_include.begin(), sl.has_include.end());
      opaque = opaque || sl.opaque;
    }
  }

  // What the input audit (tests/integration/test_input_audit.py) checks every file a miss opened against.
  if (log.should_log(spdlog::level::trace)) {
    for (const auto& c : closure) log.trace("closure file {}", c);
  }

  std::string object = util::read_file(paths.object);
  // Install the outputs first: the build goes on even if storing fails.
  std::string out_text = r.out, err_text = r.err;
  util::replace_all(out_text, scratch.path(), util::dirname(job_.output));
  util::replace_all(err_text, scratch.path(), util::dirname(job_.output));
  if (!job_.depfile.empty()) util::write_file_replacing(job_.depfile, dep_text);
  if (!util::rename_replacing(paths.object, job_.output)) util::copy_file(paths.object, job_.output);

  if (not_stored.empty() && job_.roots.enabled()) {
    for (const auto& root : job_.roots.roots()) {
      if (object.find(root.path) != std::string::npos) {
        not_stored = "path-in-object";
        log.debug("not storing: the object still contains {}", root.path);
        break;
      }
    }
  }
  if (not_stored.empty() && object.find(scratch.path()) != std::string::npos) not_stored = "path-in-object";

  if (not_stored.empty()) {
    entry.path_specific = job_.path_specific;
    for (const auto& marker : adapter_.path_specific_markers()) {
      if (object.find(marker) != std::string::npos) entry.path_specific = true;
    }
    entry.result_key = result_key(entry.files);
    for (const auto& c : closure) {
      if (outside_roots(c)) {
        entry.checkout_specific = true;
        log.debug("{} lies outside the path roots: the entry is specific to this checkout", c);
        break;
      }
    }
    entry.created_ns = util::now_ns();
    if (opaque) {
      log.debug("a computed __has_include or #include: no direct-mode record for this compile");
    } else {
      std::vector<std::string> searched;
      searched.reserve(closure.size());
      // The source is named on the command line, not searched for: nothing can shadow it.
      for (const auto& c : closure) {
        if (util::lexically_normal(c) != job_.source) searched.push_back(c);
      }
      Observations observed;
      std::vector<std::string> present;
      const std::vector<std::string> absent =
          watch_set(searched, job_.search_dirs, job_.system_dirs, has_include, &observed, &present);
      // A __has_include or #include target that exists but is not in the closure: its existence
      // decides a __has_include test, and an #include target skipped as a #pragma once duplicate is
      // included once its content differs. Recorded like a closure file (deleted or edited: the entry
      // no longer verifies); not part of the result key, the object does not depend on its content.
      util::ReadBuffer buffer;
      for (const auto& p : present) {
        ManifestFile f;
        std::string reason, why;
        if (!hash_input(p, buffer, f, reason, why)) {
          log.debug("a named target cannot be recorded ({}): no direct-mode record for this compile", why);
          opaque = true;
          break;
        }
        log.trace("closure file {} (named, not read)", p);
        if (outside_roots(p)) entry.checkout_specific = true;
        entry.files.push_back(std::move(f));
      }
      auto trusted = [&](const std::string& dir, const util::FileIdentity& id, std::int64_t clock) {
        return !is_racy(id, clock, margins_.for_file(dir, id.dev));
      };
      auto groups = opaque ? std::nullopt : group_absent(absent, job_.system_dirs, trusted, &observed);
      if (opaque) {
        // Logged above: a named target could not be recorded.
      } else if (!groups) {
        // A watched path appeared while this ran: no record can claim it missing. The result itself
        // is still right for the closure nvcc read (its key names those files' contents).
        log.debug("a watched path appeared during the compile: no direct-mode record for this compile");
        opaque = true;
      } else {
        for (auto& g : *groups) {
          AbsentDir a;
          a.dir = job_.roots.split(g.dir);
          a.guarded = g.guard.has_value();
          if (g.guard) a.identity = *g.guard;
          for (auto& name : g.names) {
            if (outside_roots(g.dir + "/" + name)) entry.checkout_specific = true;
            a.names.push_back(std::move(name));
          }
          entry.absent.push_back(std::move(a));
        }
      }
    }
    CacheEntry ce;
    ce.object = std::move(object);
    if (!job_.depfile.empty()) {
      ce.depfile_template = job_.roots.templatize(templatize_target(dep_text, job_.depfile_target));
    }
    // Diagnostics name this checkout's files; a hit elsewhere prints its own (as its depfile does).
    ce.stdout_text = job_.roots.templatize_text(out_text);
    ce.stderr_text = job_.roots.templatize_text(err_text);
    try {
      store_.put_parts(storage_key(entry).hex(), serialize_entry_head(ce), ce.object);
      if (!opaque) {
        Manifest manifest;
        if (auto current = store_.get(manifest_key_)) {
          try {
            manifest = deserialize_manifest(*current);
          } catch (const std::exception&) {
          }
        }
        manifest_add(manifest, std::move(entry));
        store_.put_uncompressed(manifest_key_, serialize_manifest(manifest));
      }
      counts_[counter::kStored]++;
      log.debug("miss: stored {}", job_.output);
    } catch (const util::LockTimeout& e) {
      counts_["not_stored.lock-timeout"]++;  // another process holds the lock and does not let go
      log.info("miss: not stored ({}): {}", e.what(), job_.output);
    } catch (const std::exception& e) {
      counts_["errors"]++;
      counts_["error.storage-write"]++;
      log.info("miss: could not store {}: {}", job_.output, e.what());
    }
  } else {
    counts_["not_stored." + not_stored]++;
    log.debug("miss: not stored ({}): {}", not_stored, job_.output);
  }
  write_all(STDOUT_FILENO, out_text);
  write_all(STDERR_FILENO, err_text);
  return 0;
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
  auto pass = [&](const std::string& reason, const std::string& detail) {
    if (reason != "compile-failed") {
      counts[counter::kPassthrough]++;
      counts["passthrough." + reason]++;
      log.debug("passthrough ({}){}{}", reason, detail.empty() ? "" : ": ", detail);
    }
    stats.add(counts);
    run_unchanged(inv);
  };
  if (cfg.disable) pass("disabled", "");
  if (!cfg.allow_world_writable && world_writable(cfg.cache_dir)) {
    // Anyone could plant an entry there (an object with code of theirs): never read from it.
    log.warn("the cache directory {} is writable by every user, so kache does not use it; run `chmod o-w {}` "
             "(or set cache.allow_world_writable = true if every user of this machine is trusted)",
             cfg.cache_dir, cfg.cache_dir);
    pass("cache-world-writable", cfg.cache_dir);
  }
  auto adapter = compiler::find_adapter(inv.compiler_arg);
  if (!adapter) pass("unsupported-compiler", inv.compiler_arg);

  std::optional<Pipeline> pipeline;
  try {
    pipeline.emplace(inv, cfg, *adapter, counts);
    std::optional<int> code = pipeline->run();
    if (pipeline->corrupt_found() > 0) counts[counter::kCorrupt] += pipeline->corrupt_found();
    if (!code || *code < 0) pass(pipeline->passthrough().reason, pipeline->passthrough().detail);
    stats.add(counts);
    if (log.should_log(spdlog::level::debug)) {
      // kache's own cost (all its threads, not the compiler it ran): what a cache adds to a compile.
      // CLOCK_PROCESS_CPUTIME_ID is exact; getrusage's times can be tick-sampled.
      timespec ts {};
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      log.debug("own CPU time {:.2f} ms", ts.tv_sec * 1e3 + ts.tv_nsec / 1e6);
    }
    return *code;
  } catch (const std::exception& e) {
    // Nothing of the user's has been touched yet unless the compile ran; either way running the
    // real compiler now gives the build what it asked for.
    log.info("internal error ({}): running the compiler uncached", e.what());
    counts["errors"]++;
    counts["error.internal"]++;
    stats.add(counts);
    run_unchanged(inv);
  }
}

}  // namespace kache::core
