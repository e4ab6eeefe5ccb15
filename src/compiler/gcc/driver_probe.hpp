#pragma once
// What a GCC-compatible driver runs and where it looks for headers, asked of the driver itself. Used by
// the gcc adapter's toolchain probe and by nvcc's, for the host compiler nvcc drives.
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/tool_files.hpp"
#include "util/process.hpp"

namespace kache::compiler::gcc {

// Records the driver's own passes (`-print-prog-name=`: GCC's cc1/cc1plus/as) under "host:<prog>". A
// bare cc1* answer is clang's: a name it does not run, skipped. A bare "as" resolves over the probe's
// search path and is recorded as a bare name.
void add_driver_programs(ProbeFiles& files, const std::string& driver, const util::Environment& env,
                         std::initializer_list<const char*> programs);

// The driver's `#include <...>` search directories for `language` (c, c++), lexically normal.
std::vector<std::string> driver_include_dirs(const std::string& driver, std::string_view language,
                                             const util::Environment& env);

}  // namespace kache::compiler::gcc
