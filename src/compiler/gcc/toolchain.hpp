#pragma once
// What a gcc/clang driver is: its identity for the key, probed through the driver itself and memoized
// by file identity (compiler/tool_files.hpp), so a hit runs no process at all.
#include <string>
#include <vector>

#include "compiler/tool_files.hpp"
#include "util/process.hpp"

namespace kache::compiler::gcc {

struct Toolchain {
  std::string id;                         // hex digest of the identity facts; part of every key
  std::string description;                // for logs
  std::vector<std::string> include_dirs;  // the driver's own system search dirs (C and C++)
  // A clang configuration file beside the driver that may pull in another file (`@path`): that
  // file's content is keyed nowhere, so such a toolchain is not cached. "" when there is none.
  std::string config_include;
  bool from_memo = false;
  ToolFiles files;  // what the id was read from, for the miss to check after its compile
};

// driver: the resolved compiler executable. memo_dir: where probe results are kept ("" = no memo).
// Throws std::runtime_error when the driver cannot be probed.
//
// The id hashes `--version` and `-dumpmachine`, the content of the driver executable (through
// symlinks: g++ -> g++-12), of the programs it runs for a compile (-print-prog-name: cc1, cc1plus, as)
// and of its specs file when it has one. The memo is keyed by the driver's path and identity and
// every variable the environment table marks as read by the probe (PATH, GCC_EXEC_PREFIX,
// COMPILER_PATH, ...); its content is trusted while every hashed file keeps its identity and every
// bare program name resolves to the same file.
// prefixes: the compile's -B values, passed with every question (the passes, specs and include
// directories found there are the ones the compile uses); each prefix's directory and the directories
// in it are part of the memo key, so a program appearing there probes again.
Toolchain probe_toolchain(const std::string& driver, const util::Environment& env, const std::string& memo_dir,
                          const std::vector<std::string>& prefixes = {});

// What the driver turns `native` (-march=native, -mtune=native, -mcpu=native) into on this processor:
// a digest of its -### output for those options (GCC's cc1 line lists -march=<cpu>, every -m<feature>
// and the cache sizes; clang's -target-cpu and -target-feature). Memoized per driver identity, options,
// -B prefixes and util::cpu_signature(), so a cache dir shared with another machine keys apart. Throws
// std::runtime_error when the driver cannot say.
std::string native_expansion(const std::string& driver, const util::Environment& env, const std::string& memo_dir,
                             const std::vector<std::string>& prefixes, const std::vector<std::string>& native);

}  // namespace kache::compiler::gcc
