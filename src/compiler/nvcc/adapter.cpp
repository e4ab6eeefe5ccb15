#include "compiler/nvcc/adapter.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "compiler/common.hpp"
#include "compiler/env_table.hpp"
#include "compiler/job_paths.hpp"
#include "compiler/nvcc/plan.hpp"
#include "compiler/nvcc/stages.hpp"
#include "compiler/nvcc/toolchain.hpp"
#include "core/log.hpp"
#include "util/fs.hpp"

namespace kache::compiler {

namespace nvcc {

namespace {

// A -Xcompiler value with the old path of each -ffile/-fmacro/-fdebug-prefix-map rule keyed as the roots
// map it. On a miss the user's rules come after kache's and win (GCC tries the last rule first), so the
// object names NEW + the rest below OLD; OLD below a root means the same subtree in every checkout that
// keys alike, so the object is the same. Other host flags are kept as written.
core::PathRoots::KeyedValue key_host_prefix_maps(const std::string& value, const core::PathRoots& roots) {
  core::PathRoots::KeyedValue out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = value.find(',', start);
    const std::string token = value.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (auto rule = key_prefix_map_rule(token, roots)) {
      if (!out.why.empty()) out.why += "; ";
      out.why += rule->why;
      out.form += rule->form;
    } else {
      out.form += token;
    }
    if (end == std::string::npos) break;
    out.form += ',';
    start = end + 1;
  }
  if (out.why.empty()) out.why = "kept as written: no prefix-map rule";
  return out;
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Compile:
      return "c";
    case Mode::DeviceCompile:
      return "dc";
    case Mode::CompileRdc:
      return "c-rdc";
  }
  return "?";
}

// The options PlanOptions reads from the environment and the configuration.
PlanOptions plan_options(const core::Invocation& inv, const core::Config& cfg) {
  PlanOptions opts;
  opts.extra_allowlist = cfg.extra_allowlist_flags;
  opts.prepend_flags = util::env_get(inv.env, "NVCC_PREPEND_FLAGS").value_or("");
  opts.append_flags = util::env_get(inv.env, "NVCC_APPEND_FLAGS").value_or("");
  opts.cache_device_outputs = cfg.nvcc_cache_device_outputs;
  return opts;
}

// The job's files, its path roots and the depfile's target.
void place_job(CompileJob& job, const CompilePlan& plan, const core::Invocation& inv, const core::Config& cfg,
               const std::string& cwd) {
  place_files(job, cwd, plan.source, plan.output, plan.depfile != Depfile::None ? plan.depfile_path : "");
  // -MMD leaves out system headers (and what they include), so it cannot be the key's closure.
  job.depfile_partial = plan.depfile == Depfile::MMD;

  // The user's own prefix maps in NVCC_PREPEND_FLAGS would come before kache's rules, which would then
  // win (GCC applies the last matching rule): no rules of kache's at all, paths keyed literally.
  // -lineinfo no longer forces literal keys: device code names the source's and headers' paths as
  // resolved (measured, nvcc 13: not the working directory when those are absolute), which the
  // lineinfo-source field and the object scan below account for; host code takes the prefix maps.
  const bool literal = !cfg.nvcc_path_normalize || job.facts.prefix_map_prepended;
  if (!literal) {
    job.roots = standard_roots(cwd, job.source, job.output, cfg.base_dirs, &job.source_identity,
                               compiler_pwd(cwd, inv.env));
    // nvcc -objtemp names its intermediates after the object (measured: "a.o.cudafe1.cpp" in the
    // symbol table, "a.o.fatbin.c" and "a.o.cudafe1.stub.c" in -g debug info). Named after the source
    // (keyed anyway), the object does not depend on -o, so -o is left out of the key.
    std::string stem = util::basename(job.source);
    if (auto dot = stem.rfind('.'); dot != std::string::npos && dot > 0) stem.resize(dot);
    job.scratch_object_name = stem + ".o";
    // A device output does not depend on its -o either (measured: two names, byte-identical files).
  } else {
    job.source_identity = job.source;
  }
  // Without -MT, nvcc names the rule after -o as written; a stored depfile holds a placeholder there.
  // With roots, one -MT value is handled alike (CMake and Meson pass -MT <the -o value>): the target
  // is the only place the value reaches, so "-o a.o -MT a.o" and "-o b.o -MT b.o" share an entry.
  const bool user_target = !plan.dep_target_args.empty();
  if (plan.depfile != Depfile::None && !user_target) {
    job.depfile_target = plan.output;
  } else if (plan.depfile != Depfile::None && job.roots.enabled() && plan.depfile_targets.size() == 1) {
    job.depfile_target = plan.depfile_targets[0];
  }
}

// What the compile is: the toolchain, the mode, the output kind and how paths are named.
void key_compile_shape(CompileJob& job, const CompilePlan& plan, const Toolchain& tc, const std::string& cwd) {
  auto& k = job.key_fields;
  k.emplace_back("adapter", "nvcc");
  k.emplace_back("toolchain", tc.id);
  k.emplace_back("mode", mode_name(plan.mode));
  // Only for device outputs, so the keys of objects stay what they were.
  if (plan.device_output != DeviceOutput::None) {
    job.output_kind = device_output_name(plan.device_output);
    k.emplace_back("device-output", job.output_kind);
  }
  k.emplace_back("normalize", job.roots.enabled() ? "roots" : "literal");
  // Issue 27, beyond spec 000's host -ffile-prefix-map rules: the host object's debug names go through
  // placeholders replaced by this checkout's roots, so the stored object still names no checkout while
  // the installed one names this checkout's files; __FILE__ keeps the real path (an object naming a
  // root is stored per checkout). None with the user's own host debug maps or compressed debug.
  job.debug_placeholders =
      job.roots.enabled() && !job.facts.user_debug_maps && !job.facts.compressed_debug && !job.facts.lto;
  job.foreign_charset = job.facts.foreign_charset;
  k.emplace_back("debug-names", job.debug_placeholders ? core::kPlaceholderScheme : "as-compiled");
  // The working directory is the build root: with roots it is keyed by its fixed name only (the prefix
  // maps rewrite it wherever the host compiler writes it, -g's DW_AT_comp_dir included).
  k.emplace_back("cwd", job.roots.key_form(cwd));
  auto& log = core::log();
  if (log.should_log(spdlog::level::trace)) {
    log.trace("path cwd {} keyed as {} ({})", cwd, job.roots.key_form(cwd),
              job.roots.enabled() ? "normalized: the build root, mapped by the miss's prefix maps"
                                  : "literal: path normalization is off");
  }
}

// The source's and the output's paths, as the object and the depfile name them.
void key_source_and_output(CompileJob& job, const CompilePlan& plan, const std::string& cwd) {
  auto& log = core::log();
  const bool trace = log.should_log(spdlog::level::trace);
  auto& k = job.key_fields;
  // A relative source path reaches __FILE__, device assert() messages and the depfile as spelled, where
  // no prefix map reaches it: keyed as spelled (src/old/x.cu moved to src/new/x.cu misses; headers
  // found next to it are spelled after it). An absolute one is keyed as the prefix maps rewrite it.
  const auto source_keyed = job.roots.key_value(plan.source);
  k.emplace_back("source", source_keyed.form);
  if (trace) log.trace("path source {} keyed as {} ({})", plan.source, source_keyed.form, source_keyed.why);
  if (plan.has_lineinfo && job.roots.enabled()) {
    // -lineinfo writes the source's path, as nvcc resolves it, into device code where no prefix map
    // reaches (measured: "/w/b1/../src/k.cu" for that spelling, "<cwd>/../src/k.cu" for a relative
    // one): keyed literally, which keys every root it lies below (below), so two build directories
    // of one checkout share while a moved checkout misses. Headers with device code are named there
    // too; the object scan ties such an entry to its checkout (object_names_roots).
    const std::string resolved = plan.source.starts_with("/") ? plan.source : cwd + "/" + plan.source;
    k.emplace_back("lineinfo-source", resolved);
    if (trace) {
      log.trace("path lineinfo source {} keyed as {} (literal: -lineinfo writes it into device code)", plan.source,
                resolved);
    }
    job.object_names_roots = true;
  }
  if (!job.roots.enabled()) {
    k.emplace_back("output", job.output);
    if (trace) log.trace("path output {} keyed as {} (literal: path normalization is off)", plan.output, job.output);
  } else if (trace) {
    log.trace(
        "path output {} not keyed (the object does not name it; the depfile's default target is a "
        "placeholder)",
        plan.output);
  }
}

// The user's path values (-I, -isystem, -include, -MF, -MT) keyed as the roots map them: an absolute
// one below a root by the root's name, so a second build directory (-I<build>/include) or a moved
// checkout with its root as a base dir keys alike; the object names the same fixed name through the
// miss's prefix maps and the depfile and diagnostics are stored with placeholders.
// The -MF value never reaches nvcc on a miss (rewritten into the scratch directory), and a templated
// -MT value reaches only the stored depfile's placeholder: with roots, neither is keyed.
std::vector<std::string> keyed_args(const CompilePlan& plan, const CompileJob& job) {
  using Kind = CompilePlan::PathKind;
  auto& log = core::log();
  const bool trace = log.should_log(spdlog::level::trace);
  std::vector<std::string> keyed_args = plan.keyed_args;
  for (const auto& pa : plan.path_args) {
    std::string& arg = keyed_args[pa.index];
    const std::string value = arg.substr(pa.offset);
    core::PathRoots::KeyedValue keyed;
    if (pa.kind == Kind::HostOptions) {
      keyed = key_host_prefix_maps(value, job.roots);
    } else if (job.roots.enabled() && pa.kind == Kind::Depfile) {
      keyed = {"<depfile>", "not keyed: a miss writes the dependency file elsewhere, its path reaches no output"};
    } else if (pa.kind == Kind::Target && !job.depfile_target.empty()) {
      keyed = {"<target>", "not keyed: the stored dependency file holds a placeholder for the target"};
    } else {
      keyed = pa.kind == Kind::List ? job.roots.key_list(value, ',') : job.roots.key_value(value);
    }
    arg = arg.substr(0, pa.offset) + keyed.form;
    if (trace && !(pa.kind == Kind::HostOptions && keyed.form == value)) {
      log.trace("path {} {} keyed as {} ({})", pa.flag, value, keyed.form, keyed.why);
    }
  }
  return keyed_args;
}

// The arguments, the flag variables, the environment and the roots they name.
// The old paths of the host compiler's macro prefix maps (-Xcompiler values, comma lists).
std::vector<std::string> host_macro_map_olds(const CompilePlan& plan) {
  std::vector<std::string> olds;
  for (const auto& pa : plan.path_args) {
    if (pa.kind != CompilePlan::PathKind::HostOptions) continue;
    const std::string_view value = std::string_view(plan.keyed_args[pa.index]).substr(pa.offset);
    for (std::size_t start = 0; start <= value.size();) {
      const std::size_t end = std::min(value.find(',', start), value.size());
      if (auto rule = parse_prefix_map(value.substr(start, end - start)); rule && rule->maps_macros()) {
        olds.emplace_back(rule->old_path);
      }
      start = end + 1;
    }
  }
  return olds;
}

void key_arguments(CompileJob& job, const CompilePlan& plan, const core::Invocation& inv) {
  auto& k = job.key_fields;
  for (const auto& a : keyed_args(plan, job)) k.emplace_back("arg", a);
  job.macro_map_olds = host_macro_map_olds(plan);
  k.emplace_back("NVCC_PREPEND_FLAGS", plan.prepend_flags);
  k.emplace_back("NVCC_APPEND_FLAGS", plan.append_flags);
  // Every variable the table keys, an unset one apart from an empty one.
  add_env_key_fields(inv.env, EnvRoute::nvcc, k);
  if (plan.has_debug) add_debug_cwd_fields(k, job.facts, util::lexically_normal(inv.cwd));
  // A keyed value that still names a root's real path (-DWHERE=/w/build, CPATH, the lineinfo source)
  // ties the key to that root: the same text in another checkout may lie outside its roots and mean
  // something else. So each root a keyed value names is keyed with its path. Checked before the source
  // identity, an absolute path by design.
  job.keyed_roots = add_root_key_fields(k, k.size(), job.roots);
  // Stored depfiles template the target (see depfile_target); entries from before named it literally.
  k.emplace_back("depfile-target", job.depfile_target.empty() ? "keyed" : "templated");
  // -rdc objects carry a module id hashed from the absolute source path (measured: two checkouts
  // give different objects). The device link needs it unique per TU, so the key names the source's
  // identity: two files of one build never share an object, a moved checkout under a base dir does.
  job.path_specific = plan.rdc();
  if (job.path_specific) k.emplace_back("source-identity", job.source_identity);
}

// The include search path: the source's directory (quoted includes), -I/-isystem, the environment's
// include variables, and the toolchain's own directories.
void add_search_dirs(CompileJob& job, const CompilePlan& plan, const Toolchain& tc, const core::Invocation& inv,
                     const std::string& cwd) {
  // Spelled as given (joined to the cwd, not normalized): the compiler names headers found there as
  // dir + "/" + name, and the path roots must see the same spelling.
  auto add_dir = [&](const std::string& d) { add_search_dir(job, cwd, d); };
  add_dir(util::dirname(plan.source));  // quoted includes: the source's directory, as nvcc spells it
  add_dir(util::dirname(job.source));
  for (const auto& d : plan.include_dirs) {
    add_dir(d);
    add_literal_dir(job, d);
  }
  // A pre-included file (-include / --pre-include) is looked up in the working directory first (GCC:
  // "the first directory searched for file is the preprocessor's working directory"), then along the
  // chain: one that appears in the cwd would shadow the one the closure names, so the cwd is watched.
  if (plan.has_forced_include) add_dir(cwd);
  // The host compiler's include-path variables, as GCC reads them (compiler/job_paths.hpp).
  for (const char* var : {"CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"}) {
    for (const auto& d : include_path_dirs(inv.env, var)) {
      add_dir(d);
      add_literal_dir(job, d);
    }
  }
  for (const auto& d : tc.include_dirs) add_dir(d);
  job.literal_dirs.insert(job.literal_dirs.end(), job.system_dirs.begin(), job.system_dirs.end());
}

}  // namespace

std::variant<Passthrough, CompileJob> NvccAdapter::prepare(const core::Invocation& inv, const core::Config& cfg) {
  Plan planned = plan(inv.args, plan_options(inv, cfg));
  if (auto* p = std::get_if<Passthrough>(&planned)) return *p;
  plan_ = std::get<CompilePlan>(std::move(planned));
  // Environment the tools read that kache cannot model (env_table.cpp says which and why).
  if (auto r = env_refusal(inv.env, EnvRoute::nvcc)) return Passthrough{r->reason, r->variable + " is set"};
  CompileJob job;
  job.facts = read_argument_facts(inv.args, {plan_.prepend_flags, plan_.append_flags});
  const std::string cwd = util::lexically_normal(inv.cwd);
  // A miss names files by absolute paths below the working directory (its scratch directory), which
  // nvcc's shell would expand (see plan.cpp), where the plain command's relative names need not.
  if (cwd.find_first_of("$`") != std::string::npos) return Passthrough{"shell-expansion", "working directory " + cwd};
  // nvcc's intermediates are named below TMPDIR in the same quoted commands.
  if (auto tmp = util::env_get(inv.env, "TMPDIR"); tmp && tmp->find_first_of("$`") != std::string::npos) {
    return Passthrough{"shell-expansion", "TMPDIR=" + *tmp};
  }
  place_job(job, plan_, inv, cfg, cwd);
  Toolchain tc = probe_toolchain(inv.compiler_path, inv.env, plan_.ccbin,
                                 cfg.cache_dir.empty() ? "" : util::join_path(cfg.cache_dir, "toolchains"));
  job.description = tc.description;
  job.system_dirs = tc.include_dirs;
  key_compile_shape(job, plan_, tc, cwd);
  key_source_and_output(job, plan_, cwd);
  key_arguments(job, plan_, inv);
  add_search_dirs(job, plan_, tc, inv, cwd);
  job.toolchain_files = std::move(tc.files);
  return job;
}

std::vector<std::string> NvccAdapter::rewrite_outputs(const std::vector<std::string>& args, const std::string& object,
                                                      const std::string& depfile) const {
  std::vector<std::string> out = args;
  auto replace_value = [&](const CompilePlan::ArgRef& ref, const std::string& value) {
    if (ref.separate) {
      out[ref.index + 1] = value;
    } else {
      out[ref.index] = ref.name + "=" + value;
    }
  };
  for (const auto& ref : plan_.output_args) replace_value(ref, object);
  if (!depfile.empty()) {
    for (const auto& ref : plan_.depfile_args) replace_value(ref, depfile);
  }
  return out;
}

std::vector<std::string> NvccAdapter::miss_command(const core::Invocation& inv, const CompileJob& job,
                                                   const MissPaths& paths) const {
  std::vector<std::string> argv = {inv.compiler_arg};
  // kache's host flags come before the user's: GCC lets the last -frandom-seed win. A fixed random seed
  // fixes anonymous-namespace names, so two misses give byte-identical objects; left out where the
  // object would record it. Each root's debug names become placeholders (none when the user maps
  // paths: theirs alone decide).
  if (!job.facts.records_command_line() && !job.facts.lto)
    argv.insert(argv.end(), {"-Xcompiler", "-frandom-seed=" + paths.seed});
  if (job.debug_placeholders) {
    for (const auto& f : job.roots.debug_map_flags()) argv.insert(argv.end(), {"-Xcompiler", f});
  }
  std::vector<std::string> args = rewrite_outputs(inv.args, paths.object, job.depfile.empty() ? "" : paths.depfile);
  argv.insert(argv.end(), args.begin(), args.end());
  if (job.depfile.empty()) {
    argv.insert(argv.end(), {"-MD", "-MF", paths.depfile});
  }
  if (plan_.dep_target_args.empty()) {
    // The object is written elsewhere first; name the target nvcc would have named (the -o value).
    argv.insert(argv.end(), {"-MT", job.output_written});
  }
  // Intermediate files next to the object, named after it, instead of /tmp/tmpxft_<pid>...: the
  // pid no longer lands in the symbol table.
  if (!plan_.has_objtemp) argv.push_back("-objtemp");
  // The scratch directory is kache's own, no user rule names it, and it lies below the output root, so
  // its rule comes last (GCC tries the last rule first).
  // With roots, a fixed name that does not depend on where -o points (-g debug info names the
  // intermediates there); without, the output directory, as before.
  const std::string scratch_as = job.roots.enabled() ? "/kache/obj" : util::dirname(job.output);
  argv.insert(argv.end(), {"-Xcompiler", "-ffile-prefix-map=" + paths.scratch_dir + "=" + scratch_as});
  return argv;
}

void NvccAdapter::miss_environment(util::Environment& env, const core::Config& cfg) const {
  pin_source_date_epoch(env, cfg);
}

std::vector<std::string> NvccAdapter::closure_command(const core::Invocation& inv, const CompileJob& job) const {
  if (!job.depfile_partial) return {};
  // The same command as a dependency-only run: nvcc -M merges the host pass and every device pass
  // for the same architectures, exactly the set -MD would have written.
  std::vector<bool> drop(inv.args.size(), false);
  for (std::size_t i : plan_.mode_args) drop[i] = true;  // -c, -dc, -MD, -MMD
  for (const auto* refs : {&plan_.output_args, &plan_.depfile_args, &plan_.dep_target_args}) {
    for (const auto& ref : *refs) {
      drop[ref.index] = true;
      if (ref.separate) drop[ref.index + 1] = true;
    }
  }
  std::vector<std::string> argv = {inv.compiler_arg};
  for (std::size_t i = 0; i < inv.args.size(); ++i) {
    if (!drop[i]) argv.push_back(inv.args[i]);
  }
  argv.push_back("-M");
  return argv;
}

std::variant<std::string, util::ProcessResult> NvccAdapter::run_stages(const core::Invocation& inv,
                                                                       const CompileJob& job, const MissPaths& paths,
                                                                       const std::vector<std::string>& argv,
                                                                       const util::Environment& env,
                                                                       StageStore& stages) const {
  // nvcc writes several -MT targets in a way not measured here.
  if (plan_.dep_target_args.size() > 1) return std::string("depfile-targets");
  StageRun run;
  run.nvcc_path = inv.compiler_path;
  run.argv = argv;
  run.env = env;
  run.cwd = util::lexically_normal(inv.cwd);
  run.scratch_dir = paths.scratch_dir;
  // The miss names the target with -MT: the user's, or the -o value as written (miss_command).
  run.depfile_target = plan_.depfile_targets.empty() ? job.output_written : plan_.depfile_targets[0];
  run.depfile_without_system_headers = plan_.depfile == Depfile::MMD;
  for (const auto& field : job.key_fields) {
    if (field.first == "toolchain") run.key_fields.push_back(field);
  }
  add_env_key_fields(inv.env, EnvRoute::nvcc, run.key_fields);
  try {
    return nvcc::run_stages(run, stages);
  } catch (const std::exception& e) {
    // Whatever failed inside (a temporary that cannot be read, a full disk): nvcc runs whole.
    core::log().debug("stages: {}", e.what());
    return std::string("stage-error");
  }
}

// The user's own command, dry run: its host and device preprocessing passes, never `nvcc -E` (one device
// pass, __CUDA_ARCH__ defined: host-only code and the other architectures' are not in it). The flag
// variables reach the passes through the dry run. -g3 (through -Xcompiler) puts every #define in the
// host debug info, which no pass prints: no fallback.
std::variant<std::string, std::vector<PreprocessCommand>> NvccAdapter::fallback_preprocessing(
    const core::Invocation& inv, const CompileJob& job, const util::Environment& env) const {
  if (job.facts.macro_debug_info) {
    return std::string("macro-debug-info");
  }
  std::vector<std::string> argv = {inv.compiler_arg};
  argv.insert(argv.end(), inv.args.begin(), inv.args.end());
  return preprocessing_passes(inv.compiler_path, argv, env, util::lexically_normal(inv.cwd));
}

std::vector<std::string> NvccAdapter::path_specific_markers() const {
  // cudafe++ names internal-linkage device entities _INTERNAL_<hash of the source path>_..., and
  // anonymous namespaces _GLOBAL__N__<hash of the source's real path>_<name> (measured, nvcc 13: two
  // files of one content at two paths get two names, and one object served for both makes their link
  // fail with a multiple definition). GCC's own anonymous namespace is _GLOBAL__N_1: not matched.
  return {"_INTERNAL_", "_GLOBAL__N__"};
}

}  // namespace nvcc
}  // namespace kache::compiler
