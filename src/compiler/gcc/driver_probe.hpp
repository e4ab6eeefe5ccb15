#pragma once
// What a GCC-compatible driver runs and where it looks for headers, asked of the driver itself. Used by
// the gcc adapter's toolchain probe and by nvcc's, for the host compiler nvcc drives. Each question is
// a process of its own, started when the query is made and answered when it is read, so a probe asks
// all of them at once instead of one after another (each costs a driver start, 2 to 20 ms).
#include <future>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/tool_files.hpp"
#include "util/process.hpp"

namespace kache::compiler::gcc {

// The driver's own passes (`-print-prog-name=`: GCC's cc1/cc1plus/as), recorded by add_to() under
// "host:<prog>". A bare cc1* answer is clang's: a name it does not run, skipped. A bare "as" resolves
// over the probe's search path and is recorded as a bare name.
class DriverPrograms {
 public:
  // options: what every question carries before its own (the compile's -B prefixes).
  DriverPrograms(const std::string& driver, const util::Environment& env, std::initializer_list<const char*> programs,
                 const std::vector<std::string>& options = {});
  void add_to(ProbeFiles& files);

 private:
  std::vector<std::pair<std::string, std::future<util::ProcessResult>>> answers_;
};

// The driver's `#include <...>` search directories for `language` (c, c++), lexically normal.
class DriverIncludeDirs {
 public:
  DriverIncludeDirs(const std::string& driver, std::string_view language, const util::Environment& env,
                    const std::vector<std::string>& options = {});
  std::vector<std::string> get();

 private:
  std::future<util::ProcessResult> answer_;
};

}  // namespace kache::compiler::gcc
