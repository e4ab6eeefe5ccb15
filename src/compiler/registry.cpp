#include "compiler/registry.hpp"

#include "compiler/gcc/adapter.hpp"
#include "compiler/gcc/flag_table.hpp"
#include "compiler/gcc/plan.hpp"
#include "compiler/nvcc/adapter.hpp"
#include "compiler/nvcc/plan.hpp"
#include "compiler/offload/adapter.hpp"
#include "compiler/offload/cuda.hpp"
#include "util/fs.hpp"

namespace kache::compiler {

namespace {

// A clang driver (clang, clang++-19, x86_64-linux-gnu-clang...), not gcc, which has no CUDA mode.
bool is_clang_driver(const std::string& argv0) {
  return gcc::is_gcc_driver(argv0) && util::basename(argv0).find("clang") != std::string::npos;
}

}  // namespace

std::unique_ptr<Adapter> find_adapter(const std::string& compiler_arg, const std::vector<std::string>& args) {
  if (nvcc::is_nvcc(compiler_arg)) return std::make_unique<nvcc::NvccAdapter>();
  if (offload::is_hipcc(compiler_arg)) return std::make_unique<offload::HipccAdapter>();
  if (is_clang_driver(compiler_arg) && offload::is_cuda_compile(args)) {
    return std::make_unique<offload::HipccAdapter>(offload::Driver::clang, "clang-cuda");
  }
  if (offload::is_clang_hip(compiler_arg, args)) return std::make_unique<offload::HipccAdapter>(offload::Driver::clang);
  if (gcc::is_gcc_driver(compiler_arg)) return std::make_unique<gcc::GccAdapter>();
  return nullptr;
}

std::vector<std::unique_ptr<Adapter>> families() {
  std::vector<std::unique_ptr<Adapter>> all;
  all.push_back(std::make_unique<gcc::GccAdapter>());
  all.push_back(std::make_unique<nvcc::NvccAdapter>());
  all.push_back(std::make_unique<offload::HipccAdapter>());
  return all;
}

std::unique_ptr<Adapter> family(std::string_view name) {
  for (auto& adapter : families()) {
    if (adapter->name() == name) return std::move(adapter);
  }
  return nullptr;
}

std::optional<std::string> doctor_child_answer(std::string_view question) {
  for (const auto& adapter : families()) {
    if (auto answer = adapter->doctor_child_answer(question)) return answer;
  }
  return std::nullopt;
}

int print_gcc_flag_classes(int argc, char** argv) { return gcc::print_flag_classes(argc, argv); }

}  // namespace kache::compiler
