#pragma once
// What nvcc would run: its own version and the host compiler it drives, probed through
// `nvcc --dryrun` and `<host> --version`, and memoized so a hit runs no process at all.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/tool_files.hpp"
#include "util/process.hpp"

namespace kache::compiler::nvcc {

struct Toolchain {
  std::string id;                         // hex digest of the version facts; part of every key
  std::string description;                // for logs
  std::string host_compiler;              // resolved path of the host compiler nvcc runs
  std::vector<std::string> include_dirs;  // nvcc's own and the host compiler's system search dirs
  bool from_memo = false;
  ToolFiles files;  // what the id was read from, for the miss to check after its compile
};

// What `nvcc --dryrun` says: the host compiler it runs, the host dialect cudafe++ is told, nvcc.profile's
// variables and the programs of a compile. The one reader of a dry run's commands (the probe's and
// doctor's); its variable lines are read by stages' dry_run_variable.
struct DryRun {
  std::string host_word, host_version_token;
  std::vector<std::pair<std::string, std::string>> profile_vars;  // in nvcc's order, PATH and LD_LIBRARY_PATH apart
  std::map<std::string, std::string> vars;                        // every "#$ NAME=value"
  std::vector<std::string> programs;                               // the programs it runs, variables expanded
};
DryRun read_dry_run(const std::string& text);

// nvcc's own include directories as its dry run expands them: the words of INCLUDES, then of
// SYSTEM_INCLUDES, each an -I value or a bare directory. The one reading of them: the probe puts them
// in the toolchain's include_dirs (after the host compiler's) and doctor looks in them for the
// toolkit's crt/ headers.
std::vector<std::string> dry_run_include_dirs(const DryRun& run);

// Whether the host compiler a dry run names (resolved) is kache itself: kache's masquerade (`gcc` ->
// kache, first on PATH) runs the next program of its name on nvcc's PATH, and that one is the host
// compiler the probe keys and doctor states.
bool is_masquerade(const std::string& host_compiler);

// nvcc_path: the resolved nvcc executable. memo_dir: where probe results are kept ("" = no memo).
// Throws std::runtime_error when nvcc or the host compiler cannot be probed.
//
// The toolchain id hashes nvcc's and the host compiler's versions, the content of every program a
// representative `nvcc --dryrun -c` runs (cudafe++, cicc, ptxas, fatbinary, the host compiler and its
// cc1plus/as), libdevice, nvcc.profile, and the profile's expansion as nvcc prints it.
// The memo is keyed by nvcc's path and file identity, its nvcc.profile's identity, -ccbin and every
// environment variable the table (compiler/env_table.cpp) marks as read by the probe (PATH,
// NVCC_CCBIN, INCLUDES, GCC_EXEC_PREFIX, ...). Its content is trusted only while every hashed file
// keeps its identity, every bare program name still resolves to the same file over nvcc's PATH, and
// the variables nvcc.profile references keep their values: a hit costs a handful of stats.
Toolchain probe_toolchain(const std::string& nvcc_path, const util::Environment& env,
                          const std::optional<std::string>& ccbin, const std::string& memo_dir);

}  // namespace kache::compiler::nvcc
