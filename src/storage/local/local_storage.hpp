#pragma once
// The embedded default store: one file per entry under <cache_dir>/<k0>/<k1k2>/<key>.
//
// File format (all integers little endian):
//   "KACHE\0E1"  8-byte magic and format version
//   u64          uncompressed size
//   32 bytes     XXH3-128 checksum of the compressed payload, hex
//   ...          zstd frame
// A reader verifies magic, checksum and size; any mismatch counts as corruption: the file is removed
// and the lookup is a miss.
//
// Size bound: the 16 top-level shards each keep a size counter (<shard>/size, updated under an flock on
// <shard>/lock). When the sum passes max_size after a put, one process (flock on <dir>/cleanup.lock)
// evicts least recently used entries across all shards (a hit bumps the entry's mtime) down to 90% of
// max_size. Many kache processes can do this at once.
#include <cstdint>
#include <functional>
#include <string>
#include <sys/stat.h>

#include "storage/storage.hpp"

namespace kache::storage {

struct OpenEntry;

struct LocalStorageOptions {
  std::string dir;
  std::uint64_t max_size = 10ull << 30;
  int compression_level = 3;
  // false: results are stored uncompressed in the split layout ("KACHE\0B1": head, then the object
  // from a 4096-byte boundary to the end of the file), so a hit clones the object into place
  // (FICLONERANGE on XFS, Btrfs, bcachefs…) or lets the kernel copy it; more disk, cheaper hits.
  bool compress = true;
};

class LocalStorage final : public Storage {
 public:
  explicit LocalStorage(LocalStorageOptions options);
  std::string name() const override { return "local"; }
  std::optional<std::string> get(std::string_view key) override;
  void put(std::string_view key, std::string_view value) override;
  void remove(std::string_view key) override;
  // Same as put, without compression: for records read on every hit (manifests), where decompressing
  // costs more than reading the bytes. Format "KACHE\0R1", size, XXH3-128 of the payload, payload.
  void put_uncompressed(std::string_view key, std::string_view value);
  void put_parts(std::string_view key, std::string_view head, std::string_view body) override;
  std::optional<Parts> get_parts(std::string_view key, const std::string& body_dir) override;

  // Housekeeping used by the CLI.
  std::uint64_t total_size() const;          // bytes on disk, from the shard counters
  std::uint64_t entry_count() const;         // files, by scanning
  void clear();                              // removes every entry
  void trim_all();                           // enforces max_size now (after --max-size lowers it)
  // Counts corrupt entries found by get(); the pipeline folds it into the stats.
  int corrupt_found() const { return corrupt_found_; }

 private:
  std::string entry_path(std::string_view key) const;
  void evict(const std::string& keep);
  void put_blob(std::string_view key, const std::string& blob);
  std::optional<OpenEntry> open_entry(std::string_view key) const;
  std::optional<std::string> read_and_decode(std::string_view key, const std::string& path, int fd,
                                             const struct stat& st);
  void drop_corrupt(std::string_view key, const std::string& path, const struct stat& st);
  std::optional<Parts> stream_split_zstd(std::string_view key, const std::string& path, int fd,
                                         const struct stat& st, const std::string& body_dir);
  LocalStorageOptions opt_;
  int corrupt_found_ = 0;
};

}  // namespace kache::storage
