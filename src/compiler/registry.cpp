#include "compiler/registry.hpp"

#include "compiler/gcc/adapter.hpp"
#include "compiler/gcc/plan.hpp"
#include "compiler/nvcc/adapter.hpp"
#include "compiler/nvcc/plan.hpp"
#include "compiler/offload/adapter.hpp"

namespace kache::compiler {

std::unique_ptr<Adapter> find_adapter(const std::string& compiler_arg, const std::vector<std::string>& args) {
  if (nvcc::is_nvcc(compiler_arg)) return std::make_unique<nvcc::NvccAdapter>();
  if (offload::is_hipcc(compiler_arg)) return std::make_unique<offload::HipccAdapter>();
  if (offload::is_clang_hip(compiler_arg, args)) return std::make_unique<offload::HipccAdapter>(offload::Driver::clang);
  if (gcc::is_gcc_driver(compiler_arg)) return std::make_unique<gcc::GccAdapter>();
  return nullptr;
}

}  // namespace kache::compiler
