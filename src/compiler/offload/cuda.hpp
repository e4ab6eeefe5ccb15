#pragma once
// clang's CUDA mode (clang -x cuda --cuda-device-only -c|-S): what clang reads of the CUDA installation
// beyond the compile's headers, for the offload probe (toolchain.cpp) and its memo, and the toolkits
// clang cannot use, which pass through (clang-cuda-toolkit) instead of failing as a miss.
//
// Watched with strace (tests/integration/test_clang_cuda_input_audit.py) for clang 19 and CUDA 13:
// - the installation is --cuda-path, else the one whose bin/ptxas is first on PATH, else
//   /usr/local/cuda, /usr/local/cuda-X.Y (stat'd in turn);
// - the driver reads <cuda>/include/cuda.h for the CUDA version (older clangs: version.txt/json);
// - the device compile links <cuda>/nvvm/libdevice/libdevice.10.bc (-mlink-builtin-bitcode: the probe
//   keys it and its directory) and includes <cuda>/include (the closure lists those headers);
// - a device-only -c runs <cuda>/bin/ptxas (a program of the -### plan: keyed as every job's program);
//   clang 19 also finds the installation through the ptxas on PATH, so bin/ptxas is keyed for -S too.
#include <optional>
#include <string>
#include <vector>

#include "compiler/tool_files.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"

namespace kache::compiler::offload {

// Whether the arguments compile CUDA with clang (-x cuda, or a .cu source without -x).
bool is_cuda_compile(const std::vector<std::string>& args);

// For the memo key of a CUDA compile's probe: the identity of every place clang looks for an
// installation (each PATH directory, where ptxas is searched; /usr/local and /usr/local/cuda; a
// --cuda-path value), so an installation appearing or a ptxas found first re-probes. No-op otherwise.
void add_cuda_detection(util::Hasher& memo_key, const std::vector<std::string>& args, const util::Environment& env);

// The CUDA installation files the driver reads that no dependency list names (include/cuda.h, the
// version files), for every installation root the -### plan uses (ptxas's, libdevice's, the cc1 jobs'
// <root>/include that holds cuda.h). jobs: the plan's job lines as words.
void add_cuda_installation_files(ProbeFiles& pf, const std::vector<std::vector<std::string>>& jobs);

// clang's warning that the toolkit is newer than any CUDA it supports even partly ("CUDA version is
// newer than the latest supported version 11.5", clang 14/15 with CUDA 13, whose wrapper then fails
// on the texture<> template CUDA 12 removed). clang 19 says "latest partially supported" and compiles.
bool is_unsupported_cuda_warning(const std::string& line);

// clang's CUDA wrapper (__clang_cuda_runtime_wrapper.h, included unless -nocudainc) includes
// texture_fetch_functions.h, which CUDA 13 dropped: without one in the compile's search dirs the
// compile cannot succeed. The sentence saying so, or nullopt. search_dirs: every cc1 include dir.
std::optional<std::string> missing_cuda_wrapper_header(const std::vector<std::string>& args,
                                                       const std::vector<std::string>& search_dirs,
                                                       const std::string& cwd);

}  // namespace kache::compiler::offload
