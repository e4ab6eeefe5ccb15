#include "engine/pipeline.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/explain_record.hpp"
#include "engine/pipeline_steps.hpp"
#include "engine/pipeline_store.hpp"
#include "compiler/adapter.hpp"
#include "compiler/registry.hpp"
#include "compiler/tool_files.hpp"
#include "core/events.hpp"
#include "core/log.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"

namespace kache::engine::pipeline_steps {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

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
  source_digest_ = source;
  h.add_field("source-content", source.hex());
  log.trace("key field source-content = {}", source.hex());
  util::Digest d = h.finish();
  log.trace("direct key = {}", d.hex());
  return d;
}

std::uint64_t Pipeline::elapsed_ms() const {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_).count());
}

Pipeline::EventFacts Pipeline::event_facts() const {
  EventFacts f;
  if (!job_.source.empty()) {
    // Relative to the working directory: readable, and the same in every checkout.
    f.source = event_source(job_.source, util::lexically_normal(inv_.cwd));
  }
  for (const auto& [name, value] : job_.key_fields) {
    if (name == "language") f.language = value;
  }
  f.miss_cost_ms = stored_cost_ms_;
  if (counts_.count(counter::kMisses)) f.miss_cost_ms = std::max<std::uint64_t>(elapsed_ms(), 1);
  f.cause = cause_;
  f.cause_detail = cause_detail_;
  // What the compile itself counted names a cause before any comparison (a remote that failed it, an
  // entry stored per checkout, a time macro that kept it from being stored).
  for (const auto& [name, value] : counts_) {
    const MissCause* c = value > 0 && !f.cause.empty() ? cause_of_counter(name) : nullptr;
    if (c) {
      f.cause = std::string(c->name);
      f.cause_detail = name;
      break;
    }
  }
  f.stages = stage_notes_;
  return f;
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

std::string date_macro_text(std::time_t t) {
  std::tm tm{};
  if (::localtime_r(&t, &tm) == nullptr) return "";
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, "%b %e %Y", &tm));
}

// Where the entry is stored: under its result key when its outputs name no path of this checkout and no
// day, else combined with exactly the paths they name, as this checkout spells them (and the day).
// nullopt when this checkout lacks a root the entry names (it cannot be served here).
std::optional<util::Digest> Pipeline::storage_key(const ManifestEntry& entry) const {
  if (!entry.path_specific && !entry.checkout_specific && entry.object_roots.empty() && !entry.date_keyed) {
    return entry.result_key;
  }
  util::Hasher h;
  h.add_field("kache-key", "specific-v2");
  h.add_field("result", entry.result_key.hex());
  // __DATE__ as a plain compile would expand it now (keyable_time_macros): another day, another entry.
  if (entry.date_keyed) h.add_field("date", date_macro_text(std::time(nullptr)));
  // nvcc's -rdc module id (__nv_module_id) and cudafe++'s _INTERNAL_ names hash the source's real path
  // (another id at another path), so such an object is stored per real source path.
  if (entry.path_specific) h.add_field("source-path", explain::real_source_path(job_));
  if (entry.checkout_specific) {
    for (const auto& root : job_.roots.roots()) h.add_field("root", root.path);
  }
  for (const auto& name : entry.object_roots) {
    const auto& roots = job_.roots.roots();
    const auto here = std::find_if(roots.begin(), roots.end(), [&](const auto& r) { return r.name == name; });
    if (here == roots.end()) return std::nullopt;
    h.add_field("object-root", name + "=" + here->path);  // the spelling the object holds
  }
  return h.finish();
}

// Why a file the entry records makes it specific to this checkout: it lies outside every path root and
// every directory the key names literally. nullopt when it does not. A path below a root is joined to
// each checkout's own root as spelled; one spelled below a literal directory's spelling is as literal
// ("<p>/Samples/x/../../Common/../inc", a candidate climbing out of CMake's "<p>/Samples/x/../../Common":
// the key holds that spelling). Elsewhere "." and ".." count by what they mean, not by their
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


}  // namespace kache::engine::pipeline_steps

namespace kache::engine {

namespace {

bool world_writable(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return false;
  return (st.st_mode & S_IWOTH) != 0;
}

// Whether a command line compiles a named source to a file (-c, no stdin source "-", no -o /dev/null):
// where a cache that kache refuses to use makes every compile pass through, such a compile shows why.
bool compiles_to_a_file(const std::vector<std::string>& args) {
  bool compile = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-c") compile = true;
    if (args[i] == "-") return false;
    if (args[i] == "-o" && i + 1 < args.size() && args[i + 1] == "/dev/null") return false;
    if (args[i] == "-o/dev/null") return false;
  }
  return compile;
}

[[noreturn]] void run_unchanged(const Invocation& inv) {
  std::fflush(stdout);
  std::fflush(stderr);
  util::exec_replace(inv.compiler_path, inv.argv(), inv.env);
  std::fprintf(stderr, "kache: cannot run %s: %s\n", inv.compiler_path.c_str(), std::strerror(errno));
  std::_Exit(127);
}

using pipeline_steps::Counts;
using pipeline_steps::Pipeline;

// What one compile writes when it ends, in one place: its counts (kache -s) and its event (kache report).
class Accounting {
 public:
  Accounting(const Invocation& inv, const Config& cfg) : inv_(inv), cfg_(cfg), stats_(cfg.cache_dir) {}
  void finish(const Counts& counts, const Pipeline* pipeline) noexcept {
    stats_.add(counts);
    if (cfg_.events && !cfg_.cache_dir_refused) log_event(counts, pipeline);
  }

 private:
  void log_event(const Counts& counts, const Pipeline* pipeline) const noexcept {
    try {
      CompileEvent e;
      e.time_ms = started_ms_;
      e.build = event_build_id(std::getenv("KACHE_BUILD_ID"));
      e.pid = static_cast<std::uint32_t>(::getpid());
      e.tool = util::basename(inv_.compiler_arg);
      e.outcome = event_outcome(counts);
      e.reason = event_reason(counts);
      e.counts = counts;
      e.direct = cfg_.direct_mode;
      e.wall_us = static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started_).count());
      e.cpu_us = cpu_us();
      if (pipeline) {
        auto facts = pipeline->event_facts();
        e.source = std::move(facts.source);
        e.language = event_language(facts.language, e.source, e.tool);
        e.miss_cost_ms = facts.miss_cost_ms;
        e.cause = std::move(facts.cause);
        e.cause_detail = std::move(facts.cause_detail);
        e.stages = std::move(facts.stages);
      }
      if (cfg_.events_command_line) e.command = inv_.argv();  // asked for: it may hold tokens
      EventLog(cfg_.cache_dir).append(e);
    } catch (...) {
      // A diagnostic: the build goes on without it.
    }
  }
  // kache's own CPU time and that of the processes it waited for (the compiler of a miss).
  static std::uint64_t cpu_us() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    rusage children{};
    ::getrusage(RUSAGE_CHILDREN, &children);
    const auto tv_us = [](const timeval& tv) { return tv.tv_sec * 1000000 + tv.tv_usec; };
    return static_cast<std::uint64_t>(ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + tv_us(children.ru_utime) +
                                      tv_us(children.ru_stime));
  }

  const Invocation& inv_;
  const Config& cfg_;
  StatsFile stats_;
  std::int64_t started_ms_ = util::now_ns() / 1000000;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace

int run_compiler(const Invocation& inv, const Config& cfg) {
  auto& log = core::log();
  Accounting accounting(inv, cfg);
  Counts counts;
  // The stores outlive the pipeline, whose end flushes the identities it verified.
  std::optional<LayeredPipelineStore> store;
  std::optional<Pipeline> pipeline;
  auto pass = [&](std::string_view name, const std::string& detail) {
    // A failed compile was counted where it failed (compile_failed), and is the user's to read.
    if (name != reason::kCompileFailed) {
      count_reason(counts, ReasonCategory::Passthrough, name);
      log.debug("passthrough ({}){}{} -- {}", name, detail.empty() ? "" : ": ", detail,
                reason_sentence(ReasonCategory::Passthrough, name));
    }
    accounting.finish(counts, pipeline ? &*pipeline : nullptr);
    run_unchanged(inv);
  };
  if (cfg.disable) pass(reason::kDisabled, "");
  // No cache to count in: the default directory is another cache, not the one asked for.
  if (cfg.cache_dir_refused) {
    // Every compile passes through until the setting is fixed: a real compile says why.
    if (compiles_to_a_file(inv.args)) core::show_pending_warnings();
    run_unchanged(inv);
  }
  if (!cfg.allow_world_writable && world_writable(cfg.cache_dir)) {
    // Anyone could plant an entry there (an object with code of theirs): never read from it.
    log.warn(
        "the cache directory {} is writable by every user, so kache does not use it; run `chmod o-w {}` "
        "(or set cache.allow_world_writable = true if every user of this machine is trusted)",
        cfg.cache_dir, cfg.cache_dir);
    if (compiles_to_a_file(inv.args)) core::show_pending_warnings();
    pass(reason::kCacheWorldWritable, cfg.cache_dir);
  }
  auto adapter = compiler::find_adapter(inv.compiler_arg, inv.args);
  if (!adapter) pass(reason::kUnsupportedCompiler, inv.compiler_arg);

  try {
    store.emplace(cfg);
    pipeline.emplace(inv, cfg, *adapter, counts, *store);
    std::optional<int> code = pipeline->run();
    if (pipeline->corrupt_found() > 0) counts[counter::kCorrupt] += pipeline->corrupt_found();
    pipeline->add_storage_counts(counts);
    // A remote that failed is kache's own failure to count, where `kache -s` shows them: `errors`.
    if (counts.contains("remote_errors") || counts.contains("remote_timeouts")) {
      count_reason(counts, ReasonCategory::Error, reason::kRemoteFailed);
    }
    if (!code || *code < 0) pass(pipeline->passthrough().reason, pipeline->passthrough().detail);
    accounting.finish(counts, &*pipeline);
    core::show_pending_warnings();  // served: the first warning of each cause in the build reaches the person
    if (log.should_log(spdlog::level::debug)) {
      // kache's own cost (all its threads, not the compiler it ran): what a cache adds to a compile.
      // CLOCK_PROCESS_CPUTIME_ID is exact; getrusage's times can be tick-sampled.
      timespec ts{};
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      log.debug("own CPU time {:.2f} ms", ts.tv_sec * 1e3 + ts.tv_nsec / 1e6);
    }
    return *code;
  } catch (const compiler::UnreadableWrapper& e) {
    pass(reason::kWrapperScript, e.what());  // runs the compiler unchanged: never returns
    return 1;
  } catch (const std::exception& e) {
    // Nothing of the user's has been touched yet unless the compile ran; either way running the
    // real compiler now gives the build what it asked for.
    log.info("internal error ({}): running the compiler uncached", e.what());
    count_reason(counts, ReasonCategory::Error, reason::kInternal);
    accounting.finish(counts, nullptr);
    run_unchanged(inv);
  }
}


}  // namespace kache::engine
