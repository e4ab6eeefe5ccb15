// The miss path: the compiler runs, what it read is hashed, its outputs are installed, and the result
// is stored when it may be.

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <exception>
#include <mutex>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/explain_record.hpp"
#include "engine/pipeline_steps.hpp"
#include "engine/remote_exec.hpp"
#include "compiler/adapter.hpp"
#include "compiler/argument_facts.hpp"
#include "compiler/env_table.hpp"
#include "compiler/job_paths.hpp"
#include "core/depfile.hpp"
#include "core/entry.hpp"
#include "core/entry_format.hpp"
#include "core/fatbin.hpp"
#include "core/log.hpp"
#include "core/manifest.hpp"
#include "core/outcome.hpp"
#include "core/path_roots.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "core/watch.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/parallel.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace kache::engine::pipeline_steps {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

// Threads hashing a miss's closure.
constexpr std::size_t kHashThreads = 4;

namespace {
// Adds name to macros once.
void add_macro(std::vector<std::string>& macros, std::string name) {
  if (std::find(macros.begin(), macros.end(), name) == macros.end()) macros.push_back(std::move(name));
}

// The pipeline's stores and counters as an adapter's stage store (compiler/stage_store.hpp): stage
// values are records (local store, then the remotes), zstd-compressed inside.
// Every method takes the lock: a miss with remote execution runs its stages in parallel.
class StagesInStore final : public compiler::StageStore {
 public:
  StagesInStore(PipelineStore& store, Counts& counts, std::vector<std::string>& notes, RemoteStages* remote)
      : store_(store), counts_(counts), notes_(notes), remote_(remote) {}
  std::optional<std::string> load(std::string_view key) override {
    std::lock_guard lock(mu_);
    storage::StorageLookup got = store_.get_record(key);
    if (!got || !*got) return std::nullopt;
    Decoded<std::string> value = decode_value(std::move(**got));
    if (!value) return std::nullopt;
    return std::move(*value);
  }
  void save(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mu_);
    const std::string encoded = encode_zstd(value, 3);
    // A stage built by an execution service the user does not trust is not kept at all, not even
    // locally: a later miss would load it as its own stage and publish what it builds from it.
    if (remote_ && !remote_->publishable()) {
      counts_["stage_not_stored"]++;
      return;
    }
    if (!store_.put_record(key, encoded)) counts_["stage_not_stored"]++;
  }
  void count(const std::string& counter, std::uint64_t n) override {
    std::lock_guard lock(mu_);
    counts_[counter] += n;
  }
  void note(std::string line) override {
    std::lock_guard lock(mu_);
    notes_.push_back(std::move(line));
  }
  bool remote_enabled() const override { return remote_ && remote_->enabled(); }
  std::optional<util::ProcessResult> run_remote(const compiler::RemoteCommand& cmd) override {
    if (!remote_enabled()) return std::nullopt;
    return remote_->run(cmd, counts_, mu_);
  }

 private:
  PipelineStore& store_;
  Counts& counts_;
  std::vector<std::string>& notes_;
  RemoteStages* remote_;
  std::mutex mu_;
};
}  // namespace

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
  if (!compiled) return compile_failed(compiled.error());
  std::string object = util::read_file(paths.object);
  if (job_.debug_placeholders && has_compressed_sections(object)) {
    // Placeholders inside compressed bytes cannot be replaced in place (the toolchain compresses debug
    // sections by default, or a flag kache does not see asked for it): the user's command gives the
    // object a plain compile gives.
    passthrough_ = {std::string(reason::kCompressedDebug), paths.object};
    return -1;
  }
  if (job_.debug_placeholders && is_lto_object(object)) {
    // LTO code the command line did not show (ArgumentFacts::lto): placeholders in it can be neither
    // found nor replaced, and would reach the link's diagnostics and line table.
    passthrough_ = {std::string(reason::kLtoObject), paths.object};
    return -1;
  }
  counts_[counter::kMisses]++;
  if (!job_.output_kind.empty()) counts_[counter::kKindMissesPrefix + job_.output_kind]++;

  const std::string dep_text = util::read_file(paths.depfile);
  std::vector<std::string> closure = closure_files(compiled->closure_text, dep_text);
  Outcome<Done> assembler = add_assembler_inputs(paths, *compiled, closure);
  Outcome<HashedClosure> hashed = assembler ? hash_closure(closure, compiled->start) : assembler.error();
  // What the input audit (tests/integration/test_input_audit.py) checks every file a miss opened against.
  if (core::log().should_log(spdlog::level::trace)) {
    for (const auto& c : closure) core::log().trace("closure file {}", c);
  }
  Installed installed = install_outputs(paths, scratch.path(), compiled->result, dep_text, std::move(object));
  decide_miss_cause(hashed ? hashed->files : std::vector<ManifestFile>{});

  Outcome<Done> toolchain = hashed ? toolchain_held() : hashed.error();
  Outcome<Done> depfile = toolchain ? templatable_depfile(dep_text) : toolchain.error();
  Outcome<Done> headers = depfile ? no_precompiled_header(closure) : depfile.error();
  Outcome<bool> dated = headers ? keyable_time_macros(*compiled) : headers.error();
  Outcome<Done> times = dated ? no_unpinned_time(*dated, installed, *compiled, hashed->files) : dated.error();
  Outcome<PerCheckout> storable = times ? shareable_object(installed.object, scratch.path()) : times.error();
  if (storable) add_expanded_roots(closure, *hashed, *storable);
  if (storable) {
    ManifestEntry entry = describe_entry(std::move(hashed->files), closure, installed.object, *storable);
    entry.date_keyed = *dated;
    const bool recorded = record_direct_lookup(entry, closure, hashed->has_include, hashed->opaque, compiled->start);
    // Without a direct-mode record (a computed name), the preprocessed fallback's entry (issue 39).
    const bool preprocessed =
        !recorded && hashed->opaque && cfg_.preprocessed_fallback && record_preprocessed(entry, closure);
    // A computed name's file is what a user can change; any other refusal is the record's own.
    Unrecorded why{recorded || preprocessed, hashed->opaque ? hashed->opaque_file : ""};
    store_result(std::move(entry), cache_entry(dep_text, installed), why, *storable);
  } else {
    count_reason(counts_, storable.error().category, storable.error().name);
    core::log().debug("miss: not stored ({}): {} -- {}", storable.error().name, job_.output,
                      reason_sentence(storable.error().category, storable.error().name));
  }
  write_all(STDOUT_FILENO, installed.stdout_text);
  write_all(STDERR_FILENO, installed.stderr_text);
  return 0;
}

void Pipeline::decide_miss_cause(const std::vector<ManifestFile>& files) {
  if (!cfg_.events) return;  // only the event log reads it
  explain::Cause c = explain::miss_cause(cfg_.cache_dir, job_, source_digest_.hex(), files, preprocessed_lookup_);
  cause_ = std::move(c.name);
  cause_detail_ = std::move(c.detail);
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
  // The lookup's preprocessing, which the miss's preprocessed entry reuses, read the files earlier: a file
  // modified since it began is then one the compile may have read otherwise.
  if (preprocessed_) out.start = std::min(out.start, preprocessed_began_);
  auto failed = [](const util::ProcessResult& r, std::string_view what) {
    return Failure{ReasonCategory::CompileFailed, reason::kCompileFailed,
                   fmt::format("{} failed (exit {}, signal {})", what, r.exit_code, r.term_signal)};
  };
  if (auto cmd = adapter_.closure_command(inv_, job_); !cmd.empty()) {
    log.debug("miss: listing dependencies with {}", fmt::join(cmd, " "));
    util::ProcessResult deps = util::run_capture(adapter_.program(inv_), cmd, env);
    // The listing preprocesses the user's code: it fails where the compile would (a missing header).
    if (!deps.ok()) return failed(deps, "the dependency listing");
    out.closure_text = std::move(deps.out);
  }
  out.wall_start = std::time(nullptr);
  if (auto cmd = adapter_.preprocess_command(inv_, job_); !cmd.empty()) {
    // The assembler cannot list what it opens: what the preprocessed source asks of it decides.
    log.debug("miss: checking the assembler's inputs with {}", fmt::join(cmd, " "));
    util::ProcessResult pre = util::run_capture(adapter_.program(inv_), cmd, env);
    out.assembler_unchecked = !pre.ok() || may_read_assembler_inputs(pre.out);
    out.time_macros = adapter_.time_macros(pre);
    out.preprocessed = std::move(pre.out);
  }
  out.result = run_miss(paths, argv, env);
  out.wall_end = std::time(nullptr);
  if (!out.result.ok()) return failed(out.result, "the compile");
  return out;
}

// The miss's command, stage by stage where the configuration asks for it (nvcc.stages) and the adapter
// can; else as one process.
util::ProcessResult Pipeline::run_miss(const compiler::MissPaths& paths, const std::vector<std::string>& argv,
                                       const util::Environment& env) {
  if (cfg_.nvcc_stages) {
    std::optional<RemoteStages> remote;
    if (!cfg_.remote_execution_server.empty()) remote.emplace(cfg_);
    StagesInStore stages(store_, counts_, stage_notes_, remote ? &*remote : nullptr);
    auto staged = adapter_.run_stages(inv_, job_, paths, argv, env, stages);
    if (remote && !remote->publishable()) local_only_ = true;
    if (auto* result = std::get_if<util::ProcessResult>(&staged)) return std::move(*result);
    const std::string& why = std::get<std::string>(staged);
    if (why != "unsupported") {
      counts_[counter::kStagesWholePrefix + why]++;
      stage_notes_.push_back("ran whole: " + why);
      core::log().debug("miss: nvcc runs whole ({})", why);
    }
  }
  if (!cfg_.remote_execution_server.empty()) {
    if (auto remote = run_remote_compile(paths, argv, env)) return std::move(*remote);
  }
  return util::run_capture(adapter_.program(inv_), argv, env);
}

// A gcc/clang miss run whole on a remote worker (docs/remote-execution.md): the files it reads, as the
// adapter's listing (-M) says here first, form the action's input root; its outputs come back into the
// scratch directory and go through every check a local miss's outputs go through. nullopt: it runs here,
// counted (remote_fallback.<why>) where it was meant to go.
std::optional<util::ProcessResult> Pipeline::run_remote_compile(const compiler::MissPaths& paths,
                                                                const std::vector<std::string>& argv,
                                                                const util::Environment& env) {
  const std::vector<std::string> listing = adapter_.remote_listing_command(inv_, job_);
  if (listing.empty()) return std::nullopt;
  RemoteCompile compile;
  compile.scratch_dir = paths.scratch_dir;
  compile.system_dirs = job_.system_dirs;
  compile.facts = job_.facts;
  compiler::RemoteCommand& cmd = compile.cmd;
  cmd.argv = argv;
  cmd.argv[0] = adapter_.program(inv_);
  cmd.cwd = util::lexically_normal(inv_.cwd);
  cmd.what = "compile";
  for (const auto& [name, value] : job_.key_fields) {
    if (name == "toolchain") cmd.platform.emplace_back("kache-toolchain", value);
  }
  // What the compiler reads of the environment (env_table's host rows) and PATH; nothing else leaves.
  for (const std::string& entry : env) {
    const std::string name = entry.substr(0, entry.find('='));
    const auto* rule = compiler::find_env_rule(name, compiler::EnvRoute::host);
    if (name == "PATH" || (rule && rule->effect != compiler::EnvEffect::Inert)) cmd.env.push_back(entry);
  }
  for (const std::string* out : {&paths.object, &paths.depfile, &paths.assembler_depfile}) {
    const bool named = std::any_of(argv.begin(), argv.end(),
                                   [&](const std::string& a) { return !out->empty() && a.find(*out) != std::string::npos; });
    if (named) cmd.outputs.push_back(*out);
  }
  std::mutex counts_mutex;
  RemoteStages remote(cfg_);
  util::ProcessResult deps = util::run_capture(adapter_.program(inv_), listing, env);
  try {
    if (!deps.ok()) throw std::runtime_error("the dependency listing failed");
    for (const auto& dep : parse_depfile(deps.out).deps) compile.closure.push_back(util::join_path(cmd.cwd, dep));
  } catch (const std::exception& e) {
    // The compile runs here and says what is wrong in the user's own words.
    return remote.runs_here("inputs", e.what(), counts_, counts_mutex);
  }
  auto result = remote.run_compile(compile, counts_, counts_mutex);
  if (!remote.publishable()) local_only_ = true;
  return result;
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
  // A listing (closure_command) may hold one rule per compile of the driver (HIP: one per target).
  const Depfile deps = closure_text.empty() ? parse_depfile(dep_text) : parse_depfile(closure_text, true);
  const std::string cwd = util::lexically_normal(inv_.cwd);

  // GCC names some headers by resolved paths (the toolkit's include/ is reached through a symlink and
  // ".."), so each directory is also known by its real path; the toolchain's own directories by every
  // spelling of them (a build system's -isystem of nvcc.profile's "bin/.." directory names its headers
  // without the ".."). Only a miss needs these.
  add_real_paths(job_.search_dirs);
  for (auto* dirs : {&job_.system_dirs, &job_.literal_dirs}) *dirs = compiler::system_dir_spellings(*dirs);

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
  auto below_system_dir = [&](const std::string& p) {
    return std::any_of(job_.system_dirs.begin(), job_.system_dirs.end(),
                       [&](const std::string& d) { return util::path_starts_with(p, d); });
  };
  if (below_system_dir(path)) return true;
  // clang names libstdc++'s headers through its GCC installation
  // (/usr/lib/gcc/x86_64-linux-gnu/12/../../../../include/c++/12/...), a spelling none of the toolchain's
  // directories has: the lexically normal path counts where it is the same file.
  if (path.find("/../") == std::string::npos) return false;
  const std::string normal = util::lexically_normal(path);
  if (!below_system_dir(normal)) return false;
  char real[PATH_MAX], normal_real[PATH_MAX];
  return ::realpath(path.c_str(), real) != nullptr && ::realpath(normal.c_str(), normal_real) != nullptr &&
         std::strcmp(real, normal_real) == 0;
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
      out.failure = content.error();
      return;
    }
    scan_has_include(*content, out.hashed.has_include, out.hashed.opaque);
    // The project's own #include names (see scan_include_names) and what its files may expand or paste
    // (see add_expanded_roots); the toolchain's headers change only with the toolchain, which its
    // identity keys.
    if (!is_system(path)) {
      scan_include_names(*content, out.hashed.has_include, out.hashed.opaque);
      note_expansions(path, i, *content, out.hashed);
    }
    if (out.hashed.opaque && out.hashed.opaque_file.empty()) out.hashed.opaque_file = path;
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
    HashedClosure& h = sl.hashed;
    std::move(h.files.begin(), h.files.end(), std::back_inserter(all.files));
    all.has_include.insert(all.has_include.end(), h.has_include.begin(), h.has_include.end());
    all.opaque = all.opaque || h.opaque;
    if (all.opaque_file.empty()) all.opaque_file = h.opaque_file;
    all.expands_here.insert(all.expands_here.end(), h.expands_here.begin(), h.expands_here.end());
    for (auto& m : h.path_macros) add_macro(all.path_macros, std::move(m));
    all.expands_base = all.expands_base || h.expands_base;
    all.expands_anywhere = all.expands_anywhere || h.expands_anywhere;
    if (all.expansion.empty()) all.expansion = h.expansion;
    all.pastes.has_include |= h.pastes.has_include;
    all.pastes.path |= h.pastes.path;
    if (all.paste_file.empty()) all.paste_file = h.paste_file;
  }
  weigh_expansions(all);
  resolve_path_macros(closure, all);
  return all;
}

// What a project file may expand or build by pasting (core/expansion_scan.hpp), noted into out.
void Pipeline::note_expansions(const std::string& path, std::size_t index, std::string_view content,
                               HashedClosure& out) const {
  const PasteScans pastes = scan_pastes(content);
  out.pastes.has_include |= pastes.has_include;
  out.pastes.path |= pastes.path;
  if (out.paste_file.empty() && (pastes.has_include.operand_piece || pastes.has_include.pastes_parameter)) {
    out.paste_file = path;
  }
  if (!job_.roots.enabled()) return;
  const PathExpansion e = scan_path_expansions(content);
  if (e.here) out.expands_here.push_back(index);
  for (const auto& m : e.macros) add_macro(out.path_macros, m);
  out.expands_base = out.expands_base || e.base;
  out.expands_anywhere = out.expands_anywhere || e.anywhere;
  if (e.any() && out.expansion.empty()) out.expansion = fmt::format("{} in {}", e.spelling, path);
}

// Adds the command line's macros to what the closure's files may expand or paste, and decides: a ## that
// may build __has_include leaves the closure opaque (no finite watch list is known complete); one that
// may build __FILE__ or its kin may expand any file's name.
void Pipeline::weigh_expansions(HashedClosure& all) const {
  std::vector<std::string> keyed_words;  // the keyed command line and the flag variables, in order
  for (const auto& field : job_.key_fields) keyed_words.push_back(field.second);
  const std::string defines = compiler::macro_definitions(keyed_words);
  const PasteScans pastes = scan_pastes(defines);
  all.pastes.has_include |= pastes.has_include;
  all.pastes.path |= pastes.path;
  if (all.pastes.has_include.may_build() && !all.opaque) {
    all.opaque = true;
    if (all.opaque_file.empty()) all.opaque_file = all.paste_file.empty() ? "the command line" : all.paste_file;
    core::log().debug("{} pastes with ## what may build a __has_include", all.opaque_file);
  }
  if (!job_.roots.enabled()) return;
  const PathExpansion e = scan_path_expansions(defines);
  for (const auto& m : e.macros) add_macro(all.path_macros, m);
  all.expands_base = all.expands_base || e.base;
  all.expands_anywhere = all.expands_anywhere || e.anywhere;
  if ((e.base || e.anywhere || !e.macros.empty()) && all.expansion.empty()) {
    all.expansion = fmt::format("{} in a -D value", e.spelling);
  }
  if (all.pastes.path.may_build() && !all.expands_anywhere) {
    all.expands_anywhere = true;
    if (all.expansion.empty()) {
      all.expansion = "a ## paste in " + (all.paste_file.empty() ? "a -D value" : all.paste_file);
    }
  }
}

Pipeline::Installed Pipeline::install_outputs(const compiler::MissPaths& paths, const std::string& scratch_dir,
                                              const util::ProcessResult& r, const std::string& dep_text,
                                              std::string object) {
  Installed out;
  out.object = std::move(object);
  // The user gets this checkout's paths where the debug maps wrote placeholders; the entry keeps them.
  if (job_.debug_placeholders) {
    PathRoots::Placeholders found = job_.roots.find_placeholders(out.object);
    // A sibling of a root ("/w/p-deps" mapped as "/w/p" + "-deps") is a path of its own: the entry
    // keeps its text (keyed as any path outside the roots), not a placeholder another checkout fills.
    if (!apply_path_patches(paths.object, found.roots, job_.roots) ||
        !apply_path_patches(paths.object, found.siblings, job_.roots) ||
        !apply_path_patches(out.object, found.siblings, job_.roots)) {
      throw std::runtime_error("cannot write this checkout's paths into " + paths.object);
    }
    out.patches = std::move(found.roots);
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

// Returns why the object is stored for this checkout only ("" when it may be shared) and the roots it names.
// kache adds no -fmacro-prefix-map (issue 27, beyond spec 000's host prefix maps): __FILE__ and assert()
// print the real path, as a plain compile does. Rewriting such a string in the stored object is unsound
// (its length is baked into code: sizeof, constexpr lengths, offsets), so an object that names a root
// is stored under the paths of the roots it names (storage_key): every build directory of this checkout
// shares it, another checkout does not. Debug names come through placeholders, which the scan below
// does not see as roots.
Outcome<Pipeline::PerCheckout> Pipeline::shareable_object(const std::string& object,
                                                          const std::string& scratch_dir) const {
  PerCheckout per_checkout;
  // Device code nvcc compressed (--compress-mode) is scanned decompressed: a byte scan of the object
  // does not see the -lineinfo/-G file names or a device __FILE__ inside (issue 35).
  bool device_names_scratch = false;
  const bool device_readable = read_compressed_device_code(object, [&](std::string_view code) {
    device_names_scratch = device_names_scratch || code.find(scratch_dir) != std::string_view::npos;
    if (job_.roots.enabled()) add_unkeyed_roots(code, per_checkout);
  });
  // kache's scratch directory is no build's path: an object naming it is never served.
  if (device_names_scratch || object.find(scratch_dir) != std::string::npos) {
    return Failure{ReasonCategory::NotStored, reason::kPathInObject, scratch_dir};
  }
  if (job_.roots.enabled()) {
    // LTO code holds __FILE__ and the IR's locations compressed (GCC) or bit-packed (LLVM): no scan
    // can prove it free of a root, or tell which, so it is kept under every root's path (issue 35).
    if (is_lto_object(object)) {
      core::log().debug("the object holds LTO code: the entry is specific to this checkout");
      return PerCheckout{std::string(reason::kLtoObject), {}, true, ""};
    }
    if (!device_readable) {
      core::log().debug("the object holds device code kache cannot read back: the entry is specific to this checkout");
      return PerCheckout{std::string(reason::kCompressedFatbin), {}, true, ""};
    }
    add_unkeyed_roots(object, per_checkout);
  }
  // A root in a string literal of an execution character set the scan cannot read (EBCDIC, say).
  // No scan can tell which roots it names: it is keyed by every root's path.
  if (per_checkout.why.empty() && job_.roots.enabled() && job_.foreign_charset) {
    core::log().debug(
        "the command names an execution character set the scan cannot read: the entry is "
        "specific to this checkout");
    per_checkout.why = std::string(reason::kPathInObject);
    per_checkout.all_roots = true;
  }
  // A root inside compressed debug sections is invisible to the scan above.
  if (per_checkout.why.empty() && has_compressed_sections(object)) {
    core::log().debug("the object has compressed sections: the entry is specific to this checkout");
    per_checkout.why = std::string(reason::kCompressedDebug);
    per_checkout.all_roots = true;
  }
  return per_checkout;
}

// Finds the project's files that use a macro whose body expands __FILE__ (scan_macro_uses): each expands
// its own name there. A macro defined in terms of one is followed too, and so is a paste that may build
// one's name. Reads the project's files again (a miss only, and only where such a macro exists); a file
// that no longer holds what was hashed, or a use in a directive the scan cannot read, leaves any file's
// name possible.
void Pipeline::resolve_path_macros(const std::vector<std::string>& closure, HashedClosure& all) const {
  std::vector<std::string>& macros = all.path_macros;
  PasteScan pastes;
  for (std::size_t known = 0; known < macros.size() && !all.expands_anywhere;) {
    known = macros.size();
    for (std::size_t i = 0; i < closure.size() && !all.expands_anywhere; ++i) {
      if (is_system(closure[i])) continue;
      std::string text;  // unreadable now: empty, which differs from what was hashed
      try {
        text = util::read_file(closure[i]);
      } catch (const std::exception&) {
      }
      if (util::sha256(text) != all.files[i].hash) {
        all.expands_anywhere = true;
        break;
      }
      MacroUses uses = scan_macro_uses(text, macros);
      if (uses.uses) all.expands_here.push_back(i);
      all.expands_anywhere = all.expands_anywhere || uses.anywhere;
      for (auto& d : uses.defines) add_macro(macros, std::move(d));
      pastes |= uses.pastes;
    }
  }
  if (pastes.may_build()) all.expands_anywhere = true;
}

// Ties the entry to the roots below which lie the files whose names the compile may have expanded
// (core/expansion_scan.hpp): the bytes of such an expansion may vanish from the object (sizeof(__FILE__),
// a constexpr hash, source_location::current().file_name() folded to a length), so the object scan of
// shareable_object cannot see it. A file's root is taken from its path as the compiler spelled it (the
// depfile's spelling, made absolute), which is what __FILE__ holds: a source under the source root
// ties that root (every build directory of the checkout shares the entry), a header generated into the
// build directory ties the build directory. No tie where the key already names the root's path, or
// where the user's macro prefix map rewrites the path (macro_mapped).
//
// Which files. __FILE__ in a file's code names that file; __BASE_FILE__ the main source; __FILE__ in a
// #define names wherever the macro is used, and __builtin_FILE() or std::source_location wherever a
// default argument takes the caller's location, so then any file of the closure may be the one named.
// The command line's -D values are read as #defines; names pasted together with ## as scan_pastes says.
//
// Why the toolchain's own headers are not read. <assert.h>, libstdc++'s __glibcxx_assert, CUDA's and
// CUB's error checks and <source_location> mention __FILE__ or __builtin_FILE only to define a macro or a
// function; the path expands where a project file uses it, and their code hands it to a function at
// run time (__assert_fail, __replacement_assert, printf), so its bytes stay in the object, where
// shareable_object finds the root. A project file that computes with a path at compile time names one
// of the words itself, or a macro of its own that does (its #define is read here), or pastes one
// together (scan_pastes). Reading the toolchain's headers would tie every compile that includes
// <cassert>. Not seen: a library installed in a toolchain include directory (/usr/include) whose macro
// hands the project a path it then folds at compile time (boost's BOOST_CURRENT_LOCATION in a
// constant expression).
void Pipeline::add_expanded_roots(const std::vector<std::string>& closure, const HashedClosure& hashed,
                                  PerCheckout& per_checkout) const {
  if (!job_.roots.enabled() || per_checkout.all_roots) return;
  std::vector<std::size_t> named = hashed.expands_here;
  for (std::size_t i = 0; i < closure.size(); ++i) {
    const bool base = hashed.expands_base && util::lexically_normal(closure[i]) == job_.source;
    if (hashed.expands_anywhere || base) named.push_back(i);
  }
  bool tied = false;
  for (const std::size_t i : named) {
    // A relative spelling (../src/x.cu from the build dir) is joined to the working directory: the
    // root it lies in is the normal path's, not the build directory its spelling starts from.
    const std::string normal = util::lexically_normal(closure[i]);
    RootedPath rooted = job_.roots.split(normal);
    if (macro_mapped(closure[i])) {
      // A user's macro map (-fmacro-prefix-map=<checkout>/=) leaves the part of the path below its old
      // path: the same in every checkout for a file of the checkout, but a file of the build or output
      // directory (a generated header) reads build-a/gen/config.h, which names that directory: tied to it.
      rooted.root = -1;
      for (std::size_t r = 0; r < job_.roots.roots().size(); ++r) {
        const auto& candidate = job_.roots.roots()[r];
        // Only a directory strictly below the map's old path leaves its own name in what remains (an
        // in-source build's directory is the old path: src/k.cu reads the same in every checkout).
        const bool below_old = std::any_of(job_.macro_map_olds.begin(), job_.macro_map_olds.end(), [&](const auto& old) {
          return util::path_starts_with(candidate.path, util::lexically_normal(old)) &&
                 candidate.path != util::lexically_normal(old);
        });
        if ((candidate.name == "/kache/build" || candidate.name == "/kache/out") && below_old &&
            util::path_starts_with(normal, candidate.path)) {
          rooted.root = static_cast<int>(r);
          break;
        }
      }
    }
    if (rooted.root < 0) continue;
    const auto& root = job_.roots.roots()[static_cast<std::size_t>(rooted.root)];
    const auto& keyed = job_.keyed_roots;
    if (std::find(keyed.begin(), keyed.end(), root.path) != keyed.end()) continue;
    auto& roots = per_checkout.roots;
    if (std::find(roots.begin(), roots.end(), root.name) != roots.end()) continue;
    core::log().debug("the compile may expand {} ({}): the entry is stored for the checkouts with {} at {}",
                      closure[i], hashed.expansion, root.name, root.path);
    roots.push_back(root.name);
    tied = true;
  }
  if (!tied) return;
  per_checkout.why = std::string(reason::kPathExpanded);
  per_checkout.expanded = hashed.expansion;
}

// Whether a user's macro prefix map rewrites path (absolute, as the compiler spelled it) in every
// compiler's reading: the old path of some rule is path or a directory above it, by whole components.
// GCC matches the old path as a string prefix and applies the last rule that matches, clang 14 sorts its
// rules first, others match by components; a rule matching by whole components matches in each reading,
// so the path expands to some rule's new path (keyed as written, a root it names by the root's path)
// and the rest of the path: what the object scan finds in a string mapped so, which names no root.
bool Pipeline::macro_mapped(const std::string& path) const {
  return std::any_of(job_.macro_map_olds.begin(), job_.macro_map_olds.end(), [&](const std::string& old_path) {
    return old_path.starts_with('/') && util::path_starts_with(path, old_path);
  });
}

// The roots bytes name that the key does not hold (the object scan of shareable_object), added to
// per_checkout by name.
void Pipeline::add_unkeyed_roots(std::string_view bytes, PerCheckout& per_checkout) const {
  for (const std::size_t i : job_.roots.roots_in(bytes)) {
    const auto& root = job_.roots.roots()[i];
    // -lineinfo: a root the key names literally may appear in a stored object.
    if (job_.object_names_roots &&
        std::find(job_.keyed_roots.begin(), job_.keyed_roots.end(), root.path) != job_.keyed_roots.end()) {
      continue;
    }
    core::log().debug("the object names {} ({}): the entry is stored for the checkouts with that path", root.path,
                      root.name);
    per_checkout.why = std::string(reason::kPathInObject);
    if (std::find(per_checkout.roots.begin(), per_checkout.roots.end(), root.name) == per_checkout.roots.end()) {
      per_checkout.roots.push_back(root.name);
    }
  }
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

// The time macros the compiler says the compile expanded (gcc and clang: -Wdate-time, which sees a
// pasted or wrapped spelling too). __DATE__ alone is stored with the day keyed (storage_key; true
// returned), as long as the compile did not cross midnight; __TIME__ and __TIMESTAMP__ (a second, a
// file time) are not stored, nor is a compile whose compiler could not say.
Outcome<bool> Pipeline::keyable_time_macros(const Compiled& compiled) const {
  if (!compiled.time_macros) {
    return Failure{ReasonCategory::NotStored, reason::kTimeMacro,
                   "the compiler could not say which time macros the compile expanded"};
  }
  switch (*compiled.time_macros) {
    case compiler::TimeMacros::none:
      return false;
    case compiler::TimeMacros::time:
      return Failure{ReasonCategory::NotStored, reason::kTimeMacro, "__TIME__ or __TIMESTAMP__ is expanded"};
    case compiler::TimeMacros::date:
      break;
  }
  if (date_macro_text(compiled.wall_start) != date_macro_text(std::time(nullptr))) {
    return Failure{ReasonCategory::NotStored, reason::kTimeMacro, "__DATE__ is expanded and the day changed"};
  }
  return true;
}

// A second net under keyable_time_macros (and the only one for nvcc, whose misses pin the times):
// __DATE__ and __TIME__ are the compile's wall clock unless SOURCE_DATE_EPOCH pins them (clang 14
// ignores it), and __TIMESTAMP__ is the mtime of the file using it (GCC 12 does not pin it). However
// the macro was spelled (pasted, wrapped), its expansion is a string of a known shape: the outputs are
// searched for "hh:mm:ss" within the compile's seconds, for the compile's __DATE__ (unless the key
// holds the day: date_keyed) and for a closure file's mtime as __TIMESTAMP__ prints it; so is the
// preprocessed source where the miss made one (gcc, clang), which holds each expansion whatever the
// code does with it (`__TIME__[7]`). Found: a later hit would replay a stale time, so not stored. A
// false match (the object holding such a string for another reason) only costs the store.
Outcome<Done> Pipeline::no_unpinned_time(bool date_keyed, const Installed& installed, const Compiled& compiled,
                                         const std::vector<ManifestFile>& files) const {
  std::unordered_set<std::string> times;  // __TIME__ values the wall clock went through
  std::unordered_set<std::string> dates;  // __DATE__ values (none when the key holds the day)
  for (std::time_t t = compiled.wall_start - 1; t <= compiled.wall_end + 1; ++t) {
    times.insert(local_time(t, "%H:%M:%S"));
    if (!date_keyed) dates.insert(date_macro_text(t));
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
                                       const std::string& object, const PerCheckout& per_checkout) const {
  ManifestEntry entry;
  entry.files = std::move(files);
  entry.path_specific = job_.path_specific;
  for (const auto& marker : adapter_.path_specific_markers()) {
    if (object.find(marker) != std::string::npos) entry.path_specific = true;
  }
  entry.result_key = result_key(entry.files);
  entry.checkout_specific = per_checkout.all_roots;
  entry.object_roots = per_checkout.roots;
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
        if (auto why = outside_roots(util::join_path(g.dir, name))) {  // g.dir may be "/"
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
                        hashed.error().detail);
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

CacheEntry Pipeline::cache_entry(const std::string& dep_text, Installed& installed) const {
  CacheEntry ce;
  if (!job_.depfile.empty()) {
    ce.outputs.push_back({OutputType::depfile, job_.roots.templatize(templatize_target(dep_text, job_.depfile_target),
                                                                     job_.depfile_escaping)});
    // Only a layout that reproduces this text exactly is stored: anything else restores as stored.
    if (const auto layout = depfile_layout_of(dep_text, job_.depfile_layouts)) {
      ce.outputs.push_back({OutputType::depfile_layout, std::string(layout_name(*layout))});
    }
  }
  // The object as the compiler wrote it, with its placeholders: it names no checkout (spec 000).
  if (!installed.patches.empty()) {
    ce.outputs.push_back({OutputType::path_patches, serialize_path_patches(installed.patches)});
  }
  ce.outputs.push_back({OutputType::miss_cost, serialize_miss_cost(std::max<std::uint64_t>(elapsed_ms(), 1))});
  ce.outputs.push_back({OutputType::object, std::move(installed.object)});  // last: the body a store keeps apart
  // Diagnostics name this checkout's files; a hit elsewhere prints its own (as its depfile does).
  ce.stdout_text = job_.roots.templatize_text(installed.stdout_text);
  ce.stderr_text = job_.roots.templatize_text(installed.stderr_text);
  return ce;
}

namespace {

// A cache that cannot store (not writable, full) is a warning: every compile then runs and stores nothing.
// The words stay the same from one compile to the next (the system's cause, not the entry's path), so the
// log says it once an hour.
void warn_unwritable_cache(const std::string& cache_dir, const std::string& failure) {
  const std::size_t colon = failure.rfind(": ");
  const std::string cause = colon == std::string::npos ? failure : failure.substr(colon + 2);
  core::log().warn("cannot store in the cache directory {} ({}): compiles run but store nothing; make it writable "
                   "and free space, or set cache.dir (`kache doctor` checks it)",
                   cache_dir, cause);
}

}  // namespace

// Stores the result, and (when the entry was recorded for direct or preprocessed lookups) adds it to the
// manifest.
// A failure costs only the store: the outputs are already installed.
void Pipeline::store_result(ManifestEntry entry, const CacheEntry& ce, const Unrecorded& unrecorded,
                            const PerCheckout& stored_for) {
  const std::string& per_checkout = stored_for.why;
  auto& log = core::log();
  std::string failure;
  try {
    const std::string key = storage_key(entry).value().hex();  // this checkout has every root it names
    // Built by an execution service the user does not trust (remote_execution.trusted): this machine only.
    storage::StorageStatus stored = local_only_ ? store_.put_local_parts(key, serialize_entry_head(ce), entry_body(ce))
                                                : store_.put_parts(key, serialize_entry_head(ce), entry_body(ce));
    if (stored) {
      explain::record(
          cfg_.cache_dir, job_, direct_.hex(), key, entry.files, stage_notes_,
          explain::ties_of(entry, job_, stored_for.expanded),
          [&](std::string_view text) { return store_.put_explain_record(key, text); }, unrecorded.computed_include_in);
      // A preprocessed entry is found by its result key, the preprocessing's: it lists no file to verify.
      if (entry.preprocessed) entry.files.clear();
      if (unrecorded.in_manifest) stored = add_to_manifest(std::move(entry));
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
    log.debug("miss: could not store {}: {}", job_.output, failure);
    warn_unwritable_cache(cfg_.cache_dir, failure);
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
  if (local_only_) return store_.put_local_record(manifest_key_, serialize_manifest(manifest));
  return store_.put_record(manifest_key_, serialize_manifest(manifest));
}

}  // namespace kache::engine::pipeline_steps
