#pragma once
#include "compiler/adapter.hpp"
#include "compiler/gcc/plan.hpp"

namespace kache::compiler::gcc {

// gcc, g++, cc, c++, clang, clang++ (versioned, prefixed, or as paths): one adapter, one flag table.
class GccAdapter final : public Adapter {
 public:
  std::string name() const override { return "gcc"; }
  std::variant<Passthrough, CompileJob> prepare(const core::Invocation& inv, const core::Config& cfg) override;
  std::vector<std::string> miss_command(const core::Invocation& inv, const CompileJob& job,
                                        const MissPaths& paths) const override;
  void miss_environment(util::Environment& env, const core::Config& cfg) const override;
  std::vector<std::string> closure_command(const core::Invocation& inv, const CompileJob& job) const override;
  std::vector<std::string> path_specific_markers() const override { return {}; }

 private:
  CompilePlan plan_;  // prepare()'s plan, which the miss and the closure listing rewrite
};

}  // namespace kache::compiler::gcc
