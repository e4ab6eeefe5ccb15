#pragma once
// One call of kache in front of a compiler: what was asked, where, and with which environment.
#include <string>
#include <vector>

#include "util/process.hpp"

namespace kache::core {

struct Invocation {
  std::string compiler_arg;       // the compiler as the user wrote it ("nvcc", "/usr/local/cuda/bin/nvcc")
  std::string compiler_path;      // resolved executable (never kache itself)
  std::vector<std::string> args;  // arguments after the compiler
  std::string cwd;
  util::Environment env;

  std::vector<std::string> argv() const;  // compiler_arg followed by args: what passthrough runs
};

}  // namespace kache::core
