// clang's offload route (hipcc, clang -x hip): the gcc table extended by the offload rows. What caches,
// what passes through and why, the targets as clang builds them, the output kinds, and spec 003's
// -Xclang depfile form. Command lines follow hipcc 5.2's own clang line and spec 003's custom targets.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "compiler/offload/plan.hpp"
#include "core/reasons.hpp"

namespace {

using namespace kache::compiler::offload;
using Args = std::vector<std::string>;

std::string reason(Driver d, const Args& args) {
  Plan p = plan(d, args, {});
  if (auto* pt = std::get_if<kache::compiler::Passthrough>(&p)) return pt->reason;
  return "cached";
}

OffloadPlan cached(Driver d, const Args& args) {
  Plan p = plan(d, args, {});
  if (auto* pt = std::get_if<kache::compiler::Passthrough>(&p)) {
    ADD_FAILURE() << "passthrough " << pt->reason << ": " << pt->detail;
    return {};
  }
  return std::get<OffloadPlan>(p);
}

TEST(OffloadPlan, HipccGenco) {
  const OffloadPlan p = cached(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "k.hip", "-o", "k.hsaco"});
  EXPECT_EQ(p.compile.source, "k.hip");
  EXPECT_EQ(p.compile.output, "k.hsaco");
  EXPECT_EQ(p.compile.language, "hip");
  EXPECT_TRUE(p.genco);
  EXPECT_EQ(p.targets, (std::vector<std::string>{"gfx90a"}));
  EXPECT_EQ(p.output_kind, "offload-bundle");  // clang 15 bundles even one target
}

TEST(OffloadPlan, TargetsAreASetAsClangBuildsThem) {
  // Order and duplicates: clang keeps the targets in a set.
  const OffloadPlan p = cached(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "--offload-arch=gfx1030",
                                               "--offload-arch=gfx90a", "k.hip", "-o", "k.bundle"});
  EXPECT_EQ(p.targets, (std::vector<std::string>{"gfx1030", "gfx90a"}));
  EXPECT_EQ(p.output_kind, "offload-bundle");
  // --no-offload-arch takes one out, "all" every one before it.
  EXPECT_EQ(cached(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "--offload-arch=gfx1030",
                                   "--no-offload-arch=gfx1030", "k.hip", "-o", "k.hsaco"})
                .targets,
            (std::vector<std::string>{"gfx90a"}));
  EXPECT_EQ(cached(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "--no-offload-arch=all",
                                   "--offload-arch=gfx908", "k.hip", "-o", "k.hsaco"})
                .targets,
            (std::vector<std::string>{"gfx908"}));
}

TEST(OffloadPlan, TargetFeatures) {
  EXPECT_EQ(cached(Driver::hipcc, {"--genco", "--offload-arch=gfx90a:xnack+", "k.hip", "-o", "k.hsaco"}).targets,
            (std::vector<std::string>{"gfx90a:xnack+"}));
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--offload-arch=gfx90a:sramecc-:xnack+", "k.hip", "-o", "k"}), "cached");
  // One processor with two feature sets: clang refuses the combination itself.
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "--offload-arch=gfx90a:xnack+", "k.hip", "-o",
                                   "k"}),
            "offload-target");
  for (const char* bad : {"--offload-arch=gfx90a:xnack", "--offload-arch=gfx90a:foo+", "--offload-arch=sm_90",
                          "--offload-arch=gfx90a:xnack+:xnack-", "--offload-arch=gfx"}) {
    EXPECT_EQ(reason(Driver::hipcc, {"--genco", bad, "k.hip", "-o", "k"}), "offload-target") << bad;
  }
  EXPECT_EQ(target_processor("gfx90a:xnack+"), "gfx90a");
  EXPECT_EQ(target_processor("gfx1030"), "gfx1030");
}

TEST(OffloadPlan, MachineTargetsPassThrough) {
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "k.hip", "-o", "k.hsaco"}), "offload-target-machine");
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--offload-arch=native", "k.hip", "-o", "k.hsaco"}),
            "offload-target-machine");
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "-c", "k.hip", "-o", "k.o"}), "offload-target-machine");
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "--no-offload-arch=gfx90a", "k.hip", "-o",
                                   "k.hsaco"}),
            "offload-target-machine");
  // hipcc asks rocm_agent_enumerator unless --offload-arch= (or --amdgpu-target=) names a target: its
  // own scan does not know --cuda-gpu-arch=, which then reaches clang beside the machine's GPU.
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--cuda-gpu-arch=gfx90a", "k.hip", "-o", "k.hsaco"}),
            "offload-target-machine");
  EXPECT_EQ(reason(Driver::hipcc, {"-c", "--cuda-gpu-arch=gfx90a", "--offload-arch=gfx1030", "k.hip", "-o", "k.o"}),
            "cached");
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "-c", "--cuda-gpu-arch=gfx90a", "k.hip", "-o", "k.o"}), "cached");
  using kache::core::ReasonCategory;
  EXPECT_NE(kache::core::find_reason(ReasonCategory::Passthrough, "offload-target-machine"), nullptr);
  EXPECT_NE(kache::core::find_reason(ReasonCategory::Passthrough, "offload-target"), nullptr);
}

TEST(OffloadPlan, OutputKinds) {
  const Args t = {"--offload-arch=gfx90a", "-x", "hip", "k.hip", "-o", "k.o"};
  auto kind = [&](Driver d, Args extra) {
    extra.insert(extra.end(), t.begin(), t.end());
    return cached(d, extra).output_kind;
  };
  EXPECT_EQ(kind(Driver::hipcc, {"-c"}), "object");
  EXPECT_EQ(kind(Driver::clang, {"-c"}), "object");
  EXPECT_EQ(kind(Driver::clang, {"-c", "-fgpu-rdc"}), "object-rdc");
  EXPECT_EQ(kind(Driver::clang, {"-c", "-fgpu-rdc", "-fno-gpu-rdc"}), "object");
  EXPECT_EQ(kind(Driver::clang, {"-c", "--offload-device-only"}), "offload-bundle");
  EXPECT_EQ(kind(Driver::clang, {"--offload-device-only"}), "offload-bundle");  // device link, not a host link
  EXPECT_EQ(reason(Driver::clang, {"--offload-arch=gfx90a", "k.hip", "-o", "a.out"}), "link");
  EXPECT_EQ(kind(Driver::clang, {"-c", "--cuda-device-only", "--offload-arch=gfx1030"}), "offload-bundle");
  EXPECT_EQ(kind(Driver::clang, {"-c", "--offload-host-only"}), "host-object");
  EXPECT_EQ(kind(Driver::clang, {"-c", "--cuda-host-only"}), "host-object");
}

TEST(OffloadPlan, DeviceOnlyAssembly) {
  // -S device-only, one target: that target's assembly where -o says (the gcc table refuses -S).
  for (const char* device_only : {"--offload-device-only", "--cuda-device-only"}) {
    const OffloadPlan p = cached(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", device_only, "-S", "k.hip",
                                                 "-o", "k.s"});
    EXPECT_TRUE(p.assemble);
    EXPECT_EQ(p.output_kind, "device-assembly") << device_only;
    EXPECT_EQ(cached(Driver::hipcc, {"--offload-arch=gfx90a", device_only, "-S", "k.hip", "-o", "k.s"}).output_kind,
              "device-assembly");
  }
  // -S wins over -c in either order, as clang's earliest phase does.
  EXPECT_EQ(cached(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", "--offload-device-only", "-c", "-S", "k.hip",
                                   "-o", "k.s"})
                .output_kind,
            "device-assembly");
  // Host assembly, --genco -S, several targets (clang refuses -o), no -o: the compiler decides.
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", "-S", "k.hip", "-o", "k.s"}), "output-kind");
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "-S", "k.hip", "-o", "k.s"}), "output-kind");
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", "--offload-arch=gfx1030",
                                   "--offload-device-only", "-S", "k.hip", "-o", "k.s"}),
            "multiple-outputs");
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", "--offload-device-only", "-S", "k.hip"}),
            "no-output");
}

TEST(OffloadPlan, DeviceOnlyWithoutOutputPassesThrough) {
  // clang names a device-only output after the source and the target (k.hip-hip-amdgcn-amd-amdhsa.hipfb,
  // or k-hip-amdgcn-amd-amdhsa-gfx90a.out per target with --no-gpu-bundle-output), not k.o.
  for (const char* device_only : {"--offload-device-only", "--cuda-device-only"}) {
    EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", device_only, "-c", "k.hip"}), "no-output")
        << device_only;
    EXPECT_EQ(reason(Driver::hipcc, {"--offload-arch=gfx90a", device_only, "-c", "k.hip"}), "no-output")
        << device_only;
  }
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", "--no-gpu-bundle-output", "-c", "k.hip"}),
            "no-output");
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", "--no-gpu-bundle-output",
                                   "--gpu-bundle-output", "-c", "k.hip"}),
            "cached");
  EXPECT_EQ(reason(Driver::clang, {"-x", "hip", "--offload-arch=gfx90a", "-c", "k.hip"}), "cached");  // k.o
}

TEST(OffloadPlan, LanguageByDriver) {
  // hipcc compiles .cpp and .cu as HIP; clang only under -x hip or for .hip.
  EXPECT_EQ(cached(Driver::hipcc, {"-c", "--offload-arch=gfx90a", "k.cpp", "-o", "k.o"}).compile.language, "hip");
  EXPECT_EQ(cached(Driver::hipcc, {"-c", "--offload-arch=gfx90a", "k.cu", "-o", "k.o"}).compile.language, "hip");
  EXPECT_EQ(cached(Driver::clang, {"-c", "--offload-arch=gfx90a", "k.hip", "-o", "k.o"}).compile.language, "hip");
  EXPECT_EQ(reason(Driver::clang, {"-c", "--offload-arch=gfx90a", "k.cpp", "-o", "k.o"}), "language");
  EXPECT_EQ(reason(Driver::clang, {"-c", "--offload-arch=gfx90a", "-x", "cuda", "k.cu", "-o", "k.o"}), "offload-target");
  EXPECT_EQ(reason(Driver::hipcc, {"-c", "--offload-arch=gfx90a", "-x", "c", "k.c", "-o", "k.o"}), "language");
}

TEST(OffloadPlan, HipccsOwnClangLine) {
  // The line hipcc 5.2 runs (HIPCC_VERBOSE=1), as a clang -x hip compile.
  const OffloadPlan p = cached(
      Driver::clang, {"-std=c++11", "-isystem", "/usr/lib/llvm-15/lib/clang/15.0.6/include/..", "-isystem",
                      "/usr/hsa/include", "--hip-version=5.2.21153", "--rocm-path=/usr", "--offload-arch=gfx90a", "-O3",
                      "-mllvm", "-amdgpu-early-inline-all=true", "-mllvm", "-amdgpu-function-calls=false",
                      "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "--cuda-device-only", "-x",
                      "hip", "k.hip", "-o", "k.hsaco"});
  EXPECT_EQ(p.rocm_path, "/usr");
  EXPECT_EQ(p.device_lib_path, "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode");
  EXPECT_EQ(p.output_kind, "offload-bundle");
  EXPECT_EQ(p.compile.include_dirs.size(), 2u);
}

TEST(OffloadPlan, RawOptionsOnlyWhereTheyReadAndWriteNothing) {
  const Args t = {"--genco", "--offload-arch=gfx90a", "k.hip", "-o", "k.hsaco"};
  auto with = [&](Args extra) {
    extra.insert(extra.end(), t.begin(), t.end());
    return reason(Driver::hipcc, extra);
  };
  EXPECT_EQ(with({"-mllvm", "-amdgpu-early-inline-all=true"}), "cached");
  EXPECT_EQ(with({"-mllvm", "-info-output-file=x"}), "hidden-input");
  EXPECT_EQ(with({"-Xclang", "-fno-pch-timestamp"}), "hidden-input");
  EXPECT_EQ(with({"-Xclang", "-mlink-bitcode-file", "-Xclang", "x.bc"}), "hidden-input");
  EXPECT_EQ(with({"-fgpu-sanitize"}), "clang-cuda");  // not a row of the offload table: the gcc row refuses it
  // --genco is hipcc's; clang does not know it.
  EXPECT_EQ(reason(Driver::clang, {"--genco", "--offload-arch=gfx90a", "-c", "k.hip", "-o", "k.hsaco"}), "unknown-flag");
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "k.hip"}), "no-output");
}

TEST(OffloadPlan, Spec003DepfileForm) {
  const OffloadPlan p =
      cached(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "-Xclang", "-dependency-file", "-Xclang",
                             "out/k.d", "-Xclang", "-MT", "-Xclang", "out/k.hsaco", "k.hip", "-o", "out/k.hsaco"});
  EXPECT_EQ(p.xclang_depfile, "out/k.d");
  EXPECT_EQ(p.xclang_depfile_index, 5u);
  EXPECT_EQ(p.xclang_targets, (std::vector<std::string>{"out/k.hsaco"}));
  EXPECT_EQ(p.xclang_target_indexes, (std::vector<std::size_t>{9}));
  EXPECT_EQ(p.compile.depfile, kache::compiler::gcc::Depfile::None);
  const Args t = {"--genco", "--offload-arch=gfx90a", "k.hip", "-o", "k.hsaco"};
  auto with = [&](Args extra) {
    extra.insert(extra.end(), t.begin(), t.end());
    return reason(Driver::hipcc, extra);
  };
  EXPECT_EQ(with({"-Xclang", "-MT", "-Xclang", "x"}), "depfile-modifier");
  EXPECT_EQ(with({"-Xclang", "-dependency-file", "-Xclang", "-"}), "output-kind");
  EXPECT_EQ(with({"-Xclang", "-dependency-file", "-Xclang", "a.d", "-MD", "-MF", "b.d"}), "multiple-outputs");
  EXPECT_EQ(with({"-Xclang", "-dependency-file", "-Xclang", "a.d", "-Xclang", "-dependency-file", "-Xclang", "b.d"}),
            "multiple-outputs");
  // -MD -MF works through hipcc too: gcc's rows.
  EXPECT_EQ(cached(Driver::hipcc, {"-MD", "-MF", "k.d", "--genco", "--offload-arch=gfx90a", "k.hip", "-o", "k.hsaco"})
                .compile.depfile,
            kache::compiler::gcc::Depfile::MD);
}

TEST(OffloadPlan, GccRowsStillRefuse) {
  EXPECT_EQ(reason(Driver::hipcc, {"--genco", "--offload-arch=gfx90a", "-fplugin=x.so", "k.hip", "-o", "k"}), "plugin");
  EXPECT_EQ(reason(Driver::hipcc, {"--offload-arch=gfx90a", "k.hip", "-o", "k"}), "link");
  EXPECT_EQ(reason(Driver::hipcc, {"-E", "--offload-arch=gfx90a", "k.hip"}), "preprocess");
}

}  // namespace

#include "compiler/offload/adapter.hpp"
#include "compiler/offload/toolchain.hpp"
#include "compiler/registry.hpp"
#include "compiler/offload/toolchain.hpp"
#include "util/fs.hpp"

namespace {

TEST(Hipcc, RegisteredForItsNames) {
  for (const char* n : {"hipcc", "/usr/bin/hipcc", "hipcc.pl", "/opt/rocm/bin/hipcc"}) {
    EXPECT_TRUE(kache::compiler::offload::is_hipcc(n)) << n;
    auto a = kache::compiler::find_adapter(n);
    ASSERT_NE(a, nullptr) << n;
    EXPECT_EQ(a->name(), "hipcc") << n;
  }
  EXPECT_FALSE(kache::compiler::offload::is_hipcc("hipconfig"));
  EXPECT_EQ(kache::compiler::find_adapter("clang++-15")->name(), "gcc");
  // clang's HIP route: -x hip, a .hip source or an --offload-arch; its CUDA mode stays with gcc's.
  using Args = std::vector<std::string>;
  for (const Args& a : {Args{"-x", "hip", "-c", "k.cpp"}, Args{"-xhip", "-c", "k.cpp"}, Args{"-c", "k.hip"},
                        Args{"--offload-arch=gfx90a", "-c", "k.cpp"}}) {
    EXPECT_EQ(kache::compiler::find_adapter("clang++-15", a)->name(), "clang-hip") << a[0];
  }
  EXPECT_EQ(kache::compiler::find_adapter("g++", {"-c", "k.hip"})->name(), "gcc");
}

TEST(ClangCuda, RoutedToTheOffloadPlanner) {
  // clang's CUDA mode (-x cuda, a .cu source without -x) goes through the offload planner, named clang-cuda;
  // gcc has none (its .cu stays with the gcc adapter, which passes it through), nor a -x c++ .cu.
  using Args = std::vector<std::string>;
  for (const Args& a : {Args{"-x", "cuda", "-c", "k.cpp"}, Args{"-xcuda", "-c", "k.cpp"}, Args{"-c", "k.cu"},
                        Args{"-x", "cuda", "--offload-arch=sm_90", "-c", "k.cu"}}) {
    EXPECT_EQ(kache::compiler::find_adapter("clang++-19", a)->name(), "clang-cuda") << a[0];
    EXPECT_EQ(kache::compiler::find_adapter("/usr/bin/clang-19", a)->name(), "clang-cuda") << a[0];
  }
  EXPECT_EQ(kache::compiler::find_adapter("clang++-19", {"-x", "c++", "-c", "k.cu"})->name(), "gcc");
  EXPECT_EQ(kache::compiler::find_adapter("g++", {"-c", "k.cu"})->name(), "gcc");
  EXPECT_EQ(kache::compiler::find_adapter("clang++-15", {"-x", "hip", "-c", "k.cu"})->name(), "clang-hip");
}

// clang-19's -### for `clang++-19 -x cuda -c --cuda-gpu-arch=sm_90 --cuda-gpu-arch=sm_80 -isystem stub k.cu
// -o k.o` with CUDA 13 (recorded here; each job's options this test does not read left out): per target a
// device cc1 (PTX) and ptxas (cubin), then fatbinary bundles them, then the host cc1 embeds the bundle.
constexpr const char* kClang19FullCudaCompile = R"( "/usr/lib/llvm-19/bin/clang" "-cc1" "-triple" "nvptx64-nvidia-cuda" "-aux-triple" "x86_64-pc-linux-gnu" "-S" "-fcuda-is-device" "-mlink-builtin-bitcode" "/usr/local/cuda-13.0/nvvm/libdevice/libdevice.10.bc" "-target-sdk-version=12.5" "-target-cpu" "sm_80" "-target-feature" "+ptx85" "-internal-isystem" "/usr/local/cuda-13.0/include" "-o" "/tmp/k-sm_80-982e78.s" "-x" "cuda" "k.cu"
 "/usr/local/cuda-13.0/bin/ptxas" "-m64" "-O0" "--gpu-name" "sm_80" "--output-file" "/tmp/k-sm_80-f9af2d.o" "/tmp/k-sm_80-982e78.s"
 "/usr/lib/llvm-19/bin/clang" "-cc1" "-triple" "nvptx64-nvidia-cuda" "-aux-triple" "x86_64-pc-linux-gnu" "-S" "-fcuda-is-device" "-mlink-builtin-bitcode" "/usr/local/cuda-13.0/nvvm/libdevice/libdevice.10.bc" "-target-sdk-version=12.5" "-target-cpu" "sm_90" "-target-feature" "+ptx85" "-internal-isystem" "/usr/local/cuda-13.0/include" "-o" "/tmp/k-sm_90-512175.s" "-x" "cuda" "k.cu"
 "/usr/local/cuda-13.0/bin/ptxas" "-m64" "-O0" "--gpu-name" "sm_90" "--output-file" "/tmp/k-sm_90-c42462.o" "/tmp/k-sm_90-512175.s"
 "/usr/local/cuda-13.0/bin/fatbinary" "-64" "--create" "/tmp/k-ff6a8e.fatbin" "--image=profile=sm_80,file=/tmp/k-sm_80-f9af2d.o" "--image=profile=compute_80,file=/tmp/k-sm_80-982e78.s" "--image=profile=sm_90,file=/tmp/k-sm_90-c42462.o" "--image=profile=compute_90,file=/tmp/k-sm_90-512175.s"
 "/usr/lib/llvm-19/bin/clang" "-cc1" "-triple" "x86_64-pc-linux-gnu" "-target-sdk-version=12.5" "-fcuda-include-gpubinary" "/tmp/k-ff6a8e.fatbin" "-emit-obj" "-target-cpu" "x86-64" "-o" "k.o" "-x" "cuda" "k.cu"
)";

std::string value_after(const std::vector<std::string>& job, const std::string& option) {
  for (std::size_t i = 0; i + 1 < job.size(); ++i) {
    if (job[i] == option) return job[i + 1];
  }
  return "";
}

TEST(ClangCuda, FullCompilePlanAgreesWithClangsPlan) {
  using kache::compiler::offload::job_words;
  std::vector<std::vector<std::string>> jobs;
  std::istringstream in(kClang19FullCudaCompile);
  for (std::string line; std::getline(in, line);) {
    if (auto w = job_words(line); !w.empty()) jobs.push_back(w);
  }
  ASSERT_EQ(jobs.size(), 6u);
  // What clang plans: one device compile per target (in the planner's order), the host object at -o.
  std::vector<std::string> device_targets;
  std::string host_output, fatbinary;
  for (const auto& j : jobs) {
    if (value_after(j, "-triple") == "nvptx64-nvidia-cuda") device_targets.push_back(value_after(j, "-target-cpu"));
    if (value_after(j, "-triple") == "x86_64-pc-linux-gnu") host_output = value_after(j, "-o");
    if (kache::util::basename(j[0]) == "fatbinary") fatbinary = j[0];
  }
  const Args args = {"-x", "cuda", "-c", "--cuda-gpu-arch=sm_90", "--cuda-gpu-arch=sm_80", "-isystem", "stub",
                     "k.cu", "-o", "k.o"};
  const OffloadPlan p = cached(Driver::clang, args);
  EXPECT_EQ(p.compile.language, "cuda");
  EXPECT_EQ(p.targets, device_targets);  // sorted and each once, as clang does
  EXPECT_EQ(p.compile.output, host_output);
  EXPECT_EQ(p.output_kind, "object");
  EXPECT_EQ(p.mode, DeviceMode::both);
  // The plan bundles with fatbinary --image, which CUDA 13 dropped: the compile is left to clang.
  EXPECT_FALSE(fatbinary.empty());
  const auto refusal = cuda_not_cached(p);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->reason, "clang-cuda");
  EXPECT_NE(kache::core::find_reason(kache::core::ReasonCategory::Passthrough, "clang-cuda"), nullptr);
  EXPECT_NE(kache::core::find_reason(kache::core::ReasonCategory::Passthrough, "clang-cuda-toolkit"), nullptr);
}

TEST(ClangCuda, DeviceOnlyCompilesAreCached) {
  const Args t = {"-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_90", "k.cu"};
  auto plan_of = [&](Args extra) {
    extra.insert(extra.begin(), t.begin(), t.end());
    return cached(Driver::clang, extra);
  };
  EXPECT_EQ(plan_of({"-S", "-o", "k.ptx"}).output_kind, "ptx");
  EXPECT_EQ(plan_of({"-c", "-o", "k.cubin"}).output_kind, "cubin");
  EXPECT_EQ(plan_of({"-c", "-S", "-o", "k.ptx"}).output_kind, "ptx");
  EXPECT_FALSE(cuda_not_cached(plan_of({"-c", "-o", "k.cubin"})).has_value());
  // --offload-arch= is the same option; a .cu without -x is CUDA; the CUDA installation options are keyed.
  EXPECT_EQ(cached(Driver::clang, {"--offload-device-only", "--offload-arch=sm_80a", "-S", "k.cu", "-o", "k.ptx"})
                .targets,
            (std::vector<std::string>{"sm_80a"}));
  EXPECT_EQ(reason(Driver::clang, {"--cuda-device-only", "--cuda-gpu-arch=sm_90", "--cuda-path=/opt/cuda", "-nocudalib",
                                   "-c", "k.cu", "-o", "k.cubin"}),
            "cached");
  // clang's default target (a fixed sm_XX of that clang, keyed with it), not the machine's GPU.
  EXPECT_EQ(reason(Driver::clang, {"--cuda-device-only", "-S", "k.cu", "-o", "k.ptx"}), "cached");
}

TEST(ClangCuda, WhatPassesThrough) {
  auto r = [](Args a) { return reason(Driver::clang, a); };
  // Several targets (clang refuses -o), no -o (clang names the file), no -c/-S (a fatbinary link).
  EXPECT_EQ(r({"--cuda-device-only", "--cuda-gpu-arch=sm_80", "--cuda-gpu-arch=sm_90", "-c", "k.cu", "-o", "k.cubin"}),
            "multiple-outputs");
  EXPECT_EQ(r({"--cuda-device-only", "--cuda-gpu-arch=sm_90", "-S", "k.cu"}), "no-output");
  EXPECT_EQ(r({"--cuda-device-only", "--cuda-gpu-arch=sm_90", "k.cu", "-o", "k.fatbin"}), "clang-cuda");
  // Targets of the other kind, or the machine's.
  EXPECT_EQ(r({"--cuda-device-only", "--cuda-gpu-arch=gfx90a", "-S", "k.cu", "-o", "k.ptx"}), "offload-target");
  EXPECT_EQ(r({"--cuda-device-only", "--cuda-gpu-arch=compute_90", "-S", "k.cu", "-o", "k.ptx"}), "offload-target");
  EXPECT_EQ(r({"--cuda-device-only", "--offload-arch=native", "-S", "k.cu", "-o", "k.ptx"}), "offload-target-machine");
  EXPECT_EQ(reason(Driver::clang, {"-c", "-x", "hip", "--offload-arch=sm_90", "k.hip", "-o", "k.o"}), "offload-target");
  // Host-only is planned, not cached.
  const OffloadPlan host = cached(Driver::clang, {"--cuda-host-only", "-c", "k.cu", "-o", "k.o"});
  EXPECT_EQ(host.output_kind, "host-object");
  EXPECT_EQ(cuda_not_cached(host)->reason, "clang-cuda");
  // Other --cuda- options stay refused by the gcc table.
  EXPECT_EQ(r({"--cuda-device-only", "--cuda-gpu-arch=sm_90", "--cuda-include-ptx=sm_90", "-c", "k.cu", "-o", "k.o"}),
            "clang-cuda");
  // hipcc takes a .cu as HIP, never as CUDA.
  EXPECT_EQ(cached(Driver::hipcc, {"-c", "--offload-arch=gfx90a", "k.cu", "-o", "k.o"}).compile.language, "hip");
}

TEST(Hipcc, JobWordsOfClangsPlan) {
  using kache::compiler::offload::job_words;
  EXPECT_EQ(job_words(R"( "/usr/lib/llvm-15/bin/clang" "-cc1" "-mlink-builtin-bitcode" "/b/ocml.bc" "-D" "A=\"x\"")"),
            (std::vector<std::string>{"/usr/lib/llvm-15/bin/clang", "-cc1", "-mlink-builtin-bitcode", "/b/ocml.bc", "-D",
                                      "A=\"x\""}));
  EXPECT_TRUE(job_words("Target: x86_64-pc-linux-gnu").empty());
  EXPECT_TRUE(job_words("InstalledDir: /usr/bin").empty());
}

}  // namespace

namespace {

// The compilation unit ID: clang hashes the whole line (the output's path included) unless -cuid= names
// one, and that hash reaches -fgpu-rdc objects (externalized statics) and, from clang 18, every HIP
// object. Measured with clang 15: without -fgpu-rdc two -o values give the same bytes.
std::string cuid_reason(const Args& args, int clang_major) {
  auto r = cuid_refusal(cached(Driver::clang, args), clang_major);
  return r ? r->reason : "cached";
}

TEST(OffloadPlan, CuidHashedFromTheLinePassesThroughWhereItReachesTheObject) {
  const Args hip = {"-x", "hip", "--offload-arch=gfx90a", "-c", "k.hip", "-o", "k.o"};
  auto with = [&](Args extra) {
    Args a = hip;
    a.insert(a.begin(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(cuid_reason(hip, 15), "cached");
  EXPECT_EQ(cuid_reason(with({"-fgpu-rdc"}), 15), "offload-cuid");
  EXPECT_EQ(cuid_reason(with({"-fgpu-rdc", "-cuid=k1"}), 15), "cached");
  EXPECT_EQ(cuid_reason(with({"-fgpu-rdc", "-cuid="}), 15), "offload-cuid");          // empty: none given
  EXPECT_EQ(cuid_reason(with({"-fgpu-rdc", "-cuid=k1", "-cuid="}), 15), "offload-cuid");  // the last one decides
  EXPECT_EQ(cuid_reason(with({"-fuse-cuid=none"}), 15), "offload-cuid");    // the source's inode
  EXPECT_EQ(cuid_reason(with({"-fuse-cuid=random"}), 15), "offload-cuid");
  EXPECT_EQ(cuid_reason(with({"-fuse-cuid=none", "-fuse-cuid=hash"}), 15), "cached");
  EXPECT_EQ(cuid_reason(hip, 18), "offload-cuid");                         // __hip_cuid_<cuid> in every object
  EXPECT_EQ(cuid_reason(hip, 0), "offload-cuid");                          // a clang of unknown version
  EXPECT_EQ(cuid_reason(with({"-cuid=k1"}), 19), "cached");
  // clang's CUDA mode: only relocatable device code names the ID.
  EXPECT_EQ(cuid_reason({"-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-device-only", "-c", "k.cu", "-o", "k.cubin"}, 19),
            "cached");
}

TEST(OffloadPlan, ClangMajorVersionFromItsDescription) {
  EXPECT_EQ(clang_major_version("hipcc -> x; clang++-15 (Debian clang version 15.0.6)"), 15);
  EXPECT_EQ(clang_major_version("clang++-19 (Ubuntu clang version 19.1.7 (++20250114))"), 19);
  EXPECT_EQ(clang_major_version("g++ (gcc 12)"), 0);
}

}  // namespace
