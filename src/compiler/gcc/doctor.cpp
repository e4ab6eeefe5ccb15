#include "compiler/gcc/doctor.hpp"

#include <vector>

#include <fmt/format.h>

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

bool doctor_rows(core::DoctorRows& rows, const util::Environment& env) {
  const std::string path_var = util::env_get(env, "PATH").value_or("");
  const std::string self = util::self_executable();
  std::string names;
  for (const char* name : {"gcc", "g++", "cc", "c++", "clang", "clang++"}) {
    if (util::find_executable(name, path_var, self)) names += (names.empty() ? "" : ", ") + std::string(name);
  }
  if (names.empty()) return false;
  rows.add("toolchain", "c-compilers", Status::ok, names);
  for (const char* name : {"gcc", "clang"}) {
    if (const auto path = util::find_executable(name, path_var, self)) {
      version_row(rows, name, *path, util::run_capture(*path, {*path, "--version"}, env));
    }
  }
  return true;
}

}  // namespace kache::compiler::gcc
