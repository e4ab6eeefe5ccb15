#include "compiler/offload/cuda.hpp"

#include <filesystem>
#include <set>

#include "compiler/argument_facts.hpp"
#include "compiler/gcc/plan.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace kache::compiler::offload {

namespace {

std::string root_above(std::string path, int levels) {
  for (int i = 0; i < levels; ++i) path = util::dirname(path);
  return path;
}

}  // namespace

bool is_cuda_compile(const std::vector<std::string>& args) { return names_cuda_input(args); }

void add_cuda_detection(util::Hasher& memo_key, const std::vector<std::string>& args, const util::Environment& env) {
  if (!is_cuda_compile(args)) return;
  std::vector<std::string> dirs = {"/usr/local", "/usr/local/cuda", "/usr/lib/cuda"};
  for (auto& d : cuda_paths(args)) dirs.push_back(std::move(d));
  const std::string path = util::env_get(env, "PATH").value_or("");
  // clang takes the installation above the real path of the ptxas PATH finds, and follows the links of
  // each candidate: a link retargeted anywhere along them changes no directory's identity, so each is
  // also keyed as it resolves now.
  std::vector<std::string> resolved = dirs;
  if (auto ptxas = util::find_executable("ptxas", path)) resolved.push_back(*ptxas);
  for (const auto& p : resolved) {
    std::error_code ec;
    const auto real = std::filesystem::canonical(p, ec);
    memo_key.add_field("cuda-resolved:" + p, ec ? "absent" : real.string());
  }
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t colon = std::min(path.find(':', start), path.size());
    if (colon > start) dirs.push_back(path.substr(start, colon - start));
    start = colon + 1;
  }
  for (const auto& d : dirs) add_identity(memo_key, "cuda-detect:" + d, d);
}

void add_cuda_installation_files(ProbeFiles& pf, const std::vector<std::vector<std::string>>& jobs) {
  std::set<std::string> roots;
  for (const auto& job : jobs) {
    if (util::basename(job[0]) == "ptxas") roots.insert(root_above(job[0], 2));  // <cuda>/bin/ptxas
    for (std::size_t i = 1; i + 1 < job.size(); ++i) {
      const std::string& v = job[i + 1];
      if (job[i] == "-mlink-builtin-bitcode" && v.find("/nvvm/libdevice/") != std::string::npos) {
        roots.insert(root_above(v, 3));  // <cuda>/nvvm/libdevice/libdevice.10.bc
      }
      if (job[i] == "-internal-isystem" && util::basename(v) == "include" &&
          util::exists(util::join_path(v, "cuda.h"))) {
        roots.insert(util::dirname(v));
      }
    }
  }
  for (const auto& root : roots) {
    // bin/ptxas: how clang 19 finds the installation over PATH (a -c runs it too: then also a job).
    for (const char* f : {"include/cuda.h", "version.json", "version.txt", "bin/ptxas"}) {
      if (const std::string p = util::join_path(root, f); util::exists(p)) pf.add("cuda-version", p);
    }
  }
}

bool is_unsupported_cuda_warning(const std::string& line) {
  return line.find("CUDA version is newer than the latest supported version") != std::string::npos;
}

std::optional<std::string> missing_cuda_wrapper_header(const std::vector<std::string>& args,
                                                       const std::vector<std::string>& search_dirs,
                                                       const std::string& cwd) {
  if (skips_cuda_wrapper_headers(args)) return std::nullopt;
  for (const auto& d : search_dirs) {
    if (util::exists(util::join_path(util::join_path(cwd, d), "texture_fetch_functions.h"))) return std::nullopt;
  }
  return "texture_fetch_functions.h, which clang's CUDA wrapper includes, is in no include directory "
         "(CUDA 13 dropped it)";
}

}  // namespace kache::compiler::offload
