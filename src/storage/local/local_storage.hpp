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
// Size bound: each of the 16 top-level shards keeps a counters file (<shard>/size: bytes and entries,
// updated under an flock on <shard>/lock with every put and removal), so the size and the entry count
// cost 16 small reads, never a walk. A shard may hold 1/16 of max_size (its share). Eviction is least
// recently used (a hit bumps the entry's mtime) and bounded per compile, whatever the cache holds:
//  - a small cache (at most kSampleFiles entries in all): the put that passes max_size evicts across
//    all shards down to 90 % of it, at most kMaxEvictionsPerPut entries (one process at a time,
//    non-blocking flock on <dir>/cleanup.lock);
//  - a larger one: the put that leaves its shard over its share evicts from a sample of that shard
//    (about kSampleFiles files of consecutive <k1k2> directories from the one written): the oldest of
//    the sample go, in proportion to what the shard must lose to reach 90 % of its share, at most
//    kMaxEvictionsPerPut of them. The sample's age spread is the shard's, so the oldest of the sample
//    are among the oldest of the shard (ccache's approximation, one level finer); the shard converges
//    to its share over the next puts.
// cleanup() (kache -M, the on-demand cleanup) and evict_older_than() walk every shard.
//
// Others may write a group-shared cache dir (cache.umask): every file is opened below the cache dir's
// own descriptor, held for the store's lifetime (util::Beneath: no link followed at any component, no
// open that waits, regular files only). A link, FIFO or directory planted at an entry's path is a miss
// that the next put replaces; eviction, cleanup and clear never enter a linked directory and delete only
// names inside the cache dir, never a link's target.
//
// Companions: kache explain's record of an entry lives beside it as <key>.explain; it counts towards
// the size (not the entries) and goes when its entry is evicted or removed.
#include <sys/stat.h>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "storage/storage.hpp"
#include "util/beneath.hpp"

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

  // Writes kache explain's record of the entry under key beside it (see Companions above); returns its path.
  std::string put_explain_record(std::string_view key, std::string_view text);

  // Housekeeping used by the CLI (throw on failure). Progress is told in steps of one <k1k2>
  // directory out of kProgressSteps; none by default.
  using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;
  static constexpr std::uint64_t kProgressSteps = 16 * 256;
  std::uint64_t total_size();   // bytes on disk of every file kept, from the shard counters
  std::uint64_t entry_count();  // entries (companions not counted), from the shard counters
  // Removes every entry; returns how many were removed.
  std::uint64_t clear(const Progress& progress = {});
  // Every shard down to 90 % of its share of max_size now, least recently used first, and exact
  // counters (kache -M after lowering the limit; the on-demand cleanup).
  void cleanup(const Progress& progress = {});
  void trim_all() { cleanup(); }
  // Removes the entries not used (read or written) for max_age_ns; returns how many were removed.
  std::uint64_t evict_older_than(std::int64_t max_age_ns, const Progress& progress = {});
  // kache -X: rewrites every compressed entry (and every uncompressed split one) with zstd at level, 0
  // meaning uncompressed; raw records (manifests) stay raw. The containers do not record their level, so
  // every one is rewritten. Each file is replaced atomically (temp + rename under the shard lock, mtime
  // kept) and its shard's counters adjusted; unreadable entries are left as they are and counted.
  struct RecompressCounts {
    std::uint64_t recompressed = 0, kept = 0, unreadable = 0;
    std::uint64_t bytes_before = 0, bytes_after = 0;  // stored size of the entries read, before and after
  };
  RecompressCounts recompress(int level, const Progress& progress = {});
  // Counts corrupt entries found by reads; the pipeline folds it into the stats.
  int corrupt_found() const { return corrupt_found_; }

  // The bounds of the eviction a put may do (see Size bound above).
  static constexpr std::size_t kSampleFiles = 1024;
  static constexpr std::size_t kMaxEvictionsPerPut = 128;

 private:
  // The entry file of key, relative to the cache dir.
  static std::string entry_path(std::string_view key);
  // The cache dir, opened once; nullptr when it does not exist (yet) and `create` is not set.
  const util::Beneath* root(bool create);
  // root(true), throwing when the cache dir cannot be opened.
  const util::Beneath& writable_root();
  void make_room(int shard, std::string_view key, std::uint64_t shard_entries, const std::string& keep);
  void evict_across_shards(const std::string& keep);
  void evict_from_sample(int shard, std::string_view key, const std::string& keep);
  std::string put_blob(std::string_view key, std::string_view blob, std::string_view suffix);
  void remove_entry(std::string_view key);
  std::optional<OpenEntry> open_entry(std::string_view key);
  std::optional<std::string> find_value(std::string_view key);
  std::optional<std::string> read_raw_payload(std::string_view key, const OpenEntry& e,
                                              const core::container::RawHeader& h);
  std::optional<std::string> read_and_decode(std::string_view key, const OpenEntry& e);
  std::optional<Parts> find_parts(std::string_view key, const std::string& body_dir);
  std::optional<Parts> restore_split(std::string_view key, const OpenEntry& e, const core::container::SplitHeader& h,
                                     const std::string& body_dir);
  std::optional<Parts> stream_split_zstd(std::string_view key, const OpenEntry& e, const std::string& body_dir);
  void drop_corrupt(std::string_view key, const OpenEntry& e);
  void recompress_file(const util::Beneath& root, const std::string& path, int level, RecompressCounts& counts);
  LocalStorageOptions opt_;
  std::unique_ptr<std::mutex> root_mutex_ = std::make_unique<std::mutex>();
  std::optional<util::Beneath> root_;
  int corrupt_found_ = 0;
};

}  // namespace kache::storage
