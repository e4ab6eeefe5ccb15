#include "compiler/nvcc/toolchain.hpp"

#include <sstream>
#include <stdexcept>

#include "core/log.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/serial.hpp"

namespace kache::compiler::nvcc {

namespace {

constexpr std::uint32_t kMemoVersion = 3;

struct Memo {
  Toolchain tc;
  util::FileIdentity host_identity;
  std::string bare_name;   // non-empty when nvcc names the host compiler without a directory
  std::string search_path; // the PATH nvcc resolves it through
};

std::string serialize(const Memo& m) {
  util::Writer w;
  w.u32(kMemoVersion);
  w.str(m.tc.id);
  w.str(m.tc.description);
  w.str(m.tc.host_compiler);
  w.u32(static_cast<std::uint32_t>(m.tc.include_dirs.size()));
  for (const auto& d : m.tc.include_dirs) w.str(d);
  w.u64(m.host_identity.dev);
  w.u64(m.host_identity.ino);
  w.i64(m.host_identity.size);
  w.i64(m.host_identity.mtime_ns);
  w.i64(m.host_identity.ctime_ns);
  w.str(m.bare_name);
  w.str(m.search_path);
  return w.take();
}

Memo deserialize(const std::string& data) {
  util::Reader r(data);
  if (r.u32() != kMemoVersion) throw std::runtime_error("old toolchain memo");
  Memo m;
  m.tc.id = r.str();
  m.tc.description = r.str();
  m.tc.host_compiler = r.str();
  const std::uint32_t n = r.u32();
  for (std::uint32_t i = 0; i < n; ++i) m.tc.include_dirs.push_back(r.str());
  m.host_identity.dev = r.u64();
  m.host_identity.ino = r.u64();
  m.host_identity.size = r.i64();
  m.host_identity.mtime_ns = r.i64();
  m.host_identity.ctime_ns = r.i64();
  m.bare_name = r.str();
  m.search_path = r.str();
  return m;
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

Memo probe(const std::string& nvcc_path, const util::Environment& env, const std::optional<std::string>& ccbin,
           const std::string& scratch_dir) {
  util::Environment probe_env = env;
  // The driver-flag variables are keyed on their own; the probe wants nvcc's bare defaults.
  std::erase_if(probe_env, [](const std::string& kv) {
    return kv.starts_with("NVCC_PREPEND_FLAGS=") || kv.starts_with("NVCC_APPEND_FLAGS=");
  });

  auto version = util::run_capture(nvcc_path, {nvcc_path, "--version"}, probe_env);
  if (!version.ok()) throw std::runtime_error("nvcc --version failed");

  std::vector<std::string> dry = {nvcc_path, "--dryrun", "-c", util::join_path(scratch_dir, "probe.cu"), "-o",
                                  util::join_path(scratch_dir, "probe.o")};
  if (ccbin) {
    dry.push_back("-ccbin");
    dry.push_back(*ccbin);
  }
  auto dr = util::run_capture(nvcc_path, dry, probe_env);
  if (!dr.ok()) throw std::runtime_error("nvcc --dryrun failed: " + first_line(dr.err));

  Memo m;
  std::string host_word, host_version_token, includes, system_includes;
  std::istringstream lines(dr.err + dr.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("#$ ")) continue;
    std::string body = line.substr(3);
    if (body.starts_with("PATH=")) m.search_path = body.substr(5);
    else if (body.starts_with("INCLUDES=")) includes = body.substr(9);
    else if (body.starts_with("SYSTEM_INCLUDES=")) system_includes = body.substr(16);
    else if (host_word.empty() && body.find(" -E ") != std::string::npos &&
             body.find("-D__CUDACC__") != std::string::npos) {
      auto words = split_words(body);
      if (!words.empty()) host_word = words[0];
    } else if (body.starts_with("cudafe++ ") || body.find("/cudafe++ ") != std::string::npos) {
      for (const auto& w : split_words(body)) {
        if (w.starts_with("--gnu_version=") || w.starts_with("--clang_version=")) host_version_token = w;
      }
    }
  }
  if (host_word.empty()) throw std::runtime_error("cannot find the host compiler in nvcc --dryrun");

  if (host_word.find('/') == std::string::npos) {
    m.bare_name = host_word;
    auto found = util::find_executable(host_word, m.search_path);
    if (!found) throw std::runtime_error("host compiler '" + host_word + "' not found on nvcc's PATH");
    m.tc.host_compiler = *found;
  } else {
    m.tc.host_compiler = host_word;
  }
  auto hid = util::stat_identity(m.tc.host_compiler);
  if (!hid) throw std::runtime_error("cannot stat host compiler " + m.tc.host_compiler);
  m.host_identity = *hid;

  auto hv = util::run_capture(m.tc.host_compiler, {m.tc.host_compiler, "--version"}, probe_env);
  if (!hv.ok()) throw std::runtime_error("host compiler --version failed");

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
  for (const auto& spec : {includes, system_includes}) {
    for (const auto& w : split_words(spec)) {
      if (w.starts_with("-I") && w.size() > 2) m.tc.include_dirs.push_back(w.substr(2));
      else if (!w.starts_with("-")) m.tc.include_dirs.push_back(w);
    }
  }

  util::Hasher h;
  h.add_field("nvcc-version", version.out);
  h.add_field("host-version", hv.out);
  h.add_field("host-dialect", host_version_token);
  // The binaries' content, not only their version text: a wrapper script or a rebuilt compiler that
  // reports the same version still keys apart.
  h.add_field("nvcc-content", util::hash_file(nvcc_path).hex());
  h.add_field("host-content", util::hash_file(m.tc.host_compiler).hex());
  h.add_field("nvcc-includes", includes);
  h.add_field("nvcc-system-includes", system_includes);
  m.tc.id = h.finish().hex();
  m.tc.description = first_line(version.out.substr(version.out.rfind("Cuda compilation tools") == std::string::npos
                                                        ? 0
                                                        : version.out.rfind("Cuda compilation tools"))) +
                     "; host " + m.tc.host_compiler + " (" + first_line(hv.out) + ")";
  return m;
}

bool memo_still_valid(const Memo& m) {
  auto id = util::stat_identity(m.tc.host_compiler);
  if (!id || !(*id == m.host_identity)) return false;
  if (!m.bare_name.empty()) {
    // A new compiler of the same name earlier on nvcc's PATH would now be the one nvcc runs.
    auto found = util::find_executable(m.bare_name, m.search_path);
    if (!found || *found != m.tc.host_compiler) return false;
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
  mk.add_field("PATH", util::env_get(env, "PATH").value_or(""));
  mk.add_field("ccbin", ccbin.value_or(""));
  mk.add_field("NVCC_CCBIN", util::env_get(env, "NVCC_CCBIN").value_or("\x01unset"));
  const std::string memo_key = mk.finish().hex();
  const std::string memo_path = memo_dir.empty() ? "" : util::join_path(memo_dir, memo_key);

  if (!memo_path.empty() && util::exists(memo_path)) {
    try {
      Memo m = deserialize(util::read_file(memo_path));
      if (memo_still_valid(m)) {
        m.tc.from_memo = true;
        return m.tc;
      }
      core::log().debug("toolchain memo {} is stale: probing again", memo_key.substr(0, 12));
    } catch (const std::exception& e) {
      core::log().debug("toolchain memo unreadable ({}): probing again", e.what());
    }
  }

  util::TempDir scratch(memo_dir.empty() ? "/tmp" : memo_dir, ".probe-");
  Memo m = probe(nvcc_path, env, ccbin, scratch.path());
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
