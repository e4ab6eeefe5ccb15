#pragma once
// Hashing: SHA-256 through OpenSSL (keys and content; collision resistance is what makes
// "same key => same object" hold), XXH3 for integrity checksums of stored entries.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/fs.hpp"

namespace kache::util {

struct Digest {
  std::array<std::uint8_t, 32> bytes{};
  std::string hex() const;
  static bool from_hex(std::string_view hex, Digest& out);
  bool operator==(const Digest&) const = default;
};

// Streaming SHA-256. add_field() is the domain-separated form every key uses: the field's name and the
// value are both length-prefixed, so no two different field sequences serialize alike.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(std::string_view data);
  void add_field(std::string_view name, std::string_view value);
  Digest finish();

 private:
  void* ctx_;  // SHA256_CTX*
};

Digest sha256(std::string_view data);
// Hashes a file's content; throws std::system_error when it cannot be read.
Digest hash_file(const std::string& path);
// The content of the file at `path` if it is the file with identity `expected`, still unchanged after it
// was read (fstat of the open file before and after), else nullopt: what was read belongs to that
// identity, even if the path was repointed (a symlink flipped, a directory renamed over) meanwhile.
std::optional<Digest> hash_file_as(const std::string& path, const FileIdentity& expected);

// HMAC-SHA-256 through OpenSSL's HMAC (EVP: its first use costs ~2 ms of provider set-up, so only the
// remote path, which waits on a network anyway, uses it).
Digest hmac_sha256(std::string_view key, std::string_view data);

// 128-bit XXH3 of data, as 32 hex characters (stored-entry checksums).
std::string xxh128_hex(std::string_view data);
// The same with a seed (a record's header fields folded in, so the checksum covers them too).
std::string xxh128_hex(std::string_view data, std::uint64_t seed);
std::uint64_t xxh64(std::string_view data);

// 128-bit XXH3 of a file's content, as 32 hex characters: the content digest of toolchain programs
// (compiler/tool_files.hpp says why XXH3 is enough there; sources and keys stay SHA-256). The file is
// read through a read-only mapping: no copy out of the page cache, measured a quarter faster than
// read() into a buffer over nvcc's 190 MB of tools. Throws std::system_error when the file cannot be
// read, or when it shrinks while it is read.
std::string xxh128_file_hex(const std::string& path);
// The same, of the file `path` reaches only while it is the file of identity `expected` (checked on the
// open file before and after the read); nullopt when it is not.
std::optional<std::string> xxh128_file_hex_as(const std::string& path, const FileIdentity& expected);
// The same over the first `size` bytes of the open file `fd`, mapped. A page past the file's end (the
// file shrank after its size was taken, or `size` was too large) raises SIGBUS, which is caught while
// the hash runs: the answer is then nullopt.
std::optional<std::string> xxh128_mapped_hex(int fd, std::size_t size);

}  // namespace kache::util
