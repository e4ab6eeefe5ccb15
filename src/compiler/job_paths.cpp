#include "compiler/job_paths.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "core/log.hpp"
#include "util/fs.hpp"

namespace kache::compiler {

core::PathRoots standard_roots(const std::string& cwd, const std::string& source, const std::string& output,
                               const std::vector<std::string>& base_dirs, std::string* source_identity) {
  std::vector<core::PathRoots::Root> bases;
  for (std::size_t i = 0; i < base_dirs.size(); ++i) {
    bases.push_back({util::absolute_path(base_dirs[i], cwd), "/kache/base" + std::to_string(i)});
  }
  std::vector<core::PathRoots::Root> roots = {
      {cwd, "/kache/build"},
      {util::dirname(source), "/kache/src"},
      {util::dirname(output), "/kache/out"},
  };
  roots.insert(roots.end(), bases.begin(), bases.end());
  // Only the base dirs: the build, source and output directories would give two files of one build
  // the same name (libA/x.cpp and libB/x.cpp, each compiled from its own directory).
  if (source_identity) *source_identity = core::PathRoots(std::move(bases)).key_form(source);
  return core::PathRoots(std::move(roots));
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

bool names_path(const std::string& value, const std::string& root) {
  for (std::size_t hit = value.find(root); hit != std::string::npos; hit = value.find(root, hit + 1)) {
    const std::size_t end = hit + root.size();
    if (end == value.size()) return true;
    const unsigned char next = static_cast<unsigned char>(value[end]);
    if (!(std::isalnum(next) || std::string_view("._-+@~#%").find(static_cast<char>(next)) != std::string_view::npos)) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> add_root_key_fields(std::vector<std::pair<std::string, std::string>>& fields,
                                             std::size_t keyed, const core::PathRoots& roots) {
  std::vector<std::string> keyed_roots;
  for (const auto& r : roots.roots()) {
    if (std::any_of(fields.begin(), fields.begin() + static_cast<std::ptrdiff_t>(keyed),
                    [&](const auto& field) { return names_path(field.second, r.path); })) {
      fields.emplace_back("root", r.name + "=" + r.path);
      keyed_roots.push_back(r.path);
      core::log().trace("path root {} keyed literally as {} (a keyed value names it)", r.name, r.path);
    }
  }
  return keyed_roots;
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

}  // namespace kache::compiler
