#include "compiler/nvcc/toolchain.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>

#include "compiler/env_table.hpp"
#include "core/log.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/process.hpp"
#include "util/serial.hpp"

namespace kache::compiler::nvcc {

namespace {

constexpr std::uint32_t kMemoVersion = 5;

// A file whose content is part of the toolchain id, and the identity it had when it was hashed.
struct ToolFile {
  std::string path;  // absolute
  util::FileIdentity identity;
};

// A program named without a directory, and the file it resolved to over nvcc's PATH.
struct BareName {
  std::string name;
  std::string resolved;  // absolute
};

struct Memo {
  Toolchain tc;
  std::vector<ToolFile> files;
  std::vector<BareName> bare;
  std::string search_path;  // the PATH nvcc resolves bare names through
  // Variables nvcc.profile references that the memo key does not cover: name, "=value" or "unset".
  std::vector<std::pair<std::string, std::string>> profile_env;
};

void write_identity(util::Writer& w, const util::FileIdentity& id) { util::write_identity(w, id, false); }
util::FileIdentity read_identity(util::Reader& r) { return util::read_identity(r, false); }

std::string serialize(const Memo& m) {
  util::Writer w;
  w.u32(kMemoVersion);
  w.str(m.tc.id);
  w.str(m.tc.description);
  w.str(m.tc.host_compiler);
  w.u32(static_cast<std::uint32_t>(m.tc.include_dirs.size()));
  for (const auto& d : m.tc.include_dirs) w.str(d);
  w.u32(static_cast<std::uint32_t>(m.files.size()));
  for (const auto& f : m.files) {
    w.str(f.path);
    write_identity(w, f.identity);
  }
  w.u32(static_cast<std::uint32_t>(m.bare.size()));
  for (const auto& b : m.bare) {
    w.str(b.name);
    w.str(b.resolved);
  }
  w.str(m.search_path);
  w.u32(static_cast<std::uint32_t>(m.profile_env.size()));
  for (const auto& [name, value] : m.profile_env) {
    w.str(name);
    w.str(value);
  }
  return w.take();
}

Memo deserialize(const std::string& data) {
  util::Reader r(data);
  if (r.u32() != kMemoVersion) throw std::runtime_error("old toolchain memo");
  Memo m;
  m.tc.id = r.str();
  m.tc.description = r.str();
  m.tc.host_compiler = r.str();
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) m.tc.include_dirs.push_back(r.str());
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    ToolFile f;
    f.path = r.str();
    f.identity = read_identity(r);
    m.files.push_back(std::move(f));
  }
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    BareName b;
    b.name = r.str();
    b.resolved = r.str();
    m.bare.push_back(std::move(b));
  }
  m.search_path = r.str();
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    std::string name = r.str();
    m.profile_env.emplace_back(std::move(name), r.str());
  }
  return m;
}

std::string env_value_field(const util::Environment& env, std::string_view name) {
  auto v = util::env_get(env, name);
  return v ? "=" + *v : "unset";
}

void add_identity(util::Hasher& h, std::string_view name, const std::string& path) {
  auto id = util::stat_identity(path);
  if (!id) {
    h.add_field(name, "absent");
    return;
  }
  h.add_field(name, std::to_string(id->dev) + ":" + std::to_string(id->ino) + ":" + std::to_string(id->size) +
                        ":" + std::to_string(id->mtime_ns) + ":" + std::to_string(id->ctime_ns));
}

// Splits a dry-run command line into words, honouring nvcc's double quotes ("/usr/bin"/g++-12).
std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') { quoted = !quoted; any = true; continue; }
    if (!quoted && (c == ' ' || c == '\t')) {
      if (any) words.push_back(cur);
      cur.clear();
      any = false;
      continue;
    }
    cur += c;
    any = true;
  }
  if (any) words.push_back(cur);
  return words;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

bool is_variable_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

// "#$ NAME=value" lines of a dry run: nvcc.profile's variables as nvcc expanded them.
std::optional<std::pair<std::string, std::string>> dryrun_variable(std::string_view body) {
  const auto eq = body.find('=');
  if (eq == std::string_view::npos || !is_variable_name(body.substr(0, eq))) return std::nullopt;
  return std::make_pair(std::string(body.substr(0, eq)), std::string(body.substr(eq + 1)));
}

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

// SHA-256 of a toolchain file, memoized in memo_dir/content/ by the file's path and identity: probes
// for other environments (another INCLUDES, PATH, ...) find the same 150 MB of tools already hashed.
std::string content_digest(const std::string& path, const util::FileIdentity& id, const std::string& memo_dir) {
  if (memo_dir.empty()) return util::hash_file(path).hex();
  util::Hasher k;
  k.add_field("path", path);
  k.add_field("identity", std::to_string(id.dev) + ":" + std::to_string(id.ino) + ":" + std::to_string(id.size) +
                              ":" + std::to_string(id.mtime_ns) + ":" + std::to_string(id.ctime_ns));
  const std::string memo = util::join_path(util::join_path(memo_dir, "content"), k.finish().hex());
  try {
    std::string hex = util::read_file(memo);
    if (hex.size() == 64) return hex;
  } catch (const std::exception&) {
  }
  const std::string hex = util::hash_file(path).hex();
  // Only a file that still has the identity it had before hashing is known to have this content.
  if (auto after = util::stat_identity(path); after && *after == id) {
    try {
      util::create_directories(util::dirname(memo));
      util::write_file_atomic(memo, hex);
    } catch (const std::exception& e) {
      core::log().debug("cannot write toolchain content memo: {}", e.what());
    }
  }
  return hex;
}

// Programs a dry run lists that nvcc performs on its own temporaries; they do not shape the output.
constexpr std::string_view kFileUtilities[] = {"rm", "cp", "mv"};

class ProbeFiles {
 public:
  ProbeFiles(Memo& m, const std::string& cwd, const std::string& memo_dir) : m_(m), cwd_(cwd), memo_dir_(memo_dir) {}

  // Resolves a program name as nvcc would (a bare name over its PATH) and records the result.
  // Returns "" when it cannot be found.
  std::string resolve(const std::string& word) {
    if (word.find('/') != std::string::npos) return util::absolute_path(word, cwd_);
    auto found = util::find_executable(word, m_.search_path);
    if (!found) return "";
    std::string abs = util::absolute_path(*found, cwd_);
    if (std::none_of(m_.bare.begin(), m_.bare.end(), [&](const BareName& b) { return b.name == word; })) {
      m_.bare.push_back({word, abs});
    }
    return abs;
  }

  // Records a file whose content becomes part of the toolchain id under `role`.
  void add(const std::string& role, const std::string& path) {
    if (std::any_of(m_.files.begin(), m_.files.end(), [&](const ToolFile& f) { return f.path == path; })) return;
    auto id = util::stat_identity(path);
    if (!id || id->is_dir) return;
    m_.files.push_back({path, *id});
    roles_.emplace_back(role, content_digest(path, *id, memo_dir_));
  }

  void hash_into(util::Hasher& h) {
    std::sort(roles_.begin(), roles_.end());
    for (const auto& [role, digest] : roles_) h.add_field("file:" + role, digest);
  }

 private:
  Memo& m_;
  std::string cwd_;
  std::string memo_dir_;
  std::vector<std::pair<std::string, std::string>> roles_;
};

Memo probe(const std::string& nvcc_path, const util::Environment& env, const std::optional<std::string>& ccbin,
           const std::string& scratch_dir, const std::string& memo_dir) {
  // Only what the memo is keyed by reaches the probe; keyed variables (PTXAS_FLAGS, CPATH, ...) are
  // key fields of their own, so the probe sees nvcc's defaults.
  const util::Environment probe_env = probe_environment(env);
  const std::string cwd = util::current_dir();

  auto version = util::run_capture(nvcc_path, {nvcc_path, "--version"}, probe_env);
  if (!version.ok()) throw std::runtime_error("nvcc --version failed");

  // The tool set comes from a representative -c of the default architecture, not from each compile's
  // own command, so the memo serves every compile of this toolchain and a hit runs no process. nvcc
  // 13's -c runs cudafe++, cicc, ptxas, fatbinary and the host compiler whatever the -arch set (a
  // PTX-only or LTO target runs a subset of them); the rest of bin/ is link-only (nvlink, bin2c) or
  // serves -arch=native, which passes through.
  std::vector<std::string> dry = {nvcc_path, "--dryrun", "-c", util::join_path(scratch_dir, "probe.cu"), "-o",
                                  util::join_path(scratch_dir, "probe.o")};
  if (ccbin) {
    dry.push_back("-ccbin");
    dry.push_back(*ccbin);
  }
  auto dr = util::run_capture(nvcc_path, dry, probe_env);
  if (!dr.ok()) throw std::runtime_error("nvcc --dryrun failed: " + first_line(dr.err));

  Memo m;
  std::string host_word, host_version_token;
  std::vector<std::pair<std::string, std::string>> profile_vars;  // in nvcc's order
  std::map<std::string, std::string> vars;
  std::vector<std::string> programs;
  std::istringstream lines(dr.err + dr.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("#$ ")) continue;
    std::string body = line.substr(3);
    if (auto var = dryrun_variable(body)) {
      vars[var->first] = var->second;
      if (var->first == "PATH") m.search_path = var->second;
      // PATH and LD_LIBRARY_PATH carry the caller's values; what they select is covered by the
      // resolved tools' content and the LD_LIBRARY_PATH key field.
      else if (var->first != "LD_LIBRARY_PATH") profile_vars.push_back(*var);
      continue;
    }
    auto words = split_words(body);
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
  if (host_word.empty()) throw std::runtime_error("cannot find the host compiler in nvcc --dryrun");

  ProbeFiles files(m, cwd, memo_dir);
  m.tc.host_compiler = files.resolve(host_word);
  if (m.tc.host_compiler.empty()) throw std::runtime_error("host compiler '" + host_word + "' not found on nvcc's PATH");
  if (!util::stat_identity(m.tc.host_compiler)) throw std::runtime_error("cannot stat host compiler " + m.tc.host_compiler);
  files.add("host", m.tc.host_compiler);
  for (const auto& p : programs) {
    const std::string path = files.resolve(p);
    if (path.empty()) throw std::runtime_error("nvcc's tool '" + p + "' not found on its PATH");
    files.add("tool:" + util::basename(p), path);
  }
  // cicc reads libdevice from NVVMIR_LIBRARY_DIR (nvcc passes it in cicc's environment, not its command).
  if (auto it = vars.find("NVVMIR_LIBRARY_DIR"); it != vars.end() && !it->second.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(util::absolute_path(it->second, cwd), ec)) {
      files.add("libdevice:" + e.path().filename().string(), e.path().string());
    }
  }
  // nvcc reads nvcc.profile beside its own executable, which the dry run names as _HERE_: where
  // `nvcc` is a wrapper script (`exec /usr/local/cuda/bin/nvcc "$@"`) or a link, the real nvcc and
  // its profile live there, not beside the name the build ran.
  std::string nvcc_home = util::dirname(nvcc_path);
  if (auto it = vars.find("_HERE_"); it != vars.end() && !it->second.empty()) {
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
    if (!find_env_rule(name)) m.profile_env.emplace_back(name, env_value_field(env, name));
  }

  auto hv = util::run_capture(m.tc.host_compiler, {m.tc.host_compiler, "--version"}, probe_env);
  if (!hv.ok()) throw std::runtime_error("host compiler --version failed");
  // The host compiler's own passes (GCC's cc1plus and as; clang answers with a bare name it does not
  // run, which is skipped): a driver of the same version over another back end keys apart.
  for (const char* prog : {"cc1plus", "as"}) {
    auto r = util::run_capture(m.tc.host_compiler, {m.tc.host_compiler, std::string("-print-prog-name=") + prog},
                               probe_env);
    std::string path = r.ok() ? first_line(r.out) : "";
    if (path.empty()) continue;
    if (path.find('/') == std::string::npos && prog == std::string_view("cc1plus")) continue;
    path = files.resolve(path);
    if (!path.empty()) files.add(std::string("host:") + prog, path);
  }

  // The host compiler's own search directories: headers appearing there are watched in direct mode.
  auto hs = util::run_capture(m.tc.host_compiler,
                              {m.tc.host_compiler, "-E", "-x", "c++", "-v", "/dev/null", "-o", "/dev/null"}, probe_env);
  {
    std::istringstream err(hs.err);
    bool in_list = false;
    while (std::getline(err, line)) {
      if (line.starts_with("#include <...> search starts here:")) { in_list = true; continue; }
      if (line.starts_with("End of search list.")) break;
      if (in_list && line.size() > 1 && line[0] == ' ') {
        std::string dir = line.substr(1);
        if (auto p = dir.find(" (framework directory)"); p != std::string::npos) dir.resize(p);
        m.tc.include_dirs.push_back(util::lexically_normal(dir));
      }
    }
  }
  for (const char* spec : {"INCLUDES", "SYSTEM_INCLUDES"}) {
    for (const auto& w : split_words(vars[spec])) {
      if (w.starts_with("-I") && w.size() > 2) m.tc.include_dirs.push_back(w.substr(2));
      else if (!w.starts_with("-")) m.tc.include_dirs.push_back(w);
    }
  }

  util::Hasher h;
  h.add_field("nvcc-version", version.out);
  h.add_field("host-version", hv.out);
  h.add_field("host-dialect", host_version_token);
  // The programs' and data files' content, not only their version text: a wrapper script, a replaced
  // ptxas or a rebuilt compiler that reports the same version still keys apart.
  auto nvcc_id = util::stat_identity(nvcc_path);
  if (!nvcc_id) throw std::runtime_error("cannot stat " + nvcc_path);
  h.add_field("nvcc-content", content_digest(nvcc_path, *nvcc_id, memo_dir));
  files.hash_into(h);
  // nvcc.profile's expansion (INCLUDES, PTXAS_FLAGS, TOP, ...) as nvcc printed it.
  for (const auto& [name, value] : profile_vars) h.add_field("profile:" + name, value);
  m.tc.id = h.finish().hex();
  m.tc.description = first_line(version.out.substr(version.out.rfind("Cuda compilation tools") == std::string::npos
                                                        ? 0
                                                        : version.out.rfind("Cuda compilation tools"))) +
                     "; host " + m.tc.host_compiler + " (" + first_line(hv.out) + ")";
  return m;
}

bool memo_still_valid(const Memo& m, const util::Environment& env) {
  // A few stats: every hashed file keeps its identity ...
  for (const auto& f : m.files) {
    auto id = util::stat_identity(f.path);
    if (!id || !(*id == f.identity)) return false;
  }
  // ... every bare name still resolves to the same file (a new ptxas or gcc earlier on nvcc's PATH
  // would now be the one nvcc runs) ...
  const std::string cwd = util::current_dir();
  for (const auto& b : m.bare) {
    auto found = util::find_executable(b.name, m.search_path);
    if (!found || util::absolute_path(*found, cwd) != b.resolved) return false;
  }
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
  for (std::string_view var : probe_variables(true)) mk.add_field(std::string("env:") + std::string(var), env_value_field(env, var));
  const std::string memo_key = mk.finish().hex();
  core::log().trace("toolchain memo key = {}", memo_key);
  const std::string memo_path = memo_dir.empty() ? "" : util::join_path(memo_dir, memo_key);

  if (!memo_path.empty() && util::exists(memo_path)) {
    try {
      Memo m = deserialize(util::read_file(memo_path));
      if (memo_still_valid(m, env)) {
        m.tc.from_memo = true;
        return m.tc;
      }
      core::log().debug("toolchain memo {} is stale: probing again", memo_key.substr(0, 12));
    } catch (const std::exception& e) {
      core::log().debug("toolchain memo unreadable ({}): probing again", e.what());
    }
  }

  // The memo lives in the cache dir: its files and directories take the cache umask (cache.umask).
  util::CacheUmaskScope cache_umask;
  util::TempDir scratch(memo_dir.empty() ? "/tmp" : memo_dir, ".probe-");
  Memo m = probe(nvcc_path, env, ccbin, scratch.path(), memo_dir);
  if (!memo_path.empty()) {
    try {
      util::write_file_atomic(memo_path, serialize(m));
    } catch (const std::exception& e) {
      core::log().debug("cannot write toolchain memo: {}", e.what());
    }
  }
  return m.tc;
}

}  // namespace kache::compiler::nvcc
