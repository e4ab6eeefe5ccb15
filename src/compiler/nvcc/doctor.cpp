#include "compiler/nvcc/doctor.hpp"

#include <dlfcn.h>

#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "compiler/argument_facts.hpp"
#include "compiler/env_table.hpp"
#include "compiler/gcc/doctor.hpp"
#include "compiler/nvcc/adapter.hpp"
#include "compiler/nvcc/plan.hpp"
#include "compiler/nvcc/toolchain.hpp"
#include "util/fs.hpp"
#include "util/shell_words.hpp"
#include "util/text.hpp"

namespace kache::compiler::nvcc {

namespace {

// The flags of an NVCC_*_FLAGS variable by name only ("-DAPI_KEY -G"): doctor's rows are pasted into
// bug reports, and a define's value may be a token.
std::string flag_names(std::string_view words) {
  std::string out;
  for (const std::string& word : util::split_shell_words(words).texts()) {
    if (!out.empty()) out += ' ';
    out += argument_name(word);
  }
  return out;
}

using core::DoctorRows;
using Status = core::DoctorStatus;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string read_or_empty(const std::string& path) {
  try {
    return util::read_file(path);
  } catch (const std::exception&) {
    return "";
  }
}

// The `#if` line that guards the first line containing `error_text`.
std::optional<std::string> guard_of(const std::string& text, std::string_view error_text) {
  const std::size_t at = text.find(error_text);
  if (at == std::string::npos) return std::nullopt;
  std::size_t line_start = text.rfind('\n', at);
  while (line_start != std::string::npos && line_start > 0) {
    const std::size_t prev = text.rfind('\n', line_start - 1);
    const std::size_t begin = prev == std::string::npos ? 0 : prev + 1;
    std::string line = text.substr(begin, line_start - begin);
    const std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 3, "#if") == 0) return line;
    if (prev == std::string::npos) break;
    line_start = prev;
  }
  return std::nullopt;
}

// "release 13.0, V13.0.88" -> {13, 0}.
std::optional<std::pair<int, int>> toolkit_release(const std::string& version_text) {
  std::smatch m;
  if (!std::regex_search(version_text, m, std::regex(R"(release (\d+)\.(\d+))"))) return std::nullopt;
  return std::make_pair(std::stoi(m[1].str()), std::stoi(m[2].str()));
}

// The host compiler's predefined macros, with the C library's (features.h) when it has one.
std::map<std::string, std::string> host_macros(const std::string& host, const util::Environment& env) {
  std::map<std::string, std::string> out;
  auto r = util::run_capture(host, {host, "-E", "-dM", "-x", "c++", "-include", "features.h", "/dev/null"}, env);
  if (!r.ok()) r = util::run_capture(host, {host, "-E", "-dM", "-x", "c++", "/dev/null"}, env);
  if (!r.ok()) return out;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("#define ")) continue;
    const std::string rest = line.substr(8);
    const std::size_t sp = rest.find(' ');
    if (sp == std::string::npos) continue;
    out[rest.substr(0, sp)] = rest.substr(sp + 1);
  }
  return out;
}

int macro_int(const std::map<std::string, std::string>& m, const std::string& name, int fallback = -1) {
  auto it = m.find(name);
  if (it == m.end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    return fallback;
  }
}

// The host compiler nvcc would run, as its dry run names it; "" (with a failed row) when there is none.
std::string host_compiler_of(DoctorRows& rows, const DryRun& run, const util::ProcessResult& dr,
                             const std::string& path_var) {
  if (!dr.ok() || run.host_word.empty()) {
    rows.add("toolchain", "host-compiler", Status::fail, "unknown",
             fmt::format("nvcc --dryrun names no host compiler: {}.", first_line(dr.err)),
             "pass -ccbin with a host compiler nvcc supports (or set NVCC_CCBIN)");
    return "";
  }
  std::string host = run.host_word;
  const std::string search_path = run.vars.count("PATH") ? run.vars.at("PATH") : path_var;
  if (host.find('/') == std::string::npos) host = util::find_executable(host, search_path).value_or("");
  // The compiler kache's masquerade runs, past kache, as the probe keys it (not the masquerade's path).
  if (!host.empty() && is_masquerade(host)) {
    host = util::find_executable(util::basename(host), search_path, util::self_executable()).value_or("");
  }
  if (host.empty()) {
    rows.add("toolchain", "host-compiler", Status::fail, run.host_word,
             fmt::format("nvcc would run the host compiler '{}', which is not on its PATH.", run.host_word),
             "install it, or pass -ccbin with a host compiler nvcc supports");
    return "";
  }
  return host;
}

// The first of nvcc's include directories that holds name, as a normal path; "" when none does.
std::string first_in_include_dirs(const std::vector<std::string>& include_dirs, const std::string& name) {
  for (const auto& dir : include_dirs) {
    const std::string path = util::join_path(dir, name);
    if (util::exists(path)) return util::lexically_normal(path);
  }
  return "";
}

// nvcc itself: absent (a row), or its path and release. nullopt ends the toolchain rows.
std::optional<std::string> nvcc_of(DoctorRows& rows, const ToolkitQuery& q, const std::string& path_var) {
  auto nvcc = util::find_executable(q.nvcc_arg, path_var, util::self_executable());
  if (nvcc) return util::absolute_path(*nvcc, util::current_dir());
  if (!q.nvcc_named && q.c_compilers_found) {
    // A C/C++ user: nothing in use is broken.
    rows.add("toolchain", "nvcc", Status::warn, "not found",
             "there is no nvcc on PATH, so only C and C++ compiles are cached (kache nvcc would not run).",
             "nothing to do for C and C++; for CUDA put the toolkit's bin directory on PATH");
  } else {
    rows.add("toolchain", "nvcc", Status::fail, "not found",
             fmt::format("kache nvcc cannot run: there is no executable '{}'{}.", q.nvcc_arg,
                         q.nvcc_arg.find('/') == std::string::npos ? " on PATH" : ""),
             "put the CUDA toolkit's bin directory on PATH, or name nvcc with --nvcc PATH");
  }
  return std::nullopt;
}

// The host compiler's row and its version facts (macros); false when there is no host compiler.
void host_compiler_rows(DoctorRows& rows, const DryRun& run, const std::string& host, const util::Environment& env,
                        const std::pair<int, int>& release) {
  const auto macros = host_macros(host, env);
  const bool clang = macros.count("__clang__") > 0;
  const int major = clang ? macro_int(macros, "__clang_major__") : macro_int(macros, "__GNUC__");
  const std::string host_version = clang ? fmt::format("clang {}.{}", major, macro_int(macros, "__clang_minor__"))
                                         : fmt::format("gcc {}.{}.{}", major, macro_int(macros, "__GNUC_MINOR__"),
                                                       macro_int(macros, "__GNUC_PATCHLEVEL__"));
  rows.add("toolchain", "host-compiler", major < 0 ? Status::warn : Status::ok,
           fmt::format("{} at {}", host_version, host),
           major < 0 ? "the host compiler's version could not be read." : "",
           major < 0 ? "check that it runs: " + host + " -E -dM -x c++ /dev/null" : "");
  const std::vector<std::string> include_dirs = dry_run_include_dirs(run);
  host_bound_row(rows, include_dirs, clang, major);
  glibc_row(rows, include_dirs, macros, release);
}

}  // namespace

std::optional<int> newest_host_major(const std::string& host_config, bool clang) {
  const auto guard =
      guard_of(host_config, clang ? "#error -- unsupported clang version!" : "#error -- unsupported GNU version!");
  if (!guard) return std::nullopt;
  const std::regex upper(clang ? R"(__clang_major__\s*(>=|>)\s*(\d+))" : R"(__GNUC__\s*(>=|>)\s*(\d+))");
  std::smatch m;
  if (!std::regex_search(*guard, m, upper)) return std::nullopt;
  const int n = std::stoi(m[2].str());
  return m[1].str() == ">=" ? n - 1 : n;
}

std::optional<bool> math_functions_lacks_noexcept(const std::string& math_functions) {
  // The declaration of the double-precision cospi, up to its ';'.
  const std::regex decl(R"(\bcospi\s*\(\s*double\b[^;]*;)");
  std::smatch m;
  if (!std::regex_search(math_functions, m, decl)) return std::nullopt;
  const std::string d = m.str();
  for (const char* spec : {"noexcept", "__THROW", "EXCEPTION_SPECIFIER", "throw()"}) {
    if (d.find(spec) != std::string::npos) return false;
  }
  return true;
}

// The bound nvcc itself enforces on the host compiler's major version, read from the header nvcc
// includes first.
void host_bound_row(DoctorRows& rows, const std::vector<std::string>& include_dirs, bool clang, int major) {
  const std::string host_config_path = first_in_include_dirs(include_dirs, "crt/host_config.h");
  const std::string compiler_word = clang ? "clang" : "gcc";
  if (host_config_path.empty()) {
    rows.add("toolchain", "host-compiler-bound", Status::warn, "unknown",
             "nvcc's include directories hold no crt/host_config.h, so the supported host compilers are unknown.",
             "check the toolkit installation (its include/crt/)");
  } else if (auto bound = newest_host_major(read_or_empty(host_config_path), clang); !bound) {
    rows.add("toolchain", "host-compiler-bound", Status::warn, host_config_path,
             fmt::format("{} states no {} version bound that kache can read.", host_config_path, compiler_word),
             "compare the host compiler with the toolkit's release notes");
  } else if (major > *bound) {
    rows.add("toolchain", "host-compiler-bound", Status::fail,
             fmt::format("{} {} > {} (newest in {})", compiler_word, major, *bound, host_config_path),
             fmt::format("{} {} is newer than {} {}, the newest this nvcc accepts, so every compile stops at "
                         "crt/host_config.h ('unsupported {} version').",
                         compiler_word, major, compiler_word, *bound, clang ? "clang" : "GNU"),
             fmt::format("pass -ccbin naming a {} {} or older (or set NVCC_CCBIN), or use a newer CUDA toolkit",
                         compiler_word, *bound));
  } else {
    rows.add("toolchain", "host-compiler-bound", Status::ok,
             fmt::format("{} {} <= {} (newest in {})", compiler_word, major, *bound, host_config_path));
  }
}

// The C library, and the CUDA 12.x math_functions.h clash with glibc >= 2.41.
void glibc_row(DoctorRows& rows, const std::vector<std::string>& include_dirs,
               const std::map<std::string, std::string>& macros, const std::pair<int, int>& release) {
  const std::string math_functions_path = first_in_include_dirs(include_dirs, "crt/math_functions.h");
  const int glibc_major = macro_int(macros, "__GLIBC__"), glibc_minor = macro_int(macros, "__GLIBC_MINOR__");
  if (glibc_major < 0) {
    rows.add("toolchain", "glibc", Status::ok, "not glibc (no __GLIBC__ from features.h)");
    return;
  }
  const bool new_glibc = glibc_major > 2 || (glibc_major == 2 && glibc_minor >= 41);
  // Plain booleans, not the optional itself: GCC 12 -O3 reports a read of the optional's flag as
  // maybe-uninitialized (a false positive that -Werror would turn into a failed Release build).
  const std::optional<bool> answer =
      math_functions_path.empty() ? std::nullopt : math_functions_lacks_noexcept(read_or_empty(math_functions_path));
  const bool declared = answer.has_value();
  const bool lacks_noexcept = declared && *answer;
  const std::string glibc = fmt::format("glibc {}.{}", glibc_major, glibc_minor);
  if (new_glibc && lacks_noexcept) {
    rows.add("toolchain", "glibc", Status::fail, fmt::format("{} with {}", glibc, math_functions_path),
             fmt::format("CUDA {}.{}'s crt/math_functions.h declares cospi, sinpi and rsqrt without the noexcept {} "
                         "gives them, so every compile that includes <cmath> stops with 'exception specification is "
                         "incompatible'.",
                         release.first, release.second, glibc),
             "use a CUDA 13.x toolkit (or a host compiler whose sysroot has glibc older than 2.41)");
  } else {
    rows.add(
        "toolchain", "glibc", Status::ok,
        fmt::format("{}; {}", glibc,
                    math_functions_path.empty() ? "no crt/math_functions.h in nvcc's include directories"
                    : !declared                 ? "math_functions.h: no host cospi declaration found"
                    : lacks_noexcept ? "math_functions.h lacks noexcept on cospi/sinpi/rsqrt, harmless below glibc 2.41"
                                     : "math_functions.h declares cospi/sinpi/rsqrt with an exception specification"));
  }
}

std::optional<std::pair<int, int>> doctor_rows(DoctorRows& rows, const ToolkitQuery& q, const util::Environment& env) {
  const std::string path_var = util::env_get(env, "PATH").value_or("");
  const std::optional<std::string> nvcc = nvcc_of(rows, q, path_var);
  if (!nvcc) return std::nullopt;
  const auto version = util::run_capture(*nvcc, {*nvcc, "--version"}, env);
  std::smatch m;
  std::string long_version;
  if (std::regex_search(version.out, m, std::regex(R"(V\d+\.\d+\.\d+)"))) long_version = m.str();
  const auto release = toolkit_release(version.out);
  if (!version.ok() || !release) {
    rows.add("toolchain", "nvcc", Status::fail, *nvcc, fmt::format("{} --version did not report a CUDA release.", *nvcc),
             "check the toolkit installation (nvcc --version must work)");
    return std::nullopt;
  }
  std::vector<std::string> dry = {*nvcc, "--dryrun", "-c", util::join_path(q.scratch, "probe.cu"),
                                  "-o", util::join_path(q.scratch, "probe.o")};
  if (q.ccbin) dry.insert(dry.end(), {"-ccbin", *q.ccbin});
  const auto dr = util::run_capture(*nvcc, dry, env);
  const DryRun run = read_dry_run(dr.err + dr.out);
  const std::string home = run.vars.count("_HERE_") ? run.vars.at("_HERE_") : util::dirname(*nvcc);
  rows.add("toolchain", "nvcc", Status::ok,
           fmt::format("CUDA {}.{} ({}) at {}{}", release->first, release->second, long_version, *nvcc,
                       util::lexically_normal(home) == util::dirname(*nvcc) ? "" : " (runs " + home + "/nvcc)"));
  const std::string host = host_compiler_of(rows, run, dr, path_var);
  if (!host.empty()) host_compiler_rows(rows, run, host, env, *release);
  return release;
}

// cuDriverGetVersion's answer: > 0, 0 when libcuda.so.1 cannot be loaded, -1 when it does not answer.
int driver_version_here() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return 0;
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(::dlsym(lib, "cuDriverGetVersion"));
  int v = 0;
  if (get == nullptr || get(&v) != 0 || v <= 0) v = -1;
  ::dlclose(lib);
  return v;
}

// The driver, asked through its own library; none is a fact (compiling needs no driver).
void driver_rows(DoctorRows& rows, const std::optional<std::pair<int, int>>& release, const std::optional<int>& answer,
                 const std::string& failure) {
  if (!answer) {
    rows.add("driver", "driver", Status::warn, "unknown",
             fmt::format("libcuda.so.1 could not be asked for its version ({}).", failure),
             "run nvidia-smi to see the driver; a kache built on this machine can ask it");
    return;
  }
  if (*answer == 0) {
    rows.add("driver", "driver", Status::ok, "none (libcuda.so.1 cannot be loaded)",
             release ? fmt::format("compiling needs no driver; running CUDA {}.{} objects needs one for CUDA >= {}.0",
                                   release->first, release->second, release->first)
                     : "compiling needs no driver");
    return;
  }
  const int v = *answer;
  if (v < 0) {
    rows.add("driver", "driver", Status::warn, "libcuda.so.1 loaded, version unknown",
             "libcuda.so.1 does not answer cuDriverGetVersion.", "reinstall the NVIDIA driver");
    return;
  }
  const int major = v / 1000, minor = (v % 1000) / 10;
  const std::string fact = fmt::format("CUDA {}.{} (cuDriverGetVersion {})", major, minor, v);
  if (!release) {
    rows.add("driver", "driver", Status::ok, fact);
    return;
  }
  // Minor-version compatibility: a toolkit X.y runs on any driver for X.0 or later.
  if (major < release->first) {
    rows.add("driver", "driver", Status::fail, fact,
             fmt::format("objects from CUDA {}.{} need a driver for CUDA >= {}.0, and this machine has {}.{}.",
                         release->first, release->second, release->first, major, minor),
             fmt::format("install an NVIDIA driver for CUDA {}.0 or newer, or compile with a CUDA {}.x toolkit",
                         release->first, major));
  } else if (major == release->first && minor < release->second) {
    rows.add(
        "driver", "driver", Status::warn, fact,
        fmt::format("PTX embedded by CUDA {}.{} cannot be JIT-compiled by this driver ({}.{}), so GPUs outside the "
                    "compiled architecture set will not run it.",
                    release->first, release->second, major, minor),
        "name every target GPU in -arch/-gencode, or update the driver");
  } else {
    rows.add("driver", "driver", Status::ok, fmt::format("{} >= toolkit {}.{}", fact, release->first, release->second));
  }
}

namespace {

constexpr std::string_view kDriverVersionQuestion = "--driver-version";

// The driver is asked in a child process (`kache doctor --driver-version`, answered by
// NvccAdapter::doctor_child_answer): a statically linked kache loading libcuda.so.1 needs the glibc it
// was linked with, and on another one the load may crash; the child's death is then a row, not the end
// of the report.
std::optional<int> driver_version(std::string& failure) {
  try {
    const std::string self = util::self_executable();
    const auto r = util::run_capture(self, {self, "doctor", std::string(kDriverVersionQuestion)},
                                     util::current_environment());
    if (r.ok()) return std::stoi(r.out);
    failure = r.term_signal ? fmt::format("the probe died with signal {}", r.term_signal)
                            : fmt::format("the probe exited with {}", r.exit_code);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  return std::nullopt;
}

// The toolkit's rows, from `nvcc` on PATH or the one named, with the host compiler -ccbin or NVCC_CCBIN
// names; the toolkit's release, when nvcc reports one.
std::optional<std::pair<int, int>> toolkit_rows(DoctorRows& rows, const DoctorQuery& query) {
  const auto named = query.named_programs.find("nvcc");
  ToolkitQuery q;
  q.nvcc_arg = named == query.named_programs.end() ? "nvcc" : named->second;
  q.nvcc_named = named != query.named_programs.end();
  q.ccbin = query.host_compiler;
  if (!q.ccbin) {
    if (auto v = util::env_get(query.env, "NVCC_CCBIN"); v && !v->empty()) q.ccbin = *v;
  }
  q.c_compilers_found = !gcc::c_compilers_on_path(query.env).empty();
  try {
    util::TempDir scratch("/tmp", ".kache-doctor-");
    q.scratch = scratch.path();
    return doctor_rows(rows, q, query.env);
  } catch (const std::exception& e) {
    rows.add("toolchain", "probe", Status::fail, "", fmt::format("probing the toolchain failed: {}.", e.what()),
             "run nvcc --version and nvcc --dryrun -c x.cu by hand to see why");
  }
  return std::nullopt;
}

// NVCC_PREPEND_FLAGS/NVCC_APPEND_FLAGS reach every compile: one that refuses makes all of them pass
// through. So does a variable the environment table refuses for nvcc.
void environment_rows(DoctorRows& rows, const DoctorQuery& query) {
  PlanOptions opts;
  if (query.config) opts.extra_allowlist = query.config->extra_allowlist_flags;
  opts.prepend_flags = util::env_get(query.env, "NVCC_PREPEND_FLAGS").value_or("");
  opts.append_flags = util::env_get(query.env, "NVCC_APPEND_FLAGS").value_or("");
  if (!opts.prepend_flags.empty() || !opts.append_flags.empty()) {
    const auto planned = plan({"-c", "probe.cu", "-o", "probe.o"}, opts);
    if (const auto* p = std::get_if<Passthrough>(&planned)) {
      rows.add(
          "config", "nvcc-env-flags", Status::warn,
          fmt::format("NVCC_PREPEND_FLAGS='{}' NVCC_APPEND_FLAGS='{}'", flag_names(opts.prepend_flags),
                      flag_names(opts.append_flags)),
          fmt::format("every compile passes through ({}{}{}).", p->reason, p->detail.empty() ? "" : ": ",
                      p->detail.starts_with('-') ? argument_name(p->detail) : p->detail),
          "remove the flag from the variable, or add it to cc.extra_allowlist_flags if it cannot change an object");
    } else {
      rows.add(
          "config", "nvcc-env-flags", Status::ok,
          fmt::format("NVCC_PREPEND_FLAGS='{}' NVCC_APPEND_FLAGS='{}' (keyed)", flag_names(opts.prepend_flags),
                      flag_names(opts.append_flags)));
    }
  }
  if (auto refusal = env_refusal(query.env, EnvRoute::nvcc)) {
    rows.add(
        "config", "environment", Status::warn, refusal->variable + " is set",
        fmt::format("{} is set, so every compile passes through (passthrough.{}).", refusal->variable, refusal->reason),
        "unset " + refusal->variable);
  }
}

}  // namespace

void NvccAdapter::doctor_rows(DoctorRows& rows, DoctorSection section, const DoctorQuery& query) {
  switch (section) {
    case DoctorSection::toolchain:
      doctor_release_ = toolkit_rows(rows, query);
      return;
    case DoctorSection::machine: {
      std::string failure;
      const std::optional<int> driver = driver_version(failure);
      driver_rows(rows, doctor_release_, driver, failure);
      return;
    }
    case DoctorSection::config:
      environment_rows(rows, query);
      return;
  }
}

std::optional<std::string> NvccAdapter::doctor_child_answer(std::string_view question) const {
  if (question != kDriverVersionQuestion) return std::nullopt;
  return std::to_string(driver_version_here());
}

}  // namespace kache::compiler::nvcc
