#include "compiler/offload/adapter.hpp"

#include <algorithm>
#include <functional>

#include "compiler/argument_facts.hpp"
#include "compiler/common.hpp"
#include "compiler/env_table.hpp"
#include "compiler/gcc/plan.hpp"
#include "compiler/job_paths.hpp"
#include "compiler/offload/cuda.hpp"
#include "compiler/offload/toolchain.hpp"
#include "util/fs.hpp"

namespace kache::compiler::offload {

namespace {


void replace_value(std::vector<std::string>& args, const gcc::CompilePlan::ArgRef& ref, std::string_view name,
                   const std::string& value) {
  if (ref.attached) {
    args[ref.index] = std::string(name) + value;
  } else {
    args[ref.index + 1] = value;
  }
}

// Throws when hipcc cannot say what it runs: the pipeline then runs the compile unchanged. In clang's
// CUDA mode a toolkit clang cannot use (its -### error, or the wrapper's header missing) is a
// passthrough instead: the compile then fails as plain clang's, with clang's own words.
std::variant<Passthrough, HipccToolchain> probe_toolchain(Driver driver, bool cuda, const core::Invocation& inv,
                                                          const ProbeStandIns& stand_ins, const std::string& cwd,
                                                          const core::Config& cfg) {
  std::optional<HipccToolchain> tc;
  try {
    tc = probe_offload(driver, inv.compiler_path, inv.args, stand_ins, inv.env, cwd,
                       cfg.cache_dir.empty() ? "" : util::join_path(cfg.cache_dir, "toolchains"));
  } catch (const DriverError& e) {
    if (cuda) return Passthrough{"clang-cuda-toolkit", e.what()};
    throw;
  }
  if (auto missing = cuda ? missing_cuda_wrapper_header(inv.args, tc->search_dirs, cwd) : std::nullopt) {
    return Passthrough{"clang-cuda-toolkit", *missing};
  }
  return std::move(*tc);
}

// Whether hipcc.pl prints to stdout under this HIPCC_VERBOSE ($verbose & 0x1 commands, 0x2 paths, 0x4
// arguments; a miss's would name kache's scratch files and break the dependency listing). Perl's
// numeric reading of other spellings (" 1", "1e0", "-1", huge numbers) is not modeled: only plain
// decimal digits whose value has none of those bits are taken as silent.
bool hipcc_verbose_prints(const util::Environment& env) {
  const auto v = util::env_get(env, "HIPCC_VERBOSE");
  if (!v || v->empty()) return false;  // unset: 0; empty: 0 (with a warning on stderr, keyed)
  if (v->size() > 9 || !std::all_of(v->begin(), v->end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
  return (std::stoul(*v) & 0x7) != 0;
}

// The path values of the keyed line: gcc's (-I, -MF, -MT...) and spec 003's -Xclang -dependency-file
// and -Xclang -MT values, keyed like -MF and -MT.
std::vector<PathValue> path_values(const OffloadPlan& plan) {
  std::vector<PathValue> values = plan.compile.path_values;
  if (plan.xclang_depfile) values.push_back({plan.xclang_depfile_index, 0});
  for (std::size_t i : plan.xclang_target_indexes) values.push_back({i, 0});
  return values;
}

// The values that only name this compile's files, for the probe's stand-ins (toolchain.hpp).
ProbeStandIns stand_ins(const OffloadPlan& plan) {
  const gcc::CompilePlan& cp = plan.compile;
  ProbeStandIns s;
  s.source = cp.source_index;
  auto add = [&](const gcc::CompilePlan::ArgRef& ref, std::size_t option_length) {
    s.values.push_back(ref.attached ? PathValue{ref.index, option_length} : PathValue{ref.index + 1, 0});
  };
  if (cp.output_arg) add(*cp.output_arg, 2);     // -o
  if (cp.depfile_arg) add(*cp.depfile_arg, 3);   // -MF
  for (const auto& ref : cp.dep_target_args) add(ref, 3);  // -MT, -MQ
  if (plan.xclang_depfile) s.values.push_back({plan.xclang_depfile_index, 0});
  for (std::size_t i : plan.xclang_target_indexes) s.values.push_back({i, 0});
  return s;
}

// Search dirs for the absent-path watch, and the literal dirs among them.
void add_search_dirs(CompileJob& job, const gcc::CompilePlan& cp, const HipccToolchain& tc, const std::string& cwd) {
  // Search dirs for the absent-path watch: the source's directory, then every cc1 job's include dirs in
  // search order (the user's and those hipcc and the HIP driver add, e.g. -isystem $HSA_PATH/include
  // before the user's -isystem), then the user's and the clang's own as a backstop.
  auto add_dir = [&](const std::string& d) { add_search_dir(job, cwd, d); };
  add_dir(util::dirname(cp.source));
  for (const auto& d : tc.search_dirs) add_dir(d);
  for (const auto& d : cp.include_dirs) add_dir(d);
  for (const auto& d : tc.include_dirs) add_dir(d);
  // Keyed as written: the clang's own dirs, those hipcc and the HIP driver add (the toolchain id holds
  // hipcc's additions; the driver's follow from the clang and the keyed args) and the user's absolute
  // ones (keyed literally when outside every root). A header below one is the same file in any checkout.
  job.literal_dirs = job.system_dirs;
  for (const auto& dirs : {std::cref(tc.search_dirs), std::cref(cp.include_dirs)}) {
    for (const auto& d : dirs.get()) {
      if (!d.starts_with('/')) continue;
      // As the driver spells it (a header found there is named so) and as it resolves.
      job.literal_dirs.push_back(d);
      job.literal_dirs.push_back(util::lexically_normal(d));
    }
  }
}

}  // namespace

bool is_hipcc(const std::string& argv0) {
  const std::string name = util::basename(argv0);
  return name == "hipcc" || name == "hipcc.pl";
}

bool is_clang_hip(const std::string& argv0, const std::vector<std::string>& args) {
  if (!gcc::is_gcc_driver(argv0) || util::basename(argv0).find("clang") == std::string::npos) return false;
  return names_hip_input(args);
}

std::variant<Passthrough, CompileJob> HipccAdapter::prepare(const core::Invocation& inv, const core::Config& cfg) {
  Plan planned = plan(driver_, inv.args, cfg.extra_allowlist_flags);
  if (auto* p = std::get_if<Passthrough>(&planned)) return *p;
  plan_ = std::get<OffloadPlan>(planned);
  if (auto p = cuda_not_cached(plan_)) return *p;
  const gcc::CompilePlan& cp = plan_.compile;
  // env_table.cpp's rows say which and why (HCC_AMDGPU_TARGET, HIPCC_COMPILE_FLAGS_APPEND, PERL5LIB...).
  if (auto r = env_refusal(inv.env, env_route(driver_))) return Passthrough{r->reason, r->variable + " is set"};
  if (driver_ == Driver::hipcc && hipcc_verbose_prints(inv.env)) return Passthrough{"env-verbose", "HIPCC_VERBOSE"};
  // Spec 003's form without -MT: cc1 would name a target of its own choosing.
  if (plan_.xclang_depfile && plan_.xclang_targets.empty()) {
    return Passthrough{"depfile-modifier", "-Xclang -dependency-file without -Xclang -MT"};
  }
  CompileJob job;
  const std::string cwd = util::lexically_normal(inv.cwd);
  std::string depfile = cp.depfile != gcc::Depfile::None ? cp.depfile_path : "";
  if (plan_.xclang_depfile) depfile = *plan_.xclang_depfile;
  place_files(job, cwd, cp.source, cp.output, depfile);
  if (cp.depfile != gcc::Depfile::None && !cp.has_dep_target) job.depfile_target = cp.output;
  // Every dependency file a compile writes covers one of its compiles only: each device compile and the
  // host compile write the same file, the last one wins (measured with two targets). The closure is
  // closure_command's listing, one rule per compile.
  job.depfile_partial = true;
  // The build, source and output directories and the base dirs are roots, as for gcc (job_paths.hpp).
  job.facts = read_argument_facts(inv.args);
  set_job_roots(job, cwd, cfg, inv.env);
  // hipcc pastes kache's debug maps into its /bin/sh line: a root spelling one of its patterns would
  // change what it runs. No placeholders then: the object names the roots and is stored per checkout.
  if (driver_ == Driver::hipcc && !std::all_of(job.roots.roots().begin(), job.roots.roots().end(),
                                               [](const auto& r) { return hipcc_inert(r.path); })) {
    job.debug_placeholders = false;
  }
  // Device code built with debug information carries its DWARF inside the offload bundle, an allocated
  // section the linker copies and the runtime loads. A placeholder there can only be replaced at its own
  // length, so the restored device image would differ from plain clang's (measured: .hip_fatbin of a -g
  // object, 101798 bytes through placeholders, 101356 to 101453 plain, by path length). No placeholders
  // then: the object names the roots as plain clang writes them and is stored per checkout.
  if (plan_.compile.has_debug && plan_.mode != DeviceMode::host_only) job.debug_placeholders = false;

  auto probed = probe_toolchain(driver_, cp.language == "cuda", inv, stand_ins(plan_), cwd, cfg);
  if (auto* p = std::get_if<Passthrough>(&probed)) return *p;
  HipccToolchain& tc = std::get<HipccToolchain>(probed);
  if (auto p = cuid_refusal(plan_, clang_major_version(tc.description))) return *p;
  if (!tc.config_include.empty()) return Passthrough{"clang-config-include", tc.config_include};
  job.description = tc.description;
  job.system_dirs = tc.include_dirs;
  job.toolchain_files = std::move(tc.files);
  job.precompiled_headers_searched = true;
  job.output_kind = plan_.output_kind;

  auto& k = job.key_fields;
  k.emplace_back("adapter", name());
  // clang++ and clang differ in the C++ runtime they name; hipcc's name picks nothing.
  k.emplace_back("driver-name", util::basename(inv.compiler_arg));
  k.emplace_back("toolchain", tc.id);
  k.emplace_back("language", cp.language);
  k.emplace_back("output-kind", plan_.output_kind);
  // -fgpu-rdc externalizes static device variables under names hashed from the cuid, which clang hashes
  // from the source's real path and the whole line: two files of one build that key alike (libA/x.hip,
  // libB/x.hip, each compiled in its own directory) must not get one object, whose names would clash in
  // the device link. Stored per source identity, as nvcc's -rdc objects.
  job.path_specific = plan_.rdc;
  add_path_key_fields(k, job, cwd, cp.source);
  for (const auto& a : keyed_args(cp.keyed_args, path_values(plan_), job.roots)) k.emplace_back("arg", a);
  job.macro_map_olds = macro_map_olds(cp.keyed_args);
  add_env_key_fields(inv.env, env_route(driver_), k);
  // Modeled (env_table.cpp): a value that prints passed through above.
  const auto verbose = util::env_get(inv.env, "HIPCC_VERBOSE");
  k.emplace_back("env:HIPCC_VERBOSE", verbose ? "=" + *verbose : "unset");
  // Each root a keyed value names (-DWHERE=\"$PWD\", --rocm-path=<checkout>/rocm) is keyed with its path.
  job.keyed_roots = add_root_key_fields(k, k.size(), job.roots);
  k.emplace_back("depfile-target", job.depfile_target.empty() ? "keyed" : "templated");
  job.depfile_layouts = {core::DepfileLayout::clang75, core::DepfileLayout::clang75_packed};
  job.depfile_escaping = core::MakeEscaping::clang;

  add_search_dirs(job, cp, tc, cwd);
  job.assembler_inputs = CompileJob::AssemblerInputs::scanned;
  return job;
}

std::vector<std::string> HipccAdapter::miss_command(const core::Invocation& inv, const CompileJob& job,
                                                    const MissPaths& paths) const {
  const gcc::CompilePlan& cp = plan_.compile;
  std::vector<std::string> argv = {inv.compiler_arg};
  // Debug names through placeholders, as for gcc (every cc1 job, device ones included, takes them).
  if (job.debug_placeholders) {
    for (const auto& f : job.roots.debug_map_flags()) argv.push_back(f);
  }
  std::vector<std::string> args = inv.args;
  if (cp.output_arg) replace_value(args, *cp.output_arg, "-o", paths.object);
  if (cp.depfile_arg) replace_value(args, *cp.depfile_arg, "-MF", paths.depfile);
  if (plan_.xclang_depfile) args[plan_.xclang_depfile_index] = paths.depfile;
  argv.insert(argv.end(), args.begin(), args.end());
  if (!cp.output_arg) argv.insert(argv.end(), {"-o", paths.object});
  // The 003 form's -MT names the target; otherwise a dependency file the pipeline reads even when the
  // user asked for none (the closure is the listing).
  if (!plan_.xclang_depfile) {
    if (job.depfile.empty()) {
      argv.insert(argv.end(), {"-MD", "-MF", paths.depfile});
    } else if (!cp.depfile_arg) {
      argv.insert(argv.end(), {"-MF", paths.depfile});
    }
    if (!cp.has_dep_target) argv.insert(argv.end(), {"-MQ", job.output_written});
  }
  argv.push_back(scratch_prefix_map(job, paths.scratch_dir));
  return argv;
}

std::vector<std::string> HipccAdapter::closure_command(const core::Invocation& inv, const CompileJob&) const {
  // The user's command without its outputs and dependency options, listing the dependencies of every
  // compile on stdout (one rule each). clang's --dependencies is -M under a spelling hipcc does not
  // rewrite: for "-M" hipcc adds --cuda-host-only, which would list the host compile's headers only.
  const gcc::CompilePlan& cp = plan_.compile;
  std::vector<bool> drop(inv.args.size(), false);
  auto drop_option = [&](const gcc::CompilePlan::ArgRef& ref) {
    drop[ref.index] = true;
    if (!ref.attached && ref.index + 1 < drop.size()) drop[ref.index + 1] = true;
  };
  if (cp.output_arg) drop_option(*cp.output_arg);
  if (cp.depfile_arg) drop_option(*cp.depfile_arg);
  for (const auto& ref : cp.dep_target_args) drop_option(ref);
  for (std::size_t i : cp.dep_flag_args) drop[i] = true;
  // -Xclang -dependency-file -Xclang D and -Xclang -MT -Xclang T: the value and the three before it.
  std::vector<std::size_t> pairs = plan_.xclang_target_indexes;
  if (plan_.xclang_depfile) pairs.push_back(plan_.xclang_depfile_index);
  for (std::size_t v : pairs) {
    for (std::size_t i = v - 3; i <= v; ++i) drop[i] = true;
  }
  std::vector<std::string> argv = {inv.compiler_arg};
  for (std::size_t i = 0; i < inv.args.size(); ++i) {
    if (!drop[i]) argv.push_back(inv.args[i]);
  }
  argv.push_back("--dependencies");
  return argv;
}

void HipccAdapter::miss_environment(util::Environment& env, const core::Config& cfg) const {
  pin_source_date_epoch(env, cfg);
}

}  // namespace kache::compiler::offload
