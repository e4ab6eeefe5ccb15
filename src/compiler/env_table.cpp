#include "compiler/env_table.hpp"

#include <algorithm>

namespace kache::compiler {

namespace {

using E = EnvEffect;
using R = EnvReader;

// "Measured" below: nvcc 13.0 / g++ 12 with an LD_PRELOAD getenv() hook, `nvcc --dryrun`, and
// compiles compared byte for byte. A variable nobody reads costs nothing: only set ones change keys.
constexpr EnvRule kRules[] = {
    // ---- nvcc's driver ----
    // nvcc splices it before the command line; the planner models its flags and keys it verbatim.
    {"NVCC_PREPEND_FLAGS", E::Modeled, "", R::nvcc},
    // nvcc splices it after the command line; modeled and keyed like NVCC_PREPEND_FLAGS.
    {"NVCC_APPEND_FLAGS", E::Modeled, "", R::nvcc},
    // nvcc's default -ccbin: picks the host compiler the probe resolves (and keyed as written).
    {"NVCC_CCBIN", E::KeyedProbe, "", R::nvcc},
    // nvcc asks for it (measured): nvcc.profile's spelling of -ccbin, so it can pick the host compiler.
    {"compiler-bindir", E::Probe, "", R::nvcc},
    // nvcc appends it to every ptxas command (measured: PTXAS_FLAGS=-O0 changes the object).
    {"PTXAS_FLAGS", E::Keyed, "", R::nvcc},
    // nvcc passes it to ptxas as well (measured: OCG_FLAGS=-O0 lands on the ptxas line).
    {"OCG_FLAGS", E::Keyed, "", R::nvcc},
    // nvcc appends it to the cicc command (measured in --dryrun): device code generation options.
    {"NVVM_FLAGS", E::Keyed, "", R::nvcc},
    // nvcc appends it to the cudafe++ and cicc commands (measured): front-end options.
    {"CUDAFE_FLAGS", E::Keyed, "", R::nvcc},
    // nvcc reads these on every compile (measured) to forward them to its other tools; keyed so a
    // use nvcc 13's -c does not show in --dryrun is still covered.
    {"NVLINK_FLAGS", E::Keyed, "", R::nvcc},
    {"NVASM_FLAGS", E::Keyed, "", R::nvcc},
    {"NVDISASM_FLAGS", E::Keyed, "", R::nvcc},
    {"LLVMC_FLAGS", E::Keyed, "", R::nvcc},
    {"LLVMDIS_FLAGS", E::Keyed, "", R::nvcc},
    // nvcc.profile appends its -I to it and nvcc pastes it into every preprocessing and host command
    // (measured); the probe hashes nvcc's expanded value into the toolchain id and adds its dirs to
    // the search path.
    {"INCLUDES", E::Probe, "", R::nvcc},
    // As INCLUDES, for the -isystem part.
    {"SYSTEM_INCLUDES", E::Probe, "", R::nvcc},
    // nvcc.profile's -L list: appears only on link commands (measured absent from -c); kache caches no link.
    {"LIBRARIES", E::Inert, "", R::nvcc},
    // nvcc.profile variables: the environment's value seeds the profile's expansion (today's profile
    // overrides these with `=`, measured; an edited one may not), and nvcc prints the result as `#$
    // NAME=`, which the probe hashes into the toolchain id.
    {"TOP", E::Probe, "", R::nvcc},
    {"CICC_PATH", E::Probe, "", R::nvcc},
    {"NVVMIR_LIBRARY_DIR", E::Probe, "", R::nvcc},
    {"_HERE_", E::Probe, "", R::nvcc},
    {"_THERE_", E::Probe, "", R::nvcc},
    {"_SPACE_", E::Probe, "", R::nvcc},
    {"_TARGET_DIR_", E::Probe, "", R::nvcc},
    {"_TARGET_SIZE_", E::Probe, "", R::nvcc},
    {"_NVVM_BRANCH_", E::Probe, "", R::nvcc},
    {"_CUDART_", E::Probe, "", R::nvcc},
    // ---- cicc (NVVM) ----
    // cicc's internal option switches and IR version check (measured reads, undocumented): keyed.
    {"NVVMCCWIZ", E::Keyed, "", R::nvcc},
    {"NVVM_IR_VER_CHK", E::Keyed, "", R::nvcc},
    {"NV_NVVM_VERSION", E::Keyed, "", R::nvcc},
    // LLVM's override of the producer string written into the IR (read by clang too, measured: it
    // reaches -flto bitcode).
    {"LLVM_OVERRIDE_PRODUCER", E::Keyed, "", R::host},
    // libNVVM threading switch, read by cicc (measured); keyed as its effect is undocumented.
    {"LIBNVVM_DISABLE_CONCURRENT_API", E::Keyed, "", R::nvcc},
    // cicc's allocator (jemalloc) options: can print statistics to stderr, which a hit replays.
    {"MALLOC_CONF", E::Keyed, "", R::host},
    // cicc and clang (both LLVM) ask for a variable literally named "bar" (measured, undocumented):
    // keyed, whatever it does.
    {"bar", E::Keyed, "", R::host},
    // LLVM MC (cicc's and clang's integrated assembler) appends a log to this file: an output kache
    // would not restore.
    {"AS_SECURE_LOG_FILE", E::Refused, "env_side_output", R::host},
    // ---- cudafe++ / cicc front end (EDG) ----
    // A directory of EDG runtime files whose content kache does not hash.
    {"EDG_BASE", E::Refused, "env_unmodeled", R::nvcc},
    // EDG's C++ modules search path: files kache does not see.
    {"EDG_MODULES_PATH", E::Refused, "env_unmodeled", R::nvcc},
    // EDG's default system include directory: headers outside nvcc's -M closure.
    {"USR_INCLUDE", E::Refused, "env_unmodeled", R::nvcc},
    // Changes the text of EDG's internal-error messages.
    {"EDG_SUPPRESS_ASSERTION_LINE_NUMBER", E::Keyed, "", R::nvcc},
    // Turns off colour in EDG diagnostics (stderr a hit replays).
    {"NOCOLOR", E::Keyed, "", R::nvcc},
    // ---- ptxas / nvlink ----
    // ptxas writes its option knobs to a file: an output kache would not restore.
    {"DUMP_KNOBS_TO_FILE", E::Refused, "env_side_output", R::nvcc},
    // Read by ptxas and nvlink (measured, undocumented): keyed.
    {"CAN_FINALIZE_DEBUG", E::Keyed, "", R::nvcc},
    // ---- loader (every dynamically linked tool: nvcc, cicc, ptxas, gcc, ...) ----
    // Picks the shared libraries the tools load (nvcc.profile prepends the toolkit's lib/); the probe
    // runs the host compiler with it, so it is part of the probe memo's key too.
    {"LD_LIBRARY_PATH", E::KeyedProbe, "", R::host},
    // Code injected into every tool; the library's content is not hashed, its path is keyed.
    {"LD_PRELOAD", E::Keyed, "", R::host},
    // ---- search path ----
    // nvcc resolves the host compiler and its tools through it (after nvcc.profile's directories);
    // the resolved files' identity and content are in the toolchain id, so PATH itself is not keyed:
    // two PATHs that find the same tools share entries.
    {"PATH", E::Probe, "", R::host},
    // ---- GCC (driver, cc1plus) ----
    // Include directories cc1plus adds (measured reads); the adapter also adds them to the search path.
    {"CPATH", E::Keyed, "", R::host},
    {"CPLUS_INCLUDE_PATH", E::Keyed, "", R::host},
    // C's include path: read by cc1 (a C compile of a future gcc adapter), keyed for both.
    {"C_INCLUDE_PATH", E::Keyed, "", R::host},
    // Objective-C's include path: read by cc1obj only; keyed so a gcc adapter is covered.
    {"OBJC_INCLUDE_PATH", E::Keyed, "", R::host},
    // Where gcc finds cc1plus, as and its own headers: changes the probe's include dirs as well.
    {"GCC_EXEC_PREFIX", E::KeyedProbe, "", R::host},
    // Extra directories gcc searches for cc1plus and as.
    {"COMPILER_PATH", E::KeyedProbe, "", R::host},
    // Relocate gcc's configured prefixes (prefix.c's @GCC/@G++/@BINUTILS): include dirs and tools.
    {"GCC_ROOT", E::KeyedProbe, "", R::host},
    {"G++_ROOT", E::KeyedProbe, "", R::host},
    {"BINUTILS_ROOT", E::KeyedProbe, "", R::host},
    // Library search path of gcc's link step only; kache caches compiles.
    {"LIBRARY_PATH", E::Inert, "", R::host},
    {"LPATH", E::Inert, "", R::host},
    // Makes cc1plus write a second dependency file kache would not restore.
    {"DEPENDENCIES_OUTPUT", E::Refused, "env_depfile", R::host},
    // As DEPENDENCIES_OUTPUT, with system headers.
    {"SUNPRO_DEPENDENCIES", E::Refused, "env_depfile", R::host},
    // gcc compiles twice and compares (-fcompare-debug): can fail the build and leaves dump files.
    {"GCC_COMPARE_DEBUG", E::Refused, "env_unmodeled", R::host},
    // Adds machine-readable fix-it hints to the diagnostics a hit replays.
    {"GCC_EXTRA_DIAGNOSTIC_OUTPUT", E::Keyed, "", R::host},
    // Colour escapes of diagnostics under -fdiagnostics-color=always.
    {"GCC_COLORS", E::Keyed, "", R::host},
    // Whether and how diagnostics embed URLs (escape sequences in the stderr a hit replays): gcc, cc1
    // and cc1plus read both under -fdiagnostics-urls=always (measured), and on a terminal.
    {"GCC_URLS", E::Keyed, "", R::host},
    {"TERM_URLS", E::Keyed, "", R::host},
    // Assembler options cc1plus records for LTO (the driver sets it only when -Wa is given).
    {"COLLECT_AS_OPTIONS", E::Keyed, "", R::host},
    // __DATE__/__TIME__: kache pins it on an nvcc miss and the spec keeps it out of the key (a hit
    // keeps the date it was built with); the gcc adapter keys the build's own value and pins nothing.
    {"SOURCE_DATE_EPOCH", E::Modeled, "", R::host},
    // Local time of __TIMESTAMP__ (and of __DATE__ when SOURCE_DATE_EPOCH is unset). Keyed verbatim;
    // /etc/localtime is not, and files using __TIMESTAMP__ are the hidden-inputs helper's topic.
    {"TZ", E::Keyed, "", R::host},
    // Language and character set of diagnostics a hit replays (measured: LC_ALL=C.UTF-8 makes gcc
    // quote with U+2018/2019, C with ').
    {"LC_ALL", E::Keyed, "", R::host},
    {"LC_CTYPE", E::Keyed, "", R::host},
    {"LC_MESSAGES", E::Keyed, "", R::host},
    {"LANG", E::Keyed, "", R::host},
    {"LANGUAGE", E::Keyed, "", R::host},
    // cc1plus colours diagnostics only when stderr is a terminal; kache captures it through a pipe.
    {"TERM", E::Inert, "", R::host},
    // Read only when stderr is a terminal (measured under a pty): the caret line's width (gcc, clang),
    // colour support (gcc's COLORTERM; clang's terminfo lookup: TERMINFO, TERMINFO_DIRS, and HOME for
    // ~/.terminfo, which has no row: rows are withheld from the toolchain probe, and a ccache-wrapped
    // compiler finds its cache through HOME). A miss runs with stderr on kache's pipe, so none reaches a
    // stored result.
    {"COLUMNS", E::Inert, "", R::host},
    {"LINES", E::Inert, "", R::host},
    {"COLORTERM", E::Inert, "", R::host},
    {"TERMINFO", E::Inert, "", R::host},
    {"TERMINFO_DIRS", E::Inert, "", R::host},
    // gcc uses it as the working directory only when it names the same directory as getcwd(); the
    // working directory is keyed (through the path roots). A symlinked spelling reaching -g debug
    // info is path normalization's topic.
    {"PWD", E::Modeled, "", R::host},
    // Where nvcc, cicc and gcc put intermediates: kache's misses use -objtemp, and the temporary
    // names do not reach the object (measured: same object with another TMPDIR).
    {"TMPDIR", E::Inert, "", R::host},
    {"TMP", E::Inert, "", R::host},
    {"TEMP", E::Inert, "", R::host},
    {"TEMPDIR", E::Inert, "", R::host},
    // gcc's jobserver for -flto=auto, used at link time only.
    {"MAKEFLAGS", E::Inert, "", R::host},
    // ---- clang's driver (measured with the getenv hook over clang 14 and 19 compiles) ----
    // Edits the driver's own command line (adds, removes, replaces arguments, -o included): a compile
    // kache's planner never saw.
    {"CCC_OVERRIDE_OPTIONS", E::Refused, "env_unmodeled", R::host},
    // Write the cc1 command line, the included headers, the diagnostics or process statistics to
    // stderr or to a file (CC_PRINT_OPTIONS_FILE, CC_PRINT_HEADERS_FILE, CC_LOG_DIAGNOSTICS_FILE,
    // CC_PRINT_PROC_STAT_FILE, CC_PRINT_INTERNAL_STAT_FILE): outputs kache would not restore.
    {"CC_PRINT_OPTIONS", E::Refused, "env_side_output", R::host},
    {"CC_PRINT_HEADERS", E::Refused, "env_side_output", R::host},
    {"CC_LOG_DIAGNOSTICS", E::Refused, "env_side_output", R::host},
    {"CC_PRINT_PROC_STAT", E::Refused, "env_side_output", R::host},
    {"CC_PRINT_INTERNAL_STAT", E::Refused, "env_side_output", R::host},
    // Where clang 19 writes crash reproducers: only a crashed compile, which fails and is never stored.
    {"CLANG_CRASH_DIAGNOSTICS_DIR", E::Inert, "", R::host},
    // The format of CC_PRINT_HEADERS' list; without CC_PRINT_HEADERS (refused above) nothing is written.
    {"CC_PRINT_HEADERS_FORMAT", E::Inert, "", R::host},
    // clang 19 skips its default configuration files (<driver dir>/clang.cfg and the like, whose
    // options apply to every compile; the gcc probe hashes them into the toolchain id): keyed.
    {"CLANG_NO_DEFAULT_CONFIG", E::Keyed, "", R::host},
    // A debugging switch that makes clang crash while emitting a diagnostic: keyed (a crash is a
    // failed compile, never stored, but the variable costs nothing to key).
    {"FORCE_CLANG_DIAGNOSTICS_CRASH", E::Keyed, "", R::host},
    // clang 19 turns diagnostic colour off when it is set: the stderr a hit replays.
    {"NO_COLOR", E::Keyed, "", R::host},
    // Objective-C++'s include path, read by clang on every compile; kache passes Objective-C++
    // through (language), keyed like OBJC_INCLUDE_PATH all the same.
    {"OBJCPLUS_INCLUDE_PATH", E::Keyed, "", R::host},
    // Where clang looks for a ROCm installation: clang 14 for HIP and OpenCL offload only (the hip rows
    // below decide it there; the host route passes OpenCL through: language); clang 19 also when it
    // prints -v, which only the toolchain probe does, and the probe runs without it.
    {"ROCM_PATH", E::Inert, "", R::host},
    // clang 19's HIP installation search (gcc/toolchain.cpp, the memo's HIP search) replaces its default
    // roots with this one; it reads it when it prints -v (the toolchain probe's `-E -v`): the memo key.
    {"HIP_PATH", E::Probe, "", R::host},
    // ---- clang's HIP driver and the ROCm programs it runs (measured with the getenv hook over hipcc
    // --genco/-c and clang++-15 -x hip -c: clang, lld, clang-offload-bundler) ----
    // clang's ROCm installation search (device libraries, --hip-version, include dirs) and hipvars.pm's
    // root (its default HIP_CLANG_PATH, HSA_PATH, the bitcode directory hipcc.pl picks): keyed as written,
    // and the probe (clang's -### plan, hipcc's clang line, the bitcode files, the include dirs) runs
    // with it, so it keys the probe memo.
    {"ROCM_PATH", E::KeyedProbe, "", R::hip},
    // clang's HIP installation (include/hip, the version files) and hipvars.pm's HIP root (its
    // HIP_CLANG_PATH, HIP_INCLUDE_PATH, ROCm root default): as ROCM_PATH.
    {"HIP_PATH", E::KeyedProbe, "", R::hip},
    // clang's device library directory when no --hip-device-lib-path/--rocm-device-lib-path is given
    // (measured read on every HIP compile): picks the bitcode every target links, which the probe keys.
    {"HIP_DEVICE_LIB_PATH", E::KeyedProbe, "", R::hip},
    // lld writes a reproducer archive of the device link: an output kache would not restore.
    {"LLD_REPRODUCE", E::Refused, "env_side_output", R::hip},
    // lld's version string, which it writes into the code object's .comment section.
    {"LLD_VERSION", E::Keyed, "", R::hip},
    // lld's test mode: changes its diagnostics and exit path (measured read on every device link).
    {"LLD_IN_TEST", E::Keyed, "", R::hip},
    // ---- hipcc.pl and hipvars.pm (their $ENV{...}, hipcc 5.2) ----
    // hipvars.pm's clang directory (HIP_CLANG_PATH/clang++ is the compiler hipcc runs; hipvars.pm
    // overrides it with $HIP_ROCCLR_HOME/bin when HIP_PATH/bin/clang exists): the probe's clang line and
    // the clang's own probe key what it picks; keyed as written too.
    {"HIP_CLANG_PATH", E::KeyedProbe, "", R::hipcc},
    // hipvars.pm: "amd" or "nvidia" (then hipcc runs nvcc); unset, it guesses from which compiler runs.
    {"HIP_PLATFORM", E::KeyedProbe, "", R::hipcc},
    // hipvars.pm: overrides .hipInfo's HIP_COMPILER and HIP_RUNTIME, which pick hipcc's flags.
    {"HIP_COMPILER", E::KeyedProbe, "", R::hipcc},
    {"HIP_RUNTIME", E::KeyedProbe, "", R::hipcc},
    // hipvars.pm: the ROCclr root (its .hipInfo, lib/bitcode, bin/clang decide the clang and the bitcode).
    {"HIP_ROCCLR_HOME", E::KeyedProbe, "", R::hipcc},
    // hipcc.pl adds -isystem $HSA_PATH/include (before the user's -isystem): the probe's include dirs
    // (the absent-path watch) and its clang line key it.
    {"HSA_PATH", E::KeyedProbe, "", R::hipcc},
    // hipvars.pm/hipcc.pl: the CUDA root of HIP_PLATFORM=nvidia (hipcc runs $CUDA_PATH/bin/nvcc).
    {"CUDA_PATH", E::KeyedProbe, "", R::hipcc},
    // hipcc.pl: -L of a link (not a compile); it also names the library dir of hipcc's clang line.
    {"HIP_LIB_PATH", E::KeyedProbe, "", R::hipcc},
    // hipcc.pl passes --hip-device-lib-path=$DEVICE_LIB_PATH: the bitcode every target links.
    {"DEVICE_LIB_PATH", E::KeyedProbe, "", R::hipcc},
    // hipcc.pl adds -Xclang -fallow-half-arguments-and-returns -D__HIP_HCC_COMPAT_MODE__=1 when true.
    {"HIP_CLANG_HCC_COMPAT_MODE", E::KeyedProbe, "", R::hipcc},
    // hipcc.pl: "0" compiles .cpp/.cxx/.cc/.C as C++ instead of HIP (-x hip): another language.
    {"HIP_COMPILE_CXX_AS_HIP", E::KeyedProbe, "", R::hipcc},
    // hipcc.pl takes the targets from it when the command line names none: targets the planner does
    // not see (the machine's choice, as rocm_agent_enumerator's).
    {"HCC_AMDGPU_TARGET", E::Refused, "offload-target-machine", R::hipcc},
    // hipcc.pl pastes them into the command line it hands /bin/sh: $VAR, $(...) and globs are expanded
    // there, after any text kache keys, and the words never reach the planner. Empty (or unset) they
    // add nothing, and are keyed.
    {"HIPCC_COMPILE_FLAGS_APPEND", E::RefusedNonEmpty, "env-flags-shell", R::hipcc},
    {"HIPCC_LINK_FLAGS_APPEND", E::RefusedNonEmpty, "env-flags-shell", R::hipcc},
    // hipcc.pl prints its commands (0x1), paths (0x2) and arguments (0x4) to stdout: on a miss they name
    // kache's scratch files. The adapter passes through (env-verbose) when the value may print and keys
    // it verbatim otherwise; the probe sets it itself (1, for the clang line).
    {"HIPCC_VERBOSE", E::Modeled, "", R::hipcc},
    // Newer hipcc (not 5.2) runs the clang through this program (e.g. a cache): keyed as written.
    {"HIP_CLANG_LAUNCHER", E::KeyedProbe, "", R::hipcc},
    // ---- Perl, which runs hipcc and hipcc.pl (measured with the getenv hook: perl asks for these) ----
    // Directories searched before Perl's own library, and options (-M modules, -I dirs) added to every
    // run: a module there (File/Basename.pm, hipvars.pm...) changes what hipcc does, and kache hashes no
    // file of them.
    {"PERL5LIB", E::Refused, "env_unmodeled", R::hipcc},
    {"PERLLIB", E::Refused, "env_unmodeled", R::hipcc},
    {"PERL5OPT", E::Refused, "env_unmodeled", R::hipcc},
    // Adds the working directory to @INC: its modules, which kache does not hash, could be loaded.
    {"PERL_USE_UNSAFE_INC", E::Refused, "env_unmodeled", R::hipcc},
    // The debugger's command, read only under -d, which only PERL5OPT (refused) could give: keyed.
    {"PERL5DB", E::Keyed, "", R::hipcc},
    // I/O layers and Unicode handling of hipcc's reads and prints (the clang line it builds).
    {"PERLIO", E::Keyed, "", R::hipcc},
    {"PERL_UNICODE", E::Keyed, "", R::hipcc},
    // Hash order (hipcc iterates hashes), its debug print to stderr, and Perl's random seed.
    {"PERL_HASH_SEED", E::Keyed, "", R::hipcc},
    {"PERL_PERTURB_KEYS", E::Keyed, "", R::hipcc},
    {"PERL_HASH_SEED_DEBUG", E::Keyed, "", R::hipcc},
    {"PERL_INTERNAL_RAND_SEED", E::Keyed, "", R::hipcc},
    // Locale start-up and its warning on stderr (PERL_BADLANG), signal delivery, dynamic loading,
    // global destruction: read by every perl run (measured), keyed as their effect is not measured.
    {"PERL_SKIP_LOCALE_INIT", E::Keyed, "", R::hipcc},
    {"PERL_BADLANG", E::Keyed, "", R::hipcc},
    {"PERL_SIGNALS", E::Keyed, "", R::hipcc},
    {"PERL_DL_NONLAZY", E::Keyed, "", R::hipcc},
    {"PERL_DESTRUCT_LEVEL", E::Keyed, "", R::hipcc},
    // Debian's perl asks for it (package upgrades: quiets its @INC warnings): keyed.
    {"DPKG_RUNNING_VERSION", E::Keyed, "", R::hipcc},
    // Perl's locale categories (the host rows key LANG, LANGUAGE, LC_ALL, LC_CTYPE and LC_MESSAGES):
    // perl initializes every category at start-up; hipcc formats no number or date, keyed all the same.
    {"LC_ADDRESS", E::Keyed, "", R::hipcc},
    {"LC_COLLATE", E::Keyed, "", R::hipcc},
    {"LC_IDENTIFICATION", E::Keyed, "", R::hipcc},
    {"LC_MEASUREMENT", E::Keyed, "", R::hipcc},
    {"LC_MONETARY", E::Keyed, "", R::hipcc},
    {"LC_NUMERIC", E::Keyed, "", R::hipcc},
    {"LC_PAPER", E::Keyed, "", R::hipcc},
    {"LC_TELEPHONE", E::Keyed, "", R::hipcc},
    {"LC_TIME", E::Keyed, "", R::hipcc},
};

bool reads(EnvReader reader, EnvRoute route) {
  switch (reader) {
    case R::host:
      return true;
    case R::nvcc:
      return route == EnvRoute::nvcc;
    case R::hip:
      return route == EnvRoute::clang_hip || route == EnvRoute::hipcc;
    case R::hipcc:
      return route == EnvRoute::hipcc;
  }
  return false;
}

// hipcc over hip over host; nvcc and hip rows never apply to the same route.
int specificity(EnvReader reader) { return reader == R::host ? 0 : reader == R::hipcc ? 2 : 1; }

// Whether r is the row deciding its variable on route (no more specific row of the name applies).
bool decides(const EnvRule& r, EnvRoute route) {
  if (!reads(r.reader, route)) return false;
  return std::none_of(std::begin(kRules), std::end(kRules), [&](const EnvRule& o) {
    return o.name == r.name && reads(o.reader, route) && specificity(o.reader) > specificity(r.reader);
  });
}

bool probe_reads(const EnvRule& r) { return r.effect == E::Probe || r.effect == E::KeyedProbe; }

bool keyed(const EnvRule& r) { return r.effect == E::Keyed || r.effect == E::KeyedProbe || r.effect == E::RefusedNonEmpty; }

}  // namespace

std::string_view reader_name(EnvReader reader) {
  switch (reader) {
    case R::host:
      return "host";
    case R::nvcc:
      return "nvcc";
    case R::hip:
      return "hip";
    case R::hipcc:
      return "hipcc";
  }
  return "?";
}

std::span<const EnvRule> env_rules() { return kRules; }

const EnvRule* find_env_rule(std::string_view name, EnvRoute route) {
  for (const auto& r : kRules) {
    if (r.name == name && decides(r, route)) return &r;
  }
  return nullptr;
}

void add_env_key_fields(const util::Environment& env, EnvRoute route,
                        std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& r : kRules) {
    if (!keyed(r) || !decides(r, route)) continue;
    auto v = util::env_get(env, r.name);
    out.emplace_back("env:" + std::string(r.name), v ? "=" + *v : "unset");
  }
}

std::optional<EnvRefusal> env_refusal(const util::Environment& env, EnvRoute route) {
  for (const auto& r : kRules) {
    if (r.effect != E::Refused && r.effect != E::RefusedNonEmpty) continue;
    const auto v = util::env_get(env, r.name);
    if (!v || (r.effect == E::RefusedNonEmpty && v->empty()) || !decides(r, route)) continue;
    return EnvRefusal{std::string(r.reason), std::string(r.name)};
  }
  return std::nullopt;
}

util::Environment probe_environment(const util::Environment& env) {
  util::Environment out = env;
  std::erase_if(out, [](const std::string& kv) {
    const std::string_view name = std::string_view(kv).substr(0, kv.find('='));
    const EnvRule* r = find_env_rule(name, EnvRoute::nvcc);
    return r && !probe_reads(*r);
  });
  return out;
}

std::vector<std::string_view> probe_variables(EnvRoute route) {
  std::vector<std::string_view> names;
  for (const auto& r : kRules) {
    if (probe_reads(r) && decides(r, route)) names.push_back(r.name);
  }
  return names;
}

}  // namespace kache::compiler
