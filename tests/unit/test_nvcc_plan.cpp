// The nvcc planner and its flag table: what caches, what passes through and why, and what the key
// sees. Command lines follow what real builds pass (CMake 3.25, Meson, hand-written makefiles).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "compiler/nvcc/flag_table.hpp"
#include "compiler/nvcc/plan.hpp"

namespace {

using namespace kache::compiler::nvcc;
using Args = std::vector<std::string>;

PlanOptions with_allowlist(std::vector<std::string> allow) {
  PlanOptions o;
  o.extra_allowlist = std::move(allow);
  return o;
}

PlanOptions with_env(std::string prepend, std::string append) {
  PlanOptions o;
  o.prepend_flags = std::move(prepend);
  o.append_flags = std::move(append);
  return o;
}

// "-c k.cu -o k.o" plus extra.
Args compile(Args extra = {}) {
  Args a = {"-c", "k.cu", "-o", "k.o"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

::testing::AssertionResult caches(const Args& args, const PlanOptions& o = {}) {
  Plan p = plan(args, o);
  if (auto* pt = std::get_if<Passthrough>(&p)) {
    return ::testing::AssertionFailure() << "passthrough (" << pt->reason << "): " << pt->detail;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult passes(const Args& args, const std::string& reason, const PlanOptions& o = {},
                                  const std::string* detail = nullptr) {
  Plan p = plan(args, o);
  auto* pt = std::get_if<Passthrough>(&p);
  if (!pt) return ::testing::AssertionFailure() << "cached, expected passthrough (" << reason << ")";
  if (pt->reason != reason) {
    return ::testing::AssertionFailure() << "reason " << pt->reason << " (" << pt->detail << "), expected " << reason;
  }
  if (detail && pt->detail != *detail) {
    return ::testing::AssertionFailure() << "detail '" << pt->detail << "', expected '" << *detail << "'";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult passes(const Args& args, const std::string& reason, const PlanOptions& o,
                                  const std::string& detail) {
  return passes(args, reason, o, &detail);
}

CompilePlan planned(const Args& args, const PlanOptions& o = {}) {
  Plan p = plan(args, o);
  if (auto* pt = std::get_if<Passthrough>(&p)) {
    ADD_FAILURE() << "passthrough (" << pt->reason << "): " << pt->detail;
    return {};
  }
  return std::get<CompilePlan>(p);
}

// ---- The basic cached shape -------------------------------------------------------------------

TEST(NvccPlanBasics, PlainCompileIsCachedWithSubstitutedKey) {
  Args args = {"-c", "src/kernel.cu", "-o", "build/kernel.o", "-arch=sm_80"};
  CompilePlan p = planned(args);
  EXPECT_EQ(p.mode, Mode::Compile);
  EXPECT_FALSE(p.rdc());
  EXPECT_EQ(p.source, "src/kernel.cu");
  EXPECT_EQ(p.output, "build/kernel.o");
  EXPECT_EQ(p.args, args);
  EXPECT_EQ(p.keyed_args, (Args{"-c", "<source>", "-o", "<output>", "-arch=sm_80"}));
  EXPECT_EQ(p.gpu_arch_args, (Args{"-arch=sm_80"}));
  EXPECT_EQ(p.depfile, Depfile::None);
  EXPECT_TRUE(p.depfile_path.empty());
  EXPECT_FALSE(p.ccbin);
  EXPECT_FALSE(p.path_literal);
  EXPECT_FALSE(p.has_lineinfo);
  EXPECT_FALSE(p.has_debug);
  EXPECT_EQ(p.prepend_flags, "");
  EXPECT_EQ(p.append_flags, "");
}

TEST(NvccPlanBasics, PathValuesAreLocatedForNormalization) {
  // Every spelling of the path-valued flags: separate, "=value" and attached (-I only); the adapter
  // rewrites keyed_args[index].substr(offset).
  CompilePlan p = planned({"-c", "/w/s/k.cu", "-I/w/b/gen", "-I", "/w/inc", "--include-path=a,b", "-isystem=/w/t",
                           "--system-include", "/w/u", "-include", "/w/b/pre.h", "-MD", "-MF", "/w/b/k.d", "-MT",
                           "/w/b/k.o", "-o", "k.o", "-DX=/w/b"});
  std::vector<std::string> values;
  for (const auto& pa : p.path_args) values.push_back(pa.flag + " " + p.keyed_args[pa.index].substr(pa.offset));
  EXPECT_EQ(values, (Args{"-I /w/b/gen", "-I /w/inc", "--include-path a,b", "-isystem /w/t", "--system-include /w/u",
                          "-include /w/b/pre.h", "-MF /w/b/k.d", "-MT /w/b/k.o"}));
}

TEST(NvccPlanBasics, OutputSpellingsAreSubstitutedInPlace) {
  EXPECT_EQ(planned({"-c", "a.cu", "--output-file", "a.o"}).keyed_args,
            (Args{"-c", "<source>", "--output-file", "<output>"}));
  EXPECT_EQ(planned({"-c", "a.cu", "--output-file=a.o"}).keyed_args,
            (Args{"-c", "<source>", "--output-file=<output>"}));
  CompilePlan p = planned({"-o=a.o", "a.cu", "-c"});
  EXPECT_EQ(p.output, "a.o");
  EXPECT_EQ(p.keyed_args, (Args{"-o=<output>", "<source>", "-c"}));
}

TEST(NvccPlanBasics, LastOutputWinsLikeNvcc) {
  // nvcc warns "incompatible redefinition for option 'output-file', the last value ... was used".
  CompilePlan p = planned({"-c", "a.cu", "-o", "first.o", "-o", "second.o"});
  EXPECT_EQ(p.output, "second.o");
  EXPECT_EQ(p.keyed_args, (Args{"-c", "<source>", "-o", "first.o", "-o", "<output>"}));
}

TEST(NvccPlanBasics, SourceSubstitutionTouchesOnlyThePositional) {
  // The -MT value equals the output path; only the -o value becomes <output>.
  CompilePlan p = planned({"-c", "a.cu", "-o", "a.o", "-MD", "-MF", "a.o.d", "-MT", "a.o"});
  EXPECT_EQ(p.keyed_args, (Args{"-c", "<source>", "-o", "<output>", "-MD", "-MF", "a.o.d", "-MT", "a.o"}));
}

TEST(NvccPlanBasics, ValuesThatLookLikeSourcesAreNotInputs) {
  // The value of a separate-form option is consumed, never counted as a second source.
  CompilePlan p = planned({"-c", "a.cu", "-o", "a.o", "-include", "pre.cu", "-MD", "-MF", "x.cu", "-MT", "y.cu"});
  EXPECT_EQ(p.source, "a.cu");
}

// ---- Mode ---------------------------------------------------------------------------------------

TEST(NvccPlanMode, DeviceCompileSpellings) {
  EXPECT_EQ(planned({"-dc", "a.cu", "-o", "a.o"}).mode, Mode::DeviceCompile);
  EXPECT_EQ(planned({"--device-c", "a.cu", "-o", "a.o"}).mode, Mode::DeviceCompile);
  EXPECT_EQ(planned({"-c", "-dc", "a.cu", "-o", "a.o"}).mode, Mode::DeviceCompile);
  EXPECT_TRUE(planned({"-dc", "a.cu", "-o", "a.o"}).rdc());
}

TEST(NvccPlanMode, CompileRdcSpellings) {
  for (const Args& rdc : {Args{"-rdc=true"}, Args{"-rdc", "true"}, Args{"--relocatable-device-code=true"},
                          Args{"--relocatable-device-code", "true"}}) {
    CompilePlan p = planned(compile(rdc));
    EXPECT_EQ(p.mode, Mode::CompileRdc) << rdc[0];
    EXPECT_TRUE(p.rdc());
  }
}

TEST(NvccPlanMode, LastRdcValueWins) {
  EXPECT_EQ(planned(compile({"-rdc=true", "-rdc=false"})).mode, Mode::Compile);
  EXPECT_EQ(planned(compile({"-rdc=false", "-rdc=true"})).mode, Mode::CompileRdc);
  EXPECT_EQ(planned(compile({"-rdc=false"})).mode, Mode::Compile);
}

TEST(NvccPlanMode, RdcNeedsABoolean) {
  EXPECT_TRUE(passes(compile({"-rdc=1"}), "unknown-flag", {}, "-rdc=1"));
  EXPECT_TRUE(passes(compile({"-rdc"}), "unknown-flag", {}, "-rdc (missing value)"));
}

// ---- Sources --------------------------------------------------------------------------------------

TEST(NvccPlanSource, LanguageFlagMakesAnyInputCuda) {
  for (const Args& x : {Args{"-x", "cu"}, Args{"--x", "cu"}, Args{"-x=cu"}, Args{"--x=cu"}}) {
    Args args = {"-c", "src/file.cc", "-o", "file.o"};
    args.insert(args.begin(), x.begin(), x.end());
    EXPECT_EQ(planned(args).source, "src/file.cc") << x[0];
  }
  // -x applies to every input wherever it stands (measured), and the last one wins.
  EXPECT_TRUE(caches({"-c", "file.cc", "-o", "f.o", "-x", "cu"}));
  EXPECT_TRUE(passes({"-c", "a.cu", "-o", "a.o", "-x", "cu", "-x", "c++"}, "non-cuda-source"));
}

TEST(NvccPlanSource, NonCudaSource) {
  EXPECT_TRUE(passes({"-c", "a.cpp", "-o", "a.o"}, "non-cuda-source", {}, "a.cpp"));
  EXPECT_TRUE(passes({"-c", "a.cu", "-o", "a.o", "-x", "c++"}, "non-cuda-source"));
  EXPECT_TRUE(passes({"-c", "a.CU", "-o", "a.o"}, "non-cuda-source"));
  EXPECT_TRUE(passes({"-c", "a.cu.o", "-o", "a.o"}, "non-cuda-source"));
}

TEST(NvccPlanSource, MultipleSources) {
  EXPECT_TRUE(passes({"-c", "a.cu", "b.cu", "-o", "a.o"}, "multiple-sources", {}, "b.cu"));
}

TEST(NvccPlanSource, NoSource) { EXPECT_TRUE(passes({"-c", "-o", "a.o"}, "no-source")); }

TEST(NvccPlanSource, StdinAndEmptyArgumentsAreRefused) {
  EXPECT_TRUE(passes({"-c", "-x", "cu", "-", "-o", "a.o"}, "unknown-flag", {}, "-"));
  EXPECT_TRUE(passes({"-c", "-x", "cu", "", "-o", "a.o"}, "unknown-flag"));
}

// ---- Passthrough reasons --------------------------------------------------------------------------

TEST(NvccPlanPassthrough, Link) {
  EXPECT_TRUE(passes({"a.o", "b.o", "-o", "app"}, "link", {}, "no -c or -dc"));
  EXPECT_TRUE(passes({"a.cu", "-o", "app"}, "link"));
  EXPECT_TRUE(passes({"-link", "a.o", "-o", "app"}, "link", {}, "-link"));
  EXPECT_TRUE(passes({"--link", "a.o", "-o", "app"}, "link"));
  EXPECT_TRUE(passes({"-run", "a.cu", "-o", "app"}, "link", {}, "-run"));
  EXPECT_TRUE(passes({"--run", "a.cu"}, "link"));
  EXPECT_TRUE(passes(compile({"-link"}), "link"));
  // A link carries link flags kache would not know; the link reason still names it.
  EXPECT_TRUE(passes({"a.o", "-o", "app", "-Xlinker", "--as-needed", "--bogus"}, "link"));
}

TEST(NvccPlanPassthrough, DeviceLink) {
  EXPECT_TRUE(passes({"-dlink", "a.o", "b.o", "-o", "dlink.o"}, "device-link", {}, "-dlink"));
  EXPECT_TRUE(passes({"--device-link", "a.o", "-o", "dlink.o"}, "device-link", {}, "--device-link"));
}

TEST(NvccPlanPassthrough, Lib) {
  EXPECT_TRUE(passes({"-lib", "a.o", "b.o", "-o", "libx.a"}, "lib", {}, "-lib"));
  EXPECT_TRUE(passes({"--lib", "a.cu", "-o", "libx.a"}, "lib", {}, "--lib"));
}

TEST(NvccPlanPassthrough, OutputKind) {
  for (const char* f : {"-cuda", "--cuda", "-dlto", "--dlink-time-opt", "-lto", "--lto", "-gen-opt-lto",
                        "--gen-opt-lto", "-fdevice-syntax-only"}) {
    EXPECT_TRUE(passes(compile({f}), "output-kind", {}, f)) << f;
  }
  // A device output with -c or -dc: nvcc writes the device file (measured), not an object.
  for (const char* f : {"-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin"}) {
    EXPECT_TRUE(passes(compile({f}), "output-kind", {}, f)) << f;
    EXPECT_TRUE(passes({"-dc", f, "k.cu", "-o", "k.out"}, "output-kind", {}, f)) << f;
  }
  // Two kinds of device output on one line: nvcc picks one.
  EXPECT_TRUE(passes({"-fatbin", "-ptx", "k.cu", "-o", "k.out"}, "output-kind", {}, "-ptx"));
  // NVVM IR outputs name the working directory and the source's spelling.
  for (const char* f : {"-optix-ir", "--optix-ir", "-ltoir", "--ltoir"}) {
    EXPECT_TRUE(passes({f, "k.cu", "-o", "k.out"}, "device-ir", {}, f)) << f;
  }
}

TEST(NvccPlanDeviceOutput, EachKindIsCached) {
  const std::pair<const char*, DeviceOutput> kinds[] = {
      {"-fatbin", DeviceOutput::Fatbin}, {"--fatbin", DeviceOutput::Fatbin}, {"-cubin", DeviceOutput::Cubin},
      {"--cubin", DeviceOutput::Cubin},  {"-ptx", DeviceOutput::Ptx},        {"--ptx", DeviceOutput::Ptx}};
  for (const auto& [flag, kind] : kinds) {
    CompilePlan p = planned({flag, "-arch=sm_80", "k.cu", "-o", "k.out"});
    EXPECT_EQ(p.device_output, kind) << flag;
    EXPECT_EQ(p.mode, Mode::Compile) << flag;
    EXPECT_EQ(p.keyed_args, (Args{flag, "-arch=sm_80", "<source>", "-o", "<output>"})) << flag;
  }
  EXPECT_STREQ(device_output_name(DeviceOutput::Fatbin), "fatbin");
  EXPECT_STREQ(device_output_name(DeviceOutput::Ptx), "ptx");
  EXPECT_STREQ(device_output_name(DeviceOutput::None), "");
  // The same kind twice is still one output.
  EXPECT_TRUE(caches({"-fatbin", "--fatbin", "k.cu", "-o", "k.fatbin"}));
}

TEST(NvccPlanDeviceOutput, MesonFatbinTarget) {
  // ADR-1320's custom_target: nvcc --fatbin with several -gencode and a depfile.
  CompilePlan p =
      planned({"--fatbin", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=sm_90",
               "../kernels/adm.cu", "-o", "adm.fatbin", "-MD", "-MF", "adm.fatbin.d", "-MT", "adm.fatbin"});
  EXPECT_EQ(p.device_output, DeviceOutput::Fatbin);
  EXPECT_EQ(p.depfile, Depfile::MD);
  EXPECT_EQ(p.depfile_path, "adm.fatbin.d");
  EXPECT_EQ(p.depfile_targets, (Args{"adm.fatbin"}));
}

TEST(NvccPlanDeviceOutput, RelocatableIsPathSpecific) {
  // -rdc=true device outputs carry module ids hashed from the source's absolute path, as -c -rdc objects.
  EXPECT_EQ(planned({"-fatbin", "-rdc=true", "k.cu", "-o", "k.fatbin"}).mode, Mode::CompileRdc);
  EXPECT_TRUE(planned({"-ptx", "-rdc=true", "k.cu", "-o", "k.ptx"}).rdc());
}

TEST(NvccPlanDeviceOutput, NvvmIrTargetsPassThrough) {
  EXPECT_TRUE(passes({"-fatbin", "-arch=lto_75", "k.cu", "-o", "k.fatbin"}, "device-ir", {}, "-arch=lto_75"));
  EXPECT_TRUE(passes({"-fatbin", "-gencode", "arch=compute_75,code=lto_75", "k.cu", "-o", "k.fatbin"}, "device-ir"));
  EXPECT_TRUE(passes({"-fatbin", "-dlto", "-arch=sm_75", "k.cu", "-o", "k.fatbin"}, "device-ir", {}, "-dlto"));
  EXPECT_TRUE(passes({"-ltoir", "-dlto", "-arch=sm_75", "k.cu", "-o", "k.ltoir"}, "device-ir", {}, "-ltoir"));
  // In an object's device code too: -c with an lto_NN target.
  EXPECT_TRUE(passes(compile({"-arch=lto_90"}), "device-ir", {}, "-arch=lto_90"));
  EXPECT_TRUE(passes(compile(), "device-ir", with_env("", "-gencode=arch=compute_90,code=lto_90")));
}

TEST(NvccPlanDeviceOutput, SwitchOffRestoresThePassthrough) {
  PlanOptions off;
  off.cache_device_outputs = false;
  for (const char* f : {"-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin"}) {
    EXPECT_TRUE(passes({f, "k.cu", "-o", "k.out"}, "output-kind", off, f)) << f;
  }
  // The real projects' --fatbin custom targets, as spec 000 lists them.
  EXPECT_TRUE(passes({"--fatbin", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=sm_90",
                      "k.cu", "-o", "k.fatbin"},
                     "output-kind", off));
  EXPECT_TRUE(caches(compile(), off));
}

TEST(NvccPlanDeviceOutput, ObjectRulesStillApply) {
  EXPECT_TRUE(passes({"-fatbin", "k.cu"}, "no-output"));
  EXPECT_TRUE(passes({"-fatbin", "k.cu", "-o", "k.fatbin", "-MD"}, "depfile-without-mf"));
  EXPECT_TRUE(passes({"-fatbin", "-G", "k.cu", "-o", "k.fatbin"}, "device-debug"));
  EXPECT_TRUE(passes({"-fatbin", "k.ptx", "-o", "k.fatbin"}, "non-cuda-source"));
  EXPECT_TRUE(passes({"-ptx", "a.cu", "b.cu", "-o", "k.ptx"}, "multiple-sources"));
  EXPECT_TRUE(passes({"-fatbin", "k.cu", "-o", "k.fatbin", "-arch=native"}, "machine-native"));
}

TEST(NvccPlanPassthrough, Preprocess) {
  EXPECT_TRUE(passes(compile({"-E"}), "preprocess", {}, "-E"));
  EXPECT_TRUE(passes({"--preprocess", "a.cu"}, "preprocess", {}, "--preprocess"));
}

TEST(NvccPlanPassthrough, DeviceDebug) {
  EXPECT_TRUE(passes(compile({"-G"}), "device-debug", {}, "-G"));
  EXPECT_TRUE(passes(compile({"--device-debug"}), "device-debug", {}, "--device-debug"));
  EXPECT_TRUE(passes(compile({"-Xptxas", "-g"}), "device-debug", {}, "-Xptxas -g"));
  // Allow-listing does not turn a modeled refusal into a cached flag.
  EXPECT_TRUE(passes(compile({"-G"}), "device-debug", with_allowlist({"-G"})));
}

TEST(NvccPlanPassthrough, MachineNativeGpu) {
  EXPECT_TRUE(passes(compile({"-arch=native"}), "machine-native", {}, "-arch=native"));
  EXPECT_TRUE(passes(compile({"-arch", "native"}), "machine-native", {}, "-arch native"));
  EXPECT_TRUE(passes(compile({"--gpu-architecture=native"}), "machine-native"));
  EXPECT_TRUE(passes(compile({"--gpu-architecture", "native"}), "machine-native"));
  EXPECT_TRUE(passes(compile({"-code=native"}), "machine-native"));
  EXPECT_TRUE(passes(compile({"--gpu-code=sm_90,native"}), "machine-native"));
  EXPECT_TRUE(passes(compile({"-gencode", "arch=native,code=native"}), "machine-native"));
  // Found by fuzz_nvcc_plan: "native" followed by a newline was not read as native.
  EXPECT_TRUE(passes(compile({"-arch=native\nsm_90"}), "machine-native"));
  EXPECT_TRUE(passes(compile({"--generate-code=arch=compute_90,code=[native]"}), "machine-native"));
}

TEST(NvccPlanPassthrough, MachineNativeHost) {
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-march=native"}), "machine-native", {}, "-Xcompiler -march=native"));
  EXPECT_TRUE(passes(compile({"-Xcompiler=-mtune=native"}), "machine-native"));
  EXPECT_TRUE(passes(compile({"--compiler-options", "-O2 -mcpu=native"}), "machine-native"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-fPIC,-march=native"}), "machine-native"));
  EXPECT_TRUE(
      passes(compile({"-forward-unknown-to-host-compiler", "-march=native"}), "machine-native", {}, "-march=native"));
}

TEST(NvccPlanPassthrough, MachineNativeRefusesEvenWhenAllowListed) {
  EXPECT_TRUE(passes(compile({"-march=native"}), "machine-native", with_allowlist({"-march"})));
  EXPECT_TRUE(passes(compile({"-march=native"}), "machine-native", with_allowlist({"-march=native"})));
  EXPECT_TRUE(passes(compile({"-arch=native"}), "machine-native", with_allowlist({"-arch"})));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-march=native"}), "machine-native", with_allowlist({"-Xcompiler"})));
  EXPECT_TRUE(passes(compile({"-mcpu=native"}), "machine-native", with_allowlist({"-mcpu"})));
}

TEST(NvccPlanPassthrough, DependencyOnly) {
  for (const char* f : {"-M", "-MM", "--generate-dependencies", "--generate-nonsystem-dependencies"}) {
    EXPECT_TRUE(passes({f, "a.cu"}, "dependency-only", {}, f)) << f;
    EXPECT_TRUE(passes({f, "a.cu", "-MF", "a.d"}, "dependency-only")) << f;
    // nvcc -c -M only writes dependencies (measured with --dryrun).
    EXPECT_TRUE(passes(compile({f}), "dependency-only")) << f;
  }
}

TEST(NvccPlanPassthrough, DepfileModifier) {
  EXPECT_TRUE(passes(compile({"-MD", "-MF", "k.d", "-MP"}), "depfile-modifier", {}, "-MP"));
  EXPECT_TRUE(passes(compile({"-MD", "-MF", "k.d", "--generate-dependency-targets"}), "depfile-modifier"));
  EXPECT_TRUE(passes(compile({"-MD", "-MF", "k.d", "-MG"}), "depfile-modifier", {}, "-MG"));
  // -MF without -MD/-MMD: nvcc itself rejects it.
  EXPECT_TRUE(passes(compile({"-MF", "k.d"}), "depfile-modifier", {}, "-MF"));
}

TEST(NvccPlanPassthrough, DepfileWithoutMf) {
  EXPECT_TRUE(passes(compile({"-MD"}), "depfile-without-mf", {}, "-MD"));
  EXPECT_TRUE(passes(compile({"-MMD", "-MT", "k.o"}), "depfile-without-mf", {}, "-MMD"));
  EXPECT_TRUE(passes(compile({"--generate-dependencies-with-compile"}), "depfile-without-mf"));
  EXPECT_TRUE(passes(compile({"--generate-nonsystem-dependencies-with-compile"}), "depfile-without-mf"));
}

TEST(NvccPlanPassthrough, NoOutput) {
  EXPECT_TRUE(passes({"-c", "a.cu"}, "no-output"));
  EXPECT_TRUE(passes({"-dc", "a.cu", "-arch=sm_90"}, "no-output"));
  // Found by fuzz_nvcc_plan (fuzz/regressions/fuzz_nvcc_plan/): an empty value was a cacheable plan,
  // and the miss then failed inside kache (counted as an internal error) instead of passing through.
  EXPECT_TRUE(passes({"-c", "a.cu", "-o", ""}, "no-output"));
  EXPECT_TRUE(passes({"-c", "a.cu", "-o="}, "no-output"));
  EXPECT_TRUE(passes(compile({"-MD", "-MF", ""}), "depfile-without-mf"));
}

// nvcc 13 writes "-o -" to stdout (every spelling); a cached result would land in a file named "-".
TEST(NvccPlanPassthrough, OutputToStdout) {
  EXPECT_TRUE(passes({"-ptx", "-arch=sm_90", "k.cu", "-o", "-"}, "output-kind", {}, "-o -"));
  EXPECT_TRUE(passes({"-ptx", "-arch=sm_90", "k.cu", "-o=-"}, "output-kind", {}, "-o=-"));
  EXPECT_TRUE(passes({"-ptx", "-arch=sm_90", "k.cu", "--output-file=-"}, "output-kind", {}, "--output-file=-"));
  EXPECT_TRUE(passes({"-ptx", "-arch=sm_90", "k.cu", "--output-file", "-"}, "output-kind"));
  EXPECT_TRUE(passes({"-c", "k.cu", "-o", "-"}, "output-kind"));
  EXPECT_TRUE(passes({"-fatbin", "k.cu", "-o", "-"}, "output-kind"));
  EXPECT_TRUE(caches({"-c", "k.cu", "-o", "./-"}));  // a file named "-", spelled as one
}

TEST(NvccPlanPassthrough, KeepTemps) {
  EXPECT_TRUE(passes(compile({"-keep"}), "keep-temps", {}, "-keep"));
  EXPECT_TRUE(passes(compile({"--keep"}), "keep-temps"));
  EXPECT_TRUE(passes(compile({"--keep-dir", "tmp"}), "keep-temps", {}, "--keep-dir tmp"));
  EXPECT_TRUE(passes(compile({"-keep-dir=tmp"}), "keep-temps"));
  EXPECT_TRUE(passes(compile({"-save-temps"}), "keep-temps"));
  EXPECT_TRUE(passes(compile({"--save-temps"}), "keep-temps"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-save-temps=obj"}), "keep-temps"));
}

TEST(NvccPlanPassthrough, Profiling) {
  EXPECT_TRUE(passes(compile({"--time", "t.csv"}), "profiling", {}, "--time t.csv"));
  EXPECT_TRUE(passes(compile({"-time", "t.csv"}), "profiling"));
  EXPECT_TRUE(passes(compile({"-time=t.csv"}), "profiling"));
  EXPECT_TRUE(passes(compile({"-fdevice-time-trace", "t.json"}), "profiling"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "--coverage"}), "profiling"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-ftime-trace"}), "profiling"));
}

TEST(NvccPlanPassthrough, ResponseFile) {
  EXPECT_TRUE(passes({"@args.rsp"}, "response-file", {}, "@args.rsp"));
  EXPECT_TRUE(passes(compile({"@more.rsp"}), "response-file"));
  EXPECT_TRUE(passes(compile({"--options-file", "includes.rsp"}), "response-file", {}, "--options-file includes.rsp"));
  EXPECT_TRUE(passes(compile({"--options-file=includes.rsp"}), "response-file"));
  EXPECT_TRUE(passes(compile({"-optf", "includes.rsp"}), "response-file"));
  EXPECT_TRUE(passes(compile({"-Xptxas", "@p.rsp"}), "response-file"));
  EXPECT_TRUE(passes(compile({"-Xptxas", "--options-file=p.rsp"}), "response-file"));
}

TEST(NvccPlanPassthrough, UnknownFlag) {
  EXPECT_TRUE(passes(compile({"--bogus"}), "unknown-flag", {}, "--bogus"));
  EXPECT_TRUE(passes(compile({"-Wall"}), "unknown-flag", {}, "-Wall"));
  EXPECT_TRUE(passes(compile({"-forward-unknown-to-host-compiler", "-fPIC"}), "unknown-flag", {}, "-fPIC"));
  // Spellings nvcc itself rejects (measured) are not guessed at.
  for (const char* f : {"--arch=sm_90", "-generate-code=arch=compute_90,code=sm_90", "-device-c", "--dc", "--lineinfo",
                        "-ccbin/usr/bin/g++", "-Xcompiler-fPIE", "-xcu", "--rdc=true"}) {
    EXPECT_TRUE(passes(compile({f}), "unknown-flag", {}, f)) << f;
  }
  // The first unknown flag is the one named.
  EXPECT_TRUE(passes(compile({"--one", "--two"}), "unknown-flag", {}, "--one"));
  // An option without its value.
  EXPECT_TRUE(passes({"-c", "a.cu", "-o"}, "unknown-flag", {}, "-o (missing value)"));
}

TEST(NvccPlanModeled, RealProjectFlagsBeyondTheSpecAreBuiltIn) {
  // The spec's tool passes these through; real CMake projects use them on every TU, and their
  // effect is captured by keying them verbatim (-lineinfo additionally keys literal paths).
  for (const char* f : {"--use_fast_math", "-use_fast_math", "--extended-lambda", "-expt-extended-lambda", "-lineinfo",
                        "--generate-line-info"}) {
    EXPECT_TRUE(caches(compile({f}))) << f;
  }
  EXPECT_TRUE(caches(compile({"-Xcudafe", "--diag_suppress=177"})));
  EXPECT_TRUE(passes(compile({"-Xcudafe", "--gen_c_file_name"}), "unknown-flag"));
  // The spec's allow-list example stays outside the table.
  EXPECT_TRUE(passes(compile({"--maxrregcount=64"}), "unknown-flag", {}, "--maxrregcount=64"));
}

TEST(NvccPlanPassthrough, HiddenInputThroughXcompiler) {
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-I/opt/include"}), "hidden-input", {}, "-Xcompiler -I/opt/include"));
  EXPECT_TRUE(passes(compile({"-Xcompiler=-DNDEBUG"}), "hidden-input", {}, "-Xcompiler -DNDEBUG"));
  EXPECT_TRUE(passes(compile({"--compiler-options", "-Wall -isystem /opt/inc"}), "hidden-input", {},
                     "--compiler-options -isystem"));
  EXPECT_TRUE(passes(compile({"--compiler-options=-Wall,-include,pre.h"}), "hidden-input"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "\"-I /opt/include\""}), "hidden-input"));
  for (const char* f :
       {"-include pre.h", "-imacros m.h", "-iquote q", "-idirafter d", "-isysroot /s", "--sysroot=/s", "-B/opt/bin",
        "-specs=x.specs", "-fplugin=p.so", "-fprofile-use=p.gcda", "-Wp,-MD,x.d", "-Xpreprocessor -I/x",
        "-Xclang -load", "@host.rsp", "-iwithprefix x", "/IC:\\inc", "/DNDEBUG", "/FIpre.h"}) {
    EXPECT_TRUE(passes(compile({"-Xcompiler", f}), "hidden-input")) << f;
  }
  // Allow-listing -Xcompiler changes nothing: the refusal is about what is inside.
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-I/x"}), "hidden-input", with_allowlist({"-Xcompiler"})));
}

TEST(NvccPlanPassthrough, HiddenInputAllowListedHostFlag) {
  // With -forward-unknown-to-host-compiler an allow-listed host flag reaches gcc; one that adds
  // search directories stays refused.
  EXPECT_TRUE(passes(compile({"-forward-unknown-to-host-compiler", "-iquote=inc"}), "hidden-input",
                     with_allowlist({"-iquote"})));
  EXPECT_TRUE(passes(compile({"-forward-unknown-to-host-compiler", "-idirafter"}), "hidden-input",
                     with_allowlist({"-idirafter"})));
}

TEST(NvccPlanPassthrough, HiddenInputNvccFlags) {
  EXPECT_TRUE(passes(compile({"-ldir", "/opt/libdevice"}), "hidden-input", {}, "-ldir /opt/libdevice"));
  EXPECT_TRUE(passes(compile({"--libdevice-directory=/opt/libdevice"}), "hidden-input"));
  EXPECT_TRUE(passes(compile({"-target-dir", "sbsa-linux"}), "hidden-input"));
}

TEST(NvccPlanPassthrough, HostFlagsThatChangeOutputs) {
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-MD"}), "depfile-modifier"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-E"}), "output-kind"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-gsplit-dwarf"}), "output-kind"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-fdump-tree-all"}), "keep-temps"));
}

TEST(NvccPlanPassthrough, Informational) {
  for (const char* f : {"--version", "-V", "--help", "-h", "--dryrun", "-dryrun", "-v", "--verbose", "--list-gpu-arch",
                        "-arch-ls", "--list-gpu-code", "-code-ls"}) {
    EXPECT_TRUE(passes({f}, "informational", {}, f)) << f;
    EXPECT_TRUE(passes(compile({f}), "informational")) << f;
  }
}

TEST(NvccPlanPassthrough, PhaseReasonWinsOverRefusedFlag) {
  // What the invocation is comes first; the first refused flag otherwise.
  EXPECT_TRUE(passes({"--bogus", "-dlink", "a.o", "-o", "d.o"}, "device-link"));
  EXPECT_TRUE(passes(compile({"-G", "-keep"}), "device-debug"));
  EXPECT_TRUE(passes(compile({"-keep", "-G"}), "keep-temps"));
}

// ---- Modeled flag families, every value form ------------------------------------------------------

TEST(NvccPlanFlags, GpuArchitectureForms) {
  for (const Args& f :
       {Args{"-arch=sm_90"}, Args{"-arch", "sm_90"}, Args{"--gpu-architecture=sm_90"},
        Args{"--gpu-architecture", "sm_90"}, Args{"-arch=compute_90", "-code=sm_90,compute_90"}, Args{"-code", "sm_90"},
        Args{"--gpu-code=sm_90"}, Args{"--gpu-code", "sm_90"}, Args{"-gencode", "arch=compute_90,code=sm_90"},
        Args{"-gencode=arch=compute_90,code=sm_90"}, Args{"--generate-code", "arch=compute_90,code=[compute_90,sm_90]"},
        Args{"--generate-code=arch=compute_90,code=[compute_90,sm_90]"}, Args{"-arch=all-major"}}) {
    CompilePlan p = planned(compile(f));
    EXPECT_EQ(p.gpu_arch_args, f) << f[0];
  }
  // Several -gencode, in order.
  CompilePlan p = planned(compile({"-gencode", "arch=compute_75,code=sm_75", "-gencode=arch=compute_90,code=sm_90"}));
  EXPECT_EQ(p.gpu_arch_args, (Args{"-gencode", "arch=compute_75,code=sm_75", "-gencode=arch=compute_90,code=sm_90"}));
}

TEST(NvccPlanFlags, HostCompiler) {
  EXPECT_EQ(planned(compile({"-ccbin", "/usr/bin/g++-12"})).ccbin, "/usr/bin/g++-12");
  EXPECT_EQ(planned(compile({"-ccbin=clang++"})).ccbin, "clang++");
  EXPECT_EQ(planned(compile({"--compiler-bindir", "g++"})).ccbin, "g++");
  EXPECT_EQ(planned(compile({"--compiler-bindir=g++"})).ccbin, "g++");
  // Last one wins, as nvcc does.
  EXPECT_EQ(planned(compile({"-ccbin", "g++", "-ccbin", "clang++"})).ccbin, "clang++");
  EXPECT_TRUE(caches(compile({"-allow-unsupported-compiler"})));
  EXPECT_TRUE(caches(compile({"--allow-unsupported-compiler"})));
}

TEST(NvccPlanFlags, DialectAndOptimization) {
  for (const Args& f :
       {Args{"-std=c++17"}, Args{"-std", "c++17"}, Args{"--std=c++20"}, Args{"--std", "c++14"}, Args{"-O3"},
        Args{"-O", "2"}, Args{"-O=1"}, Args{"--optimize=3"}, Args{"--optimize", "0"}, Args{"-O0"}}) {
    EXPECT_TRUE(caches(compile(f))) << f[0];
  }
}

TEST(NvccPlanFlags, PreprocessorFlags) {
  for (const Args& f : {Args{"-DNDEBUG"},
                        Args{"-D", "X=1"},
                        Args{"-D=X"},
                        Args{"--define-macro=X"},
                        Args{"--define-macro", "X"},
                        Args{"-UX"},
                        Args{"-U", "X"},
                        Args{"--undefine-macro=X"},
                        Args{"-Iinclude"},
                        Args{"-I", "include"},
                        Args{"-I=include"},
                        Args{"--include-path=include"},
                        Args{"--include-path", "include"},
                        Args{"-isystem", "/usr/local/cuda/include"},
                        Args{"-isystem=/usr/local/cuda/include"},
                        Args{"--system-include=/x"},
                        Args{"--system-include", "/x"},
                        Args{"-include", "pre.h"},
                        Args{"--pre-include=pre.h"},
                        Args{"--pre-include", "pre.h"}}) {
    CompilePlan p = planned(compile(f));
    EXPECT_EQ(p.source, "k.cu") << f[0];
  }
}

TEST(NvccPlanFlags, LinkTimeFlagsAreHarmlessWithCompile) {
  for (const Args& f :
       {Args{"-L/opt/lib"}, Args{"-L", "/opt/lib"}, Args{"--library-path=/opt/lib"}, Args{"-lcublas"},
        Args{"-l", "cublas"}, Args{"--library=cublas"}, Args{"--library", "cublas"}, Args{"-cudart=static"},
        Args{"-cudart", "shared"}, Args{"--cudart=none"}, Args{"-Xnvlink", "-v"}, Args{"-Xnvlink=--verbose"},
        Args{"--nvlink-options", "-v"}, Args{"-Xlinker", "--as-needed"}, Args{"-forward-unknown-to-host-linker"},
        Args{"--forward-unknown-to-host-linker"}}) {
    EXPECT_TRUE(caches(compile(f))) << f[0];
  }
}

TEST(NvccPlanFlags, AttachedValuesDoNotSwallowLongerNames) {
  // "-lineinfo" is its own option, not "-l ineinfo"; "-time" not "-t ime"; "-Ofc" not "-O fc".
  EXPECT_TRUE(planned(compile({"-lineinfo"})).has_lineinfo);
  EXPECT_TRUE(passes(compile({"-time", "x"}), "profiling"));
  EXPECT_TRUE(passes(compile({"-Ofc=max"}), "unknown-flag", {}, "-Ofc=max"));
  EXPECT_TRUE(passes(compile({"-link"}), "link"));
  EXPECT_TRUE(passes(compile({"-lib"}), "lib"));
  EXPECT_TRUE(caches(compile({"-t2"})));
  EXPECT_TRUE(caches(compile({"-t", "0"})));
  EXPECT_TRUE(caches(compile({"--threads=4"})));
}

TEST(NvccPlanFlags, XcompilerForms) {
  for (const Args& f : {Args{"-Xcompiler", "-fPIC"}, Args{"-Xcompiler=-fPIE"}, Args{"--compiler-options", "-fPIC"},
                        Args{"--compiler-options=-fPIC"}, Args{"-Xcompiler", "-Wall,-Wextra"},
                        Args{"-Xcompiler", "-Wall -Wextra -Wno-unused-parameter"}, Args{"-Xcompiler", "-O2"},
                        Args{"-Xcompiler", "-UFOO"}, Args{"-Xcompiler", "-fopenmp"}, Args{"-Xcompiler", "-Wpedantic"},
                        Args{"-Xcompiler", "-Wpointer-arith"}}) {
    EXPECT_TRUE(caches(compile(f))) << f[0] << " " << f.back();
  }
}

// -Xcompiler values are classified by the closed gcc/clang table, as a direct gcc compile is.
TEST(NvccPlanXcompiler, FlagsRealProjectsForwardKeepCaching) {
  for (const char* v : {"-fPIC", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden", "-std=c++17", "-g", "-fopenmp",
                        "-march=x86-64-v3", "-UNDEBUG", "-fno-strict-aliasing", "-x c++", "--param max-inline-insns=10",
                        "-ffile-prefix-map=/a=/b", "-fPIC,-Wall,-Wextra,-O3,-g"}) {
    EXPECT_TRUE(caches(compile({"-Xcompiler", v}))) << v;
  }
}

TEST(NvccPlanXcompiler, UnknownHostFlagPassesThroughLikeADirectCompile) {
  // The old deny-list let every flag it did not name through; the closed table does not know this one.
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-fkache-no-such-option"}), "unknown-flag", {},
                     "-Xcompiler -fkache-no-such-option"));
  EXPECT_TRUE(passes(compile({"--compiler-options", "-fPIC -frecord-gcc-switches"}), "unknown-flag", {},
                     "--compiler-options -frecord-gcc-switches"));
  // As for a direct gcc compile, [cc] extra_allowlist_flags admits it ...
  EXPECT_TRUE(caches(compile({"-Xcompiler", "-fkache-no-such-option"}), with_allowlist({"-fkache-no-such-option"})));
  // ... but never a flag the table refuses.
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-fplugin=p.so"}), "hidden-input", with_allowlist({"-fplugin=p.so"})));
}

TEST(NvccPlanXcompiler, RefusedFlagsKeepTheirForwardedReasons) {
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-DX"}), "hidden-input"));        // Effect::Define
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-isystem,/x"}), "hidden-input"));  // Effect::IncludeDir
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-ofoo.o"}), "output-kind"));       // Effect::Output
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-MMD"}), "depfile-modifier"));     // Effect::DepMMD
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-fprofile-arcs"}), "profiling"));  // the table's "coverage"
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-Wa,--noexecstack"}), "assembler-options"));  // as gcc -Wa,
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-Wp,-DX"}), "hidden-input", {}, "-Xcompiler -Wp"));
  // A word that is no flag's value is another input file to the host compiler.
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-O2 extra.c"}), "hidden-input", {}, "-Xcompiler extra.c"));
}

// Inside -Xcompiler some flags mean more than on a direct gcc line: nvcc makes the dependency file in
// its own pass, so every host -M option (the table keeps -MP, refuses -MJ as a side output) changes or
// adds to it; a profile option's list file is an input no dependency list names.
TEST(NvccPlanXcompiler, ForwardedDependencyAndListOptionsKeepTheirOldReasons) {
  EXPECT_TRUE(passes(compile({"-MD", "-MF", "k.d", "-Xcompiler", "-MP"}), "depfile-modifier"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-MJ,x.json"}), "depfile-modifier"));
  EXPECT_TRUE(passes(compile({"-Xcompiler", "-fprofile-list=f.txt"}), "hidden-input"));
  // An allow-listed unknown nvcc flag forwarded to the host never admits a hidden input (spec).
  EXPECT_TRUE(passes(compile({"-forward-unknown-to-host-compiler", "-fprofile-list=f.txt"}), "hidden-input",
                     with_allowlist({"-fprofile-list"})));
}

// The plan carries what the adapter needs from the command line (as gcc's CompilePlan does), so the
// adapter never scans the arguments again.
TEST(NvccPlanPositions, IncludeDirsAndRewrittenOptions) {
  const CompilePlan p = planned({"-c", "-I", "a,b", "k.cu", "--include-path=c", "-Id", "-isystem=e", "-o", "k.o",
                                 "-MD", "-MF=k.d", "-MT", "k.o", "-objtemp", "--pre-include", "p.h"});
  EXPECT_EQ(p.include_dirs, (Args{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(p.has_forced_include);
  EXPECT_TRUE(p.has_objtemp);
  ASSERT_EQ(p.output_args.size(), 1u);
  EXPECT_EQ(p.output_args[0].index, 7u);  // the option; its value is the next argument
  EXPECT_TRUE(p.output_args[0].separate);
  ASSERT_EQ(p.depfile_args.size(), 1u);
  EXPECT_EQ(p.depfile_args[0].name, "-MF");
  EXPECT_FALSE(p.depfile_args[0].separate);
  ASSERT_EQ(p.dep_target_args.size(), 1u);
  EXPECT_EQ(p.dep_target_args[0].index, 11u);
  EXPECT_EQ(p.mode_args, (std::vector<std::size_t>{0, 9}));  // -c, -MD
  for (const auto& pa : p.path_args) {
    if (pa.flag == "-I" || pa.flag == "--include-path" || pa.flag == "-isystem") {
      EXPECT_EQ(pa.kind, CompilePlan::PathKind::List) << pa.flag;
    }
  }
}

TEST(NvccPlanFlags, HostDebug) {
  EXPECT_TRUE(planned(compile({"-g"})).has_debug);
  EXPECT_TRUE(planned(compile({"--debug"})).has_debug);
  EXPECT_TRUE(planned(compile({"-Xcompiler", "-ggdb3"})).has_debug);
  EXPECT_FALSE(planned(compile({"-Xcompiler", "-fPIC"})).has_debug);
  // -g0 asks for no debug info, forwarded or not (the gcc plan's reading; the forwarded one took it for -g).
  EXPECT_FALSE(planned(compile({"-Xcompiler", "-g0"})).has_debug);
  EXPECT_TRUE(planned(compile({"-Xcompiler", "-gz"})).has_debug);  // the table's: -gz is a debug option
  EXPECT_FALSE(planned(compile({"-g"})).path_literal);
}

TEST(NvccPlanFlags, PtxasOptions) {
  for (const Args& f : {Args{"-Xptxas", "-v"}, Args{"-Xptxas=-O3"}, Args{"--ptxas-options", "--warn-on-spills"},
                        Args{"--ptxas-options=-v,-dlcm=ca"}}) {
    EXPECT_TRUE(caches(compile(f))) << f[0];
  }
}

TEST(NvccPlanFlags, CodegenAndDiagnostics) {
  for (const Args& f : {Args{"--expt-relaxed-constexpr"},
                        Args{"-expt-relaxed-constexpr"},
                        Args{"-ftz=true"},
                        Args{"-ftz", "false"},
                        Args{"--ftz=true"},
                        Args{"-prec-div=false"},
                        Args{"--prec-sqrt", "true"},
                        Args{"-fmad=false"},
                        Args{"-Wno-deprecated-gpu-targets"},
                        Args{"--Wno-deprecated-gpu-targets"},
                        Args{"-Wno-deprecated-declarations"},
                        Args{"-Werror", "all-warnings"},
                        Args{"-Werror=reorder"},
                        Args{"--Werror=cross-execution-space-call"},
                        Args{"-w"},
                        Args{"--disable-warnings"},
                        Args{"-Wreorder"},
                        Args{"--Wreorder"},
                        Args{"-Wdefault-stream-launch"},
                        Args{"-Wext-lambda-captures-this"},
                        Args{"-diag-suppress=177"},
                        Args{"--diag-suppress", "177,550"},
                        Args{"--display-error-number"},
                        Args{"-err-no"},
                        Args{"--resource-usage"},
                        Args{"-res-usage"},
                        Args{"-compress-mode=size"},
                        Args{"--compress-mode", "speed"},
                        Args{"--no-compress"},
                        Args{"-no-compress"},
                        Args{"-m64"},
                        Args{"--machine=64"},
                        Args{"-objtemp"},
                        Args{"--objdir-as-tempdir"},
                        Args{"--default-stream", "per-thread"},
                        Args{"-default-stream=legacy"}}) {
    EXPECT_TRUE(caches(compile(f))) << f[0];
  }
}

TEST(NvccPlanFlags, DependencyFile) {
  CompilePlan p = planned(compile({"-MD", "-MF", "k.o.d", "-MT", "k.o", "-MT", "alias"}));
  EXPECT_EQ(p.depfile, Depfile::MD);
  EXPECT_EQ(p.depfile_path, "k.o.d");
  EXPECT_EQ(p.depfile_targets, (Args{"k.o", "alias"}));

  p = planned(
      compile({"--generate-dependencies-with-compile", "--dependency-output=k.d", "--dependency-target-name=t"}));
  EXPECT_EQ(p.depfile, Depfile::MD);
  EXPECT_EQ(p.depfile_path, "k.d");
  EXPECT_EQ(p.depfile_targets, (Args{"t"}));

  p = planned(compile({"-MMD", "-MF=k.d"}));
  EXPECT_EQ(p.depfile, Depfile::MMD);
  EXPECT_TRUE(p.depfile_targets.empty());

  // -MMD wins over -MD in either order (measured: system headers are left out both ways).
  EXPECT_EQ(planned(compile({"-MD", "-MMD", "-MF", "k.d"})).depfile, Depfile::MMD);
  EXPECT_EQ(planned(compile({"-MMD", "-MD", "-MF", "k.d"})).depfile, Depfile::MMD);
  // Last -MF wins.
  EXPECT_EQ(planned(compile({"-MD", "-MF", "a.d", "-MF", "b.d"})).depfile_path, "b.d");
}

TEST(NvccPlanFlags, DuplicateFlagsAreFine) {
  PlanOptions o = with_allowlist({"--extended-lambda"});
  EXPECT_TRUE(caches(compile({"--extended-lambda", "--expt-relaxed-constexpr", "--extended-lambda"}), o));
  EXPECT_TRUE(caches(compile({"-std=c++17", "-std=c++17", "-O3", "-O3"})));
}

// ---- Real build lines ---------------------------------------------------------------------------

TEST(NvccPlanRealBuilds, CMake325) {
  Args args = {"-forward-unknown-to-host-compiler",
               "-isystem=/usr/local/cuda/include",
               "--generate-code=arch=compute_90,code=[compute_90,sm_90]",
               "-Xcompiler=-fPIE",
               "-x",
               "cu",
               "-rdc=true",
               "-std=c++17",
               "-MD",
               "-MT",
               "CMakeFiles/t.dir/a.cu.o",
               "-MF",
               "CMakeFiles/t.dir/a.cu.o.d",
               "-c",
               "/abs/src/a.cu",
               "-o",
               "CMakeFiles/t.dir/a.cu.o"};
  CompilePlan p = planned(args);
  EXPECT_EQ(p.mode, Mode::CompileRdc);
  EXPECT_EQ(p.source, "/abs/src/a.cu");
  EXPECT_EQ(p.output, "CMakeFiles/t.dir/a.cu.o");
  EXPECT_EQ(p.depfile, Depfile::MD);
  EXPECT_EQ(p.depfile_path, "CMakeFiles/t.dir/a.cu.o.d");
  EXPECT_EQ(p.depfile_targets, (Args{"CMakeFiles/t.dir/a.cu.o"}));
  EXPECT_EQ(p.gpu_arch_args, (Args{"--generate-code=arch=compute_90,code=[compute_90,sm_90]"}));
  EXPECT_EQ(p.args, args);
  Args keyed = args;
  keyed[14] = "<source>";
  keyed[16] = "<output>";
  EXPECT_EQ(p.keyed_args, keyed);
}

TEST(NvccPlanRealBuilds, CMakeOnAccFileCompiledAsCuda) {
  // CMake compiles .cc files declared LANGUAGE CUDA with -x cu.
  EXPECT_EQ(planned({"-x", "cu", "-c", "/abs/src/b.cc", "-o", "b.cc.o"}).source, "/abs/src/b.cc");
}

TEST(NvccPlanRealBuilds, MesonCustomTarget) {
  CompilePlan p = planned({"-c", "../src/k.cu", "-o", "k.o", "-MD", "-MF", "k.o.d", "-MT", "k.o"});
  EXPECT_EQ(p.mode, Mode::Compile);
  EXPECT_EQ(p.source, "../src/k.cu");
  EXPECT_EQ(p.output, "k.o");
  EXPECT_EQ(p.depfile, Depfile::MD);
  EXPECT_EQ(p.depfile_path, "k.o.d");
  EXPECT_EQ(p.depfile_targets, (Args{"k.o"}));
}

TEST(NvccPlanRealBuilds, HandWrittenWithAllowListedExtras) {
  // Single-dash spellings, -lineinfo and --extended-lambda twice, a multi-flag -Xcompiler.
  PlanOptions o = with_allowlist({"-lineinfo", "--extended-lambda", "--use_fast_math"});
  CompilePlan p =
      planned({"-c", "k.cu", "-o", "k.o", "-use_fast_math", "-extended-lambda", "-lineinfo", "--expt-relaxed-constexpr",
               "--extended-lambda", "-compress-mode=size", "-Wno-deprecated-gpu-targets",
               "-Wno-deprecated-declarations", "-Xcompiler", "-Wall -Wextra -Wno-unused-function"},
              o);
  EXPECT_TRUE(p.has_lineinfo);
  EXPECT_TRUE(p.path_literal);
}

// ---- NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS ----------------------------------------------------------

TEST(NvccPlanEnv, CodegenTuningIsCachedAndKeptVerbatim) {
  PlanOptions o = with_env("  -O3 -gencode arch=compute_90,code=sm_90 ", "-Xptxas -v --use_fast_math -t 2");
  Args args = {"-c", "k.cu", "-o", "k.o"};
  CompilePlan p = planned(args, o);
  EXPECT_EQ(p.prepend_flags, "  -O3 -gencode arch=compute_90,code=sm_90 ");
  EXPECT_EQ(p.append_flags, "-Xptxas -v --use_fast_math -t 2");
  EXPECT_EQ(p.args, args);
  EXPECT_EQ(p.keyed_args, (Args{"-c", "<source>", "-o", "<output>"}));
  EXPECT_TRUE(p.gpu_arch_args.empty());  // the environment reaches every nvcc run by itself
}

TEST(NvccPlanEnv, AllowedFamilies) {
  for (const char* e :
       {"-O2", "-O", "-arch=sm_90", "--gpu-architecture=sm_80", "-code=sm_90", "--gpu-code sm_90",
        "--generate-code=arch=compute_90,code=sm_90", "-Xptxas=-O3", "--use_fast_math",
        "-ftz=true -prec-div=false -prec-sqrt=false -fmad=true", "--maxrregcount=64", "-Wno-deprecated-gpu-targets",
        "-Wreorder -Werror=reorder", "-w", "-t 4", "--threads=0", "-std=c++17", "-diag-suppress=177"}) {
    std::string append = e;
    if (append == "-O") append = "-O 3";
    EXPECT_TRUE(caches(compile(), with_env("", append))) << e;
    EXPECT_TRUE(caches(compile(), with_env(append, ""))) << e;
  }
}

TEST(NvccPlanEnv, FlagsThatChangeWhatIsBuiltOrHideInputs) {
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("-I/opt/include", ""), "-I/opt/include"));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "-DX=1")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "-include pre.h")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "-Xcompiler -fPIC")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "-rdc=true")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "-ccbin clang++")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "-lineinfo")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "--extended-lambda")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "--bogus")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "-keep")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("", "@flags.rsp")));
  // A source or an output in the environment.
  EXPECT_TRUE(passes({"-c", "-o", "k.o"}, "env-flag", with_env("", "k.cu"), "k.cu"));
  EXPECT_TRUE(passes({"-c", "k.cu"}, "env-flag", with_env("", "-o k.o")));
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("-dc", ""), "-dc"));
  // Without -c / -dc of its own the invocation is taken for a link, whatever the environment holds.
  EXPECT_TRUE(passes({"k.cu", "-o", "k.o"}, "link", with_env("-c", "")));
}

TEST(NvccPlanEnv, DeviceDebugAndNativeKeepTheirReasons) {
  EXPECT_TRUE(passes(compile(), "device-debug", with_env("-G", ""), "-G"));
  EXPECT_TRUE(passes(compile(), "device-debug", with_env("", "--device-debug")));
  EXPECT_TRUE(passes(compile(), "machine-native", with_env("", "-arch=native")));
  EXPECT_TRUE(passes(compile(), "machine-native", with_env("-arch native", "")));
  EXPECT_TRUE(passes(compile(), "machine-native", with_env("", "-Xcompiler -march=native")));
  EXPECT_TRUE(passes(compile(), "machine-native", with_env("", "-march=native")));
}

TEST(NvccPlanEnv, ValuesDoNotCrossTheEnvironmentBoundary) {
  // nvcc would read the user's first argument as the value of a prepended -arch.
  EXPECT_TRUE(passes({"sm_90", "-c", "k.cu", "-o", "k.o"}, "env-flag", with_env("-arch", ""), "-arch sm_90"));
  // ... and the first appended word as the value of the user's last option.
  EXPECT_TRUE(passes({"-c", "k.cu", "-o", "k.o", "-Xptxas"}, "env-flag", with_env("", "-v")));
}

TEST(NvccPlanEnv, PrependAndAppendOrderIsNvccs) {
  // -x from the user applies even though the environment comes first and last.
  EXPECT_TRUE(caches({"-x", "cu", "-c", "k.cc", "-o", "k.o"}, with_env("-O2", "-O3")));
  // A link stays a link whatever the environment tunes.
  EXPECT_TRUE(passes({"a.o", "-o", "app"}, "link", with_env("-O3", "")));
}

TEST(NvccPlanEnv, AllowListedFlagsInTheEnvironment) {
  PlanOptions o = with_env("", "--expt-relaxed-constexpr-ish=1");
  EXPECT_TRUE(passes(compile(), "env-flag", o));
  o.extra_allowlist = {"--expt-relaxed-constexpr-ish"};
  EXPECT_TRUE(caches(compile(), o));
  // -lineinfo is built in on the command line but not codegen tuning: from the environment it refuses.
  EXPECT_TRUE(passes(compile(), "env-flag", with_env("-lineinfo", "")));
}

TEST(NvccPlanEnv, SplitEnvFlags) {
  EXPECT_EQ(split_env_flags(""), Args{});
  EXPECT_EQ(split_env_flags("   \t\n"), Args{});
  EXPECT_EQ(split_env_flags("-O3"), (Args{"-O3"}));
  EXPECT_EQ(split_env_flags(" -O3\t-gencode  arch=compute_90,code=sm_90\n"),
            (Args{"-O3", "-gencode", "arch=compute_90,code=sm_90"}));
  // No quote processing, like nvcc.
  EXPECT_EQ(split_env_flags("-Xcompiler \"-Wall -Wextra\""), (Args{"-Xcompiler", "\"-Wall", "-Wextra\""}));
}

// ---- Extra allow-list -------------------------------------------------------------------------------

TEST(NvccPlanAllowlist, MatchesTheFlagOrTheFlagWithEqualsValue) {
  PlanOptions o = with_allowlist({"--maxrregcount"});
  EXPECT_TRUE(caches(compile({"--maxrregcount=64"}), o));
  EXPECT_TRUE(caches(compile({"--maxrregcount"}), o));
  // Another spelling of the same nvcc option is the same flag.
  EXPECT_TRUE(caches(compile({"-maxrregcount=32"}), o));
  // Allow-listed flags are keyed verbatim.
  EXPECT_EQ(planned(compile({"--maxrregcount=64"}), o).keyed_args,
            (Args{"-c", "<source>", "-o", "<output>", "--maxrregcount=64"}));
}

TEST(NvccPlanAllowlist, SeparateValueIsAnotherArgument) {
  PlanOptions o = with_allowlist({"--maxrregcount"});
  EXPECT_TRUE(passes(compile({"--maxrregcount", "64"}), "unknown-flag", o, "64"));
  PlanOptions u = with_allowlist({"--my-flag"});
  EXPECT_TRUE(passes(compile({"--my-flag", "64"}), "multiple-sources", u, "64"));
  EXPECT_TRUE(passes(compile({"--my-flag", "-v"}), "informational", u));
}

TEST(NvccPlanAllowlist, UnknownFlags) {
  PlanOptions o = with_allowlist({"-Wall", "-fno-strict-aliasing", "-split-compile"});
  EXPECT_TRUE(caches(compile({"-forward-unknown-to-host-compiler", "-Wall", "-fno-strict-aliasing"}), o));
  EXPECT_TRUE(caches(compile({"-split-compile=0"}), o));
  // Prefixes do not match: "-Wall" does not cover "-Wallx", nor "-split-compile" "-split-compile-extended".
  EXPECT_TRUE(passes(compile({"-Wallx"}), "unknown-flag", o));
  EXPECT_TRUE(passes(compile({"-split-compile-extended=1"}), "unknown-flag", o));
  // Empty entries match nothing.
  EXPECT_TRUE(passes(compile({"--bogus"}), "unknown-flag", with_allowlist({""})));
}

TEST(NvccPlanAllowlist, NonBuiltInEntriesKeepTheirMeaning) {
  PlanOptions o = with_allowlist({"-lineinfo"});
  CompilePlan p = planned(compile({"-lineinfo"}), o);
  EXPECT_TRUE(p.has_lineinfo);
  EXPECT_TRUE(p.path_literal);
  p = planned(compile({"--generate-line-info"}), with_allowlist({"--generate-line-info"}));
  EXPECT_TRUE(p.has_lineinfo);
  EXPECT_TRUE(p.path_literal);
  // --maxrregcount: the "=" form once allow-listed; a separate value is another argument.
  EXPECT_TRUE(caches(compile({"--maxrregcount=32"}), with_allowlist({"--maxrregcount"})));
  EXPECT_FALSE(caches(compile({"--maxrregcount", "32"}), with_allowlist({"--maxrregcount"})));
  // Both spellings of --extended-lambda, and its older name, once any of them is listed.
  EXPECT_TRUE(caches(compile({"-extended-lambda", "--expt-extended-lambda"}), with_allowlist({"--extended-lambda"})));
  EXPECT_TRUE(caches(compile({"-use_fast_math"}), with_allowlist({"--use_fast_math"})));
}

TEST(NvccPlanAllowlist, NeverOverridesMachineNativeOrHiddenInput) {
  EXPECT_TRUE(passes(compile({"-Xcudafe=-arch=native"}), "machine-native", with_allowlist({"-Xcudafe"})));
  EXPECT_TRUE(passes(compile({"-Wp,-MD,x.d"}), "hidden-input", with_allowlist({"-Wp,-MD,x.d"})));
  EXPECT_TRUE(passes(compile({"-isystem/x"}), "hidden-input", with_allowlist({"-isystem/x"})));
}

// ---- The table as it would behave with the spec's examples built in ---------------------------------

TEST(NvccPlanTable, ExamplesBuiltInBehaveAsModeled) {
  std::vector<FlagSpec> table = flag_table();
  for (auto& s : table) s.builtin = true;
  auto run = [&](const Args& a, const PlanOptions& o = {}) { return plan_with_table(table, a, o); };

  Plan p = run(compile({"-lineinfo", "--use_fast_math", "--extended-lambda", "-expt-extended-lambda"}));
  ASSERT_TRUE(std::holds_alternative<CompilePlan>(p));
  EXPECT_TRUE(std::get<CompilePlan>(p).path_literal);
  EXPECT_TRUE(std::get<CompilePlan>(p).has_lineinfo);
  // Built in, a separate value is read as the option's value.
  EXPECT_TRUE(std::holds_alternative<CompilePlan>(run(compile({"--maxrregcount", "64"}))));
  EXPECT_TRUE(std::holds_alternative<CompilePlan>(run(compile({"-maxrregcount=64"}))));
  // -Xcudafe carries diagnostics controls only.
  for (const char* v : {"--diag_suppress=177", "--diag_suppress=177,550", "--display_error_number",
                        "--diag_warning=20012", "--diag_error=1", "--diag-suppress=177 --diag_warning=2"}) {
    EXPECT_TRUE(std::holds_alternative<CompilePlan>(run(compile({"-Xcudafe", v})))) << v;
  }
  for (const char* v : {"--gen_c_file_name", "foo.cpp", "--diag_suppress=1 --keep"}) {
    Plan q = run(compile({"-Xcudafe", v}));
    ASSERT_TRUE(std::holds_alternative<Passthrough>(q)) << v;
    EXPECT_EQ(std::get<Passthrough>(q).reason, "unknown-flag") << v;
  }
}

TEST(NvccPlanTable, WellFormed) {
  const std::set<std::string> reasons = {"link",
                                         "device-link",
                                         "lib",
                                         "multiple-sources",
                                         "no-source",
                                         "non-cuda-source",
                                         "output-kind",
                                         "device-ir",
                                         "preprocess",
                                         "device-debug",
                                         "machine-native",
                                         "dependency-only",
                                         "depfile-modifier",
                                         "depfile-without-mf",
                                         "no-output",
                                         "keep-temps",
                                         "profiling",
                                         "response-file",
                                         "unknown-flag",
                                         "hidden-input",
                                         "env-flag",
                                         "informational"};
  const std::set<std::string> attached = {"-I", "-D", "-U", "-L", "-l", "-O", "-t"};
  std::set<std::string> seen;
  for (const auto& s : flag_table()) {
    ASSERT_FALSE(s.names.empty());
    for (std::string_view n : s.names) {
      EXPECT_TRUE(n.starts_with("-")) << n;
      EXPECT_TRUE(seen.insert(std::string(n)).second) << "duplicate spelling " << n;
      if ((s.forms & kAttached) && !n.starts_with("--")) {
        EXPECT_TRUE(attached.count(std::string(n))) << n;
      }
    }
    if (s.effect == Effect::Refuse) {
      EXPECT_TRUE(reasons.count(std::string(s.reason))) << s.names[0];
    }
    if (s.arity == Arity::Value) {
      EXPECT_EQ(s.forms & (kSeparate | kEquals), kSeparate | kEquals) << s.names[0];
    } else {
      EXPECT_EQ(s.forms, 0u) << s.names[0];
    }
  }
}

TEST(NvccPlanTable, FindFlag) {
  const auto& t = flag_table();
  auto m = find_flag(t, "-O3");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->name, "-O");
  EXPECT_EQ(m->form, kAttached);
  EXPECT_EQ(*m->inline_value, "3");
  m = find_flag(t, "--gpu-architecture=sm_90");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->form, kEquals);
  EXPECT_EQ(*m->inline_value, "sm_90");
  m = find_flag(t, "-I=inc");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->form, kEquals);
  EXPECT_EQ(*m->inline_value, "inc");
  m = find_flag(t, "-lineinfo");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->name, "-lineinfo");
  EXPECT_FALSE(find_flag(t, "--bogus"));
  EXPECT_FALSE(find_flag(t, "-ccbin/usr/bin/g++"));  // -ccbin takes no attached value
}

// ---- is_nvcc ------------------------------------------------------------------------------------------

TEST(NvccPlanIsNvcc, Names) {
  EXPECT_TRUE(is_nvcc("nvcc"));
  EXPECT_TRUE(is_nvcc("/usr/local/cuda/bin/nvcc"));
  EXPECT_TRUE(is_nvcc("nvcc.exe"));
  EXPECT_TRUE(is_nvcc("nvcc.EXE"));
  EXPECT_TRUE(is_nvcc("C:\\CUDA\\bin\\nvcc.exe"));
  EXPECT_TRUE(is_nvcc("C:\\CUDA\\bin\\NVCC.Exe"));
  EXPECT_FALSE(is_nvcc("nvcc-wrapper"));
  EXPECT_FALSE(is_nvcc("/usr/bin/nvcc.sh"));
  EXPECT_FALSE(is_nvcc("gcc"));
  EXPECT_FALSE(is_nvcc("/opt/nvcc/bin/clang"));
  EXPECT_FALSE(is_nvcc(""));
  EXPECT_FALSE(is_nvcc("xnvcc"));
}

}  // namespace
