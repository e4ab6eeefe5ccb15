#include "compiler/gcc/adapter.hpp"

#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "compiler/common.hpp"
#include "compiler/env_table.hpp"
#include "compiler/gcc/plan.hpp"
#include "compiler/gcc/toolchain.hpp"
#include "compiler/gcc/wrapper.hpp"
#include "compiler/job_paths.hpp"
#include "core/log.hpp"
#include "util/fs.hpp"

namespace kache::compiler::gcc {

namespace {

// The user's arguments with an option's value replaced (the option found at ref by the planner).
void replace_value(std::vector<std::string>& args, const CompilePlan::ArgRef& ref, std::string_view name,
                   const std::string& value) {
  if (ref.attached) {
    args[ref.index] = std::string(name) + value;
  } else {
    args[ref.index + 1] = value;
  }
}

// Whether GNU as can list the files it opens for this compile (-Wa,--MD): not with clang (its
// integrated assembler refuses --MD, clang 14 and 19 measured), not under -flto (GCC records -Wa options
// in the LTO object, COLLECT_AS_OPTIONS, so the scratch path would reach it), and not when the user asks
// for an assembler dependency file of their own.
bool assembler_listing_possible(const ArgumentFacts& facts, bool clang) {
  return !clang && !facts.lto && !facts.assembler_depfile;
}

// A precompiled header next to a forced include is read instead of it (GCC tries <file>.gch first,
// clang <file>.pch/.gch): a binary input the dependency file does not describe.
std::optional<Passthrough> precompiled_header_beside_forced_include(const CompilePlan& plan, const std::string& cwd,
                                                                    const std::string& source) {
  for (const auto& f : plan.forced_includes) {
    std::vector<std::string> places = {util::join_path(cwd, f), util::join_path(util::dirname(source), f)};
    for (const auto& d : plan.include_dirs) places.push_back(util::join_path(util::join_path(cwd, d), f));
    for (const auto& p : places) {
      for (const char* ext : {".gch", ".pch"}) {
        if (util::exists(p + ext)) return Passthrough{"pch", p + ext};
      }
    }
  }
  return std::nullopt;
}

void add_search_dirs(CompileJob& job, const CompilePlan& plan, const Toolchain& tc, const core::Invocation& inv,
                     const std::string& cwd) {
  // The include search path, spelled as given (joined to the cwd, not normalized): the compiler names
  // headers found there as dir + "/" + name, and the path roots must see the same spelling.
  auto add_dir = [&](const std::string& d, bool literal_if_absolute) {
    if (d.empty()) return;
    add_search_dir(job, cwd, d);
    if (literal_if_absolute) add_literal_dir(job, d);
  };
  add_dir(util::dirname(plan.source), false);  // quoted includes: the source's directory, as spelled
  add_dir(util::dirname(job.source), false);
  for (const auto& d : plan.include_dirs) add_dir(d, true);
  // A forced include is looked up in the working directory first (GCC: "the first directory searched
  // for file is the preprocessor's working directory"): one appearing there would shadow it.
  if (!plan.forced_includes.empty()) add_dir(cwd, false);
  for (const char* var : {"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH"}) {
    for (const auto& d : include_path_dirs(inv.env, var)) add_dir(d, true);
  }
  for (const auto& d : tc.include_dirs) add_dir(d, false);
  job.literal_dirs.insert(job.literal_dirs.end(), job.system_dirs.begin(), job.system_dirs.end());
}

}  // namespace

namespace {

std::string memo_dir(const core::Config& cfg) {
  return cfg.cache_dir.empty() ? "" : util::join_path(cfg.cache_dir, "toolchains");
}

// The wrapper's command must write what the user's would: kache restores the outputs the user's command
// names (a wrapper adding -MD, -save-temps or another -o would write files a hit does not).
bool same_outputs(const CompilePlan& a, const CompilePlan& b) {
  return a.source == b.source && a.output == b.output && a.output_implied == b.output_implied &&
         a.depfile == b.depfile && a.depfile_path == b.depfile_path && a.has_dep_target == b.has_dep_target &&
         a.dep_target_args.size() == b.dep_target_args.size();
}

}  // namespace

std::optional<Passthrough> GccAdapter::read_wrapper(const core::Invocation& given, const core::Config& cfg) {
  wrapped_ = false;
  if (!is_script(given.compiler_path)) return std::nullopt;
  auto resolved = resolve_wrapper(given, EnvRoute::host, memo_dir(cfg));
  if (auto* p = std::get_if<Passthrough>(&resolved)) return *p;
  const ResolvedWrapper& w = std::get<ResolvedWrapper>(resolved);
  Plan wrapped_plan = plan(w.args, cfg.extra_allowlist_flags);
  if (auto* p = std::get_if<Passthrough>(&wrapped_plan)) return *p;
  if (!same_outputs(std::get<CompilePlan>(wrapped_plan), plan_)) {
    return Passthrough{"wrapper-script", given.compiler_path + " changes what the compile writes"};
  }
  effective_ = given;
  effective_.compiler_arg = w.driver_arg;
  effective_.compiler_path = w.driver;
  effective_.args = w.args;
  plan_ = std::get<CompilePlan>(wrapped_plan);
  wrapped_ = true;
  return std::nullopt;
}

// The driver's fields of the key: its toolchain, what `native` expands to here, the name it runs under.
std::optional<Passthrough> GccAdapter::key_driver(std::vector<std::pair<std::string, std::string>>& k,
                                                  const Toolchain& tc, const core::Invocation& inv,
                                                  const core::Config& cfg) const {
  k.emplace_back("adapter", "gcc");
  k.emplace_back("toolchain", tc.id);
  if (!plan_.machine_native.empty()) {
    try {
      k.emplace_back("machine-native", native_expansion(inv.compiler_path, inv.env, memo_dir(cfg),
                                                        plan_.driver_prefixes, plan_.machine_native));
    } catch (const std::exception& e) {
      return Passthrough{"machine-native", e.what()};
    }
  }
  // The name the driver runs under decides the language of a .c file and the C++ runtime (clang++ is
  // clang under another name; g++ compiles x.c as C++).
  k.emplace_back("driver-name", util::basename(inv.compiler_arg));
  return std::nullopt;
}

std::variant<Passthrough, CompileJob> GccAdapter::prepare(const core::Invocation& given, const core::Config& cfg) {
  Plan planned = plan(given.args, cfg.extra_allowlist_flags);
  if (auto* p = std::get_if<Passthrough>(&planned)) return *p;
  plan_ = std::get<CompilePlan>(planned);
  if (auto p = read_wrapper(given, cfg)) return *p;
  const core::Invocation& inv = command(given);
  const CompilePlan& plan = plan_;
  // Environment the compiler reads that kache cannot model (env_table.cpp says which and why).
  if (auto r = env_refusal(inv.env, EnvRoute::host)) return Passthrough{r->reason, r->variable + " is set"};

  CompileJob job;
  const std::string cwd = util::lexically_normal(inv.cwd);
  place_files(job, cwd, plan.source, plan.output, plan.depfile != Depfile::None ? plan.depfile_path : "");
  // Without -MT/-MQ the driver names the rule after the output as written (-MQ <output>).
  if (plan.depfile != Depfile::None && !plan.has_dep_target) job.depfile_target = plan.output;
  // -MMD leaves out system headers, so it cannot be the key's closure.
  job.depfile_partial = plan.depfile == Depfile::MMD;

  if (auto pch = precompiled_header_beside_forced_include(plan, cwd, job.source)) return *pch;

  job.facts = read_argument_facts(inv.args);
  set_job_roots(job, cwd, cfg, inv.env);

  Toolchain tc = probe_toolchain(inv.compiler_path, inv.env, memo_dir(cfg), plan.driver_prefixes);
  // A clang configuration file includes another file (`@path`) whose content is keyed nowhere.
  if (!tc.config_include.empty()) return Passthrough{"clang-config-include", tc.config_include};
  job.description = wrapped_ ? tc.description + " run by " + given.compiler_path : tc.description;
  job.system_dirs = tc.include_dirs;
  job.toolchain_files = std::move(tc.files);
  // GCC, and clang given a .gch-named -include, read precompiled headers found beside headers.
  job.precompiled_headers_searched = true;

  auto& k = job.key_fields;
  if (auto p = key_driver(k, tc, inv, cfg)) return *p;
  k.emplace_back("mode", "c");
  k.emplace_back("language", plan.language);
  add_path_key_fields(k, job, cwd, plan.source);
  for (const auto& a : keyed_args(plan.keyed_args, plan.path_values, job.roots)) k.emplace_back("arg", a);
  job.macro_map_olds = macro_map_olds(plan.keyed_args);
  // Every variable the table keys (CPATH, C_INCLUDE_PATH, GCC_EXEC_PREFIX, LC_ALL...), unset apart
  // from empty.
  add_env_key_fields(inv.env, EnvRoute::host, k);
  // Each root a keyed value names (-I/w/one/inc, CPATH) is keyed with its path (see job_paths.hpp).
  job.keyed_roots = add_root_key_fields(k, k.size(), job.roots);
  k.emplace_back("depfile-target", job.depfile_target.empty() ? "keyed" : "templated");
  if (plan.has_debug) add_debug_cwd_fields(k, job.facts, cwd);
  const bool clang = tc.description.find("clang version") != std::string::npos;
  clang_ = clang;
  // A miss leaves SOURCE_DATE_EPOCH as the build has it (pinned for nvcc only, spec 000): __DATE__ and
  // __TIME__ follow it when exported, so its value is an input; unset, they are the wall clock's and
  // the miss asks the compiler which it expanded (Adapter::time_macros).
  k.emplace_back("source-date-epoch", util::env_get(inv.env, "SOURCE_DATE_EPOCH").value_or("<unset>"));
  // clang records its driver's whole command line (measured, clang 14 and 19: DW_AT_producer under
  // -grecord-command-line, .GCC.command.line under -frecord-command-line), kache's prefix maps and
  // scratch -o included, where a plain compile records the user's: no miss can give plain's object.
  // (GCC leaves -o, -MF and prefix maps out of what it records; kache's -frandom-seed stays off.)
  if (clang && job.facts.records_command_line(false)) {
    return Passthrough{"records-command-line", "clang records the command line in the object"};
  }
  job.depfile_layouts = clang ? std::vector{core::DepfileLayout::clang75, core::DepfileLayout::clang75_packed}
                             : std::vector{core::DepfileLayout::gcc72};
  job.depfile_escaping = clang ? core::MakeEscaping::clang : core::MakeEscaping::gcc;
  // Diagnostics coloured as on the user's terminal (see diagnostics_colour_flag): stored apart.
  colour_flag_ = diagnostics_colour_flag(job.facts, inv.env, clang, ::isatty(STDERR_FILENO) == 1);
  k.emplace_back("diagnostics-colour", colour_flag_.empty() ? "as-given" : colour_flag_);

  add_search_dirs(job, plan, tc, inv, cwd);
  job.assembler_inputs = assembler_listing_possible(job.facts, clang) ? CompileJob::AssemblerInputs::listed
                                                                     : CompileJob::AssemblerInputs::checked;
  return job;
}

std::vector<std::string> GccAdapter::miss_command(const core::Invocation& given, const CompileJob& job,
                                                  const MissPaths& paths) const {
  const core::Invocation& inv = command(given);
  std::vector<std::string> argv = {inv.compiler_arg};
  // kache's flags come before the user's: GCC and clang let the last -frandom-seed win. A fixed seed
  // fixes the names GCC derives from it, so two misses give byte-identical objects; left out where the
  // object would record it (DW_AT_producer, .GCC.command.line, GCC's .gnu.lto_.opts under -flto) and
  // plain's would not.
  if (!job.facts.records_command_line() && !job.facts.lto) argv.push_back("-frandom-seed=" + paths.seed);
  // Not recorded by the object (only -flto records -Wa options: no listing then).
  if (job.assembler_inputs == CompileJob::AssemblerInputs::listed) argv.push_back("-Wa,--MD," + paths.assembler_depfile);
  // Debug names through placeholders (PathRoots::debug_map_flags); none when the user maps paths
  // (clang 14 drops a second rule for one path, and clang lets a longer rule beat the user's).
  if (job.debug_placeholders) {
    for (const auto& f : job.roots.debug_map_flags()) argv.push_back(f);
  }
  std::vector<std::string> args = inv.args;
  if (plan_.output_arg) replace_value(args, *plan_.output_arg, "-o", paths.object);
  if (plan_.depfile_arg) replace_value(args, *plan_.depfile_arg, "-MF", paths.depfile);
  argv.insert(argv.end(), args.begin(), args.end());
  // -c x.cpp writes x.o in the cwd: the object goes to the scratch directory like an explicit -o.
  if (!plan_.output_arg) argv.insert(argv.end(), {"-o", paths.object});
  if (job.depfile.empty()) {
    // A private full dependency list: the key's closure.
    argv.insert(argv.end(), {"-MD", "-MF", paths.depfile});
  } else if (!plan_.depfile_arg) {
    // -MD without -MF would write <output>.d beside the scratch object.
    argv.insert(argv.end(), {"-MF", paths.depfile});
  }
  // The object is written elsewhere first; name the target the driver would have named.
  if (!plan_.has_dep_target) argv.insert(argv.end(), {"-MQ", job.output_written});
  // The scratch directory stands in for the output directory (its rule last: GCC tries it first).
  argv.push_back(scratch_prefix_map(job, paths.scratch_dir));
  // Last, so it overrides a user's -fdiagnostics-color=auto (which would see kache's pipe).
  if (!colour_flag_.empty()) argv.push_back(colour_flag_);
  return argv;
}

// Nothing pinned: a plain gcc or clang prints today's __DATE__, and so does a miss (see prepare).
void GccAdapter::miss_environment(util::Environment&, const core::Config&) const {}

std::vector<std::string> GccAdapter::closure_command(const core::Invocation& inv, const CompileJob& job) const {
  if (!job.depfile_partial) return {};
  // -MMD omits system headers: the same command as a dependency-only run (-M, on stdout) lists them all.
  return without_outputs(inv, "-M");
}

// A compile sent whole to a remote worker: every file it reads, system headers included, as -M lists them.
std::vector<std::string> GccAdapter::remote_listing_command(const core::Invocation& inv, const CompileJob&) const {
  return without_outputs(inv, "-M");
}

// The preprocessed source serves the assembler check (AssemblerInputs::checked) and, for every compile,
// says which time macros it expanded: -Wdate-time warns at each expansion of __DATE__, __TIME__ and
// __TIMESTAMP__, however it was spelled (token pasting, a macro of a header), in GCC and clang alike.
// This run's diagnostics go to kache only, never to the user's stderr; the user's -w (which would
// silence it) is dropped and -Werror cannot fail it. -Wsystem-headers reaches expansions inside system
// headers and `#pragma GCC system_header` files; diagnostic pragmas are checked in the output.
std::vector<std::string> GccAdapter::preprocess_command(const core::Invocation& inv, const CompileJob&) const {
  std::vector<std::string> argv = without_outputs(inv, "-E");
  std::erase_if(argv, [](const std::string& a) { return a == "-w" || a == "--no-warnings"; });
  argv.insert(argv.end(), {"-Wdate-time", "-Wno-error", "-Wno-error=date-time", "-Wsystem-headers",
                           "-fdiagnostics-show-option", "-fdiagnostics-color=never", "-fmessage-length=0",
                           clang_ ? "-fdiagnostics-format=clang" : "-fdiagnostics-format=text"});
  return argv;
}

// The compile's own command with -E: one preprocessing, as the compile does it. GCC reads a precompiled
// header (h.h.gch) instead of a header without naming it, but -E alone does not: -fpch-preprocess makes
// -E say where it would (a `#pragma GCC pch_preprocess` line with the .gch's path), so such a compile
// keys apart, and its miss is not stored (no_precompiled_header). -g3 puts every #define in the debug
// info, which -E leaves out: no fallback.
std::variant<std::string, std::vector<PreprocessCommand>> GccAdapter::fallback_preprocessing(
    const core::Invocation& inv, const CompileJob& job, const util::Environment& env) const {
  if (job.facts.macro_debug_info) return std::string("macro-debug-info");
  std::vector<std::string> argv = without_outputs(inv, "-E");
  if (!clang_) argv.push_back("-fpch-preprocess");
  return std::vector<PreprocessCommand>{{program(inv), std::move(argv), env, "c"}};
}

std::optional<TimeMacros> GccAdapter::time_macros(const util::ProcessResult& preprocessed) const {
  if (!preprocessed.ok()) return std::nullopt;
  return reported_time_macros(preprocessed.err, preprocessed.out, clang_);
}

std::optional<TimeMacros> reported_time_macros(std::string_view diagnostics, std::string_view preprocessed,
                                               bool clang) {
  auto lines = [](std::string_view text, auto&& each) {
    while (!text.empty()) {
      const std::size_t end = std::min(text.find('\n'), text.size());
      each(text.substr(0, end));
      text.remove_prefix(std::min(end + 1, text.size()));
    }
  };
  bool silenced = false;
  lines(preprocessed, [&](std::string_view line) {
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || !line.substr(first).starts_with("#pragma")) return;
    if (line.find("diagnostic") == std::string_view::npos) return;
    if (line.find("date-time") != std::string_view::npos || line.find("everything") != std::string_view::npos) {
      silenced = true;
    }
  });
  if (silenced) return std::nullopt;
  TimeMacros used = TimeMacros::none;
  lines(diagnostics, [&](std::string_view line) {
    if (line.find("-Wdate-time]") == std::string_view::npos) return;
    const bool date_only =
        !clang && line.find("__DATE__") != std::string_view::npos && line.find("__TIME") == std::string_view::npos;
    if (!date_only) {
      used = TimeMacros::time;
    } else if (used == TimeMacros::none) {
      used = TimeMacros::date;
    }
  });
  return used;
}

std::vector<std::string> GccAdapter::without_outputs(const core::Invocation& given, const char* mode) const {
  const core::Invocation& inv = command(given);
  // Dropped: -c, -MD/-MMD/-MP, and -o, -MF, -MT, -MQ with their values.
  std::vector<bool> drop(inv.args.size(), false);
  auto drop_option = [&](const CompilePlan::ArgRef& ref) {
    drop[ref.index] = true;
    if (!ref.attached && ref.index + 1 < drop.size()) drop[ref.index + 1] = true;
  };
  if (plan_.output_arg) drop_option(*plan_.output_arg);
  if (plan_.depfile_arg) drop_option(*plan_.depfile_arg);
  for (const auto& ref : plan_.dep_target_args) drop_option(ref);
  for (std::size_t i : plan_.dep_flag_args) drop[i] = true;
  std::vector<std::string> argv = {inv.compiler_arg};
  for (std::size_t i = 0; i < inv.args.size(); ++i) {
    if (!drop[i] && inv.args[i] != "-c") argv.push_back(inv.args[i]);
  }
  argv.push_back(mode);
  return argv;
}

}  // namespace kache::compiler::gcc
