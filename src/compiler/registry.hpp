#pragma once
// The adapter registry: which adapter serves a compiler name. Kept out of the seam (adapter.hpp), which
// names what an adapter does, not which ones exist; a new adapter (clang offload, hipcc) is added here.
#include <memory>
#include <string>
#include <vector>

#include "compiler/adapter.hpp"

namespace kache::compiler {

// The adapter for a compiler named like compiler_arg, or nullptr if kache does not know it. args: the
// compile's arguments; a clang given a HIP compile (-x hip, .hip, --offload-arch) gets the offload
// adapter, every other clang compile the gcc adapter.
std::unique_ptr<Adapter> find_adapter(const std::string& compiler_arg, const std::vector<std::string>& args = {});

}  // namespace kache::compiler
