// The gcc/clang flag table. One entry per option or option family; the comment above each says why
// caching with it is sound, or why the compile passes through. Checked against gcc 12.2 and clang 14
// (their --help and the compiles the integration tests run). An argument no entry matches is an
// unknown flag: the compile passes through unless [cc] extra_allowlist_flags names it.
#include "compiler/gcc/flag_table.hpp"

namespace kache::compiler::gcc {

namespace {

using S = Shape;
using E = Effect;

GccFlag refuse(std::string_view name, Shape shape, std::string_view reason) { return {name, shape, E::Refuse, reason}; }

std::vector<GccFlag> build_table() {
  return {
      // ---- What is built -------------------------------------------------------------------------
      // The single-object compile kache caches: one source in, one object out.
      {"-c", S::Exact, E::Compile},
      // The object kache stores and restores; without it the driver writes <source basename>.o in the cwd.
      {"-o", S::Value, E::Output},
      // The language of the inputs after it; c, c++ and assembler-with-cpp are cached (plan.cpp).
      {"-x", S::Value, E::Language},
      // Assembly text or preprocessed text instead of an object.
      refuse("-S", S::Exact, "output-kind"),
      refuse("-E", S::Exact, "preprocess"),
      // Checks the code and writes nothing.
      refuse("-fsyntax-only", S::Exact, "output-kind"),
      // Only a dependency list (-M/-MM imply -E).
      refuse("-M", S::Exact, "dependency-only"),
      refuse("-MM", S::Exact, "dependency-only"),
      // Prints instead of compiling: nothing to cache.
      refuse("-v", S::Exact, "informational"),
      refuse("-###", S::Exact, "informational"),
      refuse("--version", S::Exact, "informational"),
      refuse("--help", S::Prefix, "informational"),
      refuse("-dumpversion", S::Exact, "informational"),
      refuse("-dumpfullversion", S::Exact, "informational"),
      refuse("-dumpmachine", S::Exact, "informational"),
      refuse("-dumpspecs", S::Exact, "informational"),
      refuse("-print-", S::Prefix, "informational"),
      refuse("--print-", S::Prefix, "informational"),

      // ---- Dependency files ----------------------------------------------------------------------
      // Writes the dependency file during the compile (-MF's, or the output's name with .d); kache
      // stores it beside the object, its target templated, and restores it on a hit.
      {"-MD", S::Exact, E::DepMD},
      // The same without system headers; the key's closure then comes from a private -M listing.
      {"-MMD", S::Exact, E::DepMMD},
      // Where the dependency file goes.
      {"-MF", S::Value, E::DepFile},
      // Target names written into the dependency file; keyed verbatim, so the stored file matches.
      {"-MT", S::Value, E::DepTarget},
      {"-MQ", S::Value, E::DepTarget},
      // Adds a phony target per header: keyed, it only changes the stored dependency file's text.
      {"-MP", S::Exact, E::Keyed},
      // Lists missing headers as if they were generated: the closure would name files that do not exist.
      refuse("-MG", S::Exact, "dependency-only"),
      // clang's compilation-database fragment: a second output a hit would not restore.
      refuse("-MJ", S::Value, "side-output"),

      // ---- Preprocessor inputs: all are keyed verbatim, and the files they lead to are in the -MD
      // closure; the directories join the search path the direct mode watches ----------------------
      {"-I", S::Value, E::IncludeDir},
      {"-iquote", S::Value, E::IncludeDir},
      {"-isystem", S::Value, E::IncludeDir},
      {"-idirafter", S::Value, E::IncludeDir},
      // Files read before the source; the driver looks for them in the cwd first.
      {"-include", S::Value, E::ForcedInclude},
      {"-imacros", S::Value, E::ForcedInclude},
      // Macro definitions and removals: part of the command line, keyed verbatim.
      {"-D", S::Value, E::Keyed},
      {"-U", S::Value, E::Keyed},
      // Without the standard include directories: keyed; fewer directories are then searched.
      {"-nostdinc", S::Prefix, E::Keyed},  // also -nostdinc++
      // Defines no system-specific macros / enables trigraphs: keyed.
      {"-undef", S::Exact, E::Keyed},
      {"-trigraphs", S::Exact, E::Keyed},
      // Prints each header's name to stderr, which a hit replays.
      {"-H", S::Exact, E::Keyed},
      // Prefix-relative include directories (-iprefix state across arguments), a prefix for the
      // system headers, another multilib: search paths the probe does not know.
      refuse("-iprefix", S::Value, "hidden-input"),
      refuse("-iwithprefix", S::Value, "hidden-input"),
      refuse("-iwithprefixbefore", S::Value, "hidden-input"),
      refuse("-imultilib", S::Value, "hidden-input"),
      refuse("-imultiarch", S::Value, "hidden-input"),
      refuse("-iframework", S::Value, "hidden-input"),
      refuse("-isysroot", S::Value, "sysroot"),
      refuse("--sysroot", S::Prefix, "sysroot"),
      // Another place for cc1/cc1plus/as and the specs: programs the toolchain id did not hash.
      refuse("-B", S::Value, "hidden-input"),
      refuse("-specs", S::Prefix, "hidden-input"),
      refuse("--specs", S::Prefix, "hidden-input"),
      // Runs the compiler's programs under another program.
      refuse("-wrapper", S::Separate, "hidden-input"),
      // Raw arguments for the preprocessor or clang's front end: anything could be inside
      // (-Wp,-MD,file writes a second dependency file).
      refuse("-Wp,", S::Prefix, "hidden-input"),
      refuse("-Xpreprocessor", S::Separate, "hidden-input"),
      refuse("-Xclang", S::Separate, "hidden-input"),
      // Assembler options: listing files (-Wa,-adhln=x) and include paths kache does not see.
      refuse("-Wa,", S::Prefix, "assembler-options"),
      refuse("-Xassembler", S::Separate, "assembler-options"),
      // clang's resource directory and GCC installation: headers the probe did not list.
      refuse("-resource-dir", S::Value, "hidden-input"),
      refuse("--gcc-toolchain", S::Prefix, "hidden-input"),
      refuse("--gcc-install-dir", S::Prefix, "hidden-input"),
      // Another target: other system headers and builtins than the probe found.
      refuse("-target", S::Separate, "cross-target"),
      refuse("--target", S::Prefix, "cross-target"),

      // ---- Precompiled headers -------------------------------------------------------------------
      // A PCH is a binary the dependency file names only in part; not modeled.
      refuse("-include-pch", S::Value, "pch"),
      refuse("-fpch-preprocess", S::Exact, "pch"),
      refuse("-emit-pch", S::Exact, "pch"),

      // ---- Code generation, language and diagnostics: keyed verbatim --------------------------------
      // Optimization level (-O0..-O3, -Os, -Og, -Ofast, -Oz).
      {"-O", S::Prefix, E::Keyed},
      // Debug information (-g, -g3, -ggdb, -gdwarf-4, -gz...). It names the cwd and source paths, which
      // kache's -fdebug-prefix-map rules turn into the path roots' fixed names.
      {"-g", S::Prefix, E::Debug},
      // Split debug info writes a .dwo beside the object, which a hit would not restore.
      refuse("-gsplit-dwarf", S::Prefix, "split-dwarf"),
      // Language standard.
      {"-std=", S::Prefix, E::Keyed},
      {"--std=", S::Prefix, E::Keyed},
      {"-ansi", S::Exact, E::Keyed},
      // Warnings (and -Werror: a failed compile stores nothing). -Wl,... is for the link step.
      {"-W", S::Prefix, E::Keyed},
      // A warning (or, with -Werror, a failure) for each include directory that does not exist: the
      // compile's outcome depends on directories no dependency list names (gcc 12, clang 19 measured;
      // clang's -Weverything enables it too).
      refuse("-Wmissing-include-dirs", S::Exact, "missing-include-dirs"),
      refuse("-Werror=missing-include-dirs", S::Exact, "missing-include-dirs"),
      refuse("-Weverything", S::Exact, "missing-include-dirs"),
      {"-w", S::Exact, E::Keyed},
      {"-pedantic", S::Prefix, E::Keyed},  // also -pedantic-errors
      // Machine options (-m64, -mavx2, -march=x86-64-v3); "=native" is refused before the table.
      {"-m", S::Prefix, E::Keyed},
      // Feature switches (-fPIC, -fno-exceptions, -fvisibility=hidden, -flto, -fopenmp, the user's own
      // -f*-prefix-map, -fdiagnostics-color...): keyed; those with outputs or inputs of their own are
      // refused by the longer entries below.
      {"-f", S::Prefix, E::Keyed},
      // Tuning parameters.
      {"--param", S::Separate, E::Keyed},
      // Threads: defines _REENTRANT (and links libpthread); keyed.
      {"-pthread", S::Exact, E::Keyed},
      // Pipes instead of temporary files between the compiler's passes: same object.
      {"-pipe", S::Exact, E::Keyed},
      // gprof instrumentation: code generation only, no file at compile time.
      {"-pg", S::Exact, E::Keyed},
      // clang: silence unused-argument warnings; which C++ library's headers; integrated assembler.
      {"-Qunused-arguments", S::Exact, E::Keyed},
      {"-stdlib=", S::Prefix, E::Keyed},
      {"-integrated-as", S::Exact, E::Keyed},
      {"-no-integrated-as", S::Exact, E::Keyed},

      // ---- Link-time only: -c never links, so these cannot change the object (keyed anyway) ---------
      {"-L", S::Value, E::Keyed},
      {"-l", S::Value, E::Keyed},
      {"-Xlinker", S::Separate, E::Keyed},
      {"-T", S::Value, E::Keyed},
      {"-u", S::Value, E::Keyed},
      {"-z", S::Separate, E::Keyed},
      {"-shared", S::Exact, E::Keyed},
      {"-static", S::Prefix, E::Keyed},  // also -static-libgcc, -static-libstdc++, -static-pie
      {"-rdynamic", S::Exact, E::Keyed},
      {"-pie", S::Exact, E::Keyed},
      {"-no-pie", S::Exact, E::Keyed},
      {"-s", S::Exact, E::Keyed},
      {"-nostdlib", S::Prefix, E::Keyed},  // also -nostdlib++
      {"-nostartfiles", S::Exact, E::Keyed},
      {"-nodefaultlibs", S::Exact, E::Keyed},
      {"-rtlib=", S::Prefix, E::Keyed},
      {"-unwindlib=", S::Prefix, E::Keyed},

      // ---- Refused -f options: outputs or inputs kache cannot see -----------------------------------
      // Profile feedback: the profile is a file no dependency list names.
      refuse("-fprofile-use", S::Prefix, "profile-use"),
      refuse("-fprofile-sample-use", S::Prefix, "profile-use"),
      refuse("-fprofile-instr-use", S::Prefix, "profile-use"),
      refuse("-fauto-profile", S::Prefix, "profile-use"),
      // Coverage: writes a .gcno notes file at compile time and embeds the .gcda path.
      refuse("-fprofile-arcs", S::Exact, "coverage"),
      refuse("-ftest-coverage", S::Exact, "coverage"),
      refuse("--coverage", S::Exact, "coverage"),
      refuse("-fcoverage-", S::Prefix, "coverage"),  // clang -fcoverage-mapping
      // Every other profile option (-fprofile-generate, -fprofile-dir, -fprofile-update...) serves
      // instrumentation that embeds output paths: not modeled.
      refuse("-fprofile-", S::Prefix, "profiling"),
      refuse("-fcs-profile-generate", S::Prefix, "profiling"),
      // Timing and memory reports: the point is to measure a real compile.
      refuse("-ftime-report", S::Prefix, "profiling"),
      refuse("-ftime-trace", S::Prefix, "profiling"),
      refuse("-fmem-report", S::Prefix, "profiling"),
      refuse("-fstats", S::Exact, "profiling"),
      // Intermediate and dump files beside the output.
      refuse("-save-temps", S::Prefix, "save-temps"),
      refuse("-fdump-", S::Prefix, "keep-temps"),
      refuse("-dumpdir", S::Value, "keep-temps"),
      refuse("-dumpbase", S::Value, "keep-temps"),  // also -dumpbase-ext
      refuse("-fcompare-debug", S::Prefix, "keep-temps"),
      // Extra outputs: stack usage (.su), call graphs (.ci), optimization records, P1689 module deps.
      refuse("-fstack-usage", S::Exact, "side-output"),
      refuse("-fcallgraph-info", S::Prefix, "side-output"),
      refuse("-fopt-info", S::Prefix, "side-output"),
      refuse("-fsave-optimization-record", S::Prefix, "side-output"),
      refuse("-fdeps-", S::Prefix, "side-output"),
      // Plugins are programs and files no dependency list names.
      refuse("-fplugin", S::Prefix, "plugin"),
      refuse("-fpass-plugin", S::Prefix, "plugin"),
      // C++ modules read compiled module interfaces outside the dependency list.
      refuse("-fmodule", S::Prefix, "modules"),  // -fmodules, -fmodules-ts, -fmodule-file, -fmodule-map-file
      // Files of lists read by the compiler that no dependency list names.
      refuse("-fsanitize-blacklist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-ignorelist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-system-ignorelist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-coverage-allowlist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-coverage-ignorelist", S::Prefix, "hidden-input"),
      refuse("-fxray-attr-list", S::Prefix, "hidden-input"),
      refuse("-fxray-always-instrument", S::Prefix, "hidden-input"),
      refuse("-fxray-never-instrument", S::Prefix, "hidden-input"),
      // clang's CUDA mode: clang 19 cannot build against CUDA 13 here; nvcc compiles CUDA.
      refuse("--cuda-", S::Prefix, "clang-cuda"),  // --cuda-gpu-arch, --cuda-path, --cuda-host-only...
      refuse("--offload-arch", S::Prefix, "clang-cuda"),
      refuse("-fcuda-", S::Prefix, "clang-cuda"),
      refuse("-fgpu-", S::Prefix, "clang-cuda"),
      refuse("-nocudainc", S::Exact, "clang-cuda"),
      refuse("-nocudalib", S::Exact, "clang-cuda"),
  };
}

}  // namespace

const std::vector<GccFlag>& flag_table() {
  static const std::vector<GccFlag> table = build_table();
  return table;
}

std::optional<FlagMatch> find_flag(std::string_view arg) {
  const auto& table = flag_table();
  for (const auto& f : table) {
    if (arg == f.name) return FlagMatch{&f, std::nullopt};
  }
  const GccFlag* best = nullptr;
  for (const auto& f : table) {
    if (f.shape == Shape::Exact || arg.size() <= f.name.size() || !arg.starts_with(f.name)) continue;
    // A Separate entry matches a longer argument only as "--param=value".
    if (f.shape == Shape::Separate && arg[f.name.size()] != '=') continue;
    if (!best || f.name.size() > best->name.size()) best = &f;
  }
  if (!best) return std::nullopt;
  if (best->shape == Shape::Prefix) return FlagMatch{best, std::nullopt};
  std::string_view rest = arg.substr(best->name.size());
  if (best->shape == Shape::Separate) rest.remove_prefix(1);  // "--param=value"
  return FlagMatch{best, rest};
}

}  // namespace kache::compiler::gcc
