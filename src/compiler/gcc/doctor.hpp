#pragma once
// gcc's and clang's rows of `kache doctor`: the C and C++ compilers kache fronts that are on PATH, and
// the version of gcc and of clang, as each driver states it.
#include <string>

#include "core/doctor_rows.hpp"
#include "util/process.hpp"

namespace kache::compiler::gcc {

// Returns whether any C or C++ compiler kache fronts is on PATH (nvcc's rows then treat a missing
// nvcc as a C/C++ user's machine, not a broken one).
bool doctor_rows(core::DoctorRows& rows, const util::Environment& env);

// The version row of one driver from its `--version` output (name: "gcc" or "clang").
void version_row(core::DoctorRows& rows, const std::string& name, const std::string& path,
                 const util::ProcessResult& version);

}  // namespace kache::compiler::gcc
