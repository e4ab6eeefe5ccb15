#pragma once
// What this cache dir has already verified about a file (its content digest) or a toolchain directory
// (the digest of its names) under the identity it has now, shared by every compile of the cache dir.
//
// Why: a manifest records the identities its files had where it was written. On another machine, or
// after the toolchain was reinstalled or touched, every identity differs, and each compile's direct
// lookup would hash its whole closure again (a tiny CUDA TU: 186 headers, 3.4 MB, +5.6 ms CPU per hit,
// measured) because each TU has its own manifest. With this memo only the first compile reads a header;
// the others find "path P with identity I has digest D" and compare D with the manifest's digest.
//
// Trust: the same as direct mode's own (a file keeps its content while it keeps its identity: device,
// inode, size, mtime and ctime in ns). Only identities older than the file system's clock margin are
// recorded (a racy one could change within the same timestamp). Records live in <cache>/identities, one
// line each with its own checksum; a torn or damaged line is ignored, and the file starts over past a
// size bound. Loaded on first use only: a hit whose identities all match never reads it.
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::core {

class VerifiedIdentities {
 public:
  enum class Kind : char { file = 'f', listing = 'd' };
  // Past this the file starts over: every compile with a moved identity parses it whole (4 MiB cost
  // ~20 ms a hit; 512 KiB, ~3,000 identities, a few ms).
  static constexpr std::uint64_t kMaxBytes = 512u << 10;

  explicit VerifiedIdentities(std::string path) : path_(std::move(path)) {}
  VerifiedIdentities(const VerifiedIdentities&) = delete;
  VerifiedIdentities& operator=(const VerifiedIdentities&) = delete;
  ~VerifiedIdentities() { flush(); }

  // Whether `digest` was verified for `path` under exactly this identity.
  bool verified(Kind kind, std::string_view path, const util::FileIdentity& id, const util::Digest& digest);
  // Records a verification (kept in memory until flush()).
  void add(Kind kind, std::string_view path, const util::FileIdentity& id, const util::Digest& digest);
  // Appends what add() recorded, in one write; failures are ignored (it is a memo).
  void flush();

  // One record's line (with its newline), and its parse; exposed for the unit tests.
  static std::string format_record(Kind kind, std::string_view path, const util::FileIdentity& id,
                                   const util::Digest& digest);
  static bool parse_record(std::string_view line, std::string& key, util::Digest& digest);

 private:
  static std::string key_of(Kind kind, std::string_view path, const util::FileIdentity& id);
  void load();

  std::string path_;
  bool loaded_ = false;
  std::unordered_map<std::string, util::Digest> known_;
  std::string pending_;  // formatted records not yet written
};

}  // namespace kache::core
