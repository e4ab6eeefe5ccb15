#include "compiler/job_paths.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "core/log.hpp"
#include "util/fs.hpp"

namespace kache::compiler {

core::PathRoots standard_roots(const std::string& cwd, const std::string& source, const std::string& output,
                               const std::vector<std::string>& base_dirs, std::string* source_identity,
                               const std::string& pwd) {
  std::vector<core::PathRoots::Root> bases;
  for (std::size_t i = 0; i < base_dirs.size(); ++i) {
    bases.push_back({util::absolute_path(base_dirs[i], cwd), "/kache/base" + std::to_string(i)});
  }
  // A $PWD spelled with trailing slashes ("/a/b/") names the root without them; the compiler's strings
  // ("/a/b/" as DW_AT_comp_dir) then hold the root followed by '/', as for any path below it.
  std::string pwd_root = pwd;
  while (pwd_root.size() > 1 && pwd_root.back() == '/') pwd_root.pop_back();
  const bool pwd_spelled = !pwd_root.empty() && pwd_root != cwd;
  std::vector<core::PathRoots::Root> roots = {
      {cwd, "/kache/build"},
      {util::dirname(source), "/kache/src"},
      {util::dirname(output), "/kache/out"},
  };
  roots.insert(roots.end(), bases.begin(), bases.end());
  // Only the base dirs: the build, source and output directories would give two files of one build
  // the same name (libA/x.cpp and libB/x.cpp, each compiled from its own directory).
  if (source_identity) *source_identity = core::PathRoots(std::move(bases)).key_form(source);
  // With $PWD's spelling, every root at or below the working directory is spelled from it (the same
  // directory: pwd and cwd share an inode, and the rest is lexically normal), its getcwd() spelling
  // kept as an alias: the output directory (often the cwd itself) dedups with the build root as in a
  // checkout reached without a symlink, so both key alike.
  std::vector<core::PathRoots::Root> aliases;
  if (pwd_spelled) {
    for (auto& r : roots) {
      if (!util::path_starts_with(r.path, cwd)) continue;
      aliases.push_back({r.path, r.name});
      r.path = pwd_root + r.path.substr(cwd.size());
    }
  }
  return core::PathRoots::with_aliases(std::move(roots), std::move(aliases));
}

std::string compiler_pwd(const std::string& cwd, const util::Environment& env) {
  const std::optional<std::string> pwd = util::env_get(env, "PWD");
  if (!pwd || !pwd->starts_with("/") || *pwd == cwd) return cwd;
  const auto named = util::stat_identity(*pwd);
  const auto here = util::stat_identity(cwd);
  if (!named || !here || named->dev != here->dev || named->ino != here->ino) return cwd;
  return *pwd;
}

void place_files(CompileJob& job, const std::string& cwd, const std::string& source_written,
                 const std::string& output_written, const std::string& depfile_written) {
  job.source = util::absolute_path(source_written, cwd);
  job.output = util::absolute_path(output_written, cwd);
  job.output_written = output_written;
  if (!depfile_written.empty()) {
    job.depfile = util::absolute_path(depfile_written, cwd);
    job.depfile_written = depfile_written;
  }
}

std::vector<std::string> add_root_key_fields(std::vector<std::pair<std::string, std::string>>& fields,
                                             std::size_t keyed, const core::PathRoots& roots) {
  std::vector<std::string> keyed_roots;
  for (const auto& r : roots.roots()) {
    if (std::any_of(fields.begin(), fields.begin() + static_cast<std::ptrdiff_t>(keyed),
                    [&](const auto& field) { return core::names_path(field.second, r.path); })) {
      fields.emplace_back("root", r.name + "=" + r.path);
      keyed_roots.push_back(r.path);
      core::log().trace("path root {} keyed literally as {} (a keyed value names it)", r.name, r.path);
    }
  }
  return keyed_roots;
}

std::optional<core::PathRoots::KeyedValue> key_prefix_map_rule(const std::string& arg, const core::PathRoots& roots) {
  const auto rule = parse_prefix_map(arg);
  if (!rule) return std::nullopt;
  const auto old_path = roots.key_value(std::string(rule->old_path));
  return core::PathRoots::KeyedValue{std::string(rule->option) + old_path.form + "=" + std::string(rule->new_path),
                                     std::string(rule->option) + ": " + old_path.why};
}

void add_debug_cwd_fields(std::vector<std::pair<std::string, std::string>>& fields, const ArgumentFacts& facts,
                          const std::string& cwd) {
  for (const auto& old_spelled : facts.debug_map_olds) {
    const std::string old_path = util::lexically_normal(old_spelled);
    if (old_path.empty() || !(cwd == old_path || cwd.starts_with(old_path + "/") || old_path == "/")) continue;
    fields.emplace_back("debug-cwd", cwd.substr(std::min(old_path.size(), cwd.size())));
  }
}

std::vector<std::string> keyed_args(std::vector<std::string> args, const std::vector<PathValue>& values,
                                    const core::PathRoots& roots) {
  if (!roots.enabled()) return args;
  for (std::string& a : args) {
    if (auto rule = key_prefix_map_rule(a, roots); rule && rule->form != a) {
      core::log().trace("path {} keyed as {} ({})", a, rule->form, rule->why);
      a = rule->form;
    }
  }
  for (const auto& pv : values) {
    std::string& a = args[pv.index];
    const auto keyed = roots.key_value(a.substr(pv.offset));
    if (core::log().should_log(spdlog::level::trace) && keyed.form != a.substr(pv.offset)) {
      core::log().trace("path {} keyed as {} ({})", a, keyed.form, keyed.why);
    }
    a = a.substr(0, pv.offset) + keyed.form;
  }
  return args;
}

void set_job_roots(CompileJob& job, const std::string& cwd, const core::Config& cfg, const util::Environment& env) {
  if (cfg.nvcc_path_normalize) {
    job.roots = standard_roots(cwd, job.source, job.output, cfg.base_dirs, &job.source_identity,
                               compiler_pwd(cwd, env));
  } else {
    job.source_identity = job.source;
  }
  // Issue 27: debug names through placeholders replaced by this checkout's roots (none with the user's
  // own debug maps, compressed debug sections or LTO code, where no placeholder could be replaced).
  job.debug_placeholders =
      job.roots.enabled() && !job.facts.user_debug_maps && !job.facts.compressed_debug && !job.facts.lto;
  job.foreign_charset = job.facts.foreign_charset;
}

void add_path_key_fields(std::vector<std::pair<std::string, std::string>>& fields, const CompileJob& job,
                         const std::string& cwd, const std::string& source_written) {
  fields.emplace_back("normalize", job.roots.enabled() ? "roots" : "literal");
  // Keyed so no entry of another scheme (the fixed /kache/src names of earlier versions) is ever served.
  fields.emplace_back("debug-names", job.debug_placeholders ? core::kPlaceholderScheme : "as-compiled");
  fields.emplace_back("cwd", job.roots.key_form(cwd));
  fields.emplace_back("source", source_written.starts_with("/") ? job.roots.key_form(source_written) : source_written);
  fields.emplace_back("output", job.roots.key_form(job.output));
}

std::string scratch_prefix_map(const CompileJob& job, const std::string& scratch_dir) {
  const std::string out_dir = util::dirname(job.output);
  const std::string scratch_as = job.debug_placeholders ? job.roots.debug_form(out_dir) : out_dir;
  return "-ffile-prefix-map=" + scratch_dir + "=" + scratch_as;
}

void add_literal_dir(CompileJob& job, const std::string& dir) {
  if (!dir.starts_with('/')) return;
  std::string spelled = dir;
  while (spelled.size() > 1 && spelled.back() == '/') spelled.pop_back();
  for (std::string d : {spelled, util::lexically_normal(dir)}) {
    if (std::find(job.literal_dirs.begin(), job.literal_dirs.end(), d) == job.literal_dirs.end()) {
      job.literal_dirs.push_back(std::move(d));
    }
  }
}

void add_search_dir(CompileJob& job, const std::string& cwd, const std::string& dir) {
  if (dir.empty()) return;
  std::string abs = util::join_path(cwd, dir);
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  if (std::find(job.search_dirs.begin(), job.search_dirs.end(), abs) == job.search_dirs.end()) {
    job.search_dirs.push_back(abs);
  }
}

std::vector<std::string> include_path_dirs(const util::Environment& env, const char* variable) {
  std::vector<std::string> dirs;
  const std::string v = util::env_get(env, variable).value_or("");
  if (v.empty()) return dirs;
  std::size_t start = 0;
  while (start <= v.size()) {
    const std::size_t colon = v.find(':', start);
    std::string d = v.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    dirs.push_back(d.empty() ? "." : d);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return dirs;
}

std::vector<std::string> system_dir_spellings(const std::vector<std::string>& include_dirs) {
  std::vector<std::string> out;
  auto add = [&](std::string d) {
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (!d.empty() && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(std::move(d));
  };
  for (const auto& d : include_dirs) add(d);
  for (const auto& d : include_dirs) {
    char real[PATH_MAX];
    if (::realpath(d.c_str(), real) == nullptr) continue;  // a directory that does not exist holds no header
    const std::string normal = util::lexically_normal(d);
    char normal_real[PATH_MAX];
    if (normal != d && ::realpath(normal.c_str(), normal_real) != nullptr && std::strcmp(real, normal_real) == 0) {
      add(normal);
    }
    add(real);
  }
  return out;
}

}  // namespace kache::compiler
