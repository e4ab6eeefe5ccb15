// The layering between the pipeline and the stores (storage/layered.hpp): local first, then remotes in
// order; a lower hit checked and written back above; a failing store switched off for the compile.
// The remotes here are in-memory stores with the same byte interface a remote backend implements.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/config.hpp"
#include "core/entry_format.hpp"
#include "storage/layered.hpp"
#include "storage/open.hpp"
#include "storage/remote/schemes.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::storage {
namespace {

class MemoryStorage final : public Storage {
 public:
  std::string name() const override { return "memory"; }
  StorageLookup get(std::string_view key) override {
    if (auto f = call()) return *f;
    auto it = values.find(key);
    if (it == values.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  StorageStatus put(std::string_view key, std::string_view bytes) override {
    if (auto f = call()) return *f;
    values.insert_or_assign(std::string(key), std::string(bytes));
    return util::Done{};
  }
  StorageStatus remove(std::string_view key) override {
    if (auto f = call()) return *f;
    if (auto it = values.find(key); it != values.end()) values.erase(it);
    return util::Done{};
  }

  std::map<std::string, std::string, std::less<>> values;
  std::optional<StorageFailure::Kind> fail;  // set: every call fails so
  int calls = 0;

 private:
  std::optional<StorageFailure> call() {
    ++calls;
    if (fail) return StorageFailure{*fail, "injected"};
    return std::nullopt;
  }
};

std::string key_of(const std::string& seed) { return util::sha256(seed).hex(); }

class LayeredTest : public ::testing::Test {
 protected:
  // A local store in a temporary directory (or at `dir`), then `remotes` in-memory stores.
  LayeredStorage make(int remotes, bool compress = false, std::string dir = "") {
    std::vector<std::unique_ptr<Storage>> list;
    mem_.clear();
    for (int i = 0; i < remotes; ++i) {
      auto m = std::make_unique<MemoryStorage>();
      mem_.push_back(m.get());
      list.push_back(std::move(m));
    }
    auto local = std::make_unique<LocalStorage>(LocalStorageOptions{dir.empty() ? dir_.path() : dir, 1ull << 30});
    return LayeredStorage(std::move(local), std::move(list), core::PartsEncoding{compress, 3});
  }
  util::TempDir dir_{(std::filesystem::temp_directory_path() / "kache-unit").string()};
  std::vector<MemoryStorage*> mem_;
};

TEST_F(LayeredTest, LowerHitIsWrittenBackIntoEveryStoreAbove) {
  auto s = make(2);
  const std::string key = key_of("manifest");
  const std::string bytes = core::encode_raw("the manifest");
  mem_[1]->values[key] = bytes;
  const auto got = s.get_record(key);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, std::optional<std::string>("the manifest"));
  EXPECT_EQ(mem_[0]->values.at(key), bytes);  // the same bytes in every store
  EXPECT_EQ(*s.local().get(key), std::optional<std::string>(bytes));
  // The next lookup is a local hit: no remote is asked.
  const int asked = mem_[0]->calls + mem_[1]->calls;
  EXPECT_EQ(*s.get_record(key), std::optional<std::string>("the manifest"));
  EXPECT_EQ(mem_[0]->calls + mem_[1]->calls, asked);
}

TEST_F(LayeredTest, RemoteEntryComesBackWholeThenFromLocalWithItsBodyInAFile) {
  auto s = make(1);
  const std::string key = key_of("entry");
  const std::string body(20'000, 'o');
  mem_[0]->values[key] = core::encode_parts("head", body, {false, 3});
  util::TempDir out(dir_.path());
  auto remote = s.get_parts(key, out.path());
  ASSERT_TRUE(remote && *remote);
  EXPECT_EQ((*remote)->value, "head" + body);
  EXPECT_TRUE((*remote)->body_file.empty());
  auto local = s.get_parts(key, out.path());  // written back: now the local clone-ready path
  ASSERT_TRUE(local && *local);
  EXPECT_EQ((*local)->value, "head");
  EXPECT_EQ(util::read_file((*local)->body_file), body);
  EXPECT_EQ(mem_[0]->calls, 1);
}

TEST_F(LayeredTest, PutEncodesOnceAndStoresTheSameBytesEverywhere) {
  auto s = make(2, true);
  const std::string key = key_of("put");
  ASSERT_TRUE(s.put_parts(key, "head", std::string(5000, 'b')));
  const std::string bytes = **s.local().get(key);
  EXPECT_EQ(bytes.substr(0, 8), std::string("KACHE\0E2", 8));
  EXPECT_EQ(mem_[0]->values.at(key), bytes);
  EXPECT_EQ(mem_[1]->values.at(key), bytes);
  ASSERT_TRUE(s.put_record(key_of("record"), "m"));
  EXPECT_EQ(mem_[1]->values.at(key_of("record")), core::encode_raw("m"));
  s.remove(key);
  EXPECT_EQ(*s.local().get(key), std::nullopt);
  EXPECT_FALSE(mem_[0]->values.count(key) || mem_[1]->values.count(key));
}

// Identities re-verified on this machine stay here: no remote is written (issue 26), and with local
// writes off (remote.only) nothing is written at all.
TEST_F(LayeredTest, LocalRecordIsWrittenToTheLocalStoreOnly) {
  auto s = make(2);
  const std::string key = key_of("refreshed");
  ASSERT_TRUE(s.put_local_record(key, "this machine's identities"));
  EXPECT_EQ(*s.local().get(key), std::optional<std::string>(core::encode_raw("this machine's identities")));
  EXPECT_EQ(mem_[0]->calls + mem_[1]->calls, 0);
  s.set_local_writes(false);
  const std::string other = key_of("refreshed elsewhere");
  ASSERT_TRUE(s.put_local_record(other, "x"));
  EXPECT_EQ(*s.local().get(other), std::nullopt);
  EXPECT_EQ(mem_[0]->calls + mem_[1]->calls, 0);
}

// open_storage opens the remotes the Config carries parsed (issue 25: remote.storage is parsed once, when
// the configuration is read), and remote.only follows that list too.
TEST_F(LayeredTest, OpenStorageOpensTheRemotesTheConfigCarries) {
  core::Config cfg;
  cfg.cache_dir = dir_.path();
  cfg.remote_urls =
      core::parse_remote_urls("redis://127.0.0.1:1|read-only", {}, kache::storage::remote::remote_schemes());
  cfg.remote_only = true;
  auto s = open_storage(cfg);
  EXPECT_FALSE(s.disabled(1));  // level 1: the one remote
  EXPECT_THROW((void)s.disabled(2), std::out_of_range);
  const std::string key = key_of("remote only");
  (void)s.put_record(key, "written to the remotes only");
  EXPECT_EQ(*s.local().get(key), std::nullopt);
}

// What the commands reach through storage/open.hpp. Maintenance visits the writable shared directories
// in order (a server has nothing to do; a read-only remote, by its |read-only or remote.read_only, is
// left alone), and a directory that is not there is that store's error, reported, not thrown.
TEST_F(LayeredTest, MaintainRemoteStoresVisitsTheWritableSharedDirectories) {
  core::Config cfg;
  cfg.cache_dir = dir_.path();
  const std::string shared = util::join_path(dir_.path(), "shared");
  util::create_directories(shared);
  cfg.remote_urls =
      core::parse_remote_urls("redis://127.0.0.1:1 file://" + shared + "|max-size=1k file://" + shared + "|read-only",
                              {}, kache::storage::remote::remote_schemes());
  const Maintenance evict{Maintenance::Kind::evict_older_than, 86400};
  auto outcomes = maintain_remote_stores(cfg, evict);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].store, "file://" + shared + "|max-size=1024");
  EXPECT_EQ(outcomes[0].removed, 0u);
  EXPECT_EQ(outcomes[0].error, "");
  outcomes = maintain_remote_stores(cfg, Maintenance{Maintenance::Kind::trim_to_max_size, 0});
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].max_size, 1024u);
  cfg.remote_read_only = true;
  EXPECT_TRUE(maintain_remote_stores(cfg, evict).empty());
  cfg.remote_read_only = false;
  cfg.remote_urls = core::parse_remote_urls("file://" + util::join_path(dir_.path(), "not-mounted"), {},
                                            kache::storage::remote::remote_schemes());
  outcomes = maintain_remote_stores(cfg, evict);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_NE(outcomes[0].error.find("is the share mounted?"), std::string::npos) << outcomes[0].error;
}

// kache doctor's remote rows: each server of a sharded URL answers for itself, in the "remote" section.
TEST_F(LayeredTest, ProbeRemoteStoresGivesEachServersRows) {
  core::Config cfg;
  cfg.cache_dir = dir_.path();
  cfg.remote_urls = core::parse_remote_urls("redis://127.0.0.1:*|shards=1,2|connect-timeout=500", {},
                                            kache::storage::remote::remote_schemes());
  const auto rows = probe_remote_stores(cfg, "kache-unit-probe");
  ASSERT_EQ(rows.size(), 2u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].section, "remote");
    EXPECT_EQ(rows[i].name, "reachable");
    EXPECT_EQ(rows[i].status, core::DoctorStatus::fail);
    EXPECT_NE(rows[i].value.find("127.0.0.1:" + std::to_string(i + 1)), std::string::npos) << rows[i].value;
  }
}

// The scheme table has one row per scheme, each with its rules and its backend, and the rules the parser
// is given are the rows' own: no parsed URL lacks a backend.
TEST(SchemeTable, OneRowPerScheme) {
  const auto rows = remote::scheme_rows();
  const core::RemoteSchemes schemes = remote::remote_schemes();
  ASSERT_EQ(rows.size(), schemes.size());
  std::vector<std::string_view> names;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_NE(rows[i].rules, nullptr);
    EXPECT_EQ(rows[i].rules, schemes[i]);
    EXPECT_NE(rows[i].make, nullptr);
    EXPECT_NE(rows[i].rules->parse_address, nullptr) << rows[i].rules->name;
    EXPECT_EQ(rows[i].rules->attributes.empty(), rows[i].rules->parse_attribute == nullptr) << rows[i].rules->name;
    names.push_back(rows[i].rules->name);
  }
  EXPECT_EQ(names, (std::vector<std::string_view>{"redis", "redis+unix", "http", "https", "s3", "file"}));
}

TEST_F(LayeredTest, FailingStoreIsSkippedForTheRestOfTheCompile) {
  for (auto kind : {StorageFailure::Kind::error, StorageFailure::Kind::timeout}) {
    auto s = make(2);
    mem_[0]->fail = kind;
    const std::string key = key_of("skip");
    mem_[1]->values[key] = core::encode_raw("v");
    auto got = s.get_record(key);  // the failing remote is passed over, the next one answers
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, std::optional<std::string>("v"));
    EXPECT_EQ(mem_[0]->calls, 1);
    EXPECT_TRUE(s.disabled(1));
    EXPECT_FALSE(s.disabled(0));
    EXPECT_FALSE(s.disabled(2));
    // Never asked again: not for another lookup, a write, a write-back or a removal.
    EXPECT_TRUE(s.get_record(key_of("other")));
    EXPECT_TRUE(s.put_record(key_of("new"), "n"));
    s.remove(key);
    EXPECT_EQ(mem_[0]->calls, 1);
    EXPECT_TRUE(mem_[1]->values.count(key_of("new")));
  }
}

// A remote's failure is its own: the lookup is a miss and writes succeed (the local store has them).
TEST_F(LayeredTest, RemoteFailureIsAMissNotAFailure) {
  auto s = make(1);
  mem_[0]->fail = StorageFailure::Kind::timeout;
  const auto got = s.get_record(key_of("absent"));
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, std::nullopt);
  EXPECT_TRUE(s.put_record(key_of("absent"), "x"));
}

// The local store's failure is the caller's (the pipeline counts it): typed, never thrown, and per call
// (the local store is not switched off).
TEST_F(LayeredTest, LocalFailureIsReportedTyped) {
  const std::string file = dir_.path() + "/not-a-directory";
  util::write_file(file, "");
  auto s = make(1, false, file);
  const auto put = s.put_record(key_of("k"), "v");
  ASSERT_FALSE(put);
  EXPECT_EQ(put.error().kind, StorageFailure::Kind::error);
  EXPECT_FALSE(s.disabled(0));
  EXPECT_EQ(mem_[0]->values.count(key_of("k")), 1u);  // the remote still took it
  const auto got = s.get_record(key_of("k"));
  ASSERT_TRUE(got);  // a local miss (no such directory), then the remote's copy
  EXPECT_EQ(*got, std::optional<std::string>("v"));
  const auto invalid = s.get_record("not hex");  // the local store refuses the key: its failure is reported
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().kind, StorageFailure::Kind::error);
  EXPECT_FALSE(s.disabled(0));
  EXPECT_FALSE(s.disabled(1));
}

// A damaged remote value is counted, removed there, and the next store is asked.
TEST_F(LayeredTest, DamagedRemoteValueIsRemovedAndTheNextStoreAsked) {
  auto s = make(2);
  const std::string key = key_of("damaged");
  std::string bad = core::encode_raw("value");
  bad.back() ^= 1;
  mem_[0]->values[key] = bad;
  mem_[1]->values[key] = core::encode_raw("value");
  EXPECT_EQ(*s.get_record(key), std::optional<std::string>("value"));
  EXPECT_EQ(s.corrupt_found(), 1);
  EXPECT_EQ(mem_[0]->values.at(key), core::encode_raw("value"));  // replaced by the good copy
  EXPECT_FALSE(s.disabled(1));
}

}  // namespace
}  // namespace kache::storage
