#include "compiler/gcc/doctor.hpp"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/gcc/adapter.hpp"
#include "compiler/gcc/wrapper.hpp"
#include "compiler/tool_files.hpp"
#include "core/reasons.hpp"
#include "util/fs.hpp"

namespace kache::compiler::gcc {

using Status = core::DoctorStatus;

void version_row(core::DoctorRows& rows, const std::string& name, const std::string& path,
                 const util::ProcessResult& version) {
  const std::string first = version.out.substr(0, version.out.find('\n'));
  if (!version.ok() || first.empty()) {
    rows.add("toolchain", name, Status::warn, path, fmt::format("{} --version did not state a version.", path),
             "check that it runs: " + path + " --version");
    return;
  }
  rows.add("toolchain", name, Status::ok, fmt::format("{} at {}", first, path));
}

namespace {

// A compiler on PATH that is a wrapper script: what kache reads it as, for a C compile like a build's
// (compiler/gcc/wrapper.hpp), or why its compiles pass through, with the way out.
void wrapper_row(core::DoctorRows& rows, const std::string& name, const std::string& path,
                 const util::Environment& env) {
  core::Invocation inv;
  inv.compiler_arg = name;
  inv.compiler_path = path;
  inv.args = {"-x", "c", "-c", "/dev/null", "-o", "/dev/null"};
  inv.cwd = util::current_dir();
  inv.env = env;
  const auto read = resolve_wrapper(inv, EnvRoute::host, "");
  if (const auto* p = std::get_if<Passthrough>(&read)) {
    rows.add("toolchain", "wrapper:" + name, Status::warn, path,
             fmt::format("{} is a wrapper script whose compiles run uncached ({}: {}).", path, p->reason, p->detail),
             std::string(core::reason_sentence(core::ReasonCategory::Passthrough, p->reason)));
    return;
  }
  const auto& w = std::get<ResolvedWrapper>(read);
  rows.add("toolchain", "wrapper:" + name, Status::ok,
           fmt::format("{} is a wrapper script running {}{}; cached as that command (what the wrapper prints or "
                       "does besides the compile, its own stderr, set -x, umask, is not replayed on a hit)",
                       path, w.driver, w.added.empty() ? "" : fmt::format(" with {}", fmt::join(w.added, " "))));
}

}  // namespace

std::string c_compilers_on_path(const util::Environment& env) {
  const std::string path_var = util::env_get(env, "PATH").value_or("");
  const std::string self = util::self_executable();
  std::string names;
  for (const char* name : {"gcc", "g++", "cc", "c++", "clang", "clang++"}) {
    if (util::find_executable(name, path_var, self)) names += (names.empty() ? "" : ", ") + std::string(name);
  }
  return names;
}

void doctor_rows(core::DoctorRows& rows, const util::Environment& env) {
  const std::string names = c_compilers_on_path(env);
  if (names.empty()) return;
  rows.add("toolchain", "c-compilers", Status::ok, names);
  const std::string path_var = util::env_get(env, "PATH").value_or("");
  const std::string self = util::self_executable();
  for (const char* name : {"gcc", "g++", "cc", "c++", "clang", "clang++"}) {
    const auto path = util::find_executable(name, path_var, self);
    if (path && is_script(*path)) wrapper_row(rows, name, *path, env);
  }
  for (const char* name : {"gcc", "clang"}) {
    if (const auto path = util::find_executable(name, path_var, self)) {
      version_row(rows, name, *path, util::run_capture(*path, {*path, "--version"}, env));
    }
  }
}

void GccAdapter::doctor_rows(core::DoctorRows& rows, DoctorSection section, const DoctorQuery& query) {
  if (section == DoctorSection::toolchain) gcc::doctor_rows(rows, query.env);
}

}  // namespace kache::compiler::gcc
