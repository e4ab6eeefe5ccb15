// The gcc/clang flag table. One entry per option or group of options; the comment above each says
// why caching with it is sound, or why the compile passes through. Checked against gcc 12.2, clang 14
// and clang 19 (their --help output, and the compiles the integration tests run). The table is closed:
// an argument no entry matches is an unknown flag, and the compile passes through unless [cc]
// extra_allowlist_flags names it. Options that read a file kache does not hash, or write a file a hit
// would not restore, are refused here; tests/integration/test_flag_table_coverage.py checks that every
// option the installed compilers document with a file, path or directory value is modelled, refused or
// unknown, never merely keyed.
#include "compiler/gcc/flag_table.hpp"

#include <fmt/format.h>

#include <initializer_list>

namespace kache::compiler::gcc {

namespace {

using S = Shape;
using E = Effect;

using Names = std::initializer_list<std::string_view>;

GccFlag refuse(std::string_view name, Shape shape, std::string_view reason) { return {name, shape, E::Refuse, reason}; }

// One group of spellings that share a shape and an effect (and the comment above the call).
void add(std::vector<GccFlag>& table, Shape shape, Effect effect, Names names) {
  for (std::string_view n : names) table.push_back({n, shape, effect});
}

// The rows outside the -f and -g groups (add_f_options, add_debug_options).
std::vector<GccFlag> base_rows() {
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
      // Macro definitions and removals: part of the command line, keyed verbatim (a definition forwarded
      // by nvcc -Xcompiler reaches the host pass only: Effect::Define, refused there).
      {"-D", S::Value, E::Define},
      {"-U", S::Value, E::Keyed},
      // Without the standard include directories: keyed; fewer directories are then searched.
      {"-nostdinc", S::Exact, E::Keyed},
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
      // clang: a system directory searched last; a row so -isystem does not take "-after" as its value.
      refuse("-isystem-after", S::Separate, "hidden-input"),
      refuse("-iframework", S::Value, "hidden-input"),
      // The same through long or clang-only spellings (--include-directory, --include-prefix, --include=,
      // --imacros, --define-macro, -cxx-isystem): refused rather than modelled, as nvcc's -Xcompiler
      // refused them before the table decided there.
      refuse("--include", S::Prefix, "hidden-input"),
      refuse("--imacros", S::Prefix, "hidden-input"),
      refuse("--define-macro", S::Prefix, "hidden-input"),
      refuse("-cxx-isystem", S::Value, "hidden-input"),
      refuse("-isysroot", S::Value, "sysroot"),
      refuse("--sysroot", S::Prefix, "sysroot"),
      // Another place for cc1/cc1plus/as, the specs and headers (<prefix>/include): the toolchain probe
      // asks the driver with the same -B values which programs and directories it uses, and keys them
      // (compiler/gcc/toolchain.cpp). Wrapper compilers add it (`exec g++-real -B/opt/gcc/bin/ "$@"`).
      {"-B", S::Value, E::DriverPrefix},
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

      // ---- Code generation, language and diagnostics outside -f: keyed verbatim ----------------------
      // Optimization levels.
      {"-O", S::Exact, E::Keyed},
      {"-O0", S::Exact, E::Keyed},
      {"-O1", S::Exact, E::Keyed},
      {"-O2", S::Exact, E::Keyed},
      {"-O3", S::Exact, E::Keyed},
      {"-Os", S::Exact, E::Keyed},
      {"-Oz", S::Exact, E::Keyed},
      {"-Og", S::Exact, E::Keyed},
      {"-Ofast", S::Exact, E::Keyed},
      // Split debug info writes a .dwo beside the object, which a hit would not restore.
      refuse("-gsplit-dwarf", S::Prefix, "split-dwarf"),
      // clang: debug info that refers to module files kache does not model.
      refuse("-gmodules", S::Exact, "modules"),
      // Language standard.
      {"-std=", S::Prefix, E::Keyed},
      {"--std=", S::Prefix, E::Keyed},
      {"-ansi", S::Exact, E::Keyed},
      // Warnings (and -Werror: a failed compile stores nothing): a documented family, as gcc and clang
      // have hundreds; no -W option reads or writes a file except -Wa, and -Wp, (refused above) and
      // -Wl, (the link step, below).
      {"-W", S::Family, E::Keyed},
      // A warning (or, with -Werror, a failure) for each include directory that does not exist: the
      // compile's outcome depends on directories no dependency list names (gcc 12, clang 19 measured;
      // clang's -Weverything enables it too).
      refuse("-Wmissing-include-dirs", S::Exact, "missing-include-dirs"),
      refuse("-Werror=missing-include-dirs", S::Exact, "missing-include-dirs"),
      refuse("-Weverything", S::Exact, "missing-include-dirs"),
      {"-w", S::Exact, E::Keyed},
      {"-pedantic", S::Exact, E::Keyed},
      {"-pedantic-errors", S::Exact, E::Keyed},
      {"-nostdinc++", S::Exact, E::Keyed},
      // Machine options (-m64, -mavx2, -march=x86-64-v3, -mno-red-zone, -mtune=generic): a documented
      // family, as each target has hundreds; they select code generation only. "=native" is refused
      // before the table; -mllvm below.
      {"-m", S::Family, E::Keyed},
      // clang: raw LLVM and MLIR options, which can write files (-info-output-file, -pass-remarks-
      // output...); bitcode files linked into the module (-mlink-builtin-bitcode...).
      refuse("-mllvm", S::Separate, "hidden-input"),
      refuse("-mmlir", S::Separate, "hidden-input"),
      refuse("-mlink-", S::Prefix, "hidden-input"),
      // clang options that the -m family would otherwise take for machine options: module dependency
      // output (-module-dependency-dir, a directory of files) and module files; z/OS system headers.
      refuse("-module-", S::Prefix, "modules"),
      refuse("-mzos-", S::Prefix, "cross-target"),
      // clang options that begin like -o with an attached value (-object-file-name=, -objcmt-...): a row
      // so -o does not take them for an output named "bject-file-name=..."; not modelled.
      refuse("-object", S::Prefix, "unknown-flag"),
      refuse("-objcmt-", S::Prefix, "unknown-flag"),
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
      // clang: statistics written to a .stats file beside the object or in the cwd.
      refuse("-save-stats", S::Prefix, "side-output"),
      refuse("--save-stats", S::Prefix, "side-output"),
      // clang: a serialized diagnostics file (.dia) a hit would not write.
      refuse("--serialize-diagnostics", S::Prefix, "side-output"),
      refuse("-serialize-diagnostics", S::Prefix, "side-output"),
      // clang: compilation-database fragments and crash reproducers written to a directory.
      refuse("-gen-cdb-fragment-path", S::Separate, "side-output"),
      refuse("-gen-reproducer", S::Prefix, "side-output"),

      // ---- Link-time only: -c never links, so these cannot change the object (keyed anyway) ---------
      {"-Wl,", S::Prefix, E::Keyed},
      {"-L", S::Value, E::Keyed},
      {"-l", S::Value, E::Keyed},
      {"-Xlinker", S::Separate, E::Keyed},
      {"-T", S::Value, E::Keyed},
      {"-u", S::Value, E::Keyed},
      {"-z", S::Separate, E::Keyed},
      {"-shared", S::Exact, E::Keyed},
      {"-static", S::Exact, E::Keyed},
      {"-static-libgcc", S::Exact, E::Keyed},
      {"-static-libstdc++", S::Exact, E::Keyed},
      {"-static-pie", S::Exact, E::Keyed},
      {"-static-libasan", S::Exact, E::Keyed},
      {"-static-libubsan", S::Exact, E::Keyed},
      {"-static-libsan", S::Exact, E::Keyed},
      {"-rdynamic", S::Exact, E::Keyed},
      {"-pie", S::Exact, E::Keyed},
      {"-no-pie", S::Exact, E::Keyed},
      {"-s", S::Exact, E::Keyed},
      {"-nostdlib", S::Exact, E::Keyed},
      {"-nostdlib++", S::Exact, E::Keyed},
      {"-nostartfiles", S::Exact, E::Keyed},
      {"-nodefaultlibs", S::Exact, E::Keyed},
      {"-rtlib=", S::Prefix, E::Keyed},
      {"-unwindlib=", S::Prefix, E::Keyed},
      {"-fuse-ld=", S::Prefix, E::Keyed},
      {"-fuse-linker-plugin", S::Exact, E::Keyed},

      // ---- Refused -f options: outputs or inputs kache cannot see -----------------------------------
      // Profile feedback: the profile (.gcda, .profdata, .afdo) is a file no dependency list names.
      // Modelling it (hashing the profile, gcc's name mangling of the .gcda path) is left for later.
      refuse("-fprofile-use", S::Prefix, "profile-use"),
      refuse("-fprofile-sample-use", S::Prefix, "profile-use"),
      refuse("-fprofile-instr-use", S::Prefix, "profile-use"),
      refuse("-fauto-profile", S::Prefix, "profile-use"),
      refuse("-fbranch-probabilities", S::Exact, "profile-use"),  // reads <object>.gcda like -fprofile-use
      // Coverage: writes a .gcno notes file at compile time and embeds the .gcda path.
      refuse("-fprofile-arcs", S::Exact, "coverage"),
      refuse("-ftest-coverage", S::Exact, "coverage"),
      refuse("--coverage", S::Exact, "coverage"),
      refuse("-fcoverage-", S::Prefix, "coverage"),  // clang -fcoverage-mapping, -fcoverage-compilation-dir
      // Every other profile option (-fprofile-generate, -fprofile-dir, -fprofile-update, -fprofile-list,
      // -fprofile-remapping-file...) serves instrumentation that embeds output paths or reads lists.
      refuse("-fprofile-", S::Prefix, "profiling"),
      refuse("-fcs-profile-generate", S::Prefix, "profiling"),
      // Timing and memory reports: the point is to measure a real compile (-ftime-trace writes a .json).
      refuse("-ftime-report", S::Prefix, "profiling"),
      refuse("-ftime-trace", S::Prefix, "profiling"),
      refuse("-fmem-report", S::Prefix, "profiling"),
      refuse("-fstats", S::Exact, "profiling"),
      refuse("-fproc-stat-report", S::Prefix, "profiling"),  // clang: a process statistics file
      // Intermediate and dump files beside the output.
      refuse("-save-temps", S::Prefix, "save-temps"),
      refuse("-fdump-", S::Prefix, "keep-temps"),
      refuse("-dumpdir", S::Value, "keep-temps"),
      refuse("-dumpbase", S::Value, "keep-temps"),  // also -dumpbase-ext
      refuse("-aux-info", S::Value, "keep-temps"),  // writes prototypes to a file
      refuse("-fcompare-debug", S::Prefix, "keep-temps"),
      // Extra outputs: stack usage (.su), call graphs (.ci), optimization records (-fsave-optimization-
      // record, clang's -foptimization-record-file=), P1689 module deps, ThinLTO's minimized bitcode.
      refuse("-fstack-usage", S::Exact, "side-output"),
      refuse("-fcallgraph-info", S::Prefix, "side-output"),
      refuse("-fopt-info", S::Prefix, "side-output"),
      refuse("-fsave-optimization-record", S::Prefix, "side-output"),
      refuse("-foptimization-record-", S::Prefix, "side-output"),
      refuse("-fdeps-", S::Prefix, "side-output"),
      refuse("-fthin-link-bitcode", S::Prefix, "side-output"),
      refuse("-fdiagnostics-format=json-file", S::Exact, "side-output"),
      refuse("-fdiagnostics-format=sarif-file", S::Exact, "side-output"),
      // Plugins are programs and files no dependency list names.
      refuse("-fplugin", S::Prefix, "plugin"),
      refuse("-fpass-plugin", S::Prefix, "plugin"),
      refuse("-iplugindir=", S::Prefix, "plugin"),
      // C++ and clang modules read compiled module interfaces (.pcm, .gcm) and module maps outside the
      // dependency list: -fmodules, -fmodules-ts, -fmodule-file=, -fmodule-map-file=, -fmodules-cache-
      // path=, -fprebuilt-module-path=, -fimplicit-module-maps, -fbuiltin-module-map, -fcxx-modules.
      refuse("-fmodule", S::Prefix, "modules"),
      refuse("-fprebuilt-", S::Prefix, "modules"),
      refuse("-fimplicit-module", S::Prefix, "modules"),
      refuse("-fbuiltin-module-map", S::Exact, "modules"),
      refuse("-fcxx-modules", S::Exact, "modules"),
      // Files of lists read by the compiler that no dependency list names.
      refuse("-fsanitize-blacklist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-ignorelist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-system-ignorelist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-coverage-allowlist", S::Prefix, "hidden-input"),
      refuse("-fsanitize-coverage-ignorelist", S::Prefix, "hidden-input"),
      refuse("-fxray-attr-list", S::Prefix, "hidden-input"),
      refuse("-fxray-always-instrument", S::Prefix, "hidden-input"),
      refuse("-fxray-never-instrument", S::Prefix, "hidden-input"),
      // Basic-block sections from a list file (=list=FILE); the other values are keyed below.
      refuse("-fbasic-block-sections=", S::Prefix, "hidden-input"),
      // clang's CUDA mode: clang 19 cannot build against CUDA 13 here; nvcc compiles CUDA.
      refuse("--cuda-", S::Prefix, "clang-cuda"),  // --cuda-gpu-arch, --cuda-path, --cuda-host-only...
      refuse("--offload-arch", S::Prefix, "clang-cuda"),
      refuse("-fcuda-", S::Prefix, "clang-cuda"),
      refuse("-fgpu-", S::Prefix, "clang-cuda"),
      refuse("-nocudainc", S::Exact, "clang-cuda"),
      refuse("-nocudalib", S::Exact, "clang-cuda"),
  };
}

// gcc's optimizer switches (`gcc -Q --help=optimizers`, gcc 12) and their "=value" forms, less the
// profile-feedback and report options refused in base_rows (-fbranch-probabilities, -fvpt, -fopt-info,
// -fsave-optimization-record, -fprofile-*): each chooses code generation only. clang accepts some.
void add_optimizer_options(std::vector<GccFlag>& t) {
  add(t, S::Exact, E::Keyed,
      {"-faggressive-loop-optimizations", "-falign-functions", "-falign-jumps", "-falign-labels", "-falign-loops",
       "-fallocation-dce", "-fallow-store-data-races", "-fassociative-math", "-fauto-inc-dec", "-fbit-tests",
       "-fbranch-count-reg", "-fcaller-saves", "-fcode-hoisting", "-fcombine-stack-adjustments", "-fcompare-elim",
       "-fconserve-stack", "-fcprop-registers", "-fcrossjumping", "-fcse-follow-jumps", "-fcx-fortran-rules",
       "-fcx-limited-range", "-fdce", "-fdefer-pop", "-fdelayed-branch", "-fdelete-dead-exceptions",
       "-fdevirtualize", "-fdevirtualize-speculatively", "-fdse", "-fearly-inlining", "-fexpensive-optimizations",
       "-ffast-math", "-ffinite-loops", "-ffinite-math-only", "-ffloat-store", "-ffold-simple-inlines",
       "-fforward-propagate", "-ffp-int-builtin-inexact", "-ffunction-cse", "-fgcse", "-fgcse-after-reload",
       "-fgcse-las", "-fgcse-lm", "-fgcse-sm", "-fgraphite", "-fgraphite-identity", "-fguess-branch-probability",
       "-fhandle-exceptions", "-fharden-compares", "-fharden-conditional-branches", "-fhoist-adjacent-loads",
       "-fif-conversion", "-fif-conversion2", "-findirect-inlining", "-finline", "-finline-atomics",
       "-finline-functions", "-finline-functions-called-once", "-finline-small-functions", "-fipa-bit-cp",
       "-fipa-cp", "-fipa-cp-clone", "-fipa-icf", "-fipa-icf-functions", "-fipa-icf-variables", "-fipa-modref",
       "-fipa-profile", "-fipa-pta", "-fipa-pure-const", "-fipa-ra", "-fipa-reference",
       "-fipa-reference-addressable", "-fipa-sra", "-fipa-stack-alignment", "-fipa-strict-aliasing", "-fipa-vrp",
       "-fira-hoist-pressure", "-fira-loop-pressure", "-fira-share-save-slots", "-fira-share-spill-slots",
       "-fisolate-erroneous-paths-attribute", "-fisolate-erroneous-paths-dereference", "-fivopts", "-fjump-tables",
       "-fkeep-gc-roots-live", "-flifetime-dse", "-flimit-function-alignment", "-flive-patching",
       "-flive-range-shrinkage", "-floop-interchange", "-floop-nest-optimize", "-floop-parallelize-all",
       "-floop-unroll-and-jam", "-flra-remat", "-fmath-errno", "-fmodulo-sched", "-fmodulo-sched-allow-regmoves",
       "-fmove-loop-invariants", "-fmove-loop-stores", "-foptimize-sibling-calls", "-foptimize-strlen",
       "-fpartial-inlining", "-fpeel-loops", "-fpeephole", "-fpeephole2", "-fpredictive-commoning",
       "-fprefetch-loop-arrays", "-fprintf-return-value", "-freciprocal-math", "-free", "-freg-struct-return",
       "-frename-registers", "-freorder-blocks", "-freorder-blocks-and-partition", "-freorder-functions",
       "-frerun-cse-after-loop", "-freschedule-modulo-scheduled-loops", "-frounding-math",
       "-fsched-critical-path-heuristic", "-fsched-dep-count-heuristic", "-fsched-group-heuristic",
       "-fsched-interblock", "-fsched-last-insn-heuristic", "-fsched-pressure", "-fsched-rank-heuristic",
       "-fsched-spec", "-fsched-spec-insn-heuristic", "-fsched-spec-load", "-fsched-spec-load-dangerous",
       "-fsched-stalled-insns", "-fsched-stalled-insns-dep", "-fsched2-use-superblocks", "-fschedule-fusion",
       "-fschedule-insns", "-fschedule-insns2", "-fsection-anchors", "-fsel-sched-pipelining",
       "-fsel-sched-pipelining-outer-loops", "-fsel-sched-reschedule-pipelined", "-fselective-scheduling",
       "-fselective-scheduling2", "-fsemantic-interposition", "-fshrink-wrap", "-fshrink-wrap-separate",
       "-fsignaling-nans", "-fsigned-zeros", "-fsingle-precision-constant", "-fsplit-ivs-in-unroller",
       "-fsplit-loops", "-fsplit-paths", "-fsplit-wide-types", "-fsplit-wide-types-early", "-fssa-backprop",
       "-fssa-phiopt", "-fstdarg-opt", "-fstore-merging", "-fstrict-aliasing", "-fstrict-enums",
       "-fstrict-volatile-bitfields", "-fthread-jumps", "-ftoplevel-reorder", "-ftracer", "-ftrapping-math",
       "-ftree-bit-ccp", "-ftree-builtin-call-dce", "-ftree-ccp", "-ftree-ch", "-ftree-coalesce-vars",
       "-ftree-copy-prop", "-ftree-cselim", "-ftree-dce", "-ftree-dominator-opts", "-ftree-dse", "-ftree-forwprop",
       "-ftree-fre", "-ftree-loop-distribute-patterns", "-ftree-loop-distribution", "-ftree-loop-if-convert",
       "-ftree-loop-im", "-ftree-loop-ivcanon", "-ftree-loop-optimize", "-ftree-loop-vectorize", "-ftree-lrs",
       "-ftree-partial-pre", "-ftree-phiprop", "-ftree-pre", "-ftree-pta", "-ftree-reassoc", "-ftree-scev-cprop",
       "-ftree-sink", "-ftree-slp-vectorize", "-ftree-slsr", "-ftree-sra", "-ftree-switch-conversion",
       "-ftree-tail-merge", "-ftree-ter", "-ftree-vectorize", "-ftree-vrp", "-funconstrained-commons",
       "-funroll-all-loops", "-funroll-completely-grow-size", "-funroll-loops", "-funsafe-math-optimizations",
       "-funswitch-loops", "-fvar-tracking", "-fvar-tracking-assignments", "-fvar-tracking-assignments-toggle",
       "-fvar-tracking-uninit", "-fvariable-expansion-in-unroller", "-fversion-loops-for-strides", "-fweb"});
  add(t, S::Prefix, E::Keyed,
      {"-falign-functions=", "-falign-jumps=", "-falign-labels=", "-falign-loops=", "-fexcess-precision=",
       "-ffp-contract=", "-fira-algorithm=", "-fira-region=", "-flifetime-dse=", "-flive-patching=",
       "-freorder-blocks-algorithm=", "-fsched-stalled-insns-dep=", "-fsched-stalled-insns=", "-fsimd-cost-model=",
       "-ftree-parallelize-loops=", "-fvect-cost-model="});
}

// Debug information. It names the cwd and source paths, which kache's -fdebug-prefix-map rules turn
// into the path roots' fixed names (Effect::Debug). Listed spelling by spelling: "-g" is also the start
// of clang's -gen-cdb-fragment-path and -gen-reproducer, which write files (refused in base_rows).
void add_debug_options(std::vector<GccFlag>& t) {
  add(t, S::Exact, E::Debug,
      {"-g", "-g0", "-g1", "-g2", "-g3", "-ggdb", "-ggdb0", "-ggdb1", "-ggdb2", "-ggdb3", "-gdwarf", "-gdwarf-2",
       "-gdwarf-3", "-gdwarf-4", "-gdwarf-5", "-gdwarf32", "-gdwarf64", "-gbtf", "-gctf", "-gctf0", "-gctf1",
       "-gctf2", "-gz", "-gcolumn-info", "-gline-tables-only", "-gline-directives-only", "-gstrict-dwarf",
       "-gpubnames", "-ggnu-pubnames", "-grecord-gcc-switches", "-grecord-command-line", "-gvariable-location-views",
       "-ginline-points", "-ginternal-reset-location-views", "-gstatement-frontiers", "-gas-loc-support",
       "-gas-locview-support", "-gdescribe-dies", "-gembed-source", "-gfull", "-gused", "-glldb", "-gsce", "-gdbx",
       "-gsimple-template-names", "-gcodeview", "-gdwarf-aranges", "-gtoggle"});
  // The compression of the debug sections (-gz=zlib, -gz=zstd, -gz=none).
  add(t, S::Prefix, E::Debug, {"-gz="});
  // -gno-column-info, -gno-pubnames, -gno-record-gcc-switches, -gno-strict-dwarf...: a documented
  // family; turning a debug feature off never makes the compiler read or write a file.
  add(t, S::Family, E::Debug, {"-gno-"});
}

// The -f options kache caches with: each changes code generation, the language accepted or the
// diagnostics (stderr, which a hit replays), and none reads or writes a file. Keyed verbatim.
// The -f options that pick the language dialect and its extensions: keyed.
void add_f_dialect_options(std::vector<GccFlag>& t) {
  // Language dialect and extensions.
  add(t, S::Exact, E::Keyed,
      {"-fopenmp", "-fopenmp-simd", "-fopenacc", "-fgnu-tm", "-fpermissive", "-fms-extensions", "-fms-compatibility",
       "-fdeclspec", "-fdelayed-template-parsing", "-fborland-extensions", "-fgnu-keywords", "-fgnu89-inline",
       "-fgnu-runtime", "-fsigned-char", "-funsigned-char", "-fsigned-bitfields", "-funsigned-bitfields",
       "-ffreestanding", "-fhosted", "-fbuiltin", "-fasm", "-fcond-mismatch", "-flax-vector-conversions",
       "-fplan9-extensions", "-fallow-parameterless-variadic-functions", "-fdollars-in-identifiers",
       "-fextended-identifiers", "-fchar8_t", "-fcoroutines", "-fconcepts", "-fconcepts-ts", "-fimplicit-constexpr",
       "-fstrong-eval-order", "-fsized-deallocation", "-faligned-new", "-faligned-allocation", "-fcheck-new",
       "-fnew-inheriting-ctors", "-fnew-ttp-matching", "-frelaxed-template-template-args", "-fext-numeric-literals",
       "-fnothrow-opt", "-fenforce-eh-specs", "-fextern-tls-init", "-fgnu-unique", "-fimplicit-inline-templates",
       "-fimplicit-templates", "-fpretty-templates", "-fuse-cxa-get-exception-ptr", "-fweak", "-felide-constructors",
       "-felide-type", "-fblocks", "-fms-volatile", "-fapple-kext", "-ffixed-point", "-fdigraphs", "-ftrigraphs",
       "-fexperimental-library", "-fcontracts"});
  add(t, S::Prefix, E::Keyed,
      {"-finput-charset=", "-fexec-charset=", "-fwide-exec-charset=", "-ftabstop=", "-faligned-new=",
       "-fstrong-eval-order=", "-fms-compatibility-version=", "-fgnuc-version=", "-fconstexpr-depth=",
       "-fconstexpr-loop-limit=", "-fconstexpr-ops-limit=", "-fconstexpr-steps=", "-fconstexpr-cache-depth=",
       "-ftemplate-depth=", "-ftemplate-backtrace-limit=", "-fbracket-depth=", "-fconcepts-diagnostics-depth=",
       "-fchar8_t=", "-fwchar-type="});
}

// The -f options of diagnostics and a few more switches: keyed.
void add_f_diagnostic_options(std::vector<GccFlag>& t) {
  // Diagnostics: what stderr holds (a hit replays the miss's stderr). -fdiagnostics-urls reads
  // GCC_URLS/TERM_URLS, keyed in env_table.cpp; -fdiagnostics-color reads GCC_COLORS, keyed too.
  add(t, S::Exact, E::Keyed,
      {"-fdiagnostics-color", "-fcolor-diagnostics", "-fansi-escape-codes", "-fdiagnostics-urls",
       "-fdiagnostics-show-option", "-fdiagnostics-show-caret", "-fdiagnostics-show-labels",
       "-fdiagnostics-show-line-numbers", "-fdiagnostics-show-cwe", "-fdiagnostics-show-rules",
       "-fdiagnostics-show-path-depths", "-fdiagnostics-show-template-tree", "-fdiagnostics-show-note-include-stack",
       "-fdiagnostics-fixit-info", "-fdiagnostics-parseable-fixits", "-fdiagnostics-print-source-range-info",
       "-fdiagnostics-generate-patch", "-fdiagnostics-plain-output",
       "-fdiagnostics-format=text", "-fdiagnostics-format=json", "-fdiagnostics-format=json-stderr",
       "-fdiagnostics-format=sarif-stderr", "-fdiagnostics-format=clang", "-fdiagnostics-format=msvc",
       "-fdiagnostics-format=vi", "-fshow-column", "-fshow-source-location", "-fcaret-diagnostics",
       "-fspell-checking",});
  add(t, S::Prefix, E::Keyed,
      {"-fdiagnostics-color=", "-fdiagnostics-urls=", "-fdiagnostics-path-format=", "-fdiagnostics-column-unit=",
       "-fdiagnostics-column-origin=", "-fdiagnostics-escape-format=", "-fdiagnostics-minimum-margin-width=",
       "-fdiagnostics-show-location=", "-fmessage-length=", "-fmax-errors=", "-ferror-limit=",
       "-fmacro-backtrace-limit=", "-fcaret-diagnostics-max-lines=", "-fspell-checking-limit="});
  // Floating-point and inlining choices outside gcc's optimizer list (clang's spellings mostly).
  add(t, S::Exact, E::Keyed,
      {"-fhonor-infinities", "-fhonor-nans", "-fapprox-func", "-fprotect-parens", "-finline-hint-functions"});
  add(t, S::Prefix, E::Keyed,
      {"-ffp-model=", "-ffp-exception-behavior=", "-fdenormal-fp-math=", "-fdenormal-fp-math-f32=",
       "-ffp-eval-method=", "-finline-limit="});
  // More switches real builds pass (the Linux kernel's -fstrict-flex-arrays, clang's -faddrsig and
  // visibility variants, XRay's instrumentation without attribute lists, macro-expansion notes).
  add(t, S::Exact, E::Keyed,
      {"-fstrict-flex-arrays", "-faddrsig", "-funique-section-names", "-fxray-instrument",
       "-fcomplete-member-pointers", "-fvisibility-global-new-delete-hidden",
       "-fvisibility-inlines-hidden-static-local-var", "-ftrack-macro-expansion"});
  add(t, S::Prefix, E::Keyed, {"-fstrict-flex-arrays=", "-ftrack-macro-expansion=", "-fpermitted-flt-eval-methods="});
  // A seed for the names of anonymous-namespace symbols and the like: a string, keyed (kache adds its own
  // on a miss before the user's arguments; the user's wins). Keyed before the table was closed, kept.
  add(t, S::Exact, E::Keyed, {"-frandom-seed"});
  add(t, S::Prefix, E::Keyed, {"-frandom-seed="});
}

void add_f_options(std::vector<GccFlag>& t) {
  // -fno-exceptions, -fno-rtti, -fno-omit-frame-pointer, -fno-strict-aliasing, -fno-common,
  // -fno-builtin-memcpy...: a documented family. Turning a feature off never makes the compiler read
  // or write a file (-fno-profile-use, -fno-sanitize-ignorelist and the like turn one off).
  add(t, S::Family, E::Keyed, {"-fno-"});
  // Position independence, visibility, exceptions, unwind tables, sections (CMake, Meson, autotools and
  // distribution defaults: -fPIC, -fPIE, -fvisibility=hidden, -fexceptions, -fstack-protector-strong,
  // -fstack-clash-protection, -fcf-protection, -ffunction-sections...).
  add(t, S::Exact, E::Keyed,
      {"-fPIC", "-fpic", "-fPIE", "-fpie", "-fvisibility-inlines-hidden", "-fvisibility-ms-compat", "-frtti",
       "-fcxx-exceptions", "-fstack-protector", "-fstack-protector-all", "-fstack-protector-strong",
       "-fstack-protector-explicit", "-fstack-clash-protection", "-fstack-check", "-fsplit-stack", "-fcf-protection",
       "-funwind-tables", "-fcommon", "-fdata-sections", "-ffunction-sections", "-fmerge-constants",
       "-fmerge-all-constants", "-fident", "-fverbose-asm", "-fkeep-inline-functions", "-fkeep-static-consts",
       "-fkeep-static-functions", "-fuse-cxa-atexit", "-fuse-init-array", "-fstrict-overflow", "-fhardened",
       "-fzero-initialized-in-bss", "-fthreadsafe-statics", "-fleading-underscore", "-fpcc-struct-return",
       "-fshort-double", "-finstrument-functions", "-fsanitize-recover", "-fsanitize-trap",
       "-fsanitize-undefined-trap-on-error", "-fsanitize-minimal-runtime", "-fsanitize-address-use-after-scope",
       "-fsanitize-memory-track-origins", "-fsanitize-cfi-cross-dso", "-fsanitize-cfi-icall-generalize-pointers",
       "-fsanitize-stats", "-fintegrated-as", "-fintegrated-cc1", "-fexperimental-new-pass-manager",
       "-fforce-emit-vtables", "-fstrict-vtable-pointers", "-fwhole-program-vtables", "-fsplit-lto-unit",
       "-fvirtual-function-elimination", "-fvectorize", "-fslp-vectorize", "-fstrict-return",
       "-fstrict-float-cast-overflow", "-fforce-enable-int128", "-fstandalone-debug", "-flimit-debug-info",
       "-fdebug-types-section", "-fdebug-macro", "-fdebug-ranges-base-address", "-fdebug-info-for-profiling",
       "-fpseudo-probe-for-profiling", "-fasynchronous-unwind-tables",
       "-fexceptions", "-fnon-call-exceptions", "-fomit-frame-pointer", "-fdelete-null-pointer-checks",
       "-fwrapv", "-fwrapv-pointer", "-ftrapv", "-fshort-enums", "-fshort-wchar", "-fpack-struct", "-fplt"});
  add(t, S::Prefix, E::Keyed,
      {"-fvisibility=", "-fcf-protection=", "-fstack-check=", "-ftls-model=", "-ftrivial-auto-var-init=",
       "-ftrivial-auto-var-init-stop-after=", "-fzero-call-used-regs=", "-fpatchable-function-entry=",
       "-fsanitize=", "-fsanitize-recover=", "-fsanitize-trap=", "-fsanitize-memory-track-origins=",
       "-fsanitize-address-use-after-return=", "-fsanitize-coverage=", "-fsanitize-address-field-padding=",
       "-finstrument-functions-exclude-function-list=", "-fdebug-default-version=", "-fpack-struct=",
       "-fstack-reuse=", "-fstack-limit-register=", "-fstack-limit-symbol=", "-fsso-struct=", "-fabi-version=",
       "-fabi-compat-version=", "-fmax-type-align=", "-fopenmp=", "-fopenmp-version=", "-flto=",
       "-flto-partition=", "-flto-compression-level=", "-flto-jobs="});
  // Link-time optimization: the object holds IR instead of machine code; still one object out
  // (ThinLTO's extra outputs are refused in base_rows).
  add(t, S::Exact, E::Keyed, {"-flto", "-ffat-lto-objects", "-fwhole-program"});
  // Basic-block sections without a list file (=list=FILE is refused in base_rows).
  add(t, S::Exact, E::Keyed,
      {"-fbasic-block-sections=all", "-fbasic-block-sections=labels", "-fbasic-block-sections=none"});
  // The user's own path prefix maps (kache adds its own before them on a miss; the user's win). Paths
  // as strings: nothing is read.
  add(t, S::Prefix, E::Keyed, {"-fdebug-prefix-map=", "-ffile-prefix-map=", "-fmacro-prefix-map="});
  // clang: the directory written into debug info and coverage instead of the cwd; a string.
  add(t, S::Prefix, E::Keyed, {"-fdebug-compilation-dir=", "-ffile-compilation-dir="});
  add_f_dialect_options(t);
  add_f_diagnostic_options(t);
  add_optimizer_options(t);
}

std::vector<GccFlag> build_table() {
  std::vector<GccFlag> t = base_rows();
  add_debug_options(t);
  add_f_options(t);
  return t;
}

}  // namespace

const std::vector<GccFlag>& flag_table() {
  static const std::vector<GccFlag> table = build_table();
  return table;
}

std::optional<FlagMatch> find_flag(const std::vector<GccFlag>& table, std::string_view arg) {
  const auto m = match_row(table, arg);
  if (!m) return std::nullopt;
  return FlagMatch{m->row, m->value};
}

std::optional<FlagMatch> find_flag(std::string_view arg) { return find_flag(flag_table(), arg); }

namespace {

std::string_view effect_name(Effect e) {
  switch (e) {
    case Effect::Keyed: return "keyed";
    case Effect::Compile: return "compile";
    case Effect::Output: return "output";
    case Effect::Language: return "language";
    case Effect::IncludeDir: return "include-dir";
    case Effect::ForcedInclude: return "forced-include";
    case Effect::Define: return "define";
    case Effect::Debug: return "debug";
    case Effect::DepMD: return "dep-md";
    case Effect::DepMMD: return "dep-mmd";
    case Effect::DepFile: return "dep-file";
    case Effect::DepTarget: return "dep-target";
    case Effect::DriverPrefix: return "driver-prefix";
    case Effect::Refuse: return "refused";
  }
  return "unknown";
}

}  // namespace

std::string classify_flag(std::string_view arg) {
  const std::optional<FlagMatch> m = find_flag(arg);
  if (!m) return "unknown";
  if (m->flag->effect == Effect::Refuse) return fmt::format("refused:{}", m->flag->reason);
  return std::string(effect_name(m->flag->effect));
}

int print_flag_classes(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) out += fmt::format("{}\t{}\n", argv[i], classify_flag(argv[i]));
  fmt::print("{}", out);
  return 0;
}

}  // namespace kache::compiler::gcc
