#pragma once
#include "compiler/adapter.hpp"
#include "compiler/nvcc/plan.hpp"

namespace kache::compiler::nvcc {

class NvccAdapter final : public Adapter {
 public:
  std::string name() const override { return "nvcc"; }
  std::variant<Passthrough, CompileJob> prepare(const core::Invocation& inv, const core::Config& cfg) override;
  std::vector<std::string> miss_command(const core::Invocation& inv, const CompileJob& job,
                                        const MissPaths& paths) const override;
  void miss_environment(util::Environment& env, const core::Config& cfg) const override;
  std::vector<std::string> closure_command(const core::Invocation& inv, const CompileJob& job) const override;
  std::vector<std::string> path_specific_markers() const override;
  std::variant<std::string, std::vector<PreprocessCommand>> fallback_preprocessing(
      const core::Invocation& inv, const CompileJob& job, const util::Environment& env) const override;
  std::variant<std::string, util::ProcessResult> run_stages(const core::Invocation& inv, const CompileJob& job,
                                                            const MissPaths& paths, const std::vector<std::string>& argv,
                                                            const util::Environment& env,
                                                            StageStore& stages) const override;

 private:
  CompilePlan plan_;  // prepare()'s plan, which the miss and the closure listing rewrite
  // args with the values of every -o (and, when depfile is not empty, -MF) replaced, for the miss.
  std::vector<std::string> rewrite_outputs(const std::vector<std::string>& args, const std::string& object,
                                           const std::string& depfile) const;
};

}  // namespace kache::compiler::nvcc
