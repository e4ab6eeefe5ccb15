#include "app/doctor.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "compiler/env_table.hpp"
#include "compiler/nvcc/plan.hpp"
#include "compiler/offload/toolchain.hpp"
#include "core/config.hpp"
#include "storage/local/local_storage.hpp"
#include "storage/remote/remote_factory.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/remote_store.hpp"
#include "app/remote_exec.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/process_bounded.hpp"
#include "util/text.hpp"

namespace kache::app {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;
namespace doctor {

namespace {

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

}  // namespace doctor

namespace {

using json = nlohmann::ordered_json;

enum class Status { ok, warn, fail };

const char* status_name(Status s) {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::warn:
      return "warn";
    case Status::fail:
      return "fail";
  }
  return "?";
}

struct Row {
  std::string section;  // "toolchain", "rocm", "driver", "cache", "config", "remote"
  std::string name;     // stable id, e.g. "host-compiler-bound"
  Status status = Status::ok;
  std::string value;    // the fact
  std::string message;  // warn/fail: one sentence saying what is wrong
  std::string fix;      // warn/fail: what to change
};

struct Rows {
  std::vector<Row> rows;
  Row& add(std::string section, std::string name, Status status, std::string value, std::string message = "",
           std::string fix = "") {
    rows.push_back({std::move(section), std::move(name), status, std::move(value), std::move(message), std::move(fix)});
    return rows.back();
  }
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string read_or_empty(const std::string& path) {
  try {
    return util::read_file(path);
  } catch (const std::exception&) {
    return "";
  }
}

// "release 13.0, V13.0.88" -> {13, 0}.
std::optional<std::pair<int, int>> toolkit_release(const std::string& version_text) {
  std::smatch m;
  if (!std::regex_search(version_text, m, std::regex(R"(release (\d+)\.(\d+))"))) return std::nullopt;
  return std::make_pair(std::stoi(m[1].str()), std::stoi(m[2].str()));
}

// What `nvcc --dryrun -c` says it would run: its profile's variables and the host compiler.
struct DryRun {
  std::map<std::string, std::string> vars;
  std::string host_word;
  std::vector<std::string> include_dirs;  // -I of INCLUDES, as expanded
};

DryRun read_dry_run(const std::string& text) {
  DryRun d;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("#$ ")) continue;
    const std::string body = line.substr(3);
    const std::size_t eq = body.find('=');
    const std::size_t space = body.find(' ');
    if (eq != std::string::npos && (space == std::string::npos || eq < space)) {
      d.vars[body.substr(0, eq)] = body.substr(eq + 1);
      continue;
    }
    if (d.host_word.empty() && body.find(" -E ") != std::string::npos &&
        body.find("-D__CUDACC__") != std::string::npos) {
      d.host_word = util::split_quoted_words(body).at(0);
    }
  }
  for (const auto& w : util::split_quoted_words(d.vars["INCLUDES"])) {
    if (w.starts_with("-I") && w.size() > 2) d.include_dirs.push_back(w.substr(2));
  }
  return d;
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

// The toolkit's facts: nvcc, the host compiler and its bound, the C library.
// The C and C++ compilers kache fronts that are on PATH.
std::vector<std::string> c_compilers_on_path(const std::string& path_var) {
  std::vector<std::string> found;
  for (const char* name : {"gcc", "g++", "cc", "c++", "clang", "clang++"}) {
    if (util::find_executable(name, path_var, util::self_executable())) found.emplace_back(name);
  }
  return found;
}

// The compiler that `kache nvcc` (`kache hipcc`) would run: a path as given, else found on PATH (never
// kache itself).
std::optional<std::string> find_compiler(const std::string& arg, const std::string& path_var) {
  std::optional<std::string> found;
  if (arg.find('/') != std::string::npos) {
    if (::access(arg.c_str(), X_OK) == 0) found = util::absolute_path(arg, util::current_dir());
  } else {
    found = util::find_executable(arg, path_var, util::self_executable());
  }
  return found;
}

// The host compiler nvcc would run, as its dry run names it; "" (with a failed row) when there is none.
std::string host_compiler_of(Rows& rows, const DryRun& facts, const util::ProcessResult& dr,
                             const std::string& path_var) {
  if (!dr.ok() || facts.host_word.empty()) {
    rows.add("toolchain", "host-compiler", Status::fail, "unknown",
             fmt::format("nvcc --dryrun names no host compiler: {}.", first_line(dr.err)),
             "pass -ccbin with a host compiler nvcc supports (or set NVCC_CCBIN)");
    return "";
  }
  std::string host = facts.host_word;
  if (host.find('/') == std::string::npos) {
    host = util::find_executable(host, facts.vars.count("PATH") ? facts.vars.at("PATH") : path_var).value_or("");
  }
  if (host.empty()) {
    rows.add("toolchain", "host-compiler", Status::fail, facts.host_word,
             fmt::format("nvcc would run the host compiler '{}', which is not on its PATH.", facts.host_word),
             "install it, or pass -ccbin with a host compiler nvcc supports");
    return "";
  }
  return host;
}

// The first of nvcc's include directories that holds name, as a normal path; "" when none does.
std::string first_in_include_dirs(const DryRun& facts, const std::string& name) {
  for (const auto& dir : facts.include_dirs) {
    const std::string path = util::join_path(dir, name);
    if (util::exists(path)) return util::lexically_normal(path);
  }
  return "";
}

// The bound nvcc itself enforces on the host compiler's major version, read from the header nvcc
// includes first.
void check_host_bound(Rows& rows, const DryRun& facts, bool clang, int major) {
  const std::string host_config_path = first_in_include_dirs(facts, "crt/host_config.h");
  const std::string compiler_word = clang ? "clang" : "gcc";
  if (host_config_path.empty()) {
    rows.add("toolchain", "host-compiler-bound", Status::warn, "unknown",
             "nvcc's include directories hold no crt/host_config.h, so the supported host compilers are unknown.",
             "check the toolkit installation (its include/crt/)");
  } else if (auto bound = doctor::newest_host_major(read_or_empty(host_config_path), clang); !bound) {
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
void check_glibc(Rows& rows, const DryRun& facts, const std::map<std::string, std::string>& macros,
                 const std::pair<int, int>& release) {
  const std::string math_functions_path = first_in_include_dirs(facts, "crt/math_functions.h");
  const int glibc_major = macro_int(macros, "__GLIBC__"), glibc_minor = macro_int(macros, "__GLIBC_MINOR__");
  if (glibc_major < 0) {
    rows.add("toolchain", "glibc", Status::ok, "not glibc (no __GLIBC__ from features.h)");
    return;
  }
  const bool new_glibc = glibc_major > 2 || (glibc_major == 2 && glibc_minor >= 41);
  // Plain booleans, not the optional itself: GCC 12 -O3 reports a read of the optional's flag as
  // maybe-uninitialized (a false positive that -Werror would turn into a failed Release build).
  const std::optional<bool> answer = math_functions_path.empty()
                                         ? std::nullopt
                                         : doctor::math_functions_lacks_noexcept(read_or_empty(math_functions_path));
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

void check_toolchain(Rows& rows, const std::string& nvcc_arg, bool nvcc_named, const std::optional<std::string>& ccbin,
                     const util::Environment& env, const std::string& scratch,
                     std::optional<std::pair<int, int>>& release) {
  const std::string path_var = util::env_get(env, "PATH").value_or("");
  const std::optional<std::string> nvcc = find_compiler(nvcc_arg, path_var);
  const std::vector<std::string> c_compilers = c_compilers_on_path(path_var);
  if (!c_compilers.empty()) {
    std::string names;
    for (const auto& n : c_compilers) names += (names.empty() ? "" : ", ") + n;
    rows.add("toolchain", "c-compilers", Status::ok, names);
  }
  if (!nvcc && !nvcc_named && !c_compilers.empty()) {
    // A C/C++ user: nothing in use is broken.
    rows.add("toolchain", "nvcc", Status::warn, "not found",
             "there is no nvcc on PATH, so only C and C++ compiles are cached (kache nvcc would not run).",
             "nothing to do for C and C++; for CUDA put the toolkit's bin directory on PATH");
    return;
  }
  if (!nvcc) {
    rows.add("toolchain", "nvcc", Status::fail, "not found",
             fmt::format("kache nvcc cannot run: there is no executable '{}'{}.", nvcc_arg,
                         nvcc_arg.find('/') == std::string::npos ? " on PATH" : ""),
             "put the CUDA toolkit's bin directory on PATH, or name nvcc with --nvcc PATH");
    return;
  }
  const auto version = util::run_capture(*nvcc, {*nvcc, "--version"}, env);
  std::smatch m;
  std::string long_version;
  if (std::regex_search(version.out, m, std::regex(R"(V\d+\.\d+\.\d+)"))) long_version = m.str();
  release = toolkit_release(version.out);
  if (!version.ok() || !release) {
    rows.add("toolchain", "nvcc", Status::fail, *nvcc,
             fmt::format("{} --version did not report a CUDA release.", *nvcc),
             "check the toolkit installation (nvcc --version must work)");
    return;
  }

  std::vector<std::string> dry = {
      *nvcc, "--dryrun", "-c", util::join_path(scratch, "probe.cu"), "-o", util::join_path(scratch, "probe.o")};
  if (ccbin) dry.insert(dry.end(), {"-ccbin", *ccbin});
  const auto dr = util::run_capture(*nvcc, dry, env);
  const DryRun facts = read_dry_run(dr.err + dr.out);
  const std::string home = facts.vars.count("_HERE_") ? facts.vars.at("_HERE_") : util::dirname(*nvcc);
  rows.add("toolchain", "nvcc", Status::ok,
           fmt::format("CUDA {}.{} ({}) at {}{}", release->first, release->second, long_version, *nvcc,
                       util::lexically_normal(home) == util::dirname(*nvcc) ? "" : " (runs " + home + "/nvcc)"));
  const std::string host = host_compiler_of(rows, facts, dr, path_var);
  if (host.empty()) return;
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
  check_host_bound(rows, facts, clang, major);
  check_glibc(rows, facts, macros, *release);
}

// --- ROCm: what `kache hipcc` runs ----------------------------------------------------------------------

// What one `HIPCC_VERBOSE=1 hipcc --genco --offload-arch=gfx90a -### probe.hip` says (no compile): hipcc's
// clang line (the clang it runs, --hip-version, --rocm-path, the bitcode dir it names) on stdout, and
// clang's version and plan (the bitcode files the device compile links) on stderr.
struct HipccFacts {
  std::string clang_line;  // after "hipcc-cmd: "
  std::string clang;
  std::string clang_version;  // "Debian clang version 15.0.6"
  std::string hip_version;
  std::string rocm_path;
  std::string named_bitcode_dir;        // --hip-device-lib-path= of the clang line
  std::vector<std::string> bitcode;     // -mlink-builtin-bitcode files of the gfx90a device job
  std::string error;                    // the first "error:" line of stderr
};

// The value of `--name=value` or `--name="value"` in hipcc's clang line ("" when absent).
std::string clang_line_value(const std::string& line, std::string_view name) {
  for (const auto& w : util::split_quoted_words(line)) {
    if (w.starts_with(std::string(name) + "=")) return w.substr(name.size() + 1);
  }
  return "";
}

HipccFacts read_hipcc_probe(const util::ProcessResult& r) {
  HipccFacts f;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) {
    if (line.starts_with("hipcc-cmd: ")) f.clang_line = line.substr(11);
  }
  const auto words = util::split_quoted_words(f.clang_line);
  if (!words.empty()) f.clang = words[0];
  f.hip_version = clang_line_value(f.clang_line, "--hip-version");
  f.rocm_path = clang_line_value(f.clang_line, "--rocm-path");
  f.named_bitcode_dir = clang_line_value(f.clang_line, "--hip-device-lib-path");
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    if (f.clang_version.empty() && line.find("clang version ") != std::string::npos) f.clang_version = line;
    if (f.error.empty() && line.find("error: ") != std::string::npos) f.error = line;
    const auto job = compiler::offload::job_words(line);
    for (std::size_t i = 1; i + 1 < job.size(); ++i) {
      if (job[i] == "-mlink-builtin-bitcode") f.bitcode.push_back(job[i + 1]);
    }
  }
  return f;
}

// The device bitcode library directory the probe's device compile links from.
void rocm_device_libs_row(Rows& rows, const HipccFacts& f) {
  std::set<std::string> dirs;
  for (const auto& b : f.bitcode) dirs.insert(util::dirname(b));
  if (dirs.empty()) {
    rows.add("rocm", "device-libs", Status::warn, f.named_bitcode_dir.empty() ? "none" : f.named_bitcode_dir,
             fmt::format("a gfx90a compile through hipcc links no device bitcode library ({}), so HIP compiles "
                         "fail with 'cannot find ROCm device library'.",
                         f.error.empty() ? "clang's plan names none" : f.error),
             "install the device libraries (Debian: rocm-device-libs), or point DEVICE_LIB_PATH at them");
    return;
  }
  std::string value;
  for (const auto& d : dirs) value += (value.empty() ? "" : ", ") + d;
  rows.add("rocm", "device-libs", Status::ok,
           fmt::format("{} (a gfx90a compile links {} bitcode libraries from it)", value, f.bitcode.size()));
}

// CMake's HIP language (enable_language(HIP)) reads <rocm>/lib/cmake/hip-lang/hip-lang-config.cmake.
void rocm_cmake_hip_lang_row(Rows& rows, const std::string& rocm) {
  const std::string expected = util::join_path(rocm, "lib/cmake/hip-lang/hip-lang-config.cmake");
  if (util::exists(expected)) {
    rows.add("rocm", "cmake-hip-lang", Status::ok, expected + " (CMake's HIP language finds it)");
    return;
  }
  // Debian installs it under the multiarch library directory: <rocm>/lib/<triple>/cmake/hip-lang.
  std::string elsewhere;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(util::join_path(rocm, "lib"), ec)) {
    const std::string candidate = util::join_path(e.path().string(), "cmake/hip-lang/hip-lang-config.cmake");
    if (util::exists(candidate)) elsewhere = candidate;
  }
  rows.add("rocm", "cmake-hip-lang", Status::warn,
           fmt::format("no {}{}", util::dirname(expected),
                       elsewhere.empty() ? "" : fmt::format(" (this ROCm has {})", util::dirname(elsewhere))),
           fmt::format("CMake's HIP language (enable_language(HIP)) will not configure with this ROCm: CMake looks "
                       "for {}. Build HIP with hipcc from Make, Meson custom_targets or CMake custom commands "
                       "(kache hipcc caches those).",
                       expected),
           "CMake's HIP language needs a ROCm in AMD's layout (<rocm>/lib/cmake/hip-lang and the ROCm clang, as "
           "AMD's /opt/rocm packages install it); a root of links to Debian's directories passes the lookup but "
           "fails CMake's compiler check");
}

// hipcc's version and path, the clang it runs, the device libraries and CMake's HIP-language layout.
// Absent hipcc is one row and no error: HIP is optional. Every probe is bounded by timeout_ms.
void check_rocm(Rows& rows, const std::string& hipcc_arg, const util::Environment& env, const std::string& scratch,
                int timeout_ms) {
  const auto hipcc = find_compiler(hipcc_arg, util::env_get(env, "PATH").value_or(""));
  if (!hipcc) {
    rows.add("rocm", "hipcc", Status::ok, "not found",
             fmt::format("there is no executable '{}'{}, so kache hipcc does not apply (C, C++ and CUDA "
                         "compiles are unaffected).",
                         hipcc_arg, hipcc_arg.find('/') == std::string::npos ? " on PATH" : ""));
    return;
  }
  const std::string source = util::join_path(scratch, "probe.hip");
  util::write_file(source, "");
  util::Environment probe_env = env;
  util::env_set(probe_env, "HIPCC_VERBOSE", "1");  // hipcc prints its clang line ("hipcc-cmd: ")
  const std::vector<std::string> argv = {*hipcc, "--genco", "--offload-arch=gfx90a", "-###", source,
                                         "-o", util::join_path(scratch, "probe.hsaco")};
  const auto r = util::run_capture_bounded(*hipcc, argv, probe_env, timeout_ms);
  const HipccFacts f = read_hipcc_probe(r);
  if (r.timed_out || f.clang_line.empty()) {
    rows.add("rocm", "hipcc", Status::warn, *hipcc,
             r.timed_out ? fmt::format("hipcc did not answer within {} s, so what it runs is unknown.",
                                       timeout_ms / 1000.0)
                         : fmt::format("hipcc did not say which compiler it runs ({}).",
                                       f.error.empty() ? first_line(r.err + r.out) : f.error),
             fmt::format("run HIPCC_VERBOSE=1 {} --genco --offload-arch=gfx90a -### x.hip by hand to see why", *hipcc));
    return;
  }
  rows.add("rocm", "hipcc", Status::ok,
           fmt::format("HIP {} at {} (ROCm root {})", f.hip_version.empty() ? "version unknown" : f.hip_version,
                       *hipcc, f.rocm_path.empty() ? "unknown" : f.rocm_path));
  rows.add("rocm", "clang", f.clang_version.empty() ? Status::warn : Status::ok,
           fmt::format("{} at {}", f.clang_version.empty() ? "version unknown" : f.clang_version, f.clang),
           f.clang_version.empty() ? "the clang hipcc runs did not state its version." : "",
           f.clang_version.empty() ? "check that it runs: " + f.clang + " --version" : "");
  rocm_device_libs_row(rows, f);
  if (!f.rocm_path.empty()) rocm_cmake_hip_lang_row(rows, f.rocm_path);
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

// The driver is asked in a child process (`kache doctor --driver-version`): a statically linked
// kache loading libcuda.so.1 needs the glibc it was linked with, and on another one the load may
// crash; the child's death is then a row, not the end of the report.
std::optional<int> driver_version(std::string& failure) {
  try {
    const std::string self = util::self_executable();
    const auto r = util::run_capture(self, {self, "doctor", "--driver-version"}, util::current_environment());
    if (r.ok()) return std::stoi(r.out);
    failure = r.term_signal ? fmt::format("the probe died with signal {}", r.term_signal)
                            : fmt::format("the probe exited with {}", r.exit_code);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  return std::nullopt;
}

// The driver, asked through its own library; none is a fact (compiling needs no driver).
void check_driver(Rows& rows, const std::optional<std::pair<int, int>>& release) {
  std::string failure;
  const auto answer = driver_version(failure);
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

std::string filesystem_name(std::uint64_t type) {
  switch (type) {
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0xCA451A4E:
      return "bcachefs";
    case 0x01021994:
      return "tmpfs";
    case 0x794C7630:
      return "overlayfs";
    case 0x6969:
      return "nfs";
    case 0x2FC12FC1:
      return "zfs";
    case 0x65735546:
      return "fuse";
    case 0x4D44:
      return "vfat";
    case 0x2011BAB0:
      return "exfat";
    case 0x482B:
      return "hfsplus";
    case 0xFF534D42:
      return "cifs";
    default:
      return fmt::format("0x{:x}", type);
  }
}

void check_cache(Rows& rows, const Config& cfg) {
  const std::string& dir = cfg.cache_dir;
  const bool exists = util::exists(dir);
  // The directory kache will create its cache in: the nearest existing ancestor.
  std::string probe = dir;
  while (!util::exists(probe) && util::dirname(probe) != probe) probe = util::dirname(probe);
  rows.add("cache", "dir", Status::ok, exists ? dir : dir + " (created on the first compile)");

  struct statfs sfs {};
  struct statvfs svfs {};
  if (::statfs(probe.c_str(), &sfs) == 0) {
    const std::int64_t margin = util::file_time_margin_ns(probe);
    timespec res{};
    ::clock_getres(CLOCK_REALTIME_COARSE, &res);
    rows.add("cache", "filesystem", Status::ok,
             fmt::format("{}; racy-file margin {} ms (file clock tick {:.1f} ms)",
                         filesystem_name(static_cast<std::uint64_t>(sfs.f_type)), margin / 1000000,
                         (res.tv_sec * 1e9 + res.tv_nsec) / 1e6));
  }
  struct stat dir_stat {};
  if (exists && ::stat(dir.c_str(), &dir_stat) == 0 && (dir_stat.st_mode & S_IWOTH) != 0) {
    rows.add("cache", "world-writable", cfg.allow_world_writable ? Status::warn : Status::fail, dir,
             cfg.allow_world_writable
                 ? "every user may write the cache (cache.allow_world_writable = true): any of them can plant objects."
                 : "every user may write the cache, so kache does not use it: every compile passes through "
                   "(passthrough.cache-world-writable).",
             fmt::format("chmod o-w {}", dir));
  }
  const int writable = ::access(probe.c_str(), W_OK | X_OK);
  if (writable != 0) {
    rows.add("cache", "writable", Status::fail, "no",
             fmt::format("{} is not writable, so every compile runs uncached and stores nothing.", probe),
             "set KACHE_DIR (or cache.dir) to a directory you can write");
  } else {
    rows.add("cache", "writable", Status::ok, "yes");
  }
  std::uint64_t size = 0;
  if (exists) {
    try {
      size = storage::LocalStorage(storage::LocalStorageOptions{dir, cfg.max_size}).total_size();
    } catch (const std::exception&) {
    }
  }
  const double percent = cfg.max_size ? 100.0 * static_cast<double>(size) / static_cast<double>(cfg.max_size) : 0.0;
  rows.add("cache", "size", Status::ok,
           fmt::format("{} of {} ({:.1f} %)", format_size(size), format_size(cfg.max_size), percent));
  if (::statvfs(probe.c_str(), &svfs) == 0) {
    const std::uint64_t free = static_cast<std::uint64_t>(svfs.f_bavail) * svfs.f_frsize;
    const std::uint64_t room = cfg.max_size > size ? cfg.max_size - size : 0;
    if (free < room) {
      rows.add(
          "cache", "free-space", Status::warn, format_size(free),
          fmt::format("the filesystem has {} free, less than the {} the size limit still allows, so stores may fail "
                      "before eviction starts.",
                      format_size(free), format_size(room)),
          "lower cache.max_size (kache -M SIZE) or free space");
    } else {
      rows.add("cache", "free-space", Status::ok, format_size(free));
    }
  }
}

// Each remote: reachable and accepting the credentials (a read), writable (a write and its removal, unless
// read-only), and whether its entries are signed.
void check_remotes(Rows& rows, const Config& cfg) {
  namespace remote = storage::remote;
  if (cfg.remote_urls.empty()) return;
  remote::RemoteStoreOptions options;
  options.ca_file = cfg.remote_ca_file;
  options.read_only = cfg.remote_read_only;
  const std::string probe_key = fmt::format("kache-doctor-probe-{}", ::getpid());
  for (const auto& url : cfg.remote_urls) {
    const std::string name = url.redacted();
    try {
      auto backend = remote::make_remote_storage(url, options);
      (void)backend->get(probe_key);
      rows.add("remote", "reachable", Status::ok, name + ": answers, credentials accepted");
      if (backend->read_only()) {
        rows.add("remote", "writable", Status::ok, name + ": read-only (as configured)");
      } else {
        backend->put(probe_key, "kache doctor");
        backend->remove(probe_key);
        rows.add("remote", "writable", Status::ok, name + ": yes");
      }
    } catch (const remote::RemoteError& e) {
      const bool auth = e.kind() == remote::RemoteFailure::Kind::auth;
      rows.add("remote", auth ? "authenticated" : "reachable", Status::fail, name,
               fmt::format("{}: every compile skips this remote ({}).", e.what(),
                           auth ? "the credentials are refused" : "it does not answer"),
               auth ? "correct the password (KACHE_REMOTE_PASSWORD or the URL) or the user"
                    : "start the server, or correct remote.storage, or remove it");
    } catch (const std::exception& e) {
      rows.add("remote", "reachable", Status::fail, name, fmt::format("{}.", e.what()),
               "correct remote.storage, or remove it");
    }
  }
  if (cfg.remote_signing_key_file.empty()) {
    rows.add("remote", "signing", Status::warn, "unsigned",
             "entries read from the remotes are not signed: whoever can write a remote can plant objects in "
             "every build that reads it.",
             "set remote.signing_key_file to a file holding a shared secret key");
  } else {
    rows.add("remote", "signing", Status::ok, "signed (key in " + cfg.remote_signing_key_file + ")");
  }
}

// Remote execution (docs/remote-execution.md): the server, its capabilities, a worker of this toolchain.
void check_remote_execution_rows(Rows& rows, const Config& cfg, const std::string& nvcc_arg,
                                 const util::Environment& env) {
  const std::string nvcc_path =
      nvcc_arg.find('/') != std::string::npos
          ? nvcc_arg
          : util::find_executable(nvcc_arg, util::env_get(env, "PATH").value_or("")).value_or(nvcc_arg);
  for (const auto& r : check_remote_execution(cfg, nvcc_path)) {
    const Status status = r.level == 0 ? Status::ok : r.level == 1 ? Status::warn : Status::fail;
    rows.add("remote_execution", r.name, status, r.value, r.message, r.fix);
  }
}

// The remote stores, then the remote execution server.
void check_remote_services(Rows& rows, const Config& cfg, const std::string& nvcc_arg, const util::Environment& env) {
  check_remotes(rows, cfg);
  check_remote_execution_rows(rows, cfg, nvcc_arg, env);
}

void check_config(Rows& rows, const Config& cfg, const util::Environment& env) {
  std::string origins;
  for (const auto& [key, origin] : cfg.origins)
    origins += fmt::format("{}{} ({})", origins.empty() ? "" : ", ", key, origin);
  rows.add("config", "file", Status::ok,
           fmt::format("{}{}; {}", cfg.config_file, util::exists(cfg.config_file) ? "" : " (absent)",
                       origins.empty() ? "every setting at its default" : "set: " + origins));
  if (const auto named = util::env_get(env, "KACHE_CONFIG"); named && !named->empty()) {
    struct stat st {};
    const bool readable = ::stat(cfg.config_file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                          ::access(cfg.config_file.c_str(), R_OK) == 0;
    if (!readable && util::exists(cfg.config_file)) {
      rows.add("config", "KACHE_CONFIG", Status::fail, cfg.config_file,
               "KACHE_CONFIG names something that is not a readable file, so none of its settings apply.",
               "point KACHE_CONFIG at a readable TOML file, or unset it");
    }
  }
  rows.add("config", "direct-mode", cfg.direct_mode ? Status::ok : Status::warn, cfg.direct_mode ? "on" : "off",
           cfg.direct_mode ? "" : "each lookup runs the compiler's dependency listing (-M) first: hits are slower.",
           cfg.direct_mode ? "" : "set cache.direct_mode = true unless the listing is wanted");
  if (cfg.cache_dir_refused) {
    rows.add("config", "cache-dir", Status::fail, "refused",
             "cache.dir (or KACHE_DIR) is not usable, so every compile passes through (passthrough.cache-dir-refused).",
             "set cache.dir to an absolute path");
  }
  for (const auto& problem : cfg.problems) {
    rows.add("config", "problem", Status::warn, "", problem,
             "correct the value named (kache --show-config shows every setting)");
  }
  if (cfg.disable) {
    const std::string origin = cfg.origins.count("cache.disable") ? cfg.origins.at("cache.disable") : "file";
    rows.add("config", "disable", Status::warn, fmt::format("cache.disable = true ({})", origin),
             "every compile passes through uncached (passthrough.disabled).",
             origin == "env" ? "unset KACHE_DISABLE" : "set cache.disable = false in " + cfg.config_file);
  }
  // NVCC_PREPEND_FLAGS/NVCC_APPEND_FLAGS reach every compile: one that refuses makes all of them pass through.
  compiler::nvcc::PlanOptions opts;
  opts.extra_allowlist = cfg.extra_allowlist_flags;
  opts.prepend_flags = util::env_get(env, "NVCC_PREPEND_FLAGS").value_or("");
  opts.append_flags = util::env_get(env, "NVCC_APPEND_FLAGS").value_or("");
  if (!opts.prepend_flags.empty() || !opts.append_flags.empty()) {
    const auto planned = compiler::nvcc::plan({"-c", "probe.cu", "-o", "probe.o"}, opts);
    if (const auto* p = std::get_if<compiler::nvcc::Passthrough>(&planned)) {
      rows.add(
          "config", "nvcc-env-flags", Status::warn,
          fmt::format("NVCC_PREPEND_FLAGS='{}' NVCC_APPEND_FLAGS='{}'", opts.prepend_flags, opts.append_flags),
          fmt::format("every compile passes through ({}{}{}).", p->reason, p->detail.empty() ? "" : ": ", p->detail),
          "remove the flag from the variable, or add it to cc.extra_allowlist_flags if it cannot change an object");
    } else {
      rows.add(
          "config", "nvcc-env-flags", Status::ok,
          fmt::format("NVCC_PREPEND_FLAGS='{}' NVCC_APPEND_FLAGS='{}' (keyed)", opts.prepend_flags, opts.append_flags));
    }
  }
  if (auto refusal = compiler::env_refusal(env, compiler::EnvRoute::nvcc)) {
    rows.add(
        "config", "environment", Status::warn, refusal->variable + " is set",
        fmt::format("{} is set, so every compile passes through (passthrough.{}).", refusal->variable, refusal->reason),
        "unset " + refusal->variable);
  }
}

void print_text(const Rows& rows) {
  std::size_t width = 0;
  for (const auto& r : rows.rows) width = std::max(width, r.section.size() + r.name.size() + 1);
  for (const auto& r : rows.rows) {
    fmt::print("{:<4}  {:<{}}  {}\n", status_name(r.status), r.section + "." + r.name, width, r.value);
    if (!r.message.empty()) fmt::print("{:<4}  {:<{}}  {}\n", "", "", width, r.message);
    if (!r.fix.empty() && r.status != Status::ok)
      fmt::print("{:<4}  {:<{}}  fix: {}\n", "", "", width, r.fix);
    else if (!r.fix.empty())
      fmt::print("{:<4}  {:<{}}  {}\n", "", "", width, r.fix);
  }
}

void print_json(const Rows& rows, std::size_t fails, std::size_t warns) {
  json j;
  j["schema"] = "kache-doctor-1";
  j["status"] = fails ? "fail" : warns ? "warn" : "ok";
  j["fails"] = fails;
  j["warns"] = warns;
  j["rows"] = json::array();
  for (const auto& r : rows.rows) {
    j["rows"].push_back({{"section", r.section},
                         {"name", r.name},
                         {"status", status_name(r.status)},
                         {"value", r.value},
                         {"message", r.message},
                         {"fix", r.fix}});
  }
  fmt::print("{}\n", j.dump(2));
}

constexpr const char* kUsage = R"(usage: kache doctor [--json] [--nvcc PATH] [-ccbin COMPILER] [--hipcc PATH]
                    [--probe-timeout SECONDS]
States the facts kache nvcc depends on (nvcc, its host compiler and the bound nvcc's
crt/host_config.h states, the C library, the driver, the cache directory, the configuration) and
those of kache hipcc (hipcc, the clang it runs, the device libraries, the layout CMake's HIP
language expects) as ok/warn/fail rows. Exit status 1 when any row fails.
--probe-timeout bounds each ROCm probe (default 20 s).
)";

constexpr int kDefaultRocmProbeTimeoutMs = 20'000;

// "2.5" -> 2500; nullopt unless 0 < seconds <= 3600.
std::optional<int> probe_timeout_ms_of(const std::string& text) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(seconds > 0) || seconds > 3600) return std::nullopt;
  return static_cast<int>(seconds * 1000);
}

}  // namespace

int run_doctor(const std::vector<std::string>& args) {
  bool as_json = false;
  std::string nvcc_arg = "nvcc";
  bool nvcc_named = false;
  std::optional<std::string> ccbin;
  std::string hipcc_arg = "hipcc";
  int probe_timeout_ms = kDefaultRocmProbeTimeoutMs;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string_view name) -> std::optional<std::string> {
      if (a == name && i + 1 < args.size()) return args[++i];
      if (a.starts_with(std::string(name) + "=")) return a.substr(name.size() + 1);
      return std::nullopt;
    };
    if (a == "--driver-version") {  // internal: the child process of driver_version()
      fmt::print("{}\n", driver_version_here());
      return 0;
    }
    if (a == "--json") {
      as_json = true;
    } else if (a == "-h" || a == "--help") {
      fmt::print("{}", kUsage);
      return 0;
    } else if (auto v = value("--nvcc")) {
      nvcc_arg = *v;
      nvcc_named = true;
    } else if (auto c = value("-ccbin"); c || (c = value("--compiler-bindir")) || (c = value("--ccbin"))) {
      ccbin = *c;
    } else if (auto h = value("--hipcc")) {
      hipcc_arg = *h;
    } else if (auto t = value("--probe-timeout")) {
      const auto ms = probe_timeout_ms_of(*t);
      if (!ms) {
        fmt::print(stderr, "kache doctor: --probe-timeout takes seconds (0 < S <= 3600), not '{}'.\n", *t);
        return 1;
      }
      probe_timeout_ms = *ms;
    } else {
      fmt::print(stderr, "kache doctor: unknown argument '{}'.\n{}", a, kUsage);
      return 1;
    }
  }
  const Config cfg = load_config();
  const util::Environment env = util::current_environment();
  if (!ccbin) {
    if (auto v = util::env_get(env, "NVCC_CCBIN"); v && !v->empty()) ccbin = *v;
  }
  Rows rows;
  std::optional<std::pair<int, int>> release;
  try {
    util::TempDir scratch("/tmp", ".kache-doctor-");
    check_toolchain(rows, nvcc_arg, nvcc_named, ccbin, env, scratch.path(), release);
  } catch (const std::exception& e) {
    rows.add("toolchain", "probe", Status::fail, "", fmt::format("probing the toolchain failed: {}.", e.what()),
             "run nvcc --version and nvcc --dryrun -c x.cu by hand to see why");
  }
  try {
    util::TempDir scratch("/tmp", ".kache-doctor-");
    check_rocm(rows, hipcc_arg, env, scratch.path(), probe_timeout_ms);
  } catch (const std::exception& e) {
    rows.add("rocm", "probe", Status::warn, "", fmt::format("probing hipcc failed: {}.", e.what()),
             "run HIPCC_VERBOSE=1 hipcc --genco --offload-arch=gfx90a -### x.hip by hand to see why");
  }
  check_driver(rows, release);
  check_cache(rows, cfg);
  check_config(rows, cfg, env);
  check_remote_services(rows, cfg, nvcc_arg, env);

  std::size_t fails = 0, warns = 0;
  for (const auto& r : rows.rows) {
    fails += r.status == Status::fail;
    warns += r.status == Status::warn;
  }
  if (as_json) {
    print_json(rows, fails, warns);
  } else {
    print_text(rows);
    fmt::print("{} fail, {} warn\n", fails, warns);
  }
  return fails ? 1 : 0;
}

}  // namespace kache::app
