#include "compiler/env_table.hpp"

#include <algorithm>

namespace kache::compiler {

namespace {

using E = EnvEffect;

// "Measured" below: nvcc 13.0 / g++ 12 with an LD_PRELOAD getenv() hook, `nvcc --dryrun`, and
// compiles compared byte for byte. A variable nobody reads costs nothing: only set ones change keys.
constexpr EnvRule kRules[] = {
    // ---- nvcc's driver ----
    // nvcc splices it before the command line; the planner models its flags and keys it verbatim.
    {"NVCC_PREPEND_FLAGS", E::Modeled, "", true},
    // nvcc splices it after the command line; modeled and keyed like NVCC_PREPEND_FLAGS.
    {"NVCC_APPEND_FLAGS", E::Modeled, "", true},
    // nvcc's default -ccbin: picks the host compiler the probe resolves (and keyed as written).
    {"NVCC_CCBIN", E::KeyedProbe, "", true},
    // nvcc asks for it (measured): nvcc.profile's spelling of -ccbin, so it can pick the host compiler.
    {"compiler-bindir", E::Probe, "", true},
    // nvcc appends it to every ptxas command (measured: PTXAS_FLAGS=-O0 changes the object).
    {"PTXAS_FLAGS", E::Keyed, "", true},
    // nvcc passes it to ptxas as well (measured: OCG_FLAGS=-O0 lands on the ptxas line).
    {"OCG_FLAGS", E::Keyed, "", true},
    // nvcc appends it to the cicc command (measured in --dryrun): device code generation options.
    {"NVVM_FLAGS", E::Keyed, "", true},
    // nvcc appends it to the cudafe++ and cicc commands (measured): front-end options.
    {"CUDAFE_FLAGS", E::Keyed, "", true},
    // nvcc reads these on every compile (measured) to forward them to its other tools; keyed so a
    // use nvcc 13's -c does not show in --dryrun is still covered.
    {"NVLINK_FLAGS", E::Keyed, "", true},
    {"NVASM_FLAGS", E::Keyed, "", true},
    {"NVDISASM_FLAGS", E::Keyed, "", true},
    {"LLVMC_FLAGS", E::Keyed, "", true},
    {"LLVMDIS_FLAGS", E::Keyed, "", true},
    // nvcc.profile appends its -I to it and nvcc pastes it into every preprocessing and host command
    // (measured); the probe hashes nvcc's expanded value into the toolchain id and adds its dirs to
    // the search path.
    {"INCLUDES", E::Probe, "", true},
    // As INCLUDES, for the -isystem part.
    {"SYSTEM_INCLUDES", E::Probe, "", true},
    // nvcc.profile's -L list: appears only on link commands (measured absent from -c); kache caches no link.
    {"LIBRARIES", E::Inert, "", true},
    // nvcc.profile variables: the environment's value seeds the profile's expansion (today's profile
    // overrides these with `=`, measured; an edited one may not), and nvcc prints the result as `#$
    // NAME=`, which the probe hashes into the toolchain id.
    {"TOP", E::Probe, "", true},
    {"CICC_PATH", E::Probe, "", true},
    {"NVVMIR_LIBRARY_DIR", E::Probe, "", true},
    {"_HERE_", E::Probe, "", true},
    {"_THERE_", E::Probe, "", true},
    {"_SPACE_", E::Probe, "", true},
    {"_TARGET_DIR_", E::Probe, "", true},
    {"_TARGET_SIZE_", E::Probe, "", true},
    {"_NVVM_BRANCH_", E::Probe, "", true},
    {"_CUDART_", E::Probe, "", true},
    // ---- cicc (NVVM) ----
    // cicc's internal option switches and IR version check (measured reads, undocumented): keyed.
    {"NVVMCCWIZ", E::Keyed, "", true},
    {"NVVM_IR_VER_CHK", E::Keyed, "", true},
    {"NV_NVVM_VERSION", E::Keyed, "", true},
    // LLVM's override of the producer string written into the IR (read by clang too, measured: it
    // reaches -flto bitcode).
    {"LLVM_OVERRIDE_PRODUCER", E::Keyed, "", false},
    // libNVVM threading switch, read by cicc (measured); keyed as its effect is undocumented.
    {"LIBNVVM_DISABLE_CONCURRENT_API", E::Keyed, "", true},
    // cicc's allocator (jemalloc) options: can print statistics to stderr, which a hit replays.
    {"MALLOC_CONF", E::Keyed, "", false},
    // cicc and clang (both LLVM) ask for a variable literally named "bar" (measured, undocumented):
    // keyed, whatever it does.
    {"bar", E::Keyed, "", false},
    // LLVM MC (cicc's and clang's integrated assembler) appends a log to this file: an output kache
    // would not restore.
    {"AS_SECURE_LOG_FILE", E::Refused, "env_side_output", false},
    // ---- cudafe++ / cicc front end (EDG) ----
    // A directory of EDG runtime files whose content kache does not hash.
    {"EDG_BASE", E::Refused, "env_unmodeled", true},
    // EDG's C++ modules search path: files kache does not see.
    {"EDG_MODULES_PATH", E::Refused, "env_unmodeled", true},
    // EDG's default system include directory: headers outside nvcc's -M closure.
    {"USR_INCLUDE", E::Refused, "env_unmodeled", true},
    // Changes the text of EDG's internal-error messages.
    {"EDG_SUPPRESS_ASSERTION_LINE_NUMBER", E::Keyed, "", true},
    // Turns off colour in EDG diagnostics (stderr a hit replays).
    {"NOCOLOR", E::Keyed, "", true},
    // ---- ptxas / nvlink ----
    // ptxas writes its option knobs to a file: an output kache would not restore.
    {"DUMP_KNOBS_TO_FILE", E::Refused, "env_side_output", true},
    // Read by ptxas and nvlink (measured, undocumented): keyed.
    {"CAN_FINALIZE_DEBUG", E::Keyed, "", true},
    // ---- loader (every dynamically linked tool: nvcc, cicc, ptxas, gcc, ...) ----
    // Picks the shared libraries the tools load (nvcc.profile prepends the toolkit's lib/); the probe
    // runs the host compiler with it, so it is part of the probe memo's key too.
    {"LD_LIBRARY_PATH", E::KeyedProbe, "", false},
    // Code injected into every tool; the library's content is not hashed, its path is keyed.
    {"LD_PRELOAD", E::Keyed, "", false},
    // ---- search path ----
    // nvcc resolves the host compiler and its tools through it (after nvcc.profile's directories);
    // the resolved files' identity and content are in the toolchain id, so PATH itself is not keyed:
    // two PATHs that find the same tools share entries.
    {"PATH", E::Probe, "", false},
    // ---- GCC (driver, cc1plus) ----
    // Include directories cc1plus adds (measured reads); the adapter also adds them to the search path.
    {"CPATH", E::Keyed, "", false},
    {"CPLUS_INCLUDE_PATH", E::Keyed, "", false},
    // C's include path: read by cc1 (a C compile of a future gcc adapter), keyed for both.
    {"C_INCLUDE_PATH", E::Keyed, "", false},
    // Objective-C's include path: read by cc1obj only; keyed so a gcc adapter is covered.
    {"OBJC_INCLUDE_PATH", E::Keyed, "", false},
    // Where gcc finds cc1plus, as and its own headers: changes the probe's include dirs as well.
    {"GCC_EXEC_PREFIX", E::KeyedProbe, "", false},
    // Extra directories gcc searches for cc1plus and as.
    {"COMPILER_PATH", E::KeyedProbe, "", false},
    // Relocate gcc's configured prefixes (prefix.c's @GCC/@G++/@BINUTILS): include dirs and tools.
    {"GCC_ROOT", E::KeyedProbe, "", false},
    {"G++_ROOT", E::KeyedProbe, "", false},
    {"BINUTILS_ROOT", E::KeyedProbe, "", false},
    // Library search path of gcc's link step only; kache caches compiles.
    {"LIBRARY_PATH", E::Inert, "", false},
    {"LPATH", E::Inert, "", false},
    // Makes cc1plus write a second dependency file kache would not restore.
    {"DEPENDENCIES_OUTPUT", E::Refused, "env_depfile", false},
    // As DEPENDENCIES_OUTPUT, with system headers.
    {"SUNPRO_DEPENDENCIES", E::Refused, "env_depfile", false},
    // gcc compiles twice and compares (-fcompare-debug): can fail the build and leaves dump files.
    {"GCC_COMPARE_DEBUG", E::Refused, "env_unmodeled", false},
    // Adds machine-readable fix-it hints to the diagnostics a hit replays.
    {"GCC_EXTRA_DIAGNOSTIC_OUTPUT", E::Keyed, "", false},
    // Colour escapes of diagnostics under -fdiagnostics-color=always.
    {"GCC_COLORS", E::Keyed, "", false},
    // Whether and how diagnostics embed URLs (escape sequences in the stderr a hit replays): gcc, cc1
    // and cc1plus read both under -fdiagnostics-urls=always (measured), and on a terminal.
    {"GCC_URLS", E::Keyed, "", false},
    {"TERM_URLS", E::Keyed, "", false},
    // Assembler options cc1plus records for LTO (the driver sets it only when -Wa is given).
    {"COLLECT_AS_OPTIONS", E::Keyed, "", false},
    // __DATE__/__TIME__: kache pins it on a miss and the spec keeps it out of the key (a hit keeps
    // the date it was built with).
    {"SOURCE_DATE_EPOCH", E::Modeled, "", false},
    // Local time of __TIMESTAMP__ (and of __DATE__ when SOURCE_DATE_EPOCH is unset). Keyed verbatim;
    // /etc/localtime is not, and files using __TIMESTAMP__ are the hidden-inputs helper's topic.
    {"TZ", E::Keyed, "", false},
    // Language and character set of diagnostics a hit replays (measured: LC_ALL=C.UTF-8 makes gcc
    // quote with U+2018/2019, C with ').
    {"LC_ALL", E::Keyed, "", false},
    {"LC_CTYPE", E::Keyed, "", false},
    {"LC_MESSAGES", E::Keyed, "", false},
    {"LANG", E::Keyed, "", false},
    {"LANGUAGE", E::Keyed, "", false},
    // cc1plus colours diagnostics only when stderr is a terminal; kache captures it through a pipe.
    {"TERM", E::Inert, "", false},
    // Read only when stderr is a terminal (measured under a pty): the caret line's width (gcc, clang),
    // colour support (gcc's COLORTERM; clang's terminfo lookup: TERMINFO, TERMINFO_DIRS, and HOME for
    // ~/.terminfo, which has no row: rows are withheld from the toolchain probe, and a ccache-wrapped
    // compiler finds its cache through HOME). A miss runs with stderr on kache's pipe, so none reaches a
    // stored result.
    {"COLUMNS", E::Inert, "", false},
    {"LINES", E::Inert, "", false},
    {"COLORTERM", E::Inert, "", false},
    {"TERMINFO", E::Inert, "", false},
    {"TERMINFO_DIRS", E::Inert, "", false},
    // gcc uses it as the working directory only when it names the same directory as getcwd(); the
    // working directory is keyed (through the path roots). A symlinked spelling reaching -g debug
    // info is path normalization's topic.
    {"PWD", E::Modeled, "", false},
    // Where nvcc, cicc and gcc put intermediates: kache's misses use -objtemp, and the temporary
    // names do not reach the object (measured: same object with another TMPDIR).
    {"TMPDIR", E::Inert, "", false},
    {"TMP", E::Inert, "", false},
    {"TEMP", E::Inert, "", false},
    {"TEMPDIR", E::Inert, "", false},
    // gcc's jobserver for -flto=auto, used at link time only.
    {"MAKEFLAGS", E::Inert, "", false},
    // ---- clang's driver (measured with the getenv hook over clang 14 and 19 compiles) ----
    // Edits the driver's own command line (adds, removes, replaces arguments, -o included): a compile
    // kache's planner never saw.
    {"CCC_OVERRIDE_OPTIONS", E::Refused, "env_unmodeled", false},
    // Write the cc1 command line, the included headers, the diagnostics or process statistics to
    // stderr or to a file (CC_PRINT_OPTIONS_FILE, CC_PRINT_HEADERS_FILE, CC_LOG_DIAGNOSTICS_FILE,
    // CC_PRINT_PROC_STAT_FILE, CC_PRINT_INTERNAL_STAT_FILE): outputs kache would not restore.
    {"CC_PRINT_OPTIONS", E::Refused, "env_side_output", false},
    {"CC_PRINT_HEADERS", E::Refused, "env_side_output", false},
    {"CC_LOG_DIAGNOSTICS", E::Refused, "env_side_output", false},
    {"CC_PRINT_PROC_STAT", E::Refused, "env_side_output", false},
    {"CC_PRINT_INTERNAL_STAT", E::Refused, "env_side_output", false},
    // Where clang 19 writes crash reproducers: only a crashed compile, which fails and is never stored.
    {"CLANG_CRASH_DIAGNOSTICS_DIR", E::Inert, "", false},
    // The format of CC_PRINT_HEADERS' list; without CC_PRINT_HEADERS (refused above) nothing is written.
    {"CC_PRINT_HEADERS_FORMAT", E::Inert, "", false},
    // clang 19 skips its default configuration files (<driver dir>/clang.cfg and the like, whose
    // options apply to every compile; the gcc probe hashes them into the toolchain id): keyed.
    {"CLANG_NO_DEFAULT_CONFIG", E::Keyed, "", false},
    // A debugging switch that makes clang crash while emitting a diagnostic: keyed (a crash is a
    // failed compile, never stored, but the variable costs nothing to key).
    {"FORCE_CLANG_DIAGNOSTICS_CRASH", E::Keyed, "", false},
    // clang 19 turns diagnostic colour off when it is set: the stderr a hit replays.
    {"NO_COLOR", E::Keyed, "", false},
    // Objective-C++'s include path, read by clang on every compile; kache passes Objective-C++
    // through (language), keyed like OBJC_INCLUDE_PATH all the same.
    {"OBJCPLUS_INCLUDE_PATH", E::Keyed, "", false},
    // Where clang looks for a ROCm installation: clang 14 for HIP and OpenCL offload only, which kache
    // passes through (language, clang-cuda's --offload-arch); clang 19 also when it prints -v, which
    // only the toolchain probe does, and the probe runs without it.
    {"ROCM_PATH", E::Inert, "", false},
    // clang 19's HIP installation search (gcc/toolchain.cpp, the memo's HIP search) replaces its default
    // roots with this one; it reads it when it prints -v (the toolchain probe's `-E -v`): the memo key.
    {"HIP_PATH", E::Probe, "", false},
};

bool applies(const EnvRule& r, bool nvcc) { return nvcc || !r.nvcc_only; }

bool probe_reads(const EnvRule& r) { return r.effect == E::Probe || r.effect == E::KeyedProbe; }

}  // namespace

std::span<const EnvRule> env_rules() { return kRules; }

const EnvRule* find_env_rule(std::string_view name) {
  for (const auto& r : kRules) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

void add_env_key_fields(const util::Environment& env, bool nvcc,
                        std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& r : kRules) {
    if (!applies(r, nvcc) || (r.effect != E::Keyed && r.effect != E::KeyedProbe)) continue;
    auto v = util::env_get(env, r.name);
    out.emplace_back("env:" + std::string(r.name), v ? "=" + *v : "unset");
  }
}

std::optional<EnvRefusal> env_refusal(const util::Environment& env, bool nvcc) {
  for (const auto& r : kRules) {
    if (applies(r, nvcc) && r.effect == E::Refused && util::env_get(env, r.name)) {
      return EnvRefusal{std::string(r.reason), std::string(r.name)};
    }
  }
  return std::nullopt;
}

util::Environment probe_environment(const util::Environment& env) {
  util::Environment out = env;
  std::erase_if(out, [](const std::string& kv) {
    const EnvRule* r = find_env_rule(std::string_view(kv).substr(0, kv.find('=')));
    return r && !probe_reads(*r);
  });
  return out;
}

std::vector<std::string_view> probe_variables(bool nvcc) {
  std::vector<std::string_view> names;
  for (const auto& r : kRules) {
    if (applies(r, nvcc) && probe_reads(r)) names.push_back(r.name);
  }
  return names;
}

}  // namespace kache::compiler
