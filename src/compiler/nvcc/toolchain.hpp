#pragma once
// What nvcc would run: its own version and the host compiler it drives, probed through
// `nvcc --dryrun` and `<host> --version`, and memoized so a hit runs no process at all.
#include <optional>
#include <string>
#include <vector>

#include "util/process.hpp"

namespace kache::compiler::nvcc {

struct Toolchain {
  std::string id;                         // hex digest of the version facts; part of every key
  std::string description;                // for logs
  std::string host_compiler;              // resolved path of the host compiler nvcc runs
  std::vector<std::string> include_dirs;  // nvcc's own and the host compiler's system search dirs
  bool from_memo = false;
};

// nvcc_path: the resolved nvcc executable. memo_dir: where probe results are kept ("" = no memo).
// Throws std::runtime_error when nvcc or the host compiler cannot be probed.
//
// The memo is keyed by everything that decides the probe's answer: nvcc's path and file identity,
// its nvcc.profile's identity (it sets nvcc's include paths), PATH (nvcc resolves a bare host
// compiler through it), -ccbin and NVCC_CCBIN. Its content is trusted only while the host compiler
// file it names has the same identity and a bare host compiler name still resolves to it.
Toolchain probe_toolchain(const std::string& nvcc_path, const util::Environment& env,
                          const std::optional<std::string>& ccbin, const std::string& memo_dir);

}  // namespace kache::compiler::nvcc
