#pragma once
#include "compiler/adapter.hpp"
#include "compiler/gcc/plan.hpp"
#include "compiler/gcc/toolchain.hpp"

namespace kache::compiler::gcc {

// gcc, g++, cc, c++, clang, clang++ (versioned, prefixed, or as paths): one adapter, one flag table.
class GccAdapter final : public Adapter {
 public:
  std::string name() const override { return "gcc"; }
  // compiler/gcc/doctor.cpp: the C and C++ compilers on PATH, their wrappers and versions.
  void doctor_rows(core::DoctorRows& rows, DoctorSection section, const DoctorQuery& query) override;
  // compiler/gcc/toolchain.cpp: probe_toolchain's id.
  std::string toolchain_id(const std::string& program, const util::Environment& env) const override;
  std::variant<Passthrough, CompileJob> prepare(const core::Invocation& inv, const core::Config& cfg) override;
  std::vector<std::string> miss_command(const core::Invocation& inv, const CompileJob& job,
                                        const MissPaths& paths) const override;
  void miss_environment(util::Environment& env, const core::Config& cfg) const override;
  std::vector<std::string> closure_command(const core::Invocation& inv, const CompileJob& job) const override;
  std::vector<std::string> preprocess_command(const core::Invocation& inv, const CompileJob& job) const override;
  std::vector<std::string> remote_listing_command(const core::Invocation& inv, const CompileJob& job) const override;
  std::optional<TimeMacros> time_macros(const util::ProcessResult& preprocessed) const override;
  std::variant<std::string, std::vector<PreprocessCommand>> fallback_preprocessing(
      const core::Invocation& inv, const CompileJob& job, const util::Environment& env) const override;
  std::vector<std::string> path_specific_markers() const override { return {}; }
  const std::string& program(const core::Invocation& inv) const override {
    return wrapped_ ? effective_.compiler_path : inv.compiler_path;
  }

 private:
  // The wrapper's reading, when the compiler is a wrapper script: its plan is checked, then the
  // command it stands for becomes the one planned.
  std::optional<Passthrough> read_wrapper(const core::Invocation& given, const core::Config& cfg);
  std::optional<Passthrough> key_driver(std::vector<std::pair<std::string, std::string>>& k, const Toolchain& tc,
                                        const core::Invocation& inv, const core::Config& cfg) const;
  // The command kache plans, keys and runs: the user's, or the one a wrapper script stands for.
  const core::Invocation& command(const core::Invocation& given) const { return wrapped_ ? effective_ : given; }
  CompilePlan plan_;  // prepare()'s plan of command(), which the miss and the closure listing rewrite
  core::Invocation effective_;
  bool wrapped_ = false;
  // The user's command without its outputs, dependency options and -c, ending in `mode` (-M, -E).
  std::vector<std::string> without_outputs(const core::Invocation& inv, const char* mode) const;
  std::string colour_flag_;  // prepare()'s diagnostics_colour_flag, appended to the miss command
  bool clang_ = false;       // the driver is clang's (its -Wdate-time does not name the macro)
};

// Which time macros a preprocessing run with -Wdate-time reported (its diagnostics, as text, one per
// line) and whether it can be believed: nullopt when the preprocessed text holds a diagnostic pragma
// that names date-time or everything (it can silence the warning, clang honours it under -E). GCC
// names the macro ("macro \"__DATE__\" might prevent..."); clang does not, so every clang report
// counts as __TIME__.
std::optional<TimeMacros> reported_time_macros(std::string_view diagnostics, std::string_view preprocessed, bool clang);

}  // namespace kache::compiler::gcc
