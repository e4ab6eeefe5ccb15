#pragma once
// The embedded default store: one file per entry under <cache_dir>/<k0>/<k1k2>/<key>, holding the
// container bytes of core/entry_format.hpp as they were put.
//
// Hits read the file in parts instead of whole (read_value, read_parts): a raw record's payload straight
// into the string returned, a split entry's body cloned into place (FICLONERANGE on XFS, Btrfs,
// bcachefs…, else copy_file_range), a split-zstd entry's body decompressed straight into its file. A
// reader verifies magic, checksums and sizes; any mismatch counts as corruption: the file is removed
// and the lookup is a miss.
//
// Size bound: the 16 top-level shards each keep a size counter (<shard>/size, updated under an flock on
// <shard>/lock). When the sum passes max_size after a put, one process (flock on <dir>/cleanup.lock)
// evicts least recently used entries across all shards (a hit bumps the entry's mtime) down to 90% of
// max_size. Many kache processes can do this at once.
#include <sys/stat.h>
#include <cstdint>
#include <functional>
#include <string>

#include "storage/storage.hpp"

namespace kache::core::container {
struct RawHeader;
struct SplitHeader;
}  // namespace kache::core::container

namespace kache::storage {

struct OpenEntry;

struct LocalStorageOptions {
  std::string dir;
  std::uint64_t max_size = 10ull << 30;
};

class LocalStorage final : public Storage {
 public:
  explicit LocalStorage(LocalStorageOptions options);
  std::string name() const override { return "local"; }
  StorageLookup get(std::string_view key) override;
  StorageStatus put(std::string_view key, std::string_view bytes) override;
  StorageStatus remove(std::string_view key) override;

  // The hit path. The decoded value of the container under key (a raw record is read straight into
  // the string returned).
  StorageLookup read_value(std::string_view key);
  // A split entry's head, with its body put into a new file in body_dir (see Parts); other containers
  // give their whole value.
  StorageResult<std::optional<Parts>> read_parts(std::string_view key, const std::string& body_dir);

  // Housekeeping used by the CLI (throw on failure).
  std::uint64_t total_size() const;   // bytes on disk, from the shard counters
  std::uint64_t entry_count() const;  // files, by scanning
  void clear();                       // removes every entry
  void trim_all();                    // enforces max_size now (after --max-size lowers it)
  // Counts corrupt entries found by reads; the pipeline folds it into the stats.
  int corrupt_found() const { return corrupt_found_; }

 private:
  std::string entry_path(std::string_view key) const;
  void evict(const std::string& keep);
  void put_blob(std::string_view key, std::string_view blob);
  void remove_entry(std::string_view key);
  std::optional<OpenEntry> open_entry(std::string_view key) const;
  std::optional<std::string> find_value(std::string_view key);
  std::optional<std::string> read_raw_payload(std::string_view key, const OpenEntry& e,
                                              const core::container::RawHeader& h);
  std::optional<std::string> read_and_decode(std::string_view key, const OpenEntry& e);
  std::optional<Parts> find_parts(std::string_view key, const std::string& body_dir);
  std::optional<Parts> restore_split(std::string_view key, const OpenEntry& e, const core::container::SplitHeader& h,
                                     const std::string& body_dir);
  std::optional<Parts> stream_split_zstd(std::string_view key, const OpenEntry& e, const std::string& body_dir);
  void drop_corrupt(std::string_view key, const OpenEntry& e);
  LocalStorageOptions opt_;
  int corrupt_found_ = 0;
};

}  // namespace kache::storage
