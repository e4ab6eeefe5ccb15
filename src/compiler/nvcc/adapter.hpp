#pragma once
#include "compiler/adapter.hpp"

namespace kache::compiler::nvcc {

class NvccAdapter final : public Adapter {
 public:
  std::string name() const override { return "nvcc"; }
  std::variant<compiler::Passthrough, CompileJob> prepare(const core::Invocation& inv,
                                                          const core::Config& cfg) override;
  std::vector<std::string> miss_command(const core::Invocation& inv, const CompileJob& job,
                                        const MissPaths& paths) const override;
  void miss_environment(util::Environment& env, const core::Config& cfg) const override;
  std::vector<std::string> closure_command(const core::Invocation& inv, const CompileJob& job) const override;
  std::vector<std::string> path_specific_markers() const override;

  // Include directories named by -I/-isystem/--include-path/--system-include in args (as written).
  static std::vector<std::string> include_dirs_in(const std::vector<std::string>& args);
  // args with the values of -o and -MF replaced, for the miss command.
  static std::vector<std::string> rewrite_outputs(const std::vector<std::string>& args, const std::string& object,
                                                  const std::string& depfile);
};

}  // namespace kache::compiler::nvcc
