#pragma once
// A directory shared between machines (NFS, SMB, a cluster filesystem) as a store: file:///PATH holds
// each value in PATH/<key[0..2)>/<key>, as the local store shards its entries.
//
// Publishing: a value is written to a new temporary file in the same directory (".tmp.…", O_EXCL, a name
// no key has) and renamed over the key's path: rename within one directory is atomic on NFS and SMB, so
// a reader on any machine sees the old value, the new one or none, never a partial one. No lock is ever
// held across machines: two writers of one key both publish whole values (the same bytes, as a key names
// one result), the last rename wins.
//
// Others can write the share: every open is made below the share's own descriptor (util::Beneath: no
// link followed at any component, no open that waits, regular files only), so a link, FIFO or directory
// planted at a key's path is a miss, and the next publish replaces it (a link or FIFO by the rename, a
// directory removed without entering anything it holds); eviction and cleanup delete only regular entry
// files and never enter a linked directory. Directories and files are created with the cache umask
// (cache.umask): a share a group writes needs KACHE_UMASK=002 and a setgid directory (docs/sharing.md).
//
// Reading: a file that vanishes (evicted or replaced by another machine) is a miss; one cut short (a
// server that lost data) is read as it is and fails the layered store's check (a corrupt entry: a miss,
// removed). Neither fails a build. A hit refreshes the file's mtime at most once an hour, so
// `kache --evict-older-than AGE` (run by one machine) removes what no machine has used for AGE. A
// missing PATH is an error (a share that is not mounted), not a miss of every key.
//
// Its URLs (file_scheme, the scheme table's row): file:///PATH, absolute, no host, credentials or port.
//   attribute: max-size=SIZE (what `kache -c` trims the shared directory to; none by default)
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/remote_url.hpp"
#include "storage/remote/remote_store.hpp"
#include "util/beneath.hpp"

namespace kache::storage::remote {

extern const core::SchemeRules file_scheme;
// The max-size= of a file URL in bytes; 0: none.
std::uint64_t file_max_size(const core::RemoteUrl& url);

class FileStorage final : public RemoteBackend {
 public:
  FileStorage(core::RemoteUrl url, std::uint64_t max_body, bool every_remote_read_only);
  std::string name() const override { return url_.redacted(); }
  std::optional<std::string> get(std::string_view key) override;
  // Removes the values not read or written for max_age_s seconds, and temporary files a writer that died
  // left behind (older than an hour at least). Returns how many values it removed.
  std::uint64_t evict_older_than(std::int64_t max_age_s);
  // Removes the least recently used values until the directory holds at most the URL's max-size
  // (`kache -c`; nothing without one). Returns how many it removed.
  std::uint64_t trim_to_max_size();
  std::string key_path(std::string_view key) const;
  // The key's file relative to the share: <key[0..2)>/<key>.
  static std::string key_relative(std::string_view key);
  // evict_older_than or trim_to_max_size, unless read-only (trim: only with a max-size=).
  std::optional<MaintenanceOutcome> maintain(const Maintenance& what) override;

 protected:
  void write(std::string_view key, std::string_view value) override;
  void erase(std::string_view key) override;

 private:
  // The share, opened once (a missing one is an error, retried at the next operation).
  const util::Beneath& share();
  struct Value {
    std::string path;  // relative to the share
    std::int64_t mtime;
    std::uint64_t size;
  };
  // Every value file, and (when `abandoned_after_s` >= 0) the temporary files older than it removed.
  std::vector<Value> values(std::int64_t abandoned_after_s);

  core::RemoteUrl url_;
  std::uint64_t max_body_;
  std::mutex opening_;  // not std::call_once: libstdc++'s hangs on the call after one that threw
  std::optional<util::Beneath> share_;
};

}  // namespace kache::storage::remote
