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

namespace {
// Whether text holds option (a whole token: preceded by a start, ',', '=' or ' ' and followed by the
// end, ',', ' ' or '=') with a value other than "=none" (nvcc passes host flags comma-separated).
bool holds_option(const std::string& text, std::string_view option, bool value_none_is_off) {
  for (std::size_t hit = text.find(option); hit != std::string::npos; hit = text.find(option, hit + 1)) {
    const char before = hit == 0 ? ',' : text[hit - 1];
    const std::size_t end = hit + option.size();
    const char after = end == text.size() ? ',' : text[end];
    if (std::string_view(", =").find(before) == std::string_view::npos) continue;
    if (std::string_view(", =").find(after) == std::string_view::npos) continue;
    if (value_none_is_off && text.compare(end, 5, "=none") == 0 &&
        (end + 5 == text.size() || text[end + 5] == ',' || text[end + 5] == ' ')) {
      continue;
    }
    return true;
  }
  return false;
}

bool any_holds(const std::vector<std::string>& args, const std::string& flag_variables,
               std::initializer_list<std::string_view> options, bool value_none_is_off) {
  for (std::string_view o : options) {
    if (holds_option(flag_variables, o, value_none_is_off)) return true;
    for (const auto& a : args) {
      if (holds_option(a, o, value_none_is_off)) return true;
    }
  }
  return false;
}
}  // namespace

bool has_user_debug_maps(const std::vector<std::string>& args, const std::string& flag_variables) {
  return any_holds(args, flag_variables,
                   {"-ffile-prefix-map", "-fdebug-prefix-map", "-fdebug-compilation-dir", "-ffile-compilation-dir"},
                   false);
}

bool asks_compressed_debug(const std::vector<std::string>& args, const std::string& flag_variables) {
  return any_holds(args, flag_variables, {"-gz", "--compress-debug-sections", "-compress-debug-sections"}, true);
}

namespace {
bool scannable_charset(std::string_view option, std::string value) {
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::toupper(c); });
  if (option == "-fexec-charset=") return value == "UTF-8" || value == "UTF8";
  for (std::string_view family : {"UTF-16", "UTF-32", "UCS-2", "UCS-4", "UTF16", "UTF32", "UCS2", "UCS4"}) {
    for (std::string_view order : {"", "LE", "BE"}) {
      if (value == std::string(family) + std::string(order)) return true;
    }
  }
  return false;
}

bool text_names_foreign_charset(const std::string& text) {
  for (std::string_view option : {"-fexec-charset=", "-fwide-exec-charset="}) {
    for (std::size_t hit = text.find(option); hit != std::string::npos; hit = text.find(option, hit + 1)) {
      const std::size_t begin = hit + option.size();
      const std::size_t end = text.find_first_of(", ", begin);
      if (!scannable_charset(option, text.substr(begin, end == std::string::npos ? end : end - begin))) return true;
    }
  }
  return false;
}
}  // namespace

bool names_foreign_charset(const std::vector<std::string>& args, const std::string& flag_variables) {
  return text_names_foreign_charset(flag_variables) ||
         std::any_of(args.begin(), args.end(), [](const std::string& a) { return text_names_foreign_charset(a); });
}

bool asks_lto(const std::vector<std::string>& args, const std::string& flag_variables) {
  bool lto = false;
  auto scan = [&](std::string_view text) {
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t end = text.find_first_of(", =", start);
      const std::string_view token = text.substr(start, end == std::string_view::npos ? end : end - start);
      if (token == "-flto") lto = true;  // "-flto=auto" reads as "-flto", then "auto"
      if (token == "-fno-lto") lto = false;
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
  };
  for (const auto& a : args) scan(a);
  scan(flag_variables);
  return lto;
}

bool asks_macro_debug_info(const std::vector<std::string>& args, const std::string& flag_variables) {
  bool macros = false;
  auto level_three = [](std::string_view token) {
    if (token == "-fdebug-macro") return true;
    if (!token.starts_with("-g") || !token.ends_with('3')) return false;
    const std::string_view kind = token.substr(2, token.size() - 3);  // "" in -g3, "gdb" in -ggdb3
    for (std::string_view k : {"", "gdb", "stabs", "stabs+", "xcoff", "xcoff+", "vms", "coff", "dwarf"}) {
      if (kind == k) return true;
    }
    return false;
  };
  auto scan = [&](std::string_view text) {
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t end = text.find_first_of(", =", start);
      if (level_three(text.substr(start, end == std::string_view::npos ? end : end - start))) macros = true;
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
  };
  for (const auto& a : args) scan(a);
  scan(flag_variables);
  return macros;
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
  for (std::string_view kind : {"-ffile-prefix-map=", "-fmacro-prefix-map=", "-fdebug-prefix-map="}) {
    if (!arg.starts_with(kind)) continue;
    const std::size_t eq = arg.find('=', kind.size());
    if (eq == std::string::npos) return std::nullopt;
    const auto old_path = roots.key_value(arg.substr(kind.size(), eq - kind.size()));
    return core::PathRoots::KeyedValue{std::string(kind) + old_path.form + arg.substr(eq),
                                       std::string(kind) + ": " + old_path.why};
  }
  return std::nullopt;
}

std::optional<std::string> macro_prefix_map_old(std::string_view arg) {
  for (std::string_view kind : {"-ffile-prefix-map=", "-fmacro-prefix-map="}) {
    if (!arg.starts_with(kind)) continue;
    const std::size_t eq = arg.find('=', kind.size());
    if (eq == std::string_view::npos) return std::nullopt;
    return std::string(arg.substr(kind.size(), eq - kind.size()));
  }
  return std::nullopt;
}

std::vector<std::string> macro_prefix_map_olds(const std::vector<std::string>& args) {
  std::vector<std::string> olds;
  for (const auto& a : args) {
    if (auto old_path = macro_prefix_map_old(a)) olds.push_back(*old_path);
  }
  return olds;
}

void add_debug_cwd_fields(std::vector<std::pair<std::string, std::string>>& fields, const std::vector<std::string>& args,
                          const std::string& cwd) {
  for (const auto& arg : args) {
    for (std::size_t start = 0; start <= arg.size();) {
      const std::size_t end = std::min(arg.find(',', start), arg.size());
      const std::string_view option = std::string_view(arg).substr(start, end - start);
      start = end + 1;
      const std::size_t at = option.find("-ffile-prefix-map=") != std::string_view::npos
                                 ? option.find("-ffile-prefix-map=") + 18
                             : option.find("-fdebug-prefix-map=") != std::string_view::npos
                                 ? option.find("-fdebug-prefix-map=") + 19
                                 : std::string_view::npos;
      if (at == std::string_view::npos) continue;
      const std::size_t eq = option.find('=', at);
      if (eq == std::string_view::npos) continue;
      const std::string old_path = util::lexically_normal(std::string(option.substr(at, eq - at)));
      if (old_path.empty() || !(cwd == old_path || cwd.starts_with(old_path + "/") || old_path == "/")) continue;
      fields.emplace_back("debug-cwd", cwd.substr(std::min(old_path.size(), cwd.size())));
    }
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

void set_job_roots(CompileJob& job, const std::string& cwd, const core::Config& cfg, const util::Environment& env,
                   const std::vector<std::string>& args) {
  if (cfg.nvcc_path_normalize) {
    job.roots = standard_roots(cwd, job.source, job.output, cfg.base_dirs, &job.source_identity,
                               compiler_pwd(cwd, env));
  } else {
    job.source_identity = job.source;
  }
  // Issue 27: debug names through placeholders replaced by this checkout's roots (none with the user's
  // own debug maps, compressed debug sections or LTO code, where no placeholder could be replaced).
  job.debug_placeholders =
      job.roots.enabled() && !has_user_debug_maps(args) && !asks_compressed_debug(args) && !asks_lto(args);
  job.foreign_charset = names_foreign_charset(args);
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
