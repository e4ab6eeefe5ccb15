// Unit tests for sharding (shards=): the URL form, rendezvous hashing (adding a shard moves only its share,
// all of it to the new shard), and a dead shard costing only its keys.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "core/remote_url.hpp"
#include "storage/remote/schemes.hpp"
#include "storage/remote/sharded_store.hpp"

namespace kache::storage::remote {
namespace {

TEST(ShardUrl, StarStandsForEachName) {
  const auto u =
      core::parse_remote_url("redis://:pw@127.0.0.1:*/2|shards=6379,6380|connect-timeout=50", {}, remote_schemes());
  EXPECT_EQ(u.shards, (std::vector<std::string>{"6379", "6380"}));
  EXPECT_EQ(u.redacted(), "redis://:***@127.0.0.1:*/2|connect-timeout=50|shards=6379,6380");
  EXPECT_EQ(core::parse_remote_url(u.to_string(true), {}, remote_schemes()), u);
  const auto shards = u.shard_urls();
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[0].to_string(true), "redis://:pw@127.0.0.1:6379/2|connect-timeout=50");
  EXPECT_EQ(shards[1].to_string(true), "redis://:pw@127.0.0.1:6380/2|connect-timeout=50");
  EXPECT_NE(shards[0].identity(), shards[1].identity());  // one breaker each
  const auto http = core::parse_remote_url("http://cache-*.example/kache|shards=a,b,c", {}, remote_schemes());
  EXPECT_EQ(http.shard_urls()[2].http_base(), "http://cache-c.example/kache");
  EXPECT_EQ(core::parse_remote_url("redis://h", {}, remote_schemes()).shard_urls().size(), 1u);
  for (const char* bad : {"redis://h|shards=a,b", "redis://h*:*|shards=a", "redis://h*|shards=a,a",
                          "redis://h*|shards=", "redis://h*|shards=a b", "s3://bucket*|shards=a", "file:///x*|shards=a",
                          "redis://h*", "redis://h:*|shards=1,99999"}) {
    EXPECT_THROW(core::parse_remote_url(bad, {}, remote_schemes()), core::RemoteUrlError) << bad;
  }
}

std::string key_number(int i) { return "key-" + std::to_string(i); }

TEST(Rendezvous, AddingAShardMovesOnlyItsShare) {
  const std::vector<std::string> three{"a", "b", "c"}, four{"a", "b", "c", "d"};
  constexpr int kKeys = 20000;
  int moved = 0;
  std::map<std::size_t, int> per_shard;
  for (int i = 0; i < kKeys; ++i) {
    const std::size_t before = rendezvous_shard(three, key_number(i));
    const std::size_t after = rendezvous_shard(four, key_number(i));
    ++per_shard[before];
    if (before != after) {
      ++moved;
      EXPECT_EQ(after, 3u) << key_number(i) << " moved between old shards";
    }
  }
  // The new shard's share is a quarter: measured 0.25 +- a few hundredths over 20000 keys.
  EXPECT_GT(moved, kKeys * 20 / 100);
  EXPECT_LT(moved, kKeys * 30 / 100);
  for (const auto& [shard, n] : per_shard) EXPECT_GT(n, kKeys * 28 / 100) << shard;  // a third each, roughly
}

// A store in memory that can be made to fail, counting what it is asked.
class MemoryStore final : public Storage {
 public:
  std::string name() const override { return "memory"; }
  StorageLookup get(std::string_view key) override {
    ++asked;
    if (dead) return StorageFailure{StorageFailure::Kind::error, "dead"};
    auto it = values.find(std::string(key));
    return it == values.end() ? std::optional<std::string>() : std::optional<std::string>(it->second);
  }
  StorageStatus put(std::string_view key, std::string_view bytes) override {
    ++asked;
    if (dead) return StorageFailure{StorageFailure::Kind::error, "dead"};
    values[std::string(key)] = std::string(bytes);
    return util::Done{};
  }
  StorageStatus remove(std::string_view key) override {
    values.erase(std::string(key));
    return util::Done{};
  }
  std::map<std::string, std::string> values;
  bool dead = false;
  int asked = 0;
};

TEST(ShardedStore, ADeadShardCostsOnlyItsKeys) {
  std::vector<std::unique_ptr<Storage>> shards;
  std::vector<MemoryStore*> raw;
  for (int i = 0; i < 2; ++i) {
    shards.push_back(std::make_unique<MemoryStore>());
    raw.push_back(static_cast<MemoryStore*>(shards.back().get()));
  }
  ShardedStore store("redis://h*|shards=a,b", {"a", "b"}, std::move(shards));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(store.put(key_number(i), "v" + std::to_string(i)));
  EXPECT_GT(raw[0]->values.size(), 20u);
  EXPECT_GT(raw[1]->values.size(), 20u);
  raw[1]->dead = true;
  int hits = 0, misses = 0;
  for (int i = 0; i < 100; ++i) {
    auto r = store.get(key_number(i));
    ASSERT_TRUE(r) << "a shard's failure must not fail the sharded store";
    (*r ? hits : misses)++;
    if (*r) {
      EXPECT_EQ(**r, "v" + std::to_string(i));
    }
  }
  EXPECT_EQ(hits, static_cast<int>(raw[0]->values.size()));
  EXPECT_EQ(misses, static_cast<int>(raw[1]->values.size()));
  // Its own puts, then one failed lookup: never asked again in this compile.
  EXPECT_EQ(raw[1]->asked, static_cast<int>(raw[1]->values.size()) + 1);
}

}  // namespace
}  // namespace kache::storage::remote
