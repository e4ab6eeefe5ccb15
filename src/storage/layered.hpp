#pragma once
// What the pipeline and the CLI talk to: the stores in order, local first, then the remotes of [remote] storage.
// A lookup asks each store in turn; a value from a lower store is checked (the one decoder of
// core/entry_format.hpp), then written back into every store above it, so the next lookup finds it
// nearer. A value that fails the check counts as corrupt, is removed from that store, and the next one
// is asked. A remote that fails (error or timeout) is switched off for the rest of this compile: kache
// never waits on a broken server twice. The local store is never switched off: each call reports its own
// outcome, as it did before there were layers (one unreadable entry says nothing of the next write).
// Every store keeps the same bytes: a value is encoded once.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/entry_format.hpp"
#include "storage/local/local_storage.hpp"
#include "storage/storage.hpp"

namespace kache::storage {

class LayeredStorage {
 public:
  LayeredStorage(std::unique_ptr<LocalStorage> local, std::vector<std::unique_ptr<Storage>> remotes,
                 core::PartsEncoding encoding);

  // A record read on every hit (a manifest); stored uncompressed, as decompressing costs more than
  // reading the bytes.
  StorageLookup get_record(std::string_view key);
  StorageStatus put_record(std::string_view key, std::string_view value);
  // A record that only this machine can use (identities re-verified here): the local store alone;
  // nothing when local writes are off (remote.only).
  StorageStatus put_local_record(std::string_view key, std::string_view value);
  // A result entry: a head and a large body (see Parts).
  StorageResult<std::optional<Parts>> get_parts(std::string_view key, const std::string& body_dir);
  StorageStatus put_parts(std::string_view key, std::string_view head, std::string_view body);
  // A result entry for the local store alone (built by a remote service the user does not trust to
  // publish: docs/remote-execution.md); nothing when local writes are off.
  StorageStatus put_local_parts(std::string_view key, std::string_view head, std::string_view body);
  // Forgets key in every store (a value the caller found unusable); best effort.
  void remove(std::string_view key);

  // Lookups and writes report the local store's outcome (what the next lookup here depends on); a
  // remote's failure only switches that remote off. Level 0 is the local store, remotes follow in order.
  bool disabled(std::size_t level) const { return levels_.at(level).failure.has_value(); }
  LocalStorage& local() { return *local_; }
  // Off: values are written to the remotes only (remote.only); lookups still read the local store.
  void set_local_writes(bool on) { local_writes_ = on; }
  // The remotes' own counters (hits, misses, errors, timeouts, bytes) for `kache -s`.
  void add_counts(std::map<std::string, std::uint64_t>& counts) const;
  // Damaged values found by any store or by the check of a remote's value.
  int corrupt_found() const { return local_->corrupt_found() + corrupt_found_; }

 private:
  struct Level {
    Storage* store;
    std::optional<StorageFailure> failure;  // set: switched off for this compile (remotes only)
  };
  template <typename T, typename ReadLocal, typename Wrap>
  StorageResult<std::optional<T>> lookup(std::string_view key, ReadLocal read_local, Wrap wrap);
  std::optional<std::string> fetch_from(std::size_t level, std::string_view key);
  void write_back(std::size_t below, std::string_view key, std::string_view bytes);
  StorageStatus put_everywhere(std::string_view key, std::string_view bytes);
  template <typename T>
  bool usable(std::size_t level, StorageResult<T>& r);

  std::unique_ptr<LocalStorage> local_;
  std::vector<std::unique_ptr<Storage>> remotes_;
  std::vector<Level> levels_;
  core::PartsEncoding encoding_;
  int corrupt_found_ = 0;
  bool local_writes_ = true;
};

}  // namespace kache::storage
