// Unit tests for the local disk store: format, corruption handling, LRU size bound, concurrency, and what
// others plant in a group-shared cache dir (links, FIFOs, directories).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/entry_format.hpp"
#include "core/stats.hpp"
#include "storage/local/local_storage.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::storage {
namespace {

namespace fs = std::filesystem;

std::string test_root() { return (fs::temp_directory_path() / "kache-unit").string(); }

// A 64-hex-digit key; with `shard` set, forced into that shard.
std::string key_of(const std::string& seed, char shard = 0) {
  std::string k = util::sha256(seed).hex();
  if (shard != 0) k[0] = shard;
  return k;
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Real bytes of all entry files (what the size counters must agree with).
std::uint64_t disk_sum(const std::string& dir, std::uint64_t* files = nullptr) {
  std::uint64_t sum = 0, n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const fs::path& p = e.path();
    // entries live at <dir>/<k0>/<k1k2>/<key>, their explain records at <dir>/explain/<k0>/<k1k2>/<key>.json
    const fs::path top = p.parent_path().parent_path().parent_path();
    const bool record = top == fs::path(dir) / "explain" && p.extension() == ".json";
    if (top != fs::path(dir) && !record) continue;
    if (p.filename().string().front() == '.') continue;
    sum += e.file_size();
    if (!record) ++n;
  }
  if (files) *files = n;
  return sum;
}

void set_mtime(const std::string& path, std::int64_t sec) {
  struct timespec t[2];
  t[0].tv_sec = sec;
  t[0].tv_nsec = 0;
  t[1] = t[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

// The local store as the layering uses it: values encoded in the shared containers
// (core/entry_format.hpp), read back through the hit path. A failure the store reports is thrown here.
class Store {
 public:
  Store(std::string dir, std::uint64_t max_size, bool compress = true)
      : local_(LocalStorageOptions{std::move(dir), max_size}), parts_{compress, 3} {}
  std::optional<std::string> get(const std::string& key) { return checked(local_.read_value(key)); }
  std::optional<Parts> get_parts(const std::string& key, const std::string& body_dir) {
    return checked(local_.read_parts(key, body_dir));
  }
  void put(const std::string& key, std::string_view value) { checked(local_.put(key, core::encode_zstd(value, 3))); }
  void put_uncompressed(const std::string& key, std::string_view value) {
    checked(local_.put(key, core::encode_raw(value)));
  }
  void put_parts(const std::string& key, std::string_view head, std::string_view body) {
    checked(local_.put(key, core::encode_parts(head, body, parts_)));
  }
  void remove(const std::string& key) { checked(local_.remove(key)); }
  std::string name() const { return local_.name(); }
  int corrupt_found() const { return local_.corrupt_found(); }
  std::uint64_t total_size() { return local_.total_size(); }
  std::uint64_t entry_count() { return local_.entry_count(); }
  LocalStorage& local() { return local_; }
  void clear() { local_.clear(); }
  void trim_all() { local_.trim_all(); }

 private:
  template <typename T>
  static T checked(StorageResult<T> r) {
    if (!r) throw std::runtime_error(r.error().message);
    return std::move(*r);
  }
  LocalStorage local_;
  core::PartsEncoding parts_;
};

class LocalStorageTest : public ::testing::Test {
 protected:
  std::string entry_file(const std::string& key) const {
    return dir_.path() + "/" + key.substr(0, 1) + "/" + key.substr(1, 2) + "/" + key;
  }
  Store make(std::uint64_t max_size = 1ull << 30, bool compress = true) {
    return Store(dir_.path(), max_size, compress);
  }
  util::TempDir dir_{test_root()};
};

TEST_F(LocalStorageTest, RoundTripAndMiss) {
  auto s = make();
  const std::string k1 = key_of("one"), k2 = key_of("two"), k3 = key_of("three");
  const std::string big(1 << 20, 'z');
  EXPECT_EQ(s.get(k1), std::nullopt);
  s.put(k1, "hello");
  s.put(k2, "");
  s.put(k3, big);
  EXPECT_EQ(s.get(k1), "hello");
  EXPECT_EQ(s.get(k2), "");
  EXPECT_EQ(s.get(k3), big);
  EXPECT_EQ(s.get(key_of("absent")), std::nullopt);
  EXPECT_EQ(s.corrupt_found(), 0);
  EXPECT_TRUE(util::exists(entry_file(k1)));
  EXPECT_EQ(s.entry_count(), 3u);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  EXPECT_LT(fs::file_size(entry_file(k3)), 10'000u);  // compressed
  EXPECT_EQ(s.name(), "local");
}

TEST_F(LocalStorageTest, OnDiskFormat) {
  auto s = make();
  const std::string key = key_of("fmt");
  const std::string value = "some value some value some value";
  s.put(key, value);
  const std::string raw = util::read_file(entry_file(key));
  ASSERT_GT(raw.size(), 48u);
  EXPECT_EQ(raw.substr(0, 8), std::string("KACHE\0E1", 8));
  std::uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = (size << 8) | static_cast<unsigned char>(raw[8 + i]);
  EXPECT_EQ(size, value.size());
  const std::string payload = raw.substr(48);
  EXPECT_EQ(raw.substr(16, 32), util::xxh128_hex(payload));
  std::string out(value.size(), '\0');
  EXPECT_EQ(ZSTD_decompress(out.data(), out.size(), payload.data(), payload.size()), value.size());
  EXPECT_EQ(out, value);
}

TEST_F(LocalStorageTest, OverwriteKeepsAccountingExact) {
  auto s = make();
  const std::string key = key_of("k");
  s.put(key, random_bytes(5000, 1));
  s.put(key, random_bytes(100, 2));
  EXPECT_EQ(s.get(key), random_bytes(100, 2));
  EXPECT_EQ(s.total_size(), fs::file_size(entry_file(key)));
  EXPECT_EQ(s.entry_count(), 1u);
}

TEST_F(LocalStorageTest, CorruptPayloadIsRemovedAndCounted) {
  auto s = make();
  const std::string key = key_of("corrupt");
  s.put(key, random_bytes(4096, 3));
  s.put(key_of("other"), "other");
  const std::string path = entry_file(key);
  std::string raw = util::read_file(path);
  raw[raw.size() - 10] ^= 0x01;  // inside the zstd frame
  util::write_file(path, raw);
  EXPECT_EQ(s.get(key), std::nullopt);
  EXPECT_FALSE(util::exists(path));
  EXPECT_EQ(s.corrupt_found(), 1);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  EXPECT_EQ(s.get(key_of("other")), "other");
  EXPECT_EQ(s.corrupt_found(), 1);
}

TEST_F(LocalStorageTest, UncompressedEntriesRoundTripAndAreChecked) {
  auto s = make();
  const std::string key = key_of("raw");
  const std::string value = std::string(50'000, 'm') + random_bytes(100, 9);
  s.put_uncompressed(key, value);
  const std::string path = entry_file(key);
  EXPECT_EQ(util::read_file(path).substr(0, 8), std::string("KACHE\0R1", 8));
  EXPECT_GT(fs::file_size(path), value.size());  // stored as is, not compressed
  EXPECT_EQ(s.get(key), value);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  std::string raw = util::read_file(path);
  raw[raw.size() / 2] ^= 0x20;
  util::write_file(path, raw);
  EXPECT_EQ(s.get(key), std::nullopt);
  EXPECT_FALSE(util::exists(path));
  EXPECT_EQ(s.corrupt_found(), 1);
  s.put_uncompressed(key, value);
  ASSERT_EQ(::truncate(path.c_str(), 1000), 0);
  EXPECT_EQ(s.get(key), std::nullopt);
  EXPECT_EQ(s.corrupt_found(), 2);
}

TEST_F(LocalStorageTest, TruncatedEntryIsRemovedAndCounted) {
  auto s = make();
  const std::string a = key_of("a"), b = key_of("b");
  s.put(a, random_bytes(4096, 4));
  s.put(b, random_bytes(4096, 5));
  ASSERT_EQ(::truncate(entry_file(a).c_str(), 2000), 0);
  ASSERT_EQ(::truncate(entry_file(b).c_str(), 10), 0);  // shorter than the header
  EXPECT_EQ(s.get(a), std::nullopt);
  EXPECT_EQ(s.get(b), std::nullopt);
  EXPECT_FALSE(util::exists(entry_file(a)));
  EXPECT_FALSE(util::exists(entry_file(b)));
  EXPECT_EQ(s.corrupt_found(), 2);
  EXPECT_EQ(s.entry_count(), 0u);
  // The counters only saw the truncated sizes leave; a trim recounts from the real files.
  s.trim_all();
  EXPECT_EQ(s.total_size(), 0u);
}

TEST_F(LocalStorageTest, DamagedHeaderIsCorruption) {
  auto s = make();
  const std::string m = key_of("magic"), z = key_of("size"), c = key_of("sum");
  for (const auto& k : {m, z, c}) s.put(k, "value of " + k);
  auto flip = [&](const std::string& k, std::size_t at) {
    std::string raw = util::read_file(entry_file(k));
    raw[at] ^= 0x20;
    util::write_file(entry_file(k), raw);
  };
  flip(m, 1);   // magic
  flip(z, 8);   // uncompressed size (not covered by the checksum)
  flip(c, 20);  // checksum text
  EXPECT_EQ(s.get(m), std::nullopt);
  EXPECT_EQ(s.get(z), std::nullopt);
  EXPECT_EQ(s.get(c), std::nullopt);
  EXPECT_EQ(s.corrupt_found(), 3);
  EXPECT_EQ(s.entry_count(), 0u);
}

TEST_F(LocalStorageTest, TempFilesAreIgnoredAndStaleOnesCleaned) {
  auto s = make();
  const std::string key = key_of("tmp");
  const std::string lonely = key_of("lonely", key[0]);
  s.put(key, "real");
  const std::string d = util::dirname(entry_file(key));
  const std::string dl = util::dirname(entry_file(lonely));
  util::create_directories(dl);
  // What a writer killed mid-put leaves behind.
  const std::string fresh = d + "/.tmp." + key + ".123.deadbeef";
  const std::string stale = dl + "/.tmp." + lonely + ".456.cafe";
  util::write_file(fresh, "KACHE partial");
  util::write_file(stale, "KACHE partial");
  set_mtime(stale, ::time(nullptr) - 2 * 3600);

  EXPECT_EQ(s.get(key), "real");
  EXPECT_EQ(s.get(lonely), std::nullopt);
  EXPECT_EQ(s.corrupt_found(), 0);
  EXPECT_EQ(s.entry_count(), 1u);
  EXPECT_EQ(s.total_size(), fs::file_size(entry_file(key)));

  s.trim_all();
  EXPECT_TRUE(util::exists(fresh));  // may belong to a put in progress
  EXPECT_FALSE(util::exists(stale));
  EXPECT_EQ(s.get(key), "real");
}

TEST_F(LocalStorageTest, RemoveAndClear) {
  auto s = make();
  const std::string a = key_of("a"), b = key_of("b"), c = key_of("c");
  s.put(a, "1");
  s.put(b, "2");
  s.put(c, "3");
  s.remove(a);
  s.remove(a);                // absent: no-op
  s.remove(key_of("never"));  // shard may not even exist
  EXPECT_EQ(s.get(a), std::nullopt);
  EXPECT_EQ(s.entry_count(), 2u);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  s.clear();
  EXPECT_EQ(s.entry_count(), 0u);
  EXPECT_EQ(s.total_size(), 0u);
  EXPECT_EQ(s.get(b), std::nullopt);
  s.put(b, "again");
  EXPECT_EQ(s.get(b), "again");
}

// Keys become path components: anything but lowercase hex is refused, as a typed failure (no throw).
TEST_F(LocalStorageTest, RejectsKeysThatAreNotHex) {
  LocalStorage s(LocalStorageOptions{dir_.path(), 1ull << 30});
  const auto put = s.put("../../etc/passwd", core::encode_raw("x"));
  ASSERT_FALSE(put);
  EXPECT_EQ(put.error().kind, StorageFailure::Kind::error);
  EXPECT_NE(put.error().message.find("invalid cache key"), std::string::npos);
  EXPECT_FALSE(s.get("ABCDEF"));
  EXPECT_FALSE(s.read_value("ab"));
  EXPECT_FALSE(s.read_parts("ab", dir_.path()));
  EXPECT_FALSE(s.remove("x/y"));
}

// get() hands over the stored bytes as they are, for the layering to check and to write back.
TEST_F(LocalStorageTest, GetReturnsTheStoredBytes) {
  LocalStorage s(LocalStorageOptions{dir_.path(), 1ull << 30});
  const std::string key = key_of("bytes");
  const std::string bytes = core::encode_parts("head", "body", {false, 3});
  ASSERT_TRUE(s.put(key, bytes));
  const auto got = s.get(key);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, bytes);
  EXPECT_EQ(util::read_file(entry_file(key)), bytes);
  EXPECT_EQ(*s.read_value(key), "headbody");
  ASSERT_TRUE(s.remove(key));
  EXPECT_EQ(*s.get(key), std::nullopt);
}

TEST_F(LocalStorageTest, HitBumpsMtime) {
  auto s = make();
  const std::string key = key_of("lru");
  s.put(key, "v");
  set_mtime(entry_file(key), 1'000'000'000);
  ASSERT_TRUE(s.get(key));
  EXPECT_GT(fs::last_write_time(entry_file(key)).time_since_epoch(),
            fs::file_time_type::clock::now().time_since_epoch() - std::chrono::minutes(5));
}

TEST_F(LocalStorageTest, SizeBoundHolds) {
  const std::uint64_t max = 16 * 64 * 1024;
  auto s = make(max);
  for (int i = 0; i < 600; ++i) {
    s.put(key_of("bound" + std::to_string(i)), random_bytes(3000 + (i % 7) * 500, static_cast<unsigned>(i)));
    ASSERT_LE(s.total_size(), max) << "after put " << i;
  }
  std::uint64_t files = 0;
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path(), &files));
  EXPECT_LE(disk_sum(dir_.path()), max);
  EXPECT_GT(files, 100u);  // evicted some, not everything
  EXPECT_LT(files, 600u);
  s.trim_all();
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
}

TEST_F(LocalStorageTest, RecentlyReadEntriesSurviveEviction) {
  auto s = make(64 * 1024);  // the bound covers the whole store
  std::vector<std::string> old_keys;
  for (int i = 0; i < 10; ++i) {
    old_keys.push_back(key_of("old" + std::to_string(i), 'a'));
    s.put(old_keys.back(), random_bytes(4000, 100 + i));
  }
  // Give them distinct, clearly older times; entry 0 is the oldest.
  const std::int64_t base = ::time(nullptr) - 1000;
  for (int i = 0; i < 10; ++i) set_mtime(entry_file(old_keys[i]), base + i);
  // Reading the three oldest makes them the most recently used of the old ones.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.get(old_keys[i]));

  for (int i = 0; i < 8; ++i) s.put(key_of("new" + std::to_string(i), 'a'), random_bytes(4000, 200 + i));

  for (int i = 0; i < 3; ++i) EXPECT_TRUE(util::exists(entry_file(old_keys[i]))) << "read entry " << i << " evicted";
  EXPECT_FALSE(util::exists(entry_file(old_keys[3])));  // oldest unread goes first
  EXPECT_LE(s.total_size(), 64u * 1024);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
}

// The size and the entry count come from the shard counters, explain records included in the size.
TEST_F(LocalStorageTest, CountersHoldSizeAndEntriesWithExplainRecords) {
  auto s = make();
  std::uint64_t bytes = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string key = key_of("counted" + std::to_string(i));
    s.put(key, random_bytes(500 + i, static_cast<unsigned>(i)));
    if (i % 2 == 0) {
      const std::string record = s.local().put_explain_record(key, std::string(100 + i, 'r'));
      EXPECT_TRUE(util::exists(record));
      bytes += 100 + i;
    }
  }
  std::uint64_t files = 0;
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path(), &files));
  EXPECT_GT(s.total_size(), bytes);
  EXPECT_EQ(s.entry_count(), 40u);
  EXPECT_EQ(files, 40u);
  // A removed entry takes its record along.
  const std::string gone = key_of("counted0");
  s.remove(gone);
  EXPECT_FALSE(util::exists(dir_.path() + "/explain/" + gone.substr(0, 1) + "/" + gone.substr(1, 2) + "/" + gone +
                            ".json"));
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  EXPECT_EQ(s.entry_count(), 39u);
  // Counters an older kache wrote (the bytes alone) are rebuilt from the files.
  for (const auto& shard : fs::directory_iterator(dir_.path())) {
    if (fs::exists(shard.path() / "size") && shard.path().filename().string().size() == 1)
      util::write_file((shard.path() / "size").string(), "12\n");
  }
  EXPECT_EQ(s.entry_count(), 39u);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
}

TEST_F(LocalStorageTest, EvictionTakesExplainRecordsAlong) {
  auto s = make(16 * 4096);
  for (int i = 0; i < 60; ++i) {
    const std::string key = key_of("rec" + std::to_string(i));
    s.put(key, random_bytes(3000, static_cast<unsigned>(i)));
    s.local().put_explain_record(key, std::string(400, 'r'));
  }
  EXPECT_LE(s.total_size(), 16u * 4096);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  // No record outlives its entry.
  for (const auto& e : fs::recursive_directory_iterator(dir_.path() + "/explain")) {
    if (!e.is_regular_file()) continue;
    const std::string key = e.path().stem().string();
    EXPECT_TRUE(util::exists(entry_file(key))) << "the record of evicted " << key << " stayed";
  }
}

// A cache over kSampleFiles entries: a put that leaves its shard over its share evicts at most
// kMaxEvictionsPerPut entries, and the puts that follow bring the cache down to its limit.
TEST_F(LocalStorageTest, LargeCacheEvictsABoundedSampleAndConverges) {
  constexpr int kEntries = 1600;
  constexpr std::size_t kSize = 400;
  {
    auto unbounded = make(0);
    for (int i = 0; i < kEntries; ++i) {
      unbounded.put_uncompressed(key_of("big" + std::to_string(i)), std::string(kSize, 'x'));
    }
  }
  const std::uint64_t full = disk_sum(dir_.path());
  const std::uint64_t limit = full / 2;
  auto s = make(limit);
  std::uint64_t files = 0, most_removed = 0;
  disk_sum(dir_.path(), &files);
  for (int i = 0; i < 200; ++i) {
    s.put_uncompressed(key_of("new" + std::to_string(i)), std::string(kSize, 'y'));
    std::uint64_t now = 0;
    disk_sum(dir_.path(), &now);
    most_removed = std::max(most_removed, files + 1 - now);
    files = now;
  }
  EXPECT_LE(most_removed, LocalStorage::kMaxEvictionsPerPut);
  EXPECT_GT(most_removed, 0u);
  EXPECT_LE(s.total_size(), limit);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  // The new entries are the most recently used: none went.
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(util::exists(entry_file(key_of("new" + std::to_string(i))))) << i;
}

TEST_F(LocalStorageTest, CleanupAndEvictOlderThan) {
  auto s = make();
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) {
    keys.push_back(key_of("age" + std::to_string(i)));
    s.put(keys.back(), random_bytes(2000, static_cast<unsigned>(i)));
  }
  for (int i = 0; i < 20; ++i) set_mtime(entry_file(keys[i]), ::time(nullptr) - 3 * 86400);
  std::uint64_t steps = 0, last = 0;
  const auto progress = [&](std::uint64_t done, std::uint64_t total) {
    ++steps;
    last = done;
    EXPECT_EQ(total, LocalStorage::kProgressSteps);
  };
  const std::uint64_t removed = s.local().evict_older_than(86400ll * 1'000'000'000, progress);
  EXPECT_EQ(removed, 20u);
  EXPECT_EQ(last, LocalStorage::kProgressSteps);
  EXPECT_GT(steps, 1u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(util::exists(entry_file(keys[i])), i >= 20) << i;
  EXPECT_EQ(s.entry_count(), 30u);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  // Cleanup to a lower limit: every shard within its share.
  LocalStorage lower(LocalStorageOptions{dir_.path(), 16 * 4096});
  lower.cleanup();
  EXPECT_LE(lower.total_size(), 16u * 4096);
  EXPECT_EQ(lower.total_size(), disk_sum(dir_.path()));
}

// Many processes at once: 16 forked children each put 100 distinct entries and count 100 stats.
void run_children(const std::string& dir, std::uint64_t max_size, bool overlap) {
  constexpr int kChildren = 16, kPerChild = 100;
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        Store s(dir, max_size);
        core::StatsFile stats(dir);
        for (int i = 0; i < kPerChild; ++i) {
          // With overlap, children also rewrite each other's keys (old-size accounting under load).
          const std::string seed = overlap ? "shared" + std::to_string(i % 40) + "-" + std::to_string((c + i) % 3)
                                           : "c" + std::to_string(c) + "-" + std::to_string(i);
          s.put(key_of(seed), random_bytes(200 + ((c * 31 + i * 17) % 3000), static_cast<unsigned>(c * 1000 + i)));
          stats.add({{core::counter::kStored, 1}});
        }
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child failed";
  }
}

TEST_F(LocalStorageTest, ConcurrentPuttersAndStats) {
  run_children(dir_.path(), 1ull << 30, false);
  auto s = make();
  std::uint64_t files = 0;
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path(), &files));
  EXPECT_EQ(files, 1600u);
  EXPECT_EQ(s.entry_count(), 1600u);
  EXPECT_EQ(core::StatsFile(dir_.path()).read().get(core::counter::kStored), 1600u);
}

TEST_F(LocalStorageTest, ConcurrentPuttersWithEvictionAndOverwrites) {
  const std::uint64_t max = 16 * 16 * 1024;
  run_children(dir_.path(), max, true);
  auto s = make(max);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));
  EXPECT_LE(s.total_size(), max);
  EXPECT_EQ(core::StatsFile(dir_.path()).read().get(core::counter::kStored), 1600u);
}

// Uncompressed results keep the object apart, on a block boundary, so a hit can clone it.
TEST_F(LocalStorageTest, SplitEntriesRestoreTheBodyIntoAFile) {
  auto s = make(1ull << 30, false);
  const std::string key = key_of("split");
  const std::string head = "head bytes", body = random_bytes(10'000, 3);
  s.put_parts(key, head, body);
  const std::string file = entry_file(key);
  const std::string raw = util::read_file(file);
  EXPECT_EQ(raw.substr(0, 8), std::string("KACHE\0B1", 8));
  EXPECT_EQ(raw.size(), 4096 + body.size());  // head padded to one block, body to the end
  EXPECT_EQ(raw.substr(4096), body);
  EXPECT_EQ(s.total_size(), disk_sum(dir_.path()));

  util::TempDir out(test_root());
  auto parts = s.get_parts(key, out.path());
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->value, head);
  EXPECT_EQ(parts->body_size, body.size());
  ASSERT_FALSE(parts->body_file.empty());
  EXPECT_EQ(util::dirname(parts->body_file), out.path());
  EXPECT_EQ(util::read_file(parts->body_file), body);
  ASSERT_NE(parts->body_copied_by, nullptr);
  // Writing through the restored file must not reach the cache (a copy or a reflink, never a link).
  util::write_file(parts->body_file, "overwritten");
  EXPECT_EQ(util::read_file(file).substr(4096), body);
  // A plain get returns head + body, as put(key, head + body) would have.
  EXPECT_EQ(s.get(key), head + body);
  EXPECT_EQ(s.corrupt_found(), 0);
}

TEST_F(LocalStorageTest, CompressedPartsStreamTheBodyIntoAFile) {
  auto s = make(1ull << 30, true);
  const std::string key = key_of("zstd parts");
  const std::string head = "the head", body = random_bytes(700'000, 9) + std::string(300'000, 'a');
  s.put_parts(key, head, body);
  EXPECT_EQ(util::read_file(entry_file(key)).substr(0, 8), std::string("KACHE\0E2", 8));
  EXPECT_LT(fs::file_size(entry_file(key)), 760'000u);  // compressed
  util::TempDir out(test_root());
  auto parts = s.get_parts(key, out.path());
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->value, head);
  EXPECT_EQ(parts->body_size, body.size());
  EXPECT_EQ(util::read_file(parts->body_file), body);
  EXPECT_STREQ(parts->body_copied_by, "zstd stream");
  EXPECT_EQ(s.get(key), head + body);  // a plain get decodes it whole
  // A whole value stored compressed the old way (no head size) comes back whole.
  s.put(key_of("whole"), "headbody");
  auto whole = s.get_parts(key_of("whole"), out.path());
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->value, "headbody");
  EXPECT_TRUE(whole->body_file.empty());
  // A store switched between compressed and split entries reads both.
  auto split = make(1ull << 30, false);
  EXPECT_EQ(split.get_parts(key, out.path())->value, head);
  split.put_parts(key_of("s"), "h", "b");
  EXPECT_EQ(s.get(key_of("s")), "hb");
  EXPECT_EQ(s.corrupt_found(), 0);
}

TEST_F(LocalStorageTest, CorruptCompressedPartsAreMisses) {
  auto s = make(1ull << 30, true);
  util::TempDir out(test_root());
  const std::string body = random_bytes(200'000, 11);
  std::vector<std::function<void(std::string&)>> damage = {
      [](std::string& f) { f[f.size() / 2] ^= 1; },  // frame byte
      [](std::string& f) { f[12] ^= 1; },            // value size
      [](std::string& f) { f[17] ^= 0x40; },         // head size beyond the value
      [](std::string& f) { f.resize(f.size() - 1); },
      [](std::string& f) { f.resize(30); },
  };
  for (std::size_t i = 0; i < damage.size(); ++i) {
    const std::string key = key_of("zbad" + std::to_string(i));
    s.put_parts(key, "head", body);
    std::string raw = util::read_file(entry_file(key));
    damage[i](raw);
    util::write_file(entry_file(key), raw);
    EXPECT_FALSE(s.get_parts(key, out.path()).has_value()) << i;
    EXPECT_FALSE(util::exists(entry_file(key))) << i;
  }
  EXPECT_EQ(s.corrupt_found(), static_cast<int>(damage.size()));
  EXPECT_TRUE(fs::is_empty(out.path()));
}

TEST_F(LocalStorageTest, CorruptSplitEntriesAreMisses) {
  auto s = make(1ull << 30, false);
  util::TempDir out(test_root());
  const std::string body = random_bytes(9000, 5);
  // A flipped bit in the body, in the head, in the header; a truncated file; a grown file.
  std::vector<std::function<void(std::string&)>> damage = {
      [](std::string& f) { f[4096 + 100] ^= 1; }, [](std::string& f) { f[90] ^= 1; },
      [](std::string& f) { f[9] ^= 1; },          [](std::string& f) { f.resize(f.size() - 1); },
      [](std::string& f) { f += "x"; },
  };
  for (std::size_t i = 0; i < damage.size(); ++i) {
    const std::string key = key_of("bad" + std::to_string(i));
    s.put_parts(key, "the head", body);
    std::string raw = util::read_file(entry_file(key));
    damage[i](raw);
    util::write_file(entry_file(key), raw);
    EXPECT_FALSE(s.get_parts(key, out.path()).has_value()) << i;
    EXPECT_FALSE(util::exists(entry_file(key))) << i;  // removed
  }
  EXPECT_EQ(s.corrupt_found(), static_cast<int>(damage.size()));
  // No restored body is left behind by a failed lookup.
  EXPECT_TRUE(fs::is_empty(out.path()));
}

// kache -X: every kind of entry is rewritten at the new level (or kept), reads back byte-identical through
// both hit paths, the counters equal a recount, and an unreadable entry is skipped and counted.
TEST_F(LocalStorageTest, RecompressKeepsValuesAndExactCounters) {
  auto s = make(1ull << 30, true);
  auto uncompressed = make(1ull << 30, false);
  const std::string body = random_bytes(50'000, 3) + std::string(200'000, 'z');
  std::vector<std::string> split_keys, whole_keys, raw_keys;
  for (int i = 0; i < 12; ++i) {
    const std::string k = key_of("parts " + std::to_string(i));
    (i % 2 ? s : uncompressed).put_parts(k, "head " + std::to_string(i), body);  // split-zstd and split
    split_keys.push_back(k);
    whole_keys.push_back(key_of("whole " + std::to_string(i)));
    s.put(whole_keys.back(), body + std::to_string(i));
    raw_keys.push_back(key_of("raw " + std::to_string(i)));
    s.put_uncompressed(raw_keys.back(), "manifest " + std::to_string(i));
  }
  const std::string bad = key_of("bad");
  s.put_parts(bad, "h", body);
  {
    std::string bytes = util::read_file(entry_file(bad));
    bytes[bytes.size() / 2] ^= 0x5a;
    util::write_file(entry_file(bad), bytes);  // same size: the counters still agree with the disk
  }
  const std::string raw_before = util::read_file(entry_file(raw_keys[0]));
  auto check_all = [&](const char* when) {
    SCOPED_TRACE(when);
    util::TempDir out(test_root());
    for (int i = 0; i < 12; ++i) {
      const std::string head = "head " + std::to_string(i);
      EXPECT_EQ(s.get(split_keys[i]), head + body);
      auto parts = s.get_parts(split_keys[i], out.path());
      ASSERT_TRUE(parts);
      EXPECT_EQ(parts->value, head);
      EXPECT_EQ(util::read_file(parts->body_file), body);
      EXPECT_EQ(s.get(whole_keys[i]), body + std::to_string(i));
      EXPECT_EQ(s.get(raw_keys[i]), "manifest " + std::to_string(i));
    }
    std::uint64_t files = 0;
    EXPECT_EQ(s.total_size(), disk_sum(dir_.path(), &files));
    EXPECT_EQ(s.entry_count(), files);
  };
  const auto magic = [&](const std::string& key) { return util::read_file(entry_file(key)).substr(0, 8); };

  const auto to19 = s.local().recompress(19);
  EXPECT_EQ(to19.recompressed, 24u);  // every split and whole-value entry; the raw records kept
  EXPECT_EQ(to19.kept, 12u);
  EXPECT_EQ(to19.unreadable, 1u);
  EXPECT_EQ(magic(split_keys[0]), std::string("KACHE\0E2", 8));  // a split one compressed now
  EXPECT_EQ(util::read_file(entry_file(raw_keys[0])), raw_before);
  EXPECT_LT(to19.bytes_after, to19.bytes_before);
  check_all("after -X 19");

  const auto to0 = s.local().recompress(0);
  EXPECT_EQ(to0.recompressed, 24u);  // split-zstd -> split, zstd -> raw
  EXPECT_EQ(to0.bytes_before, to19.bytes_after);
  EXPECT_GT(to0.bytes_after, to0.bytes_before);
  EXPECT_EQ(magic(split_keys[1]), std::string("KACHE\0B1", 8));
  EXPECT_EQ(magic(whole_keys[1]), std::string("KACHE\0R1", 8));
  check_all("after -X 0");

  const auto to1 = s.local().recompress(1);
  EXPECT_EQ(to1.recompressed, 12u);  // the split ones; whole values are raw records now
  EXPECT_EQ(magic(split_keys[1]), std::string("KACHE\0E2", 8));
  check_all("after -X 1");
  EXPECT_EQ(to1.unreadable, 1u);
  EXPECT_FALSE(s.get(bad));  // still corrupt, found by the read as before
}

// A group-shared cache dir (cache.umask) is one others can write: what they plant there, and where it
// must never lead: a directory outside the cache holding a file the user cares about, old enough for
// any eviction. A stuck open kills the test (fails it) instead of hanging the suite.
class PlantedInTheCacheDir : public LocalStorageTest {
 protected:
  void SetUp() override {
    fs::create_directories(outside_);
    std::ofstream(outside_ + "/id_rsa") << "secret";
    ::alarm(20);
  }
  void TearDown() override {
    ::alarm(0);
    fs::remove_all(outside_);
  }
  bool outside_intact() const {
    std::ifstream in(outside_ + "/id_rsa");
    return std::string((std::istreambuf_iterator<char>(in)), {}) == "secret";
  }
  std::string outside_ = dir_.path() + "-outside";
};

TEST_F(PlantedInTheCacheDir, ALinkAtAnEntryIsAMissNeverRead) {
  auto s = make();
  const std::string key = key_of("linked");
  s.put(key, "value");
  fs::rename(entry_file(key), outside_ + "/entry");
  fs::create_symlink(outside_ + "/entry", entry_file(key));
  EXPECT_EQ(s.get(key), std::nullopt) << "a link's target is never read";
  s.put(key, "new value");
  EXPECT_FALSE(fs::is_symlink(entry_file(key)));
  EXPECT_EQ(s.get(key), "new value");
  EXPECT_TRUE(fs::exists(outside_ + "/entry"));
}

TEST_F(PlantedInTheCacheDir, AFifoAtAnEntryOrCountersNeverWaits) {
  auto s = make();
  const std::string key = key_of("fifo");
  s.put(key, "value");
  fs::remove(entry_file(key));
  ASSERT_EQ(::mkfifo(entry_file(key).c_str(), 0666), 0);
  const std::string counters = dir_.path() + "/" + key.substr(0, 1) + "/size";
  fs::remove(counters);
  ASSERT_EQ(::mkfifo(counters.c_str(), 0666), 0);
  EXPECT_EQ(s.get(key), std::nullopt);
  EXPECT_EQ(s.entry_count(), 0u) << "recounted from the regular files";
  s.put(key, "value");
  EXPECT_EQ(s.get(key), "value");
  EXPECT_EQ(s.entry_count(), 1u);
}

TEST_F(PlantedInTheCacheDir, ADirectoryAtAnEntryIsAMissThatTheNextPutReplaces) {
  auto s = make();
  const std::string key = key_of("dir");
  fs::create_directories(entry_file(key) + "/inner");
  fs::create_symlink(outside_, entry_file(key) + "/inner/out");
  EXPECT_EQ(s.get(key), std::nullopt);
  s.put(key, "value");
  EXPECT_EQ(s.get(key), "value");
  EXPECT_TRUE(outside_intact());
}

TEST_F(PlantedInTheCacheDir, EvictionCleanupAndClearNeverEnterALink) {
  auto s = make(1);  // every put evicts what it can
  // A shard and a <k1k2> directory that are links to the outside directory, which holds entry-like files.
  const std::string key = key_of("victim", '0');
  fs::create_directories(outside_ + "/" + key.substr(1, 2));
  std::ofstream(outside_ + "/" + key.substr(1, 2) + "/" + key) << "secret";
  fs::create_symlink(outside_, dir_.path() + "/0");
  fs::create_directories(dir_.path() + "/1");
  fs::create_symlink(outside_, dir_.path() + "/1/23");
  std::ofstream(outside_ + "/1" + key.substr(1)) << "old";
  for (const auto& e : fs::recursive_directory_iterator(outside_)) set_mtime(e.path().string(), 1000);
  s.put(key_of("other", '1'), "value");
  s.local().evict_older_than(1);
  s.local().cleanup();
  s.clear();
  s.put(key_of("again", '1'), "value");
  EXPECT_TRUE(outside_intact());
  EXPECT_TRUE(fs::exists(outside_ + "/" + key.substr(1, 2) + "/" + key));
  EXPECT_TRUE(fs::exists(outside_ + "/1" + key.substr(1)));
}

}  // namespace
}  // namespace kache::storage
