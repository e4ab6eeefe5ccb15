#include "compiler/tool_files.hpp"

#include <algorithm>

#include "core/log.hpp"
#include "util/process.hpp"

namespace kache::compiler {

void ToolFiles::write(util::Writer& w) const {
  w.u32(static_cast<std::uint32_t>(files.size()));
  for (const auto& f : files) {
    w.str(f.path);
    util::write_identity(w, f.identity, false);
  }
  w.u32(static_cast<std::uint32_t>(bare.size()));
  for (const auto& b : bare) {
    w.str(b.name);
    w.str(b.resolved);
  }
  w.str(search_path);
}

ToolFiles ToolFiles::read(util::Reader& r) {
  ToolFiles t;
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    ToolFile f;
    f.path = r.str();
    f.identity = util::read_identity(r, false);
    t.files.push_back(std::move(f));
  }
  for (std::uint32_t i = 0, n = r.u32(); i < n; ++i) {
    BareName b;
    b.name = r.str();
    b.resolved = r.str();
    t.bare.push_back(std::move(b));
  }
  t.search_path = r.str();
  return t;
}

bool ToolFiles::still_valid() const {
  // A few stats: every hashed file keeps its identity ...
  for (const auto& f : files) {
    auto id = util::stat_identity(f.path);
    if (!id || !(*id == f.identity)) return false;
  }
  // ... and every bare name still resolves to the same file (a new ptxas or as earlier on the PATH
  // would now be the one the driver runs).
  const std::string cwd = util::current_dir();
  for (const auto& b : bare) {
    auto found = util::find_executable(b.name, search_path);
    if (!found || util::absolute_path(*found, cwd) != b.resolved) return false;
  }
  return true;
}

std::string identity_text(const util::FileIdentity& id) {
  return std::to_string(id.dev) + ":" + std::to_string(id.ino) + ":" + std::to_string(id.size) + ":" +
         std::to_string(id.mtime_ns) + ":" + std::to_string(id.ctime_ns);
}

void add_identity(util::Hasher& h, std::string_view name, const std::string& path) {
  auto id = util::stat_identity(path);
  h.add_field(name, id ? identity_text(*id) : "absent");
}

std::string content_digest(const std::string& path, const util::FileIdentity& id, const std::string& memo_dir) {
  if (memo_dir.empty()) return util::hash_file(path).hex();
  util::Hasher k;
  k.add_field("path", path);
  k.add_field("identity", identity_text(id));
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

std::string ProbeFiles::resolve(const std::string& word) {
  if (word.find('/') != std::string::npos) return util::absolute_path(word, cwd_);
  auto found = util::find_executable(word, t_.search_path);
  if (!found) return "";
  std::string abs = util::absolute_path(*found, cwd_);
  if (std::none_of(t_.bare.begin(), t_.bare.end(), [&](const BareName& b) { return b.name == word; })) {
    t_.bare.push_back({word, abs});
  }
  return abs;
}

void ProbeFiles::add(const std::string& role, const std::string& path) {
  if (std::any_of(t_.files.begin(), t_.files.end(), [&](const ToolFile& f) { return f.path == path; })) return;
  auto id = util::stat_identity(path);
  if (!id || id->is_dir) return;
  t_.files.push_back({path, *id});
  roles_.emplace_back(role, content_digest(path, *id, memo_dir_));
  // The input audits (tests/integration/test_gcc_input_audit.py) read what the toolchain id covers here.
  core::log().trace("toolchain file {} {}", role, path);
}

void ProbeFiles::hash_into(util::Hasher& h) {
  std::sort(roles_.begin(), roles_.end());
  for (const auto& [role, digest] : roles_) h.add_field("file:" + role, digest);
}

}  // namespace kache::compiler
