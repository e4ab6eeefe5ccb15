#pragma once
// gcc's and clang's rows of `kache doctor`: the C and C++ compilers kache fronts that are on PATH, and
// the version of gcc and of clang, as each driver states it.
#include <string>

#include "core/doctor_rows.hpp"
#include "util/process.hpp"

namespace kache::compiler::gcc {

// The C and C++ compilers kache fronts that are on PATH ("gcc, g++, cc"; "" when none is): nvcc's rows
// treat a missing nvcc on a machine with one as a C/C++ user's, not a broken one.
std::string c_compilers_on_path(const util::Environment& env);

// The c-compilers row, a row per wrapper script among them and gcc's and clang's versions.
void doctor_rows(core::DoctorRows& rows, const util::Environment& env);

// The version row of one driver from its `--version` output (name: "gcc" or "clang").
void version_row(core::DoctorRows& rows, const std::string& name, const std::string& path,
                 const util::ProcessResult& version);

}  // namespace kache::compiler::gcc
