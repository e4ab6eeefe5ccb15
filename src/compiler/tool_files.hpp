#pragma once
// The files a toolchain id is computed from, shared by the adapters' toolchain probes (nvcc's and
// gcc's): each hashed program or data file with the identity it had when hashed, and each program
// named without a directory with the file it resolved to. A memoized probe is trusted while every
// file keeps its identity and every bare name still resolves the same way: a handful of stats.
#include <string>
#include <utility>
#include <vector>

#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/serial.hpp"

namespace kache::compiler {

// A file whose content is part of the toolchain id, and the identity it had when it was hashed.
struct ToolFile {
  std::string path;  // absolute
  util::FileIdentity identity;
};

// A program named without a directory, and the file it resolved to over the search path.
struct BareName {
  std::string name;
  std::string resolved;  // absolute
};

struct ToolFiles {
  std::vector<ToolFile> files;
  std::vector<BareName> bare;
  std::string search_path;  // the PATH bare names resolve through

  // Written as: files, bare names, search path (the layout of nvcc's memo since version 5).
  void write(util::Writer& w) const;
  static ToolFiles read(util::Reader& r);
  // Every file keeps its identity and every bare name resolves to the same file.
  bool still_valid() const;
};

// "dev:ino:size:mtime:ctime", for memo keys.
std::string identity_text(const util::FileIdentity& id);
// Adds a file's identity (or "absent") to a memo key.
void add_identity(util::Hasher& h, std::string_view name, const std::string& path);

// SHA-256 of a toolchain file, memoized in memo_dir/content/ by the file's path and identity: probes
// for other environments find the same 150 MB of tools already hashed. memo_dir "" = no memo.
std::string content_digest(const std::string& path, const util::FileIdentity& id, const std::string& memo_dir);

// Collects a probe's files into a ToolFiles and their content digests under named roles.
class ProbeFiles {
 public:
  ProbeFiles(ToolFiles& t, const std::string& cwd, const std::string& memo_dir)
      : t_(t), cwd_(cwd), memo_dir_(memo_dir) {}

  // Resolves a program name as the driver would (a bare name over the search path) and records the
  // result. Returns "" when it cannot be found.
  std::string resolve(const std::string& word);
  // Records a file whose content becomes part of the toolchain id under `role`.
  void add(const std::string& role, const std::string& path);
  void hash_into(util::Hasher& h);

 private:
  ToolFiles& t_;
  std::string cwd_;
  std::string memo_dir_;
  std::vector<std::pair<std::string, std::string>> roles_;
};

}  // namespace kache::compiler
