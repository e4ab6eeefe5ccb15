#include "core/reasons.hpp"

#include <utility>

namespace kache::core {

namespace {

using C = ReasonCategory;

// One row per reason. The sentence completes "Not cached: ..." / "Not stored: ..." in spirit, but
// stands alone: it is printed by `kache --reasons` and appended to the log line that counts it.
constexpr Reason kReasons[] = {
    // ---- passthrough: the command ran unchanged ---------------------------------------------------
    // kache itself (engine/pipeline.cpp)
    {C::Passthrough, "disabled", "Caching is switched off (KACHE_DISABLE or cache.disable)."},
    {C::Passthrough, "cache-dir-refused",
     "cache.dir (or KACHE_DIR) is not usable (a relative path): every compile runs uncached until it is fixed."},
    {C::Passthrough, "unsupported-compiler", "kache has no adapter for this compiler, so it runs it unchanged."},
    {C::Passthrough, "cache-world-writable",
     "The cache directory is writable by every user, so its entries cannot be trusted (chmod o-w, or "
     "cache.allow_world_writable)."},
    {C::Passthrough, "output-dir-missing",
     "The directory of the output or dependency file does not exist; the compiler reports it itself."},
    {C::Passthrough, "output-dir-unwritable",
     "The directory of the output or dependency file cannot be written; the compiler reports it itself."},
    {C::Passthrough, "output-special",
     "The output or dependency file is a symlink, device (/dev/null), FIFO, socket or directory, which the "
     "compiler writes through and kache's rename would replace."},
    {C::Passthrough, "source-special",
     "The source is a pipe, FIFO, socket or device (/dev/stdin, <(...), a mkfifo path): hashing it would consume "
     "what the compiler must read."},
    {C::Passthrough, "output-path-through-link",
     "The output or dependency file is spelled with '..' after a symlink, so the kernel writes elsewhere than its "
     "lexical normal form names."},
    // What the invocation is (nvcc plan.cpp "phase" reasons: they win over a refused flag)
    {C::Passthrough, "informational",
     "The command prints information (--version, --help, --dryrun, -v) instead of compiling."},
    {C::Passthrough, "link", "The command links (or has no -c/-dc): kache caches single compiles only."},
    {C::Passthrough, "device-link", "The command is a device link (-dlink), which kache does not cache."},
    {C::Passthrough, "lib", "The command builds a library (-lib), which kache does not cache."},
    {C::Passthrough, "output-kind",
     "The command asks for an output kache does not cache (-cuda, LTO objects, -E/-S to the host, -ptx/-cubin/-fatbin "
     "with -c or with nvcc.cache_device_outputs off)."},
    {C::Passthrough, "device-ir",
     "Device code is NVVM IR (--optix-ir, -ltoir, lto_NN targets, -dlto with -fatbin/-cubin/-ptx), which names the "
     "working directory and the source path as written."},
    {C::Passthrough, "preprocess", "The command only preprocesses (-E)."},
    {C::Passthrough, "dependency-only", "The command only writes dependencies (-M, -MM), no object."},
    {C::Passthrough, "response-file", "Arguments come from a file (@file, -optf) whose content kache does not hash."},
    // The command line (nvcc plan.cpp, flag_table.cpp)
    {C::Passthrough, "unknown-flag",
     "A flag kache does not know (and that is not allow-listed) is on the command line, so it cannot prove caching "
     "safe."},
    {C::Passthrough, "env-flag",
     "NVCC_PREPEND_FLAGS or NVCC_APPEND_FLAGS holds something other than code generation tuning kache models."},
    {C::Passthrough, "device-debug", "Device debug information (-G) embeds the absolute source path and changes code."},
    {C::Passthrough, "machine-native",
     "A value resolved from the build machine (-arch=native, -march=native) is used."},
    {C::Passthrough, "shell-expansion",
     "An nvcc argument (or the working directory or TMPDIR) holds $ or a backquote, which nvcc's /bin/sh steps "
     "expand from the environment or by running a command: pass the expanded value from the build system instead."},
    {C::Passthrough, "wrapper-script",
     "The compiler, or a program it runs, is a wrapper script kache cannot read: its -### shows passes that no "
     "real driver run with the compile's arguments and the options the wrapper added shows, it changes what the "
     "compile writes, or (for a program nvcc or a driver runs) its text names a program kache cannot find: point "
     "the build at the real program, or at a script that execs it with the compile's arguments."},
    {C::Passthrough, "wrapper-environment",
     "The compiler is a wrapper script that mentions a variable the compiler reads (CPATH, GCC_EXEC_PREFIX, "
     "LD_LIBRARY_PATH, ...), which it may set for the compiler where kache cannot see it: set it in the build's "
     "environment instead, or point the build at the real compiler."},
    {C::Passthrough, "hidden-input",
     "A flag makes the compiler read inputs no dependency list names (host -I/-D/-include, -ldir, -target-dir)."},
    {C::Passthrough, "keep-temps",
     "Intermediate files are kept (-keep, -save-temps), extra outputs a hit would not restore."},
    {C::Passthrough, "profiling",
     "Timing or coverage files are written at compile time, extra outputs a hit would not restore."},
    {C::Passthrough, "depfile-modifier",
     "A dependency-file option kache does not model (-MP, -MG, a host -M flag) changes what is written."},
    {C::Passthrough, "depfile-without-mf", "A dependency file is asked for without -MF naming it."},
    {C::Passthrough, "no-source", "No input file is named."},
    {C::Passthrough, "multiple-sources", "More than one input file is named; kache caches one source per compile."},
    {C::Passthrough, "non-cuda-source", "The input is not a CUDA source (.cu, or -x cu)."},
    {C::Passthrough, "no-output", "No object file is named with -o (or it is empty)."},
    // The gcc/clang adapter (compiler/gcc/plan.cpp, flag_table.cpp, adapter.cpp)
    {C::Passthrough, "assembler-options",
     "Options are passed to the assembler (-Wa, -Xassembler), which kache does not model."},
    {C::Passthrough, "c-header", "The input is a header compiled to a precompiled header."},
    {C::Passthrough, "clang-config-include",
     "A clang configuration file beside the driver may include another file (@path) whose content kache does not hash."},
    {C::Passthrough, "clang-cuda",
     "clang compiles CUDA other than device-only -c or -S (a full -c runs fatbinary, which clang 19 cannot run with "
     "CUDA 13), or a CUDA option (--cuda-*) is given to a compile kache does not plan as CUDA."},
    {C::Passthrough, "clang-cuda-toolkit",
     "clang cannot use this CUDA toolkit (clang's own error, or a header its CUDA wrapper needs is missing), so "
     "the compile runs unchanged and fails as plain clang does."},
    // The clang offload route (compiler/offload/plan.cpp)
    {C::Passthrough, "offload-target-machine",
     "No offload target is named, or --offload-arch=native: the target would come from the machine's GPU."},
    {C::Passthrough, "env-flags-shell",
     "hipcc pastes HIPCC_COMPILE_FLAGS_APPEND or HIPCC_LINK_FLAGS_APPEND into a shell command, expanded after kache."},
    {C::Passthrough, "hipcc-rewrite",
     "hipcc replaces an argument containing --genco (a -D value, a file name) with --cuda-device-only."},
    {C::Passthrough, "env-verbose",
     "HIPCC_VERBOSE makes hipcc print its commands, paths or arguments, which would name kache's scratch files."},
    {C::Passthrough, "offload-cuid",
     "clang names device symbols after a hash of the whole command line, output path included (-fgpu-rdc, or any HIP compile by clang 18+): give -cuid=ID to cache it."},
    {C::Passthrough, "offload-target",
     "An offload target clang would refuse (not a gfx target ID, or one GPU named with two feature sets)."},
    {C::Passthrough, "coverage", "Coverage data (--coverage, -fprofile-arcs) is written beside the object."},
    {C::Passthrough, "cross-target", "A cross-compilation target (--target) kache does not probe is named."},
    {C::Passthrough, "language", "The input's language (assembler, preprocessed, Objective-C, Fortran) is not cached."},
    {C::Passthrough, "modules", "C++ modules read and write module files kache does not model."},
    {C::Passthrough, "multiple-outputs", "More than one output is named."},
    {C::Passthrough, "pch", "A precompiled header is read or written (-include-pch, a .gch beside -include)."},
    {C::Passthrough, "plugin", "A compiler plugin (-fplugin) is loaded; its code and inputs are not hashed."},
    {C::Passthrough, "profile-use", "A profile (-fprofile-use, -fauto-profile) is read that kache does not hash."},
    {C::Passthrough, "save-temps",
     "Intermediate files are kept (-save-temps, -fdump-*), extra outputs a hit would not restore."},
    {C::Passthrough, "side-output",
     "The compiler writes a side file (-fstack-usage, -MJ, ...) a hit would not restore."},
    {C::Passthrough, "missing-include-dirs",
     "-Wmissing-include-dirs (or clang's -Weverything) warns, or with -Werror fails, for each include directory "
     "that is missing: an input no dependency list names."},
    {C::Passthrough, "split-dwarf", "Split debug information (-gsplit-dwarf) writes a .dwo a hit would not restore."},
    {C::Passthrough, "stdin", "The source is read from standard input."},
    {C::Passthrough, "sysroot", "A sysroot (--sysroot) changes the headers and tools the compiler uses."},
    // The environment (compiler/env_table.cpp)
    {C::Passthrough, "env_side_output", "An environment variable makes a tool write a file a hit would not restore."},
    {C::Passthrough, "env_unmodeled",
     "An environment variable changes what the compiler reads or does in a way kache does not model."},
    {C::Passthrough, "env_depfile",
     "DEPENDENCIES_OUTPUT or SUNPRO_DEPENDENCIES makes the compiler write a second dependency file."},
    {C::Passthrough, "compressed-debug",
     "The object's debug sections came out compressed where kache's path placeholders were written (they "
     "cannot be replaced there), so the command ran unchanged."},
    {C::Passthrough, "records-command-line",
     "clang records its whole command line in the object (-grecord-command-line, -frecord-command-line), so "
     "kache's own flags and scratch output would show there."},
    {C::Passthrough, "lto-object",
     "The object holds LTO code (GCC's compressed .gnu.lto_* sections, LLVM bitcode), where paths can be neither "
     "seen nor replaced: stored for this checkout only, or run unchanged where kache's placeholders went in."},

    // ---- the user's compile failed --------------------------------------------------------------
    {C::CompileFailed, "compile-failed",
     "The compile (or its dependency listing) failed; the command ran unchanged so the compiler reports it."},

    // ---- errors inside kache --------------------------------------------------------------------
    {C::Error, "storage-read", "The cache could not be read (a manifest); the lookup counted as a miss."},
    {C::Error, "storage-write", "The result could not be written to the cache; the build got its object all the same."},
    {C::Error, "remote-failed",
     "A remote store refused, could not be reached or did not answer in time; the compile went on without it."},
    {C::Error, "internal", "kache failed internally and ran the compiler uncached."},

    // ---- compiled, installed, not stored ----------------------------------------------------------
    {C::NotStored, "closure-unreadable", "A file the compile read could not be read back to hash it."},
    {C::NotStored, "input-changed", "A file the compile read changed during the compile or while kache hashed it."},
    {C::NotStored, "lock-timeout",
     "A lock of the cache was held longer than cache.lock_timeout (a stopped process?); the result is not stored."},
    {C::NotStored, "compressed-fatbin",
     "nvcc compressed device code in a way kache cannot read back, so the object cannot be proven free of this "
     "checkout's paths: stored for this checkout only."},
    {C::NotStored, "depfile-target",
     "The dependency file does not start with its target, so the target could not be templated."},
    {C::NotStored, "path-in-object", "The object contains kache's scratch directory, a path of no build, so it is not stored."},
    {C::NotStored, "path-expanded",
     "The compile expands a path of the checkout (__FILE__, __BASE_FILE__, __builtin_FILE(), source_location, "
     "#line) whose bytes need not stay in the object (sizeof(__FILE__), a hash of it): stored for the paths of "
     "the roots that path lies below only."},
    {C::NotStored, "precompiled-header",
     "A *.gch lies in a directory the compile searched; GCC may have read it instead of a header, unnamed in -MD."},
    // Hidden inputs (core/watch.cpp scan_hidden_inputs)
    {C::NotStored, "incbin", "Host code includes a file with asm .incbin, an input no dependency list names."},
    {C::NotStored, "asm-include", "Host code includes assembly with asm .include, an input no dependency list names."},
    {C::NotStored, "timestamp", "__TIMESTAMP__ is used: it expands to a file time, which no key covers."},
    {C::NotStored, "pragma-dependency",
     "#pragma GCC dependency compares another file's time with the source's, an input no dependency list names."},
    // Hidden inputs found by the tools (engine/pipeline.cpp)
    {C::NotStored, "assembler-inputs",
     "The assembler may have read files of its own (.incbin/.include in a .S file or inline asm) that kache could "
     "not list (clang's integrated assembler writes no dependency list, or the list was not written)."},
    {C::NotStored, "time-macro",
     "The compiler (-Wdate-time) reports __TIME__ or __TIMESTAMP__ expanded, however spelled, or could not say: a "
     "later hit would replay a stale time (__DATE__ alone is stored under the day)."},
    {C::NotStored, "unpinned-time",
     "The output holds __DATE__/__TIME__ of the compile's wall clock or a __TIMESTAMP__ of a file time "
     "(SOURCE_DATE_EPOCH not honoured, e.g. clang 14): a later hit would replay a stale time."},
};

// Misconfigurations first: a report lists them before the causes a build's own changes give.
constexpr MissCause kMissCauses[] = {
    {"per-checkout-entry", true,
     "Entries were stored for this checkout only, because the objects name its path (__FILE__, assert(), "
     "-lineinfo), so another checkout or build directory misses them.",
     "Map the checkout to a portable path: -ffile-prefix-map=$PWD=. (or -fmacro-prefix-map) in the flags and "
     "paths.base_dirs set to the checkout's root (docs/sharing.md)."},
    {"expanded-path", true,
     "Entries were stored for one checkout's paths because the compile expands a path of it (__FILE__, "
     "source_location) that the object may hold as a length or a hash, so another checkout (or build directory, "
     "for a generated header) misses them.",
     "Map the checkout to a portable path for macros too: -ffile-prefix-map=$PWD=. (or -fmacro-prefix-map) in "
     "the flags and paths.base_dirs set to the checkout's root (docs/sharing.md)."},
    {"absolute-path", true,
     "An absolute path outside every path root (-I/home/me/proj/include, CMake's ${CMAKE_SOURCE_DIR}/include) "
     "names the checkout in the key, so another checkout's entries of the same sources are never found.",
     "Set paths.base_dirs (KACHE_PATHS_BASE_DIRS) to the checkout's root, or spell the path relative to the build "
     "directory (docs/sharing.md)."},
    {"toolchain-changed", true,
     "The compiler or toolkit differs from the one the entries were stored with (another nvcc, gcc or host "
     "compiler, or a toolkit changed mid-build).",
     "Build with one toolchain (PATH, CUDA_HOME, -ccbin pinned for the whole build)."},
    {"volatile-define", true,
     "A -D value changes from build to build (a time, a build number, a commit), so every build keys its "
     "compiles anew.",
     "Give the value to one generated source compiled once, or a fixed value in cached builds."},
    {"volatile-time", true,
     "__DATE__, __TIME__ or __TIMESTAMP__ reach the object, so the result cannot be stored.",
     "Set SOURCE_DATE_EPOCH (kache sets it for nvcc: nvcc.source_date_epoch), or drop the macros."},
    {"remote-failed", true, "A remote store refused, failed or timed out, so it served nothing to this compile.",
     "Check the remote with `kache doctor`: its URL, credentials, connect-timeout and the server's health."},
    {"direct-mode-off", true,
     "cache.direct_mode is off: every lookup runs the compiler's dependency listing before it can hit.",
     "Set cache.direct_mode = true (the default)."},
    {"flags-changed", false, "The compile's flags differ from those of the entries recorded for its source.", ""},
    {"environment-changed", false,
     "An environment variable the key holds differs from the entries recorded for this source.", ""},
    {"source-changed", false, "The source changed since its entries were stored.", ""},
    {"header-changed", false, "A header the source includes changed since its entries were stored.", ""},
    {"computed-include", false,
     "A file the compile reads computes an #include or __has_include name (#include MACRO), which kache "
     "cannot watch, so the entry has no direct-mode record and every build of this compile misses.",
     "Spell the name literally in the project's headers (#include \"x.h\" under #if), or leave it: the "
     "compile runs as without kache (docs/soundness.md)."},
    {"entry-gone", false,
     "The compile matches a recorded entry that is gone (evicted, removed by -C, or never stored here).",
     "Raise cache.max_size if entries are evicted within a build."},
    {"new-source", false, "No entry was recorded for this source before: a cold cache or a new file.", ""},
};

// Counters a compile counts that name the cause of its miss. Not stored_per_checkout.*: storing an entry
// for this checkout is what a miss did, not why it missed (measured on ggml and cuda-samples: a cold
// build's 172 and 58 first misses were reported as misconfigured); a miss of an entry stored for another
// checkout is found by comparing the recorded entries (explain's stored-for difference).
constexpr std::pair<std::string_view, std::string_view> kCauseOfCounter[] = {
    {"not_stored.unpinned-time", "volatile-time"},
    {"not_stored.timestamp", "volatile-time"},
    {"remote_errors", "remote-failed"},
    {"remote_timeouts", "remote-failed"},
    {"remote_skipped", "remote-failed"},
};

}  // namespace

std::span<const MissCause> all_miss_causes() { return kMissCauses; }

const MissCause* find_miss_cause(std::string_view name) {
  for (const MissCause& c : kMissCauses) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const MissCause* cause_of_counter(std::string_view counter) {
  for (const auto& [name, cause] : kCauseOfCounter) {
    if (name == counter) return find_miss_cause(cause);
  }
  return nullptr;
}

std::span<const Reason> all_reasons() { return kReasons; }

const Reason* find_reason(ReasonCategory category, std::string_view name) {
  for (const Reason& r : kReasons) {
    if (r.category == category && r.name == name) return &r;
  }
  return nullptr;
}

std::string_view category_name(ReasonCategory category) {
  switch (category) {
    case C::Passthrough:
      return "passthrough";
    case C::Error:
      return "error";
    case C::NotStored:
      return "not_stored";
    case C::CompileFailed:
      return "compile_failed";
  }
  return "unknown";
}

std::string counter_name(ReasonCategory category, std::string_view name) {
  if (category == C::CompileFailed) return std::string(category_name(category));
  return std::string(category_name(category)) + "." + std::string(name);
}

std::string_view reason_sentence(ReasonCategory category, std::string_view name) {
  const Reason* r = find_reason(category, name);
  return r ? r->sentence : "A reason without an entry in kache's reason table (src/core/reasons.cpp).";
}

}  // namespace kache::core
