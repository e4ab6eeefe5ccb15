#pragma once
// `kache doctor`: the machine's facts before the first compile (spec 004). Each row is ok, warn or
// fail; a fail is a pairing that cannot work (a host compiler past the bound nvcc's own
// crt/host_config.h states, a toolkit whose math_functions.h clashes with the C library, a driver
// below the toolkit's floor) and says, in one sentence, what to change. Exit status 1 on any fail.
//
// The bounds are read from the toolkit's headers, never hard-coded: a toolkit kache has not seen
// states its own.
#include <optional>
#include <string>
#include <vector>

namespace kache::app {

// `kache doctor [--json] [--nvcc PATH] [-ccbin DIR|COMPILER]`; args are the words after "doctor".
int run_doctor(const std::vector<std::string>& args);

namespace doctor {

// The newest host compiler major a crt/host_config.h accepts: the condition guarding its
// "unsupported GNU version" (gnu) or "unsupported clang version" (clang) #error, e.g.
// `#if __GNUC__ > 15` gives 15, `#if (__clang_major__ >= 21) || ...` gives 20. nullopt: not stated.
std::optional<int> newest_host_major(const std::string& host_config, bool clang);

// Whether a crt/math_functions.h declares the host's cospi without an exception specification (CUDA
// 12.x up to the fix): with glibc >= 2.41, which declares cospi/sinpi/rsqrt noexcept, every TU that
// includes <cmath> stops with "exception specification is incompatible". nullopt: no cospi declared.
std::optional<bool> math_functions_lacks_noexcept(const std::string& math_functions);

}  // namespace doctor
}  // namespace kache::app
