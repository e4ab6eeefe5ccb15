#include "compiler/nvcc/adapter.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "compiler/common.hpp"
#include "compiler/env_table.hpp"
#include "compiler/job_paths.hpp"
#include "compiler/nvcc/plan.hpp"
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
    std::string token = value.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (std::string_view kind : {"-ffile-prefix-map=", "-fmacro-prefix-map=", "-fdebug-prefix-map="}) {
      if (!token.starts_with(kind)) continue;
      const std::size_t eq = token.find('=', kind.size());
      if (eq == std::string::npos) break;
      const auto old_path = roots.key_value(token.substr(kind.size(), eq - kind.size()));
      if (!out.why.empty()) out.why += "; ";
      out.why += std::string(kind) + ": " + old_path.why;
      token = std::string(kind) + old_path.form + token.substr(eq);
      break;
    }
    out.form += token;
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

bool has_option(const std::vector<std::string>& args, std::initializer_list<std::string_view> names) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return std::any_of(names.begin(), names.end(), [&](std::string_view n) {
      return a == n || (a.starts_with(n) && a.size() > n.size() && a[n.size()] == '=');
    });
  });
}

}  // namespace

std::vector<std::string> NvccAdapter::include_dirs_in(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    for (std::string_view opt :
         {"--include-path", "-include-path", "--system-include", "-system-include", "-isystem", "-I"}) {
      if (!a.starts_with(opt)) continue;
      std::string rest = a.substr(opt.size());
      if (rest.empty()) {
        if (i + 1 < args.size()) dirs.push_back(args[++i]);
      } else if (rest[0] == '=') {
        dirs.push_back(rest.substr(1));
      } else if (opt == "-I") {
        dirs.push_back(rest);
      } else {
        continue;
      }
      break;
    }
  }
  // nvcc accepts comma-separated lists in one value.
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    std::size_t start = 0;
    while (true) {
      std::size_t comma = d.find(',', start);
      out.push_back(d.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

std::vector<std::string> NvccAdapter::rewrite_outputs(const std::vector<std::string>& args, const std::string& object,
                                                      const std::string& depfile) {
  std::vector<std::string> out;
  out.reserve(args.size());
  auto replace_value = [&](std::size_t& i, std::initializer_list<std::string_view> names,
                           const std::string& value) -> bool {
    const std::string& a = args[i];
    for (std::string_view n : names) {
      if (a == n && i + 1 < args.size()) {
        out.push_back(a);
        out.push_back(value);
        ++i;
        return true;
      }
      if (a.starts_with(n) && a.size() > n.size() && a[n.size()] == '=') {
        out.push_back(std::string(n) + "=" + value);
        return true;
      }
    }
    return false;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (replace_value(i, {"-o", "--output-file", "-output-file"}, object)) continue;
    if (!depfile.empty() && replace_value(i, {"-MF", "--dependency-output", "-dependency-output"}, depfile)) continue;
    out.push_back(args[i]);
  }
  return out;
}

std::variant<compiler::Passthrough, CompileJob> NvccAdapter::prepare(const core::Invocation& inv,
                                                                     const core::Config& cfg) {
  PlanOptions opts;
  opts.extra_allowlist = cfg.extra_allowlist_flags;
  opts.prepend_flags = util::env_get(inv.env, "NVCC_PREPEND_FLAGS").value_or("");
  opts.append_flags = util::env_get(inv.env, "NVCC_APPEND_FLAGS").value_or("");
  opts.cache_device_outputs = cfg.nvcc_cache_device_outputs;
  Plan planned = plan(inv.args, opts);
  if (auto* p = std::get_if<nvcc::Passthrough>(&planned)) return compiler::Passthrough{p->reason, p->detail};
  const CompilePlan& plan = std::get<CompilePlan>(planned);
  // Environment the tools read that kache cannot model (env_table.cpp says which and why).
  if (auto r = env_refusal(inv.env, true)) return compiler::Passthrough{r->reason, r->variable + " is set"};
  CompileJob job;
  const std::string cwd = util::lexically_normal(inv.cwd);
  place_files(job, cwd, plan.source, plan.output, plan.depfile != Depfile::None ? plan.depfile_path : "");
  // -MMD leaves out system headers (and what they include), so it cannot be the key's closure.
  job.depfile_partial = plan.depfile == Depfile::MMD;

  // The user's own prefix maps in NVCC_PREPEND_FLAGS would come before kache's rules, which would then
  // win (GCC applies the last matching rule): no rules of kache's at all, paths keyed literally.
  // -lineinfo no longer forces literal keys: device code names the source's and headers' paths as
  // resolved (measured, nvcc 13: not the working directory when those are absolute), which the
  // lineinfo-source field and the object scan below account for; host code takes the prefix maps.
  const bool literal = !cfg.nvcc_path_normalize || opts.prepend_flags.find("-prefix-map") != std::string::npos;
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
  const bool user_target = has_option(inv.args, {"-MT", "--dependency-target-name", "-dependency-target-name"});
  if (plan.depfile != Depfile::None && !user_target) {
    job.depfile_target = plan.output;
  } else if (plan.depfile != Depfile::None && job.roots.enabled() && plan.depfile_targets.size() == 1) {
    job.depfile_target = plan.depfile_targets[0];
  }

  Toolchain tc = probe_toolchain(inv.compiler_path, inv.env, plan.ccbin,
                                 cfg.cache_dir.empty() ? "" : util::join_path(cfg.cache_dir, "toolchains"));
  job.description = tc.description;
  job.system_dirs = tc.include_dirs;
  job.toolchain_files = std::move(tc.files);

  auto& log = core::log();
  const bool trace = log.should_log(spdlog::level::trace);
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
  job.debug_placeholders = job.roots.enabled() && !has_user_debug_maps(inv.args, opts.append_flags) &&
                           !asks_compressed_debug(inv.args, opts.append_flags);
  k.emplace_back("debug-names", job.debug_placeholders ? core::kPlaceholderScheme : "as-compiled");
  // The working directory is the build root: with roots it is keyed by its fixed name only (the prefix
  // maps rewrite it wherever the host compiler writes it, -g's DW_AT_comp_dir included).
  k.emplace_back("cwd", job.roots.key_form(cwd));
  if (trace) {
    log.trace("path cwd {} keyed as {} ({})", cwd, job.roots.key_form(cwd),
              job.roots.enabled() ? "normalized: the build root, mapped by the miss's prefix maps"
                                  : "literal: path normalization is off");
  }
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
  // The user's path values (-I, -isystem, -include, -MF, -MT) keyed as the roots map them: an absolute
  // one below a root by the root's name, so a second build directory (-I<build>/include) or a moved
  // checkout with its root as a base dir keys alike; the object names the same fixed name through the
  // miss's prefix maps and the depfile and diagnostics are stored with placeholders.
  // The -MF value never reaches nvcc on a miss (rewritten into the scratch directory), and a templated
  // -MT value reaches only the stored depfile's placeholder: with roots, neither is keyed.
  std::vector<std::string> keyed_args = plan.keyed_args;
  for (const auto& pa : plan.path_args) {
    std::string& arg = keyed_args[pa.index];
    const std::string value = arg.substr(pa.offset);
    const bool list =
        pa.flag == "-I" || pa.flag == "--include-path" || pa.flag == "-isystem" || pa.flag == "--system-include";
    const bool depfile_flag = pa.flag == "-MF" || pa.flag == "--dependency-output";
    const bool target_flag = pa.flag == "-MT" || pa.flag == "--dependency-target-name";
    const bool host_flag = pa.flag == "-Xcompiler" || pa.flag == "--compiler-options";
    core::PathRoots::KeyedValue keyed;
    if (host_flag) {
      keyed = key_host_prefix_maps(value, job.roots);
    } else if (job.roots.enabled() && depfile_flag) {
      keyed = {"<depfile>", "not keyed: a miss writes the dependency file elsewhere, its path reaches no output"};
    } else if (target_flag && !job.depfile_target.empty()) {
      keyed = {"<target>", "not keyed: the stored dependency file holds a placeholder for the target"};
    } else {
      keyed = list ? job.roots.key_list(value, ',') : job.roots.key_value(value);
    }
    arg = arg.substr(0, pa.offset) + keyed.form;
    if (trace && !(host_flag && keyed.form == value)) {
      log.trace("path {} {} keyed as {} ({})", pa.flag, value, keyed.form, keyed.why);
    }
  }
  for (const auto& a : keyed_args) k.emplace_back("arg", a);
  k.emplace_back("NVCC_PREPEND_FLAGS", opts.prepend_flags);
  k.emplace_back("NVCC_APPEND_FLAGS", opts.append_flags);
  // Every variable the table keys, an unset one apart from an empty one.
  add_env_key_fields(inv.env, true, k);
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

  // The include search path: the source's directory (quoted includes), -I/-isystem, the environment's
  // include variables, and the toolchain's own directories.
  // Spelled as given (joined to the cwd, not normalized): the compiler names headers found there as
  // dir + "/" + name, and the path roots must see the same spelling.
  auto add_dir = [&](const std::string& d) {
    if (d.empty()) return;
    std::string abs = util::join_path(cwd, d);
    while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
    if (std::find(job.search_dirs.begin(), job.search_dirs.end(), abs) == job.search_dirs.end()) {
      job.search_dirs.push_back(abs);
    }
  };
  add_dir(util::dirname(plan.source));  // quoted includes: the source's directory, as nvcc spells it
  add_dir(util::dirname(job.source));
  std::vector<std::string> all_args = split_env_flags(opts.prepend_flags);
  all_args.insert(all_args.end(), plan.args.begin(), plan.args.end());
  for (const auto& f : split_env_flags(opts.append_flags)) all_args.push_back(f);
  for (const auto& d : include_dirs_in(all_args)) {
    add_dir(d);
    if (!d.empty() && d[0] == '/') job.literal_dirs.push_back(util::lexically_normal(d));
  }
  // A pre-included file (-include / --pre-include) is looked up in the working directory first (GCC:
  // "the first directory searched for file is the preprocessor's working directory"), then along the
  // chain: one that appears in the cwd would shadow the one the closure names, so the cwd is watched.
  if (has_option(all_args, {"-include", "--pre-include", "-pre-include"})) add_dir(cwd);
  // The host compiler's include-path variables, as GCC reads them (compiler/job_paths.hpp).
  for (const char* var : {"CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"}) {
    for (const auto& d : include_path_dirs(inv.env, var)) {
      add_dir(d);
      if (d[0] == '/') job.literal_dirs.push_back(util::lexically_normal(d));
    }
  }
  for (const auto& d : tc.include_dirs) add_dir(d);
  job.literal_dirs.insert(job.literal_dirs.end(), job.system_dirs.begin(), job.system_dirs.end());
  return job;
}

std::vector<std::string> NvccAdapter::miss_command(const core::Invocation& inv, const CompileJob& job,
                                                   const MissPaths& paths) const {
  std::vector<std::string> argv = {inv.compiler_arg};
  // kache's host flags come before the user's: GCC lets the last -frandom-seed win. A fixed random seed
  // fixes anonymous-namespace names, so two misses give byte-identical objects; left out where the
  // object would record it. Each root's debug names become placeholders (none when the user maps
  // paths: theirs alone decide).
  if (!records_command_line(inv.args)) argv.insert(argv.end(), {"-Xcompiler", "-frandom-seed=" + paths.seed});
  if (job.debug_placeholders) {
    for (const auto& f : job.roots.debug_map_flags()) argv.insert(argv.end(), {"-Xcompiler", f});
  }
  std::vector<std::string> args = rewrite_outputs(inv.args, paths.object, job.depfile.empty() ? "" : paths.depfile);
  argv.insert(argv.end(), args.begin(), args.end());
  if (job.depfile.empty()) {
    argv.insert(argv.end(), {"-MD", "-MF", paths.depfile});
  }
  if (!has_option(inv.args, {"-MT", "--dependency-target-name", "-dependency-target-name"})) {
    // The object is written elsewhere first; name the target nvcc would have named (the -o value).
    argv.insert(argv.end(), {"-MT", job.output_written});
  }
  // Intermediate files next to the object, named after it, instead of /tmp/tmpxft_<pid>...: the
  // pid no longer lands in the symbol table.
  if (!has_option(inv.args, {"-objtemp", "--objdir-as-tempdir"})) argv.push_back("-objtemp");
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
  std::vector<std::string> argv = {inv.compiler_arg};
  const std::vector<std::string>& a = inv.args;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string& x = a[i];
    if (x == "-c" || x == "--compile" || x == "-dc" || x == "--device-c" || x == "-MMD" ||
        x == "--generate-nonsystem-dependencies-with-compile" || x == "-MD" ||
        x == "--generate-dependencies-with-compile") {
      continue;
    }
    bool dropped = false;
    for (std::string_view n :
         {"-o", "--output-file", "-MF", "--dependency-output", "-MT", "--dependency-target-name"}) {
      if (x == n) {
        ++i;
        dropped = true;
        break;
      }
      if (x.starts_with(n) && x.size() > n.size() && x[n.size()] == '=') {
        dropped = true;
        break;
      }
    }
    if (!dropped) argv.push_back(x);
  }
  argv.push_back("-M");
  return argv;
}

std::vector<std::string> NvccAdapter::path_specific_markers() const {
  // cudafe++ names internal-linkage device entities _INTERNAL_<hash of the source path>_...
  return {"_INTERNAL_"};
}

}  // namespace nvcc
}  // namespace kache::compiler
