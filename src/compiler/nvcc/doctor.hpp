#pragma once
// nvcc's rows of `kache doctor`: the toolkit, the host compiler nvcc runs (read from nvcc's own dry run,
// compiler/nvcc/toolchain.hpp) and the bound the toolkit's crt/host_config.h puts on it, the C
// library against the toolkit's crt/math_functions.h, and the CUDA driver. A fail is a pairing that
// cannot work, said in one sentence with what to change. The bounds are read from the toolkit's
// headers, never hard-coded: a toolkit kache has not seen states its own.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/doctor_rows.hpp"
#include "util/process.hpp"

namespace kache::compiler::nvcc {

// Which nvcc doctor looks at: `nvcc` on PATH or one named (--nvcc), with -ccbin or NVCC_CCBIN as nvcc
// would take it; scratch: a private directory for the dry run's file names. (NvccAdapter::doctor_rows
// makes it from compiler/adapter.hpp's DoctorQuery.)
struct ToolkitQuery {
  std::string nvcc_arg = "nvcc";
  bool nvcc_named = false;
  std::optional<std::string> ccbin;
  std::string scratch;
  bool c_compilers_found = false;  // gcc or clang on PATH: without nvcc, a C/C++ user is not broken
};

// The toolchain rows; returns the toolkit's release ({13, 0}) when nvcc reports one.
std::optional<std::pair<int, int>> doctor_rows(core::DoctorRows& rows, const ToolkitQuery& query,
                                               const util::Environment& env);

// The rows doctor_rows builds from what it read, on their own (the unit tests give them a made-up
// toolkit): the host-compiler bound of the first crt/host_config.h in include_dirs for a host
// compiler of this major (clang or gcc), and the C library (macros: the host's predefined macros with
// features.h) against the first crt/math_functions.h.
void host_bound_row(core::DoctorRows& rows, const std::vector<std::string>& include_dirs, bool clang, int major);
void glibc_row(core::DoctorRows& rows, const std::vector<std::string>& include_dirs,
               const std::map<std::string, std::string>& macros, const std::pair<int, int>& release);

// The driver row from its answer to cuDriverGetVersion (driver_version_here, asked by the caller in a
// child process: loading libcuda.so.1 may crash a static kache): > 0 the version, 0 no driver library,
// -1 no answer; nullopt when the child failed (failure says how).
void driver_rows(core::DoctorRows& rows, const std::optional<std::pair<int, int>>& release,
                 const std::optional<int>& answer, const std::string& failure);
int driver_version_here();

// The newest host compiler major a crt/host_config.h accepts: the condition guarding its
// "unsupported GNU version" (gnu) or "unsupported clang version" (clang) #error, e.g.
// `#if __GNUC__ > 15` gives 15, `#if (__clang_major__ >= 21) || ...` gives 20. nullopt: not stated.
std::optional<int> newest_host_major(const std::string& host_config, bool clang);

// Whether a crt/math_functions.h declares the host's cospi without an exception specification (CUDA
// 12.x up to the fix): with glibc >= 2.41, which declares cospi/sinpi/rsqrt noexcept, every TU that
// includes <cmath> stops with "exception specification is incompatible". nullopt: no cospi declared.
std::optional<bool> math_functions_lacks_noexcept(const std::string& math_functions);

}  // namespace kache::compiler::nvcc
