#pragma once
// clang's offload route (HIP through hipcc or clang -x hip, CUDA through clang -x cuda): a command line read through the gcc
// table extended by the offload rows (flag_table.cpp here), into an OffloadPlan or a Passthrough. The
// GCC-compatible part of the line (-c, -o, -I, -D, -MD/-MF...) is gcc's CompilePlan, planned by gcc's
// planner with these rows matched first (gcc::PlanExtension); what is the offload route's own (targets,
// device or host only, --genco, -fgpu-rdc, ROCm paths, spec 003's -Xclang depfile form) is kept here.
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/adapter.hpp"
#include "compiler/gcc/plan.hpp"

namespace kache::compiler::offload {

// Which driver reads the line: hipcc adds --genco (device code only, bundled) and takes .cpp/.cu/.hip
// as HIP (its HIP_COMPILE_CXX_AS_HIP default); clang compiles HIP only under -x hip or for a .hip file.
enum class Driver { hipcc, clang };

enum class DeviceMode { both, device_only, host_only };

struct OffloadPlan {
  gcc::CompilePlan compile;
  // The offload targets as clang builds them: each distinct target ID once, sorted (clang keeps them in
  // a set), after every --no-offload-arch. Target features stay as written (gfx90a:xnack+).
  std::vector<std::string> targets;
  DeviceMode mode = DeviceMode::both;
  bool genco = false;  // hipcc --genco: device code only (hipcc adds --cuda-device-only)
  bool rdc = false;    // -fgpu-rdc: relocatable device code
  bool explicit_cuid = false;  // -cuid=X given: the compilation unit ID does not depend on the line
  std::string use_cuid = "hash";  // -fuse-cuid=, the last one winning
  bool assemble = false;  // -S (device-only, one target): the device compile's assembly
  // What the output is: "offload-bundle" (device code only: hipcc 5.2's clang 15 bundles even one
  // target's HSACO), "device-assembly" (-S device-only: one target's AMDGPU assembly), "ptx" and "cubin"
  // (clang's CUDA device-only -S and -c), "host-object",
  // "object" (a host object with the device code embedded), "object-rdc". Counted per kind in the stats.
  std::string output_kind;
  // ROCm locations given on the line, as written (last wins, as in clang): the device bitcode and the
  // HIP headers a compile reads come from there.
  std::optional<std::string> rocm_path, hip_path, device_lib_path;
  // Spec 003's depfile form: -Xclang -dependency-file -Xclang D [-Xclang -MT -Xclang T]. D as written,
  // the index of the argument holding it (for the miss to rewrite), and the -MT values.
  std::optional<std::string> xclang_depfile;
  std::size_t xclang_depfile_index = 0;
  std::vector<std::string> xclang_targets;
  std::vector<std::size_t> xclang_target_indexes;  // the arguments holding the -MT values
};

using Plan = std::variant<Passthrough, OffloadPlan>;

// args: the arguments after the driver's name. extra_allowlist: [cc] extra_allowlist_flags.
Plan plan(Driver driver, const std::vector<std::string>& args, const std::vector<std::string>& extra_allowlist);

// clang's CUDA mode other than device-only -c/-S: planned (targets, output, kind), but not cached. A full
// -c bundles the cubins with fatbinary (clang 19: `fatbinary --create ... --image=profile=...`, an option
// CUDA 13's fatbinary dropped), so it cannot succeed with this toolkit and is left to clang; host-only
// is untested here. The passthrough, or nullopt (HIP, or CUDA device-only).
std::optional<Passthrough> cuda_not_cached(const OffloadPlan& p);

// The compilation unit ID: without -cuid=X clang makes one by hashing the source's real path and every
// argument, the output's path included (-fuse-cuid=hash), or from the source file's inode (none), or at
// random. It names the device symbols -fgpu-rdc externalizes (static __device__ variables the host
// refers to: `v.static.<cuid hash>`), and clang 18 and later put it in every HIP object
// (`__hip_cuid_<cuid>`). A cache's miss runs with its own output path, so such bytes can never be plain
// clang's for this -o: those compiles pass through (offload-cuid) unless -cuid=X is given. Measured with
// clang 15: -c without -fgpu-rdc gives the same bytes for any -o. clang_major: the clang's major version
// (0 when unknown).
std::optional<Passthrough> cuid_refusal(const OffloadPlan& p, int clang_major);

// The major version in a clang description ("... clang version 15.0.6 ..."), 0 when none is found.
int clang_major_version(std::string_view description);

// A CUDA target clang's CUDA mode takes: sm_<digits>[a|f] (sm_90, sm_90a).
bool cuda_target(std::string_view target);

// A target ID as clang accepts it for AMDGPU: gfx<version>[:feature(+|-)]..., feature sramecc or xnack,
// each at most once. The processor part, or nullopt when it is not one.
std::optional<std::string> target_processor(std::string_view target_id);

}  // namespace kache::compiler::offload
