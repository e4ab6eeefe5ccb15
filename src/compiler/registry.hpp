#pragma once
// The adapter registry: which adapter serves a compiler name. Kept out of the seam (adapter.hpp), which
// names what an adapter does, not which ones exist; a new adapter (clang offload, hipcc) is added here.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/adapter.hpp"

namespace kache::compiler {

// The adapter for a compiler named like compiler_arg, or nullptr if kache does not know it. args: the
// compile's arguments; a clang given a HIP compile (-x hip, .hip, --offload-arch) gets the offload
// adapter, every other clang compile the gcc adapter.
std::unique_ptr<Adapter> find_adapter(const std::string& compiler_arg, const std::vector<std::string>& args = {});

// One adapter of each compiler family kache knows, in the order `kache doctor` reports them: gcc
// (gcc, g++, clang, clang++), nvcc, hipcc (the offload route). Doctor and the worker iterate these
// instead of naming adapters.
std::vector<std::unique_ptr<Adapter>> families();

// The family whose adapter is called `name` ("gcc", "nvcc", "hipcc"); nullptr when there is none.
std::unique_ptr<Adapter> family(std::string_view name);

// The first family's answer to a question `kache doctor` asks itself in a child process
// (Adapter::doctor_child_answer); nullopt when no family knows it.
std::optional<std::string> doctor_child_answer(std::string_view question);

// Hidden `kache --classify-gcc-flags ARGS...`: what the gcc/clang flag table makes of each argument, one
// line each (test_flag_table_coverage.py reads it). Returns the exit status.
int print_gcc_flag_classes(int argc, char** argv);

}  // namespace kache::compiler
