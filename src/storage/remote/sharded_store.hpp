#pragma once
// One remote spread over several servers (shards=, core/remote_url.hpp): each key lives on one shard,
// chosen by rendezvous (highest random weight) hashing: the shard whose name scores highest with the key,
// the score XXH64(name, key). Adding a shard moves only the keys it now wins (about 1/n of them, all to
// it); removing one moves only its own keys. Each shard is a RemoteStore with its own breaker, so a dead
// shard costs only its keys: its failure is answered as a miss (a lookup) or a dropped write, it is
// not asked again for the rest of the compile, and the other shards serve theirs.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "storage/storage.hpp"

namespace kache::storage::remote {

// The index of the shard that holds key, among shards named shard_names (never empty).
std::size_t rendezvous_shard(const std::vector<std::string>& shard_names, std::string_view key);

class ShardedStore final : public Storage {
 public:
  // shards[i] is the server named shard_names[i]; name is the redacted URL with its shards=.
  ShardedStore(std::string name, std::vector<std::string> shard_names, std::vector<std::unique_ptr<Storage>> shards);
  std::string name() const override { return name_; }
  StorageLookup get(std::string_view key) override;
  StorageStatus put(std::string_view key, std::string_view bytes) override;
  StorageStatus remove(std::string_view key) override;
  void add_counts(std::map<std::string, std::uint64_t>& counts) const override;

 private:
  // The shard for key, or nullptr when it failed earlier in this compile.
  Storage* shard_for(std::string_view key, std::size_t& index);

  std::string name_;
  std::vector<std::string> shard_names_;
  std::vector<std::unique_ptr<Storage>> shards_;
  std::vector<bool> failed_;
};

}  // namespace kache::storage::remote
