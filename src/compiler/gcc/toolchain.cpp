#include "compiler/gcc/toolchain.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>

#include "compiler/env_table.hpp"
#include "compiler/gcc/adapter.hpp"
#include "compiler/gcc/driver_probe.hpp"
#include "compiler/gcc/wrapper.hpp"
#include "compiler/tool_files.hpp"
#include "core/log.hpp"
#include "util/cpu.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/serial.hpp"

namespace kache::compiler::gcc {

namespace {

// 2: include dirs, config and distribution files in the id; 3: config_include; 4: XXH3-128 content digests
constexpr std::uint32_t kMemoVersion = 6;  // 5: wrapper scripts followed; 6: -B prefixes

struct Memo {
  Toolchain tc;
  ToolFiles tools;

  // What the memo keeps (compiler/tool_files.hpp's write_memo and read_memo walk this list).
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit&& visit) {
    visit(m.tc.id);
    visit(m.tc.description);
    visit(m.tc.include_dirs);
    visit(m.tc.config_include);
    visit(m.tools);
  }
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The directory of the driver's real executable (symlinks resolved), "" when it cannot be found. clang
// looks there for its default configuration files (measured: clang 19 stats
// /usr/lib/llvm-19/bin/x86_64-pc-linux-gnu-clang.cfg, clang.cfg and x86_64-pc-linux-gnu.cfg on every
// compile; clang 14 a <prefix>.cfg when its name has a prefix): options no command line shows.
std::string driver_real_dir(const std::string& driver) {
  std::error_code ec;
  const auto real = std::filesystem::canonical(driver, ec);
  return ec ? "" : real.parent_path().string();
}

// The entries of a directory, full paths, sorted; none when it cannot be listed.
std::vector<std::string> sorted_entries(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A -B prefix names a directory (`/opt/gcc/bin/`) or a file-name prefix (`/opt/gcc/bin/x-`); the driver
// tries <prefix><program> and <prefix><machine>/<version>/<program>, and <prefix>include for headers.
// The directory's identity is in the memo key (a stat per compile); its <machine>/ and
// <machine>/<version>/ directories are watched by the memo (ToolFiles::watched, checked when it is read): a program or directory
// appearing in any of them changes one identity (one replaced in place keeps them, and is caught by its
// own identity in the memo's files).
std::string prefix_dir(const std::string& prefix) { return prefix.ends_with('/') ? prefix : util::dirname(prefix); }

void add_prefix_dir(util::Hasher& mk, const std::string& prefix) {
  mk.add_field("prefix", prefix);
  add_identity(mk, "prefix-dir", prefix_dir(prefix));
}

void watch_prefix_dirs(ProbeFiles& files, const std::string& prefix) {
  for (const auto& sub : sorted_entries(prefix_dir(prefix))) {
    std::error_code ec;
    // <machine>/ and <machine>/<version>/ only (a triple has a '-'): plugin/, include/ are no places of passes.
    if (util::basename(sub).find('-') == std::string::npos || !std::filesystem::is_directory(sub, ec)) continue;
    files.watch(sub);
    for (const auto& subsub : sorted_entries(sub)) {
      if (std::filesystem::is_directory(subsub, ec)) files.watch(subsub);
    }
  }
}

// A trailing '/' says the prefix is a directory: kept (absolute_path would drop it).
std::string absolute_prefix(const std::string& p) {
  return util::absolute_path(p, util::current_dir()) + (p.ends_with('/') ? "/" : "");
}

// clang picks the newest GCC installation it finds (its libstdc++ headers, measured: a
// lib/gcc/x86_64-linux-gnu/99/crtbegin.o beside a clang switches its C++ include dirs to include/c++/99)
// under /usr and beside its own installation; the probe lists the include dirs of the one it picked.
// The memo key holds the identity of every directory such an installation appears in (the lib dirs,
// lib/gcc, each triple's directory under it and each version directory under those: a crtbegin.o
// appearing in an existing <version>/ makes it an installation and changes only that directory), and
// of include/c++ and each version directory under it (clang checks that include/c++/<version> and
// Debian's include/<triple>/c++/<version> exist), so one appearing or vanishing probes again.
void add_gcc_installation_dirs(util::Hasher& mk, const std::string& driver_dir) {
  std::vector<std::string> prefixes = {"/usr"};
  if (!driver_dir.empty()) prefixes.push_back(util::dirname(driver_dir));
  for (const auto& prefix : prefixes) {
    std::set<std::string> triples;  // the names under lib*/gcc*/
    for (const char* lib : {"lib", "lib64"}) {
      const std::string lib_dir = util::join_path(prefix, lib);
      add_identity(mk, "gcc-install:" + lib_dir, lib_dir);
      for (const char* gcc : {"gcc", "gcc-cross"}) {
        const std::string base = util::join_path(lib_dir, gcc);
        add_identity(mk, "gcc-install:" + base, base);
        for (const auto& triple : sorted_entries(base)) {
          add_identity(mk, "gcc-install:" + triple, triple);
          for (const auto& version : sorted_entries(triple)) add_identity(mk, "gcc-install:" + version, version);
          triples.insert(util::basename(triple));
        }
      }
    }
    const std::string include = util::join_path(prefix, "include");
    add_identity(mk, "gcc-install:" + include, include);
    // include/c++/<version>, and Debian's multiarch include/<triple>/c++/<version>, searched when it exists.
    std::vector<std::string> cxx_dirs = {util::join_path(include, "c++")};
    for (const auto& t : triples) cxx_dirs.push_back(util::join_path(util::join_path(include, t), "c++"));
    for (const auto& cxx : cxx_dirs) {
      add_identity(mk, "gcc-install:" + cxx, cxx);
      for (const auto& version : sorted_entries(cxx)) add_identity(mk, "gcc-install:" + version, version);
    }
  }
}

// The files clang reads to tell which Linux distribution it runs on (clang's Distro.cpp; measured:
// clang 14 and 19 read /etc/os-release and /etc/debian_version on every compile): the distribution
// picks defaults (Gentoo's stack protector, Ubuntu's, ...). Their content is in the toolchain id and
// their identity, present or absent, in the memo key. GCC reads none of them; keying them costs a stat.
constexpr const char* kDistroFiles[] = {
    "/etc/os-release",      "/usr/lib/os-release",  "/etc/lsb-release",   "/etc/redhat-release",
    "/etc/debian_version",  "/etc/SuSE-release",    "/etc/alpine-release", "/etc/arch-release",
    "/etc/gentoo-release",
};

// clang's HIP runtime detection (RocmInstallationDetector::detectHIPRuntime), measured with strace once
// ROCm is installed (Debian 12's hipcc puts its version file at /usr/share/hip/version): clang 19 runs
// it when it prints -v (the probe's `-E -v`; a compile with -v passes through), clang 14 on every
// compile. It tries installation roots in turn and reads the first HIP version file it finds there:
// <root>/share/hip/version, <root>/../share/hip/version, <root>/bin/.hipVersion (clang 14: the last
// only). The roots: $HIP_PATH alone when set (clang 19; clang 14 ignores it), else each directory the
// driver sits in (invoked and real) deduced to a prefix (bin/, then llvm/ or aomp*/ stripped) and its
// parent, the resource dir, /opt/rocm, the newest /opt/rocm-*, /usr/local and /usr. ($ROCM_PATH and
// --rocm-path replace the list; ROCM_PATH never reaches the probe: probe_environment drops it.)
// What it finds changes only HIP compiles and -v's "Found HIP installation" line, both passed through;
// it is keyed all the same, like any file the probe reads: every root's existence and every version
// file's identity, present or absent, in the memo key (ROCm installed, removed or upgraded probes again,
// and a new /opt/rocm-* changes /opt's identity), and the content of the clang's present version files
// in the toolchain id (a HIP upgrade keys clang's compiles apart). A superset of what one clang reads:
// both versions' files, every /opt/rocm-* and resource dir; SPACK's hip-<version>-<hash> directories
// beside an llvm-amdgpu-<version>-<hash> clang are not followed.
struct HipSearch {
  std::vector<std::string> roots;
  std::vector<std::string> version_files;
};

HipSearch hip_search(const std::string& driver, const util::Environment& probe_env) {
  HipSearch s;
  auto add_root = [&](const std::string& root) {
    if (!root.empty() && std::find(s.roots.begin(), s.roots.end(), root) == s.roots.end()) s.roots.push_back(root);
  };
  if (auto hip_path = util::env_get(probe_env, "HIP_PATH")) add_root(*hip_path);
  const std::string real_dir = driver_real_dir(driver);
  for (const std::string& dir : {util::dirname(driver), real_dir}) {
    if (dir.empty()) continue;
    std::string prefix = util::dirname(dir);
    if (util::basename(prefix) == "bin") prefix = util::dirname(prefix);
    const std::string name = util::basename(prefix);
    if (name == "llvm" || name.starts_with("aomp")) prefix = util::dirname(prefix);
    add_root(prefix);
    add_root(util::dirname(dir));
  }
  if (!real_dir.empty()) {
    for (const auto& resource : sorted_entries(util::join_path(util::dirname(real_dir), "lib/clang"))) add_root(resource);
  }
  add_root("/opt/rocm");
  for (const auto& entry : sorted_entries("/opt")) {
    if (util::basename(entry).starts_with("rocm-")) add_root(entry);
  }
  add_root("/usr/local");
  add_root("/usr");
  for (const auto& root : s.roots) {
    for (const std::string& file : {util::join_path(root, "share/hip/version"),
                                    util::join_path(util::dirname(root), "share/hip/version"),
                                    util::join_path(root, "bin/.hipVersion")}) {
      if (std::find(s.version_files.begin(), s.version_files.end(), file) == s.version_files.end()) {
        s.version_files.push_back(file);
      }
    }
  }
  return s;
}

void add_hip_search(util::Hasher& mk, const std::string& driver, const util::Environment& env) {
  const HipSearch s = hip_search(driver, probe_environment(env));
  // The probe sees HIP_PATH (no row of env_table.cpp drops it); its value is keyed with what it names.
  auto hip_path = util::env_get(env, "HIP_PATH");
  mk.add_field("env:HIP_PATH", hip_path ? "=" + *hip_path : "unset");
  add_identity(mk, "hip-opt", "/opt");
  for (const auto& root : s.roots) mk.add_field("hip-root:" + root, util::exists(root) ? "present" : "absent");
  for (const auto& file : s.version_files) add_identity(mk, "hip-version:" + file, file);
}

// Every configuration file beside the driver: its content is in the toolchain id (an edit keeps the
// memo's identity check honest), and the directory's identity is in the memo key, so one appearing
// or vanishing there probes again. A configuration file may include another file (`@path` as a word,
// expanded like a response file, quoted or not, nested, relative to the file) whose content clang
// reads on every compile: rather than follow such chains, any '@' in a configuration file marks the
// toolchain (tc.config_include) and its compiles pass through. Comments and -D values with an '@'
// pass through too: rare, and never unsound. The file is read after ProbeFiles recorded its identity,
// so an edit after this read fails the memo's identity check.
void add_config_files(ProbeFiles& files, Toolchain& tc, const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::vector<std::string> configs;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".cfg")) configs.push_back(name);
  }
  std::sort(configs.begin(), configs.end());
  for (const auto& name : configs) {
    const std::string path = util::join_path(dir, name);
    files.add("config:" + name, path);
    if (!tc.config_include.empty() || std::filesystem::is_directory(path, ec)) continue;
    std::string text;
    try {
      text = util::read_file(path);
    } catch (const std::exception&) {
      // Unreadable now (clang would fail to read it too, or it vanished): kept out of the cache.
      tc.config_include = path;
      continue;
    }
    if (text.find('@') != std::string::npos) tc.config_include = path;
  }
}

Memo probe(const std::string& driver, const util::Environment& env, const std::string& memo_dir,
           const std::vector<std::string>& options) {
  // Only what the memo is keyed by reaches the probe; keyed variables (CPATH, ...) are key fields of
  // their own, so the probe sees the driver's defaults.
  const util::Environment probe_env = probe_environment(env);
  const std::string cwd = util::current_dir();
  Memo m;
  m.tools.search_path = util::env_get(probe_env, "PATH").value_or("");

  // Every question for the driver at once; the driver's and the other files' content is hashed while
  // they run.
  auto ask = [&](const char* what) {
    std::vector<std::string> argv = {driver};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.emplace_back(what);
    return start_capture(driver, argv, probe_env);
  };
  auto version_answer = ask("--version");
  auto machine_answer = ask("-dumpmachine");
  // A specs file beside GCC's libraries overrides the built-in specs (the driver prints the bare name
  // back when there is none).
  auto specs_answer = ask("-print-file-name=specs");
  // GCC's passes for C, C++ and preprocessed assembly (clang answers "cc1"/"cc1plus" bare: it runs
  // itself, whose content is hashed below).
  DriverPrograms programs(driver, probe_env, {"cc1", "cc1plus", "as"}, options);
  DriverIncludeDirs c_dirs(driver, "c", probe_env, options);
  DriverIncludeDirs cxx_dirs(driver, "c++", probe_env, options);

  ProbeFiles files(m.tools, cwd, memo_dir);
  // The driver's content, not only its version text: a rebuilt or replaced compiler that reports the
  // same version keys apart. stat and read follow a symlink (g++ -> g++-12) to the program itself.
  files.add_program("driver", driver);
  for (const auto& o : options) {
    if (o.starts_with("-B")) watch_prefix_dirs(files, absolute_prefix(o.substr(2)));
  }
  add_config_files(files, m.tc, driver_real_dir(driver));
  for (const char* f : kDistroFiles) files.add(std::string("distro:") + f, f);
  files.digest_pending();

  const util::ProcessResult version = version_answer.get();
  if (!version.ok()) throw std::runtime_error(driver + " --version failed");
  const util::ProcessResult machine = machine_answer.get();
  if (!machine.ok()) throw std::runtime_error(driver + " -dumpmachine failed");
  programs.add_to(files);
  // GCC reads none of them: a ROCm upgrade keys only clang's compiles apart.
  if (version.out.find("clang") != std::string::npos) {
    for (const auto& f : hip_search(driver, probe_env).version_files) files.add("hip-version:" + f, f);
  }
  const util::ProcessResult specs = specs_answer.get();
  if (specs.ok()) {
    const std::string path = first_line(specs.out);
    if (path.starts_with("/")) files.add("specs", path);
  }

  for (auto* dirs : {&c_dirs, &cxx_dirs}) {
    for (auto& d : dirs->get()) {
      if (std::find(m.tc.include_dirs.begin(), m.tc.include_dirs.end(), d) == m.tc.include_dirs.end()) {
        m.tc.include_dirs.push_back(std::move(d));
      }
    }
  }

  util::Hasher h;
  h.add_field("version", version.out);
  h.add_field("machine", machine.out);
  // The driver's own include dirs, in order: another GCC installation picked by clang (or another
  // GCC_EXEC_PREFIX) searches other headers; the direct-mode record only watches the dirs it knew.
  for (const auto& d : m.tc.include_dirs) h.add_field("include-dir", d);
  files.hash_into(h);
  m.tc.id = h.finish().hex();
  m.tc.description = driver + " (" + first_line(version.out) + ")";
  return m;
}

std::string env_value_field(const util::Environment& env, std::string_view name) {
  auto v = util::env_get(env, name);
  return v ? "=" + *v : "unset";
}

}  // namespace

Toolchain probe_toolchain(const std::string& driver, const util::Environment& env, const std::string& memo_dir,
                          const std::vector<std::string>& prefixes) {
  util::Hasher mk;
  mk.add_field("memo", "gcc-" + std::to_string(kMemoVersion));
  mk.add_field("driver", driver);
  std::vector<std::string> options;
  for (const auto& p : prefixes) {
    options.push_back("-B" + p);
    add_prefix_dir(mk, absolute_prefix(p));
  }
  add_identity(mk, "driver-id", driver);
  // A configuration file appearing beside the driver changes this directory's identity (add_config_files).
  add_identity(mk, "driver-dir", driver_real_dir(driver));
  add_gcc_installation_dirs(mk, driver_real_dir(driver));
  for (const char* f : kDistroFiles) add_identity(mk, std::string("distro:") + f, f);
  add_hip_search(mk, driver, env);
  for (std::string_view var : probe_variables(EnvRoute::host)) {
    mk.add_field(std::string("env:") + std::string(var), env_value_field(env, var));
  }
  const std::string memo_key = mk.finish().hex();
  core::log().trace("toolchain memo key = {}", memo_key);
  return memoized_probe<Memo>(
             memo_dir, memo_key, driver, kMemoVersion, [](const Memo& m) { return m.tools.still_valid(); },
             [&] { return probe(driver, env, memo_dir, options); })
      .tc;
}

std::string native_expansion(const std::string& driver, const util::Environment& env, const std::string& memo_dir,
                             const std::vector<std::string>& prefixes, const std::vector<std::string>& native) {
  util::Hasher mk;
  mk.add_field("memo", "native-1");
  mk.add_field("driver", driver);
  add_identity(mk, "driver-id", driver);
  for (const auto& p : prefixes) mk.add_field("prefix", p);
  for (const auto& n : native) mk.add_field("native", n);
  mk.add_field("cpu", util::cpu_signature());
  const std::string path = memo_dir.empty() ? "" : util::join_path(memo_dir, "native-" + mk.finish().hex());
  if (std::optional<std::string> memo = read_memo_file(memo_dir, path)) return std::move(*memo);
  std::vector<std::string> argv = {driver};
  for (const auto& p : prefixes) argv.push_back("-B" + p);
  argv.insert(argv.end(), native.begin(), native.end());
  argv.insert(argv.end(), {"-x", "c", "-c", "/dev/null", "-o", "/dev/null", "-###"});
  const util::ProcessResult r = util::run_capture(driver, argv, probe_environment(env));
  if (!r.ok()) throw std::runtime_error(driver + " cannot expand " + native.front());
  util::Hasher h;
  h.add_field("native-expansion", normalized_dry_run(r.err));
  const std::string digest = h.finish().hex();
  if (!path.empty()) write_memo_file(memo_dir, path, digest);
  return digest;
}

std::string GccAdapter::toolchain_id(const std::string& program, const util::Environment& env) const {
  return probe_toolchain(program, env, "").id;
}

}  // namespace kache::compiler::gcc
