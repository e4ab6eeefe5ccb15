// The direct-mode manifest: its encoding, its bound, and the racy-clean rule.
#include <gtest/gtest.h>

#include "core/manifest.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/serial.hpp"

namespace kache::core {
namespace {

ManifestEntry entry(char tag, std::size_t files) {
  ManifestEntry e;
  e.result_key = util::sha256(std::string(1, tag));
  for (std::size_t i = 0; i < files; ++i) {
    ManifestFile f;
    f.path = {static_cast<int>(i % 3) - 1, "/dir/file" + std::to_string(i) + ".h"};
    f.hash = util::sha256(std::to_string(i));
    f.identity = {1, 100 + i, 42, 1'000'000'000 + static_cast<std::int64_t>(i), 2'000'000'000, false};
    f.racy = i % 2 == 0;
    e.files.push_back(f);
  }
  AbsentDir guarded;
  guarded.dir = {-1, "/usr/include"};
  guarded.guarded = true;
  guarded.identity = {1, 7, 4096, 5, 6, true};
  guarded.names = {"x.h", "thrust"};
  AbsentDir toolchain;  // a toolchain directory: no names, its listing's digest
  toolchain.dir = {-1, "/usr/local/cuda/include"};
  toolchain.guarded = true;
  toolchain.identity = {1, 8, 4096, 5, 6, true};
  toolchain.listing = util::sha256("names");
  AbsentDir plain;
  plain.dir = {0, "/../include"};
  plain.names = {"y.h"};
  e.absent = {guarded, toolchain, plain};
  e.path_specific = tag == 'p';
  e.checkout_specific = tag == 'c';
  if (tag == 'r') e.object_roots = {"/kache/src", "/kache/base0"};
  return e;
}

TEST(Manifest, RoundTripKeepsEveryField) {
  Manifest m;
  manifest_add(m, entry('a', 5));
  manifest_add(m, entry('p', 2));
  manifest_add(m, entry('c', 0));
  const Manifest back = deserialize_manifest(serialize_manifest(m));
  ASSERT_EQ(back.entries.size(), 3u);
  EXPECT_EQ(back.entries[0].result_key, entry('c', 0).result_key);  // most recent first
  EXPECT_TRUE(back.entries[0].checkout_specific);
  EXPECT_TRUE(back.entries[1].path_specific);
  const auto& a = back.entries[2];
  ASSERT_EQ(a.files.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a.files[i].path, entry('a', 5).files[i].path);
    EXPECT_EQ(a.files[i].hash, entry('a', 5).files[i].hash);
    EXPECT_EQ(a.files[i].identity, entry('a', 5).files[i].identity);
    EXPECT_EQ(a.files[i].racy, i % 2 == 0);
  }
  EXPECT_EQ(a.absent, entry('a', 5).absent);
  ASSERT_EQ(a.absent.size(), 3u);
  EXPECT_TRUE(a.absent[0].guarded);
  EXPECT_TRUE(a.absent[0].identity.is_dir);  // a directory compares equal to a fresh stat of itself
  EXPECT_FALSE(a.absent[0].listing);
  ASSERT_TRUE(a.absent[1].listing);
  EXPECT_EQ(*a.absent[1].listing, util::sha256("names"));
  EXPECT_FALSE(a.absent[2].guarded);
}

// Which roots an entry's object names (issue 35): what its storage key combines, read back in order.
TEST(Manifest, RoundTripKeepsTheRootsTheObjectNames) {
  Manifest m;
  manifest_add(m, entry('r', 1));
  manifest_add(m, entry('a', 1));
  const Manifest back = deserialize_manifest(serialize_manifest(m));
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_TRUE(back.entries[0].object_roots.empty());
  EXPECT_EQ(back.entries[1].object_roots, (std::vector<std::string>{"/kache/src", "/kache/base0"}));
  EXPECT_FALSE(back.entries[1].checkout_specific);
}

// A manifest of the format before (KMN6, no roots recorded) is never read as this one: a plain miss.
TEST(Manifest, AnEarlierFormatIsRecognizedNotRead) {
  util::Writer w;
  w.u32(0x4b4d4e36);
  w.u32(0);
  const std::string older = w.take();
  EXPECT_TRUE(is_older_manifest(older));
  EXPECT_THROW(deserialize_manifest(older), std::runtime_error);
  EXPECT_FALSE(is_older_manifest(serialize_manifest(Manifest{})));
  EXPECT_FALSE(is_older_manifest("xx"));
}

// A preprocessed entry (issue 39) is read back as one, from a manifest of format 8; a manifest without one
// keeps format 7 byte for byte, so a cache from before stays warm, and a kache reading format 7 never sees a
// preprocessed entry (it would take it for a direct entry whose empty closure always holds).
TEST(Manifest, PreprocessedEntriesAreFormatEightOthersStaySeven) {
  Manifest m;
  manifest_add(m, entry('a', 2));
  const std::string seven = serialize_manifest(m);
  EXPECT_EQ(seven.substr(0, 4), std::string("7NMK"));  // little-endian "KMN7"
  ManifestEntry pre = entry('q', 0);
  pre.absent.clear();
  pre.preprocessed = true;
  pre.date_keyed = true;
  manifest_add(m, pre);
  const std::string eight = serialize_manifest(m);
  EXPECT_EQ(eight.substr(0, 4), std::string("8NMK"));
  EXPECT_FALSE(is_older_manifest(eight));
  const Manifest back = deserialize_manifest(eight);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_TRUE(back.entries[0].preprocessed);
  EXPECT_TRUE(back.entries[0].date_keyed);
  EXPECT_EQ(back.entries[0].result_key, pre.result_key);
  EXPECT_FALSE(back.entries[1].preprocessed);
  EXPECT_EQ(back.entries[1].files.size(), 2u);
  // Format 7's byte never carries the flag, whatever its bit 2 holds.
  std::string forged = seven;
  forged[4 + 4 + 32] = static_cast<char>(forged[4 + 4 + 32] | 4);
  EXPECT_FALSE(deserialize_manifest(forged).entries[0].preprocessed);
}

TEST(Manifest, TruncatedOrForeignDataIsRejected) {
  Manifest m;
  manifest_add(m, entry('a', 3));
  const std::string data = serialize_manifest(m);
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, data.size() / 2, data.size() - 1}) {
    EXPECT_THROW(deserialize_manifest(data.substr(0, cut)), std::runtime_error) << cut;
  }
  EXPECT_THROW(deserialize_manifest(data + "x"), std::runtime_error);
  EXPECT_THROW(deserialize_manifest(std::string(64, 'z')), std::runtime_error);
}

// Found by fuzz_manifest (fuzz/regressions/fuzz_manifest/): a damaged count made the decoder allocate
// before noticing the data cannot hold that many records (0xff000000 files: ~190 GB), and a root index
// of 2^31 overflowed an int.
TEST(Manifest, DamagedCountsAndRootIndicesAreRejectedBeforeAllocating) {
  Manifest m;
  manifest_add(m, entry('a', 1));
  const std::string good = serialize_manifest(m);
  const std::size_t files_count_at = 4 + 4 + 32 + 1 + 1 + 4 + 8;  // past the (empty) object roots' count
  std::string data = good;
  data.replace(files_count_at, 4, std::string("\0\0\0\xff", 4));
  EXPECT_THROW(deserialize_manifest(data), std::runtime_error);
  data = good;
  data.replace(files_count_at + 4, 4, std::string("\0\0\0\x80", 4));  // the first file's root: 2^31
  EXPECT_THROW(deserialize_manifest(data), std::runtime_error);
}

TEST(Manifest, AddReplacesTheSameResultAndKeepsTheBound) {
  Manifest m;
  for (int i = 0; i < 40; ++i) manifest_add(m, entry(static_cast<char>('A' + i), 1));
  EXPECT_EQ(m.entries.size(), kMaxManifestEntries);
  EXPECT_EQ(m.entries[0].result_key, entry(static_cast<char>('A' + 39), 1).result_key);
  manifest_add(m, entry(static_cast<char>('A' + 30), 2));
  EXPECT_EQ(m.entries.size(), kMaxManifestEntries);
  EXPECT_EQ(m.entries[0].files.size(), 2u);
}

TEST(Manifest, RacyCleanRule) {
  util::FileIdentity id{1, 2, 3, 1'000, 1'000, false};
  // Seen in a later tick: the identity is trustworthy.
  EXPECT_FALSE(is_racy(id, 5'000, 0));
  // Seen in the tick it was modified in (or with a margin covering it): a later edit in the same tick
  // could keep every field of the identity, so the record must be checked by content.
  EXPECT_TRUE(is_racy(id, 1'000, 0));
  EXPECT_TRUE(is_racy(id, 2'500, 2'000));
  // A time in the future is clock skew: never trusted by identity.
  EXPECT_TRUE(is_racy(id, 500, 0));
  // ctime counts too: touch -r restores mtime, not ctime.
  util::FileIdentity touched{1, 2, 3, 1'000, 9'000, false};
  EXPECT_TRUE(is_racy(touched, 9'000, 0));
}

TEST(Manifest, FreshlyWrittenFileIsRacyByTheFileClock) {
  util::TempDir dir("/tmp");
  const std::string p = util::join_path(dir.path(), "h.h");
  const std::int64_t before = util::file_clock_now_ns();
  util::write_file(p, "x");
  auto id = util::stat_identity(p);
  ASSERT_TRUE(id);
  // Read right away, the file clock has not left the file's tick (or has, by at most the time taken).
  EXPECT_TRUE(is_racy(*id, before, util::file_time_margin_ns(p)));
}

}  // namespace
}  // namespace kache::core
