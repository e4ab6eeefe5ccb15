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
  // compiler/nvcc/doctor.cpp: the toolkit and its host compiler, the CUDA driver, NVCC_* variables.
  void doctor_rows(core::DoctorRows& rows, DoctorSection section, const DoctorQuery& query) override;
  std::optional<std::string> doctor_child_answer(std::string_view question) const override;
  // compiler/nvcc/toolchain.cpp: probe_toolchain's id, nvcc's host compiler included.
  std::string toolchain_id(const std::string& program, const util::Environment& env) const override;

 private:
  // The toolkit's release the toolchain rows read ({13, 0}), for the driver row.
  std::optional<std::pair<int, int>> doctor_release_;
  CompilePlan plan_;  // prepare()'s plan, which the miss and the closure listing rewrite
  // args with the values of every -o (and, when depfile is not empty, -MF) replaced, for the miss.
  std::vector<std::string> rewrite_outputs(const std::vector<std::string>& args, const std::string& object,
                                           const std::string& depfile) const;
};

}  // namespace kache::compiler::nvcc
