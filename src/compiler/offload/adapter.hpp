#pragma once
// hipcc (issue 23): `kache hipcc --genco|-c ...`. Plans through the offload planner (plan.hpp), keys
// what hipcc's chain reads (toolchain.hpp) and runs hipcc itself on a miss.
#include "compiler/adapter.hpp"
#include "compiler/offload/plan.hpp"

namespace kache::compiler::offload {

// hipcc or hipcc.pl, as a bare name or a path.
bool is_hipcc(const std::string& argv0);
// A clang driver (clang, clang++-15, ...) given a HIP compile: -x hip, a .hip source or an
// --offload-arch. Its CUDA mode (-x cuda, .cu) stays with the gcc adapter, which passes it through.
bool is_clang_hip(const std::string& argv0, const std::vector<std::string>& args);

// hipcc (Driver::hipcc) and clang's HIP route (Driver::clang): one adapter, one planner.
class HipccAdapter final : public Adapter {
 public:
  // clang_name: "clang-hip", or "clang-cuda" for clang's CUDA mode (registry.cpp routes it here).
  explicit HipccAdapter(Driver driver = Driver::hipcc, std::string clang_name = "clang-hip")
      : driver_(driver), clang_name_(std::move(clang_name)) {}
  std::string name() const override { return driver_ == Driver::hipcc ? "hipcc" : clang_name_; }
  std::variant<Passthrough, CompileJob> prepare(const core::Invocation& inv, const core::Config& cfg) override;
  std::vector<std::string> miss_command(const core::Invocation& inv, const CompileJob& job,
                                        const MissPaths& paths) const override;
  void miss_environment(util::Environment& env, const core::Config& cfg) const override;
  std::vector<std::string> closure_command(const core::Invocation& inv, const CompileJob& job) const override;
  std::vector<std::string> path_specific_markers() const override { return {}; }
  // compiler/offload/doctor.cpp: hipcc, the clang it runs, the device libraries, CMake's HIP layout.
  void doctor_rows(core::DoctorRows& rows, DoctorSection section, const DoctorQuery& query) override;

 private:
  Driver driver_;
  std::string clang_name_;
  OffloadPlan plan_;
};

}  // namespace kache::compiler::offload
