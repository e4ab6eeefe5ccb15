#include "compiler/nvcc/toolchain.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>

#include "compiler/env_table.hpp"
#include "compiler/gcc/driver_probe.hpp"
#include "compiler/gcc/wrapper.hpp"
#include "compiler/nvcc/adapter.hpp"
#include "compiler/nvcc/stages.hpp"
#include "compiler/tool_files.hpp"
#include "core/log.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"
#include "util/serial.hpp"
#include "util/text.hpp"

namespace kache::compiler::nvcc {

namespace {

// 6: content digests are XXH3-128, the nvcc command is one of the files
constexpr std::uint32_t kMemoVersion = 8;  // 7: wrapper scripts followed; 8: host wrappers by behaviour

struct Memo {
  Toolchain tc;
  ToolFiles tools;  // search_path: the PATH nvcc resolves bare names through
  // Variables nvcc.profile references that the memo key does not cover: name, "=value" or "unset".
  std::vector<std::pair<std::string, std::string>> profile_env;
  // What a host compiler that is a wrapper script prints for nvcc's kinds of host pass (-###,
  // normalized): the driver it runs and the options it adds, in the toolchain id.
  std::vector<std::string> host_behaviour;  // in the id; not kept

  // What the memo keeps (compiler/tool_files.hpp's write_memo and read_memo walk this list).
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit&& visit) {
    visit(m.tc.id);
    visit(m.tc.description);
    visit(m.tc.host_compiler);
    visit(m.tc.include_dirs);
    visit(m.tools);
    visit(m.profile_env);
  }
};

std::string env_value_field(const util::Environment& env, std::string_view name) {
  auto v = util::env_get(env, name);
  return v ? "=" + *v : "unset";
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Replaces $NAME and ${NAME} with the dry run's variables (nvcc runs "$CICC_PATH/cicc").
std::string expand_variables(const std::string& word, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (std::size_t i = 0; i < word.size();) {
    if (word[i] != '$') {
      out += word[i++];
      continue;
    }
    const bool braced = i + 1 < word.size() && word[i + 1] == '{';
    std::size_t j = i + (braced ? 2 : 1);
    std::size_t k = j;
    while (k < word.size() && (std::isalnum(static_cast<unsigned char>(word[k])) || word[k] == '_')) ++k;
    const std::string name = word.substr(j, k - j);
    auto it = vars.find(name);
    out += it == vars.end() ? "" : it->second;
    i = k + (braced && k < word.size() && word[k] == '}' ? 1 : 0);
  }
  return out;
}

// Every $(NAME) nvcc.profile references: nvcc fills them from the environment (measured with an
// edited profile: `PTXAS_FLAGS += $(MYFLAG)` makes MYFLAG reach ptxas).
std::vector<std::string> profile_references(const std::string& profile) {
  std::vector<std::string> names;
  for (std::size_t p = profile.find("$("); p != std::string::npos; p = profile.find("$(", p + 2)) {
    const std::size_t close = profile.find(')', p + 2);
    if (close == std::string::npos) break;
    std::string name = profile.substr(p + 2, close - p - 2);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  return names;
}

// Programs a dry run lists that nvcc performs on its own temporaries; they do not shape the output.
constexpr std::string_view kFileUtilities[] = {"rm", "cp", "mv"};

// The host compiler's questions, asked all at once: its version, its own passes (GCC's cc1plus and as:
// a driver of the same version over another back end keys apart) and its own search directories
// (headers appearing there are watched in direct mode).
struct HostQuestions {
  HostQuestions(const std::string& compiler_path, const util::Environment& env)
      : compiler(compiler_path),
        version(start_capture(compiler, {compiler, "--version"}, env)),
        programs(compiler, env, {"cc1plus", "as"}),
        dirs(compiler, "c++", env) {}
  std::string compiler;
  std::future<util::ProcessResult> version;
  gcc::DriverPrograms programs;
  gcc::DriverIncludeDirs dirs;
};

}  // namespace

DryRun read_dry_run(const std::string& text) {
  DryRun run;
  auto& [host_word, host_version_token, profile_vars, vars, programs] = run;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("#$ ")) continue;
    std::string body = line.substr(3);
    if (auto var = dry_run_variable(body)) {
      vars[var->first] = var->second;
      // PATH and LD_LIBRARY_PATH carry the caller's values; what they select is covered by the
      // resolved tools' content and the LD_LIBRARY_PATH key field.
      if (var->first != "PATH" && var->first != "LD_LIBRARY_PATH") profile_vars.push_back(*var);
      continue;
    }
    auto words = util::split_quoted_words(body);
    if (words.empty()) continue;
    if (host_word.empty() && body.find(" -E ") != std::string::npos && body.find("-D__CUDACC__") != std::string::npos) {
      host_word = words[0];
    } else if (body.starts_with("cudafe++ ") || body.find("/cudafe++ ") != std::string::npos) {
      for (const auto& w : words) {
        if (w.starts_with("--gnu_version=") || w.starts_with("--clang_version=")) host_version_token = w;
      }
    }
    if (std::find(std::begin(kFileUtilities), std::end(kFileUtilities), words[0]) == std::end(kFileUtilities)) {
      programs.push_back(expand_variables(words[0], vars));
    }
  }
  return run;
}

std::vector<std::string> dry_run_include_dirs(const DryRun& run) {
  std::vector<std::string> dirs;
  for (const char* spec : {"INCLUDES", "SYSTEM_INCLUDES"}) {
    const auto value = run.vars.find(spec);
    if (value == run.vars.end()) continue;
    for (const auto& w : util::split_quoted_words(value->second)) {
      if (w.starts_with("-I") && w.size() > 2)
        dirs.push_back(w.substr(2));
      else if (!w.starts_with("-"))
        dirs.push_back(w);
    }
  }
  return dirs;
}

bool is_masquerade(const std::string& host_compiler) {
  std::error_code ec;
  return std::filesystem::equivalent(host_compiler, util::self_executable(), ec);
}

namespace {

// nvcc's host compiler is a wrapper script (CMake's -ccbin /opt/gcc/bin/g++, which runs
// `g++-real -B/opt/gcc/bin/ "$@"`): read by what it does (compiler/gcc/wrapper.hpp) for a preprocessing
// pass and a compile like nvcc's. Keyed: its scripts and the files they name by content, the paths
// they name by identity or absence, the variables they mention by value (profile_env), the driver they
// run by content, and what -### prints (the options added, the passes as run). nvcc runs the wrapper
// itself, so one that writes to stderr or may set a variable the compiler reads passes through, and so
// does one that can read what no list names (its reading would have to be made on every compile).
void add_host_wrapper(ProbeFiles& files, Memo& m, const util::Environment& env, const std::string& cwd) {
  const std::string host = m.tc.host_compiler;
  const ScriptChain chain = read_script_chain(host, m.tools.search_path);
  auto refuse = [&](const std::string& why) { throw UnreadableWrapper("nvcc's host compiler " + host + " " + why); };
  if (!chain.unpinned.empty()) refuse("can read inputs kache cannot name (" + chain.unpinned + ")");
  if (chain.traces) refuse("writes to stderr (set -x, >&2), which would reach the stored diagnostics");
  if (auto name = gcc::compiler_variable(chain, EnvRoute::nvcc)) refuse("mentions " + *name + ", which the compiler reads");
  for (const auto& s : chain.scripts) files.add("host:script", s);
  for (const auto& command : chain.commands) files.resolve(command.first);  // kept as bare names
  for (const auto& p : chain.named_paths) {
    files.watch(p);
    if (!is_script(p)) files.add("host:names", p);
  }
  for (const auto& v : chain.variables) m.profile_env.emplace_back(v, env_value_field(env, v));
  util::Environment run_env = env;  // as nvcc runs it: on the PATH of its dry run
  util::env_set(run_env, "PATH", m.tools.search_path);
  const std::vector<std::vector<std::string>> shapes = {
      {"-E", "-x", "c++", "-D__CUDACC__", "/dev/null", "-o", "/dev/null"},
      {"-c", "-x", "c++", "/dev/null", "-o", "/dev/null"}};
  for (const auto& shape : shapes) {
    auto run = gcc::wrapper_dry_run(host, shape, run_env, cwd);
    if (!run) refuse("fails or names no driver under -###");
    if (is_script(run->driver)) refuse("runs another script, " + run->driver);
    files.add_program("host:runs", run->driver);
    m.host_behaviour.push_back(run->text);
    for (std::size_t i = 0; i + 1 < run->added.size(); ++i) {
      if (run->added[i] != "-B") continue;
      // A prefix ending in '/' is a directory; any other is a file-name prefix in its directory.
      const std::string& prefix = run->added[i + 1];
      const std::string dir = util::absolute_path(prefix.ends_with('/') ? prefix : util::dirname(prefix), cwd);
      files.watch(dir);
    }
  }
}

// The files the toolchain id hashes, found from the dry run: the host compiler, nvcc's programs, cicc's
// libdevice, the real nvcc and its nvcc.profile; and the variables an edited profile pulls in.
void add_dry_run_files(ProbeFiles& files, Memo& m, const DryRun& run, const std::string& nvcc_path,
                       const util::Environment& env, const std::string& cwd) {
  m.tc.host_compiler = files.resolve(run.host_word);
  if (m.tc.host_compiler.empty())
    throw std::runtime_error("host compiler '" + run.host_word + "' not found on nvcc's PATH");
  if (!util::stat_identity(m.tc.host_compiler))
    throw std::runtime_error("cannot stat host compiler " + m.tc.host_compiler);
  // kache's masquerade (`gcc` -> kache, first on PATH) runs the next gcc on PATH: that one is the host
  // compiler whose content and passes are keyed (keying kache itself served the old host code after the
  // real gcc behind it changed).
  if (is_masquerade(m.tc.host_compiler)) {
    files.add("host:masquerade", m.tc.host_compiler);
    m.tc.host_compiler = files.resolve_past_kache(util::basename(m.tc.host_compiler));
    if (m.tc.host_compiler.empty()) throw std::runtime_error("kache's masquerade finds no host compiler past it");
  }
  if (is_script(m.tc.host_compiler)) {
    add_host_wrapper(files, m, env, cwd);
  } else {
    files.add_program("host", m.tc.host_compiler);
  }
  for (const auto& p : run.programs) {
    const std::string path = files.resolve(p);
    if (path.empty()) throw std::runtime_error("nvcc's tool '" + p + "' not found on its PATH");
    if (path == m.tc.host_compiler) continue;  // recorded above (a wrapper is read by behaviour)
    files.add_program("tool:" + util::basename(p), path);
  }
  // cicc reads libdevice from NVVMIR_LIBRARY_DIR (nvcc passes it in cicc's environment, not its command).
  if (auto it = run.vars.find("NVVMIR_LIBRARY_DIR"); it != run.vars.end() && !it->second.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(util::absolute_path(it->second, cwd), ec)) {
      files.add("libdevice:" + e.path().filename().string(), e.path().string());
    }
  }
  // nvcc reads nvcc.profile beside its own executable, which the dry run names as _HERE_: where
  // `nvcc` is a wrapper script (`exec /usr/local/cuda/bin/nvcc "$@"`) or a link, the real nvcc and
  // its profile live there, not beside the name the build ran.
  std::string nvcc_home = util::dirname(nvcc_path);
  if (auto it = run.vars.find("_HERE_"); it != run.vars.end() && !it->second.empty()) {
    nvcc_home = util::absolute_path(it->second, cwd);
    files.add("nvcc-executable", util::join_path(nvcc_home, "nvcc"));
  }
  const std::string profile_path = util::join_path(nvcc_home, "nvcc.profile");
  std::string profile_text;
  if (util::exists(profile_path)) {
    profile_text = util::read_file(profile_path);
    files.add("nvcc.profile", util::absolute_path(profile_path, cwd));
  }
  // The table's variables are either in the memo key or kept from the probe; any other name an
  // (edited) profile pulls in must keep its value for the memo to hold.
  for (const auto& name : profile_references(profile_text)) {
    if (!find_env_rule(name, EnvRoute::nvcc)) m.profile_env.emplace_back(name, env_value_field(env, name));
  }

}

// The toolchain id (every version fact and hashed file) and its description for logs.
void name_toolchain(Memo& m, ProbeFiles& files, const DryRun& run, const std::string& nvcc_version,
                    const std::string& host_version) {
  util::Hasher h;
  h.add_field("nvcc-version", nvcc_version);
  h.add_field("host-version", host_version);
  h.add_field("host-dialect", run.host_version_token);
  for (const auto& text : m.host_behaviour) h.add_field("host-wrapper-dry-run", text);
  files.hash_into(h);
  // nvcc.profile's expansion (INCLUDES, PTXAS_FLAGS, TOP, ...) as nvcc printed it.
  for (const auto& [name, value] : run.profile_vars) h.add_field("profile:" + name, value);
  m.tc.id = h.finish().hex();
  m.tc.description = first_line(nvcc_version.substr(nvcc_version.rfind("Cuda compilation tools") == std::string::npos
                                                       ? 0
                                                       : nvcc_version.rfind("Cuda compilation tools"))) +
                     "; host " + m.tc.host_compiler + " (" + first_line(host_version) + ")";
}

Memo probe(const std::string& nvcc_path, const util::Environment& env, const std::optional<std::string>& ccbin,
           const std::string& scratch_dir, const std::string& memo_dir) {
  // Only what the memo is keyed by reaches the probe; keyed variables (PTXAS_FLAGS, CPATH, ...) are
  // key fields of their own, so the probe sees nvcc's defaults.
  const util::Environment probe_env = probe_environment(env);
  const std::string cwd = util::current_dir();

  // Asked beside the dry run, which takes longer (it runs the host compiler): read at the end.
  auto version_answer = start_capture(nvcc_path, {nvcc_path, "--version"}, probe_env);

  // The tool set comes from a representative -c of the default architecture, not from each compile's
  // own command, so the memo serves every compile of this toolchain and a hit runs no process. nvcc
  // 13's -c runs cudafe++, cicc, ptxas, fatbinary and the host compiler whatever the -arch set (a
  // PTX-only or LTO target runs a subset of them); the rest of bin/ is link-only (nvlink, bin2c) or
  // serves -arch=native, which passes through.
  std::vector<std::string> dry = {nvcc_path, "--dryrun",
                                  "-c",      util::join_path(scratch_dir, "probe.cu"),
                                  "-o",      util::join_path(scratch_dir, "probe.o")};
  if (ccbin) {
    dry.push_back("-ccbin");
    dry.push_back(*ccbin);
  }
  auto dryrun_answer = start_capture(nvcc_path, dry, probe_env);

  // The host compiler is usually `gcc` on the PATH: its questions start now, beside the dry run (which
  // takes longest), and their answers are used only if the dry run names that same compiler; otherwise
  // they are asked again of the one it names.
  std::optional<HostQuestions> early;
  if (!ccbin && !util::env_get(probe_env, "NVCC_CCBIN")) {
    if (auto gcc = util::find_executable("gcc", util::env_get(probe_env, "PATH").value_or(""))) {
      early.emplace(util::absolute_path(*gcc, cwd), probe_env);
    }
  }

  Memo m;
  ProbeFiles files(m.tools, cwd, memo_dir);
  // The programs' and data files' content, not only their version text: a wrapper script, a replaced
  // ptxas or a rebuilt compiler that reports the same version still keys apart. The command's own
  // (nvcc, 30 MB) is hashed while the dry run runs.
  if (!util::stat_identity(nvcc_path)) throw std::runtime_error("cannot stat " + nvcc_path);
  files.add_program("nvcc-command", nvcc_path);
  files.digest_pending();

  const util::ProcessResult dr = dryrun_answer.get();
  if (!dr.ok()) throw std::runtime_error("nvcc --dryrun failed: " + first_line(dr.err));

  DryRun run = read_dry_run(dr.err + dr.out);
  std::map<std::string, std::string>& vars = run.vars;
  if (auto path = vars.find("PATH"); path != vars.end()) m.tools.search_path = path->second;
  if (run.host_word.empty()) throw std::runtime_error("cannot find the host compiler in nvcc --dryrun");

  add_dry_run_files(files, m, run, nvcc_path, env, cwd);
  // The host compiler's questions (asked early when the dry run confirms the guess); nvcc's files are
  // hashed while they run.
  std::optional<HostQuestions> late;
  if (!early || early->compiler != m.tc.host_compiler) late.emplace(m.tc.host_compiler, probe_env);
  HostQuestions& host = late ? *late : *early;
  auto& host_version_answer = host.version;
  gcc::DriverPrograms& host_programs = host.programs;
  gcc::DriverIncludeDirs& host_dirs = host.dirs;
  files.digest_pending();

  const util::ProcessResult version = version_answer.get();
  if (!version.ok()) throw std::runtime_error("nvcc --version failed");
  const util::ProcessResult hv = host_version_answer.get();
  if (!hv.ok()) throw std::runtime_error("host compiler --version failed");
  host_programs.add_to(files);
  m.tc.include_dirs = host_dirs.get();
  for (auto& dir : dry_run_include_dirs(run)) m.tc.include_dirs.push_back(std::move(dir));

  name_toolchain(m, files, run, version.out, hv.out);
  return m;
}

bool memo_still_valid(const Memo& m, const util::Environment& env) {
  // Every hashed file keeps its identity and every bare name resolves as before (a new ptxas or gcc
  // earlier on nvcc's PATH would now be the one nvcc runs) ...
  if (!m.tools.still_valid()) return false;
  // ... and the variables nvcc.profile pulls from the environment are unchanged.
  for (const auto& [name, value] : m.profile_env) {
    if (env_value_field(env, name) != value) return false;
  }
  return true;
}

}  // namespace

Toolchain probe_toolchain(const std::string& nvcc_path, const util::Environment& env,
                          const std::optional<std::string>& ccbin, const std::string& memo_dir) {
  util::Hasher mk;
  mk.add_field("memo-version", std::to_string(kMemoVersion));
  mk.add_field("nvcc", nvcc_path);
  add_identity(mk, "nvcc-id", nvcc_path);
  add_identity(mk, "nvcc-profile-id", util::join_path(util::dirname(nvcc_path), "nvcc.profile"));
  mk.add_field("ccbin", ccbin.value_or(""));
  // Everything the environment table says changes the probe's answer (PATH, NVCC_CCBIN, INCLUDES, ...).
  for (std::string_view var : probe_variables(EnvRoute::nvcc))
    mk.add_field(std::string("env:") + std::string(var), env_value_field(env, var));
  const std::string memo_key = mk.finish().hex();
  core::log().trace("toolchain memo key = {}", memo_key);
  return memoized_probe<Memo>(
             memo_dir, memo_key, nvcc_path, kMemoVersion, [&](const Memo& m) { return memo_still_valid(m, env); },
             [&] {
               util::TempDir scratch(probe_scratch_parent(memo_dir), ".probe-");
               return probe(nvcc_path, env, ccbin, scratch.path(), memo_dir);
             })
      .tc;
}

std::string NvccAdapter::toolchain_id(const std::string& program, const util::Environment& env) const {
  return probe_toolchain(program, env, std::nullopt, "").id;
}

}  // namespace kache::compiler::nvcc
