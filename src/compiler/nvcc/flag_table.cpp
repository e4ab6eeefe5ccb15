// The nvcc flag table. One entry per nvcc option; the comment above each says why caching with it
// is safe, or why it is refused. Spellings were checked against nvcc 13.0 (`nvcc --help`, and
// `nvcc --dryrun` for which value forms it accepts).
#include "compiler/nvcc/flag_table.hpp"

#include "compiler/gcc/host_rules.hpp"

#include <algorithm>
#include <initializer_list>

namespace kache::compiler::nvcc {

namespace {

FlagSpec flag(std::initializer_list<std::string_view> names) {
  FlagSpec s;
  s.names.assign(names.begin(), names.end());
  return s;
}

constexpr unsigned kAttachedToo = kSeparate | kEquals | kAttached;

std::vector<FlagSpec> build_table() {
  return {
      // ---- What is built ----------------------------------------------------------------------
      // The single-object compile kache caches: one source in, one object out (the -o file).
      flag({"-c", "--compile"}).does(Effect::Compile),
      // Same, with relocatable device code; the mode is keyed, the object is still one file.
      flag({"-dc", "--device-c"}).does(Effect::DeviceCompile),
      // true with -c gives the -dc object; keyed verbatim, and like nvcc the last value wins.
      flag({"-rdc", "--relocatable-device-code"}).value().does(Effect::Rdc),
      // The object kache stores and restores; the pipeline keys it normalized ("<output>").
      flag({"-o", "--output-file"}).value().does(Effect::Output),
      // Language of every input; "cu" makes any file name a CUDA source, "c"/"c++" make it host-only.
      flag({"-x", "--x"}).value().does(Effect::Language),
      // Linking (and running) a program reads many inputs and writes an executable, not one object.
      flag({"-link", "--link", "-run", "--run", "-shared", "--shared", "-r", "--relocatable-link"}).refuse("link"),
      // Device linking combines several objects; it runs uncached (spec).
      flag({"-dlink", "--device-link"}).refuse("device-link"),
      // Builds a static library from several inputs.
      flag({"-lib", "--lib"}).refuse("lib"),
      // Standalone device outputs: the device passes only (the host compiler preprocesses for each
      // architecture, no cudafe++, no host compile), one file at -o. Measured (nvcc 13.0): byte-identical
      // run to run, independent of -o, of the working directory and of the checkout's path; -MD -MF
      // lists every device pass's closure (plus the host pass's). Cached like -c unless
      // nvcc.cache_device_outputs is off (then output-kind); with -c/-dc on the line, output-kind.
      flag({"-fatbin", "--fatbin", "-cubin", "--cubin", "-ptx", "--ptx"}).does(Effect::DeviceOutput),
      // Host .ii output: another artifact than the object kache stores.
      flag({"-cuda", "--cuda"}).refuse("output-kind"),
      // NVVM IR outputs name the working directory and the source as spelled (measured: two directories,
      // or "k.cu" vs "/abs/k.cu", give different files), where no prefix map reaches: not cached.
      flag({"-optix-ir", "--optix-ir", "-ltoir", "--ltoir"}).refuse("device-ir"),
      // Device code as LTO IR for a device link-time optimization step: not modeled for -c (output-kind);
      // with a device output it is NVVM IR, as above (device-ir).
      flag({"-dlto", "--dlink-time-opt", "-lto", "--lto", "-gen-opt-lto", "--gen-opt-lto"}).does(Effect::LinkTimeOpt),
      // Stops after the device front end: no object comes out.
      flag({"-fdevice-syntax-only", "--fdevice-syntax-only"}).refuse("output-kind"),
      // Preprocessed text on stdout or in -o, not an object.
      flag({"-E", "--preprocess"}).refuse("preprocess"),
      // Writes only a dependency list (and overrides -c), not an object.
      flag({"-M", "--generate-dependencies", "-MM", "--generate-nonsystem-dependencies"}).refuse("dependency-only"),

      // ---- Dependency files -------------------------------------------------------------------
      // Writes the -MF file during the compile; kache stores it beside the object and restores it.
      flag({"-MD", "--generate-dependencies-with-compile"}).does(Effect::DepWithCompile),
      // Same, without system headers (measured: -MMD wins when both -MD and -MMD are given).
      flag({"-MMD", "--generate-nonsystem-dependencies-with-compile"}).does(Effect::DepNonSystem),
      // Where the dependency file goes; required with -MD/-MMD so the sidecar has a known name.
      flag({"-MF", "--dependency-output"}).value().does(Effect::DepOutput).path(),
      // Target names written into the dependency file; keyed verbatim, so the stored file matches.
      flag({"-MT", "--dependency-target-name"}).value().does(Effect::DepTarget).path(),
      // Phony targets per header: changes the dependency file's shape; not modeled (spec).
      flag({"-MP", "--generate-dependency-targets"}).refuse("depfile-modifier"),
      // Not an nvcc option (gcc habit: missing headers are targets); refused with the same reason.
      flag({"-MG"}).refuse("depfile-modifier"),

      // ---- Host compiler ------------------------------------------------------------------------
      // The host compiler is probed (path and version) and keyed; its value is keyed verbatim too.
      flag({"-ccbin", "--compiler-bindir"}).value().does(Effect::HostCompiler),
      // Lifts only nvcc's host-compiler version check; the host compiler's version is keyed anyway.
      flag({"-allow-unsupported-compiler", "--allow-unsupported-compiler"}),
      // Host flags reach the host pass and the device preprocessing passes; each one is checked.
      flag({"-Xcompiler", "--compiler-options"}).value().does(Effect::HostOptions).path(),
      // Lets nvcc pass flags it does not know to the host; kache still refuses every flag it does not
      // know (unless allow-listed), so nothing unseen is forwarded.
      flag({"-forward-unknown-to-host-compiler", "--forward-unknown-to-host-compiler", "-forward-unknown-opts",
            "--forward-unknown-opts"}),
      // Same for the host linker, which -c / -dc never run.
      flag({"-forward-unknown-to-host-linker", "--forward-unknown-to-host-linker"}),
      // Host debug info names paths; the -fdebug-prefix-map placeholders kache adds on a miss cover them.
      flag({"-g", "--debug"}).does(Effect::HostDebug),

      // ---- Language and preprocessing -----------------------------------------------------------
      // Dialect; keyed verbatim.
      flag({"-std", "--std"}).value().env(),
      // Macros seen by every pass; keyed verbatim (nvcc also splits the value on commas).
      flag({"-D", "--define-macro"}).value(kAttachedToo),
      // Same for removing a macro.
      flag({"-U", "--undefine-macro"}).value(kAttachedToo),
      // Search directories: every header they supply is in the closure nvcc reports; keyed verbatim.
      flag({"-I", "--include-path"}).value(kAttachedToo).does(Effect::IncludeDir).path(),
      // Same for system directories (CMake writes "-isystem=<dir>"); -MD lists their headers too.
      flag({"-isystem", "--system-include"}).value().does(Effect::IncludeDir).path(),
      // The pre-included file is listed by nvcc -MD like any header, so it is in the closure.
      flag({"-include", "--pre-include"}).value().does(Effect::ForcedInclude).path(),
      // Language extensions in the device front end; keyed verbatim.
      flag({"-expt-relaxed-constexpr", "--expt-relaxed-constexpr"}),
      // Language extension (lambdas in device code); only changes how the same sources are parsed,
      // keyed verbatim. Built in beyond the spec's list: real CMake projects pass it on every TU.
      flag({"-extended-lambda", "--extended-lambda", "-expt-extended-lambda", "--expt-extended-lambda"}),
      // Default stream semantics (a macro for the runtime headers); keyed verbatim.
      flag({"-default-stream", "--default-stream"}).value(),

      // ---- Code generation ----------------------------------------------------------------------
      // GPU targets: keyed verbatim and listed in gpu_arch_args; "native" resolves the build
      // machine's GPU, so one key would cover different objects: refused as machine-native.
      flag({"-arch", "--gpu-architecture", "-code", "--gpu-code", "-gencode", "--generate-code"})
          .value()
          .does(Effect::GpuArch)
          .env(),
      // Host optimization level; keyed verbatim.
      flag({"-O", "--optimize"}).value(kAttachedToo).env(),
      // Known spelling so "-Ofc" is not read as "-O fc"; device fast-compile level, not built in.
      flag({"-Ofc", "--Ofast-compile"}).value().allowlist_only(),
      // Device floating-point modes; keyed verbatim.
      flag({"-ftz", "--ftz", "-prec-div", "--prec-div", "-prec-sqrt", "--prec-sqrt", "-fmad", "--fmad"}).value().env(),
      // Device math shortcut (implies -ftz/-prec-*/-fmad values); pure codegen, keyed verbatim.
      // Built in beyond the spec's list. Fine in NVCC_*_FLAGS.
      flag({"-use_fast_math", "--use_fast_math"}).env(),
      // Register limit; the spec's allow-list example, so not built in. Fine in NVCC_*_FLAGS.
      flag({"-maxrregcount", "--maxrregcount"}).value().allowlist_only().env(),
      // Writes the source's and device-code headers' paths, as resolved, into device code, which no
      // prefix map reaches: the adapter keys the source's resolved path and every root it lies below,
      // and ties an object naming any other root to its checkout (NvccAdapter::prepare).
      flag({"-lineinfo", "--generate-line-info"}).does(Effect::LineInfo),
      // Embeds the absolute source path in the compressed device image and changes code; refused.
      flag({"-G", "--device-debug"}).refuse("device-debug"),
      // ptxas flags; each is checked (no response files, device debug, output redirection, native).
      flag({"-Xptxas", "--ptxas-options"}).value().does(Effect::PtxasOptions).env(),
      // cudafe++ flags: only diagnostics controls (which warnings show) are accepted, each keyed
      // verbatim; anything else inside -Xcudafe is refused as unknown.
      flag({"-Xcudafe"}).value().does(Effect::CudafeOptions),
      // Fatbinary compression; keyed verbatim.
      flag({"-compress-mode", "--compress-mode"}).value(),
      // Uncompressed fatbinary; keyed verbatim.
      flag({"-no-compress", "--no-compress"}),
      // The only machine model nvcc supports; keyed verbatim.
      flag({"-m64", "--m64"}),
      // Same option with its value spelled out ("-m 64", "--machine=64").
      flag({"-m", "--machine"}).value(),
      // Parallelism over architectures; does not change the object.
      flag({"-t", "--threads"}).value(kAttachedToo).env(),
      // Intermediate files next to the object instead of /tmp (kache adds it on a miss itself).
      flag({"-objtemp", "--objdir-as-tempdir"}).does(Effect::ObjTemp),

      // ---- Diagnostics (stderr only; the compile's stderr is stored and replayed) ----------------
      // Silences the "architecture is deprecated" warning.
      flag({"-Wno-deprecated-gpu-targets", "--Wno-deprecated-gpu-targets"}).env(),
      // Silences use-of-deprecated-entity warnings.
      flag({"-Wno-deprecated-declarations", "--Wno-deprecated-declarations"}).env(),
      // Extra front-end warnings; keyed verbatim.
      flag({"-Wreorder", "--Wreorder"}).env(),
      flag({"-Wdefault-stream-launch", "--Wdefault-stream-launch"}).env(),
      flag({"-Wext-lambda-captures-this", "--Wext-lambda-captures-this"}).env(),
      flag({"-Wmissing-launch-bounds", "--Wmissing-launch-bounds"}).env(),
      // Turns warning kinds into errors: a failed compile stores nothing.
      flag({"-Werror", "--Werror"}).value().env(),
      // Silences all warnings.
      flag({"-w", "--disable-warnings"}).env(),
      // Changes the severity of numbered front-end diagnostics.
      flag({"-diag-suppress", "--diag-suppress", "-diag-error", "--diag-error", "-diag-warn", "--diag-warn"})
          .value()
          .env(),
      // Shows or hides diagnostic numbers in messages.
      flag({"-err-no", "--display-error-number", "-no-err-no", "--no-display-error-number"}).env(),
      // Prints register and memory usage per kernel on stdout, which is stored with the object.
      flag({"-res-usage", "--resource-usage"}).env(),

      // ---- Link-time only: -c / -dc never link, so these cannot change the object ---------------
      // Library search path and libraries.
      flag({"-L", "--library-path", "-l", "--library"}).value(kAttachedToo),
      // Which CUDA runtime / device runtime to link.
      flag({"-cudart", "--cudart", "-cudadevrt", "--cudadevrt"}).value(),
      // Options for nvlink, the host linker and the archiver.
      flag({"-Xnvlink", "--nvlink-options", "-Xlinker", "--linker-options", "-Xarchive", "--archive-options"})
          .value()
          .does(Effect::LinkOptions),

      // ---- Refused: outputs or inputs kache cannot see ------------------------------------------
      // Keeps intermediate files: extra outputs a hit would not restore.
      flag({"-keep", "--keep", "-save-temps", "--save-temps"}).refuse("keep-temps"),
      // Where -keep puts them (implies keeping).
      flag({"-keep-dir", "--keep-dir"}).value().refuse("keep-temps"),
      // Writes timing files: extra outputs, and the point is to measure a real compile.
      flag({"-time", "--time", "-fdevice-time-trace", "--fdevice-time-trace"}).value().refuse("profiling"),
      // Arguments read from a file kache does not hash.
      flag({"-optf", "--options-file"}).value().refuse("response-file"),
      // Replaces libdevice, a file no dependency list names.
      flag({"-ldir", "--libdevice-directory"}).value().refuse("hidden-input"),
      // Picks another targets/ subtree (headers and libraries) behind nvcc's back.
      flag({"-target-dir", "--target-directory"}).value().refuse("hidden-input"),
      // Prints instead of (or on top of) compiling; nothing to cache or the output is the point.
      flag({"--version", "-V", "--help", "-h", "--dryrun", "-dryrun", "-v", "--verbose", "--list-gpu-arch", "-arch-ls",
            "--list-gpu-code", "-code-ls"})
          .refuse("informational"),
  };
}


// ptxas flags (inside -Xptxas) that kache refuses. Everything else is keyed verbatim.
constexpr ForwardRule kPtxasFlagRules[] = {
    // Arguments read from a file kache does not hash.
    {"@", Match::Prefix, "response-file"},
    {"--options-file", Match::Prefix, "response-file"},
    {"-optf", Match::Prefix, "response-file"},
    // Device debug information, as with nvcc -G.
    {"-g", Match::Exact, "device-debug"},
    {"--device-debug", Match::Exact, "device-debug"},
    // Redirects ptxas's output away from the object nvcc assembles.
    {"-o", Match::Exact, "output-kind"},
    {"--output-file", Match::Prefix, "output-kind"},
};

// cudafe++ options (inside -Xcudafe) that only change which diagnostics are printed.
constexpr std::string_view kCudafeDiagnosticPrefixes[] = {
    "--diag_suppress", "--diag-suppress", "--diag_warning", "--diag-warning",         "--diag_warn",
    "--diag_error",    "--diag-error",    "--diag_remark",  "--display_error_number", "--no_display_error_number",
};

}  // namespace

const std::vector<FlagSpec>& flag_table() {
  static const std::vector<FlagSpec> table = build_table();
  return table;
}

std::optional<FlagMatch> find_flag(const std::vector<FlagSpec>& table, std::string_view arg) {
  const auto m = match_row(table, arg);
  if (!m) return std::nullopt;
  return FlagMatch{m->row, m->name, m->form, m->value};
}

std::optional<FlagRefusal> check_ptxas_options(std::string_view value) {
  for (std::string_view raw : split_option_list(value)) {
    std::string_view t = unquote(raw);
    if (is_machine_native(t)) return FlagRefusal{"machine-native", std::string(t)};
    for (const auto& r : kPtxasFlagRules) {
      if (rule_matches(r, t)) return FlagRefusal{std::string(r.reason), std::string(t)};
    }
  }
  return std::nullopt;
}

std::optional<FlagRefusal> check_cudafe_options(std::string_view value) {
  bool after_option = false;
  for (std::string_view raw : split_option_list(value)) {
    std::string_view t = unquote(raw);
    // A bare word continues the previous option's list ("--diag_suppress=177,550"); on its own it
    // would be a file name for cudafe++.
    if (!t.starts_with("-")) {
      if (!after_option) return FlagRefusal{"unknown-flag", std::string(t)};
      continue;
    }
    after_option = true;
    bool ok = std::any_of(std::begin(kCudafeDiagnosticPrefixes), std::end(kCudafeDiagnosticPrefixes),
                          [&](std::string_view p) { return t.starts_with(p); });
    if (!ok) return FlagRefusal{"unknown-flag", std::string(t)};
  }
  return std::nullopt;
}

}  // namespace kache::compiler::nvcc
