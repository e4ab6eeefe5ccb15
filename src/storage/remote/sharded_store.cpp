#include "storage/remote/sharded_store.hpp"

#include "util/hash.hpp"

namespace kache::storage::remote {

std::size_t rendezvous_shard(const std::vector<std::string>& shard_names, std::string_view key) {
  std::size_t best = 0;
  std::uint64_t best_score = 0;
  std::string scored;
  for (std::size_t i = 0; i < shard_names.size(); ++i) {
    scored.assign(shard_names[i]);
    scored.push_back('\0');  // "a" + "bc" and "ab" + "c" score apart
    scored.append(key);
    const std::uint64_t score = util::xxh64(scored);
    if (i == 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

ShardedStore::ShardedStore(std::string name, std::vector<std::string> shard_names,
                           std::vector<std::unique_ptr<Storage>> shards)
    : name_(std::move(name)),
      shard_names_(std::move(shard_names)),
      shards_(std::move(shards)),
      failed_(shards_.size(), false) {}

Storage* ShardedStore::shard_for(std::string_view key, std::size_t& index) {
  index = rendezvous_shard(shard_names_, key);
  return failed_[index] ? nullptr : shards_[index].get();
}

StorageLookup ShardedStore::get(std::string_view key) {
  std::size_t i = 0;
  Storage* shard = shard_for(key, i);
  if (!shard) return std::optional<std::string>();
  StorageLookup r = shard->get(key);
  if (r) return r;
  failed_[i] = true;  // this shard's keys are misses for the rest of the compile; the others still answer
  return std::optional<std::string>();
}

StorageStatus ShardedStore::put(std::string_view key, std::string_view bytes) {
  std::size_t i = 0;
  Storage* shard = shard_for(key, i);
  if (!shard) return util::Done{};
  StorageStatus r = shard->put(key, bytes);
  if (!r) failed_[i] = true;
  return util::Done{};
}

StorageStatus ShardedStore::remove(std::string_view key) {
  std::size_t i = 0;
  Storage* shard = shard_for(key, i);
  if (!shard) return util::Done{};
  StorageStatus r = shard->remove(key);
  if (!r) failed_[i] = true;
  return util::Done{};
}

void ShardedStore::add_counts(std::map<std::string, std::uint64_t>& counts) const {
  for (const auto& shard : shards_) shard->add_counts(counts);
}

}  // namespace kache::storage::remote
