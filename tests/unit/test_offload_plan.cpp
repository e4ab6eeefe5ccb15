// clang's offload route (hipcc, clang -x hip): the gcc table extended by the offload rows. What caches,
// what passes through and why, the targets as clang builds them, the output kinds, and spec 003's
// -Xclang depfile form. Command lines follow hipcc 5.2's own clang line and spec 003's custom targets.
#include <gtest/gtest.h>

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
  EXPECT_EQ(reason(Driver::clang, {"-c", "--offload-arch=gfx90a", "-x", "cuda", "k.cu", "-o", "k.o"}), "clang-cuda");
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
  EXPECT_EQ(kache::compiler::find_adapter("clang-19", {"-x", "cuda", "-c", "k.cu"})->name(), "gcc");
  EXPECT_EQ(kache::compiler::find_adapter("g++", {"-c", "k.hip"})->name(), "gcc");
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
