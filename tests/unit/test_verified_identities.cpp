// The cache dir's record of identities already verified (core/verified_identities.hpp): what one
// compile records, the next one finds; a damaged or torn record is never believed.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/manifest.hpp"
#include "core/verified_identities.hpp"
#include "core/watch.hpp"
#include "util/fs.hpp"

namespace kache::core {
namespace {

util::FileIdentity identity(std::uint64_t ino, std::int64_t ctime_ns = 1000) {
  util::FileIdentity id;
  id.dev = 42;
  id.ino = ino;
  id.size = 7;
  id.mtime_ns = 900;
  id.ctime_ns = ctime_ns;
  return id;
}

util::Digest digest_of(std::string_view text) { return util::sha256(text); }

using Kind = VerifiedIdentities::Kind;

TEST(VerifiedIdentities, WhatOneRecordsTheNextFinds) {
  util::TempDir dir("/tmp");
  const std::string file = dir.path() + "/identities";
  {
    VerifiedIdentities first(file);
    EXPECT_FALSE(first.verified(Kind::file, "/inc/a.h", identity(1), digest_of("a")));
    first.add(Kind::file, "/inc/a.h", identity(1), digest_of("a"));
    first.add(Kind::listing, "/inc", identity(2), digest_of("names"));
    EXPECT_TRUE(first.verified(Kind::file, "/inc/a.h", identity(1), digest_of("a")));
  }  // flushed
  VerifiedIdentities next(file);
  EXPECT_TRUE(next.verified(Kind::file, "/inc/a.h", identity(1), digest_of("a")));
  EXPECT_TRUE(next.verified(Kind::listing, "/inc", identity(2), digest_of("names")));
  // Another digest, another identity (any field), another path or another kind: not verified.
  EXPECT_FALSE(next.verified(Kind::file, "/inc/a.h", identity(1), digest_of("b")));
  EXPECT_FALSE(next.verified(Kind::file, "/inc/a.h", identity(1, 1001), digest_of("a")));
  EXPECT_FALSE(next.verified(Kind::file, "/inc/b.h", identity(1), digest_of("a")));
  EXPECT_FALSE(next.verified(Kind::listing, "/inc/a.h", identity(1), digest_of("a")));
}

TEST(VerifiedIdentities, DamagedAndTornRecordsAreIgnored) {
  util::TempDir dir("/tmp");
  const std::string file = dir.path() + "/identities";
  const std::string good = VerifiedIdentities::format_record(Kind::file, "/inc/a.h", identity(1), digest_of("a"));
  std::string flipped = VerifiedIdentities::format_record(Kind::file, "/inc/b.h", identity(2), digest_of("b"));
  flipped[flipped.size() / 2] ^= 1;
  const std::string torn =
      VerifiedIdentities::format_record(Kind::file, "/inc/c.h", identity(3), digest_of("c")).substr(0, 40);
  util::write_file_atomic(file, "garbage\n" + flipped + good + torn);
  VerifiedIdentities memo(file);
  EXPECT_TRUE(memo.verified(Kind::file, "/inc/a.h", identity(1), digest_of("a")));
  EXPECT_FALSE(memo.verified(Kind::file, "/inc/b.h", identity(2), digest_of("b")));
  EXPECT_FALSE(memo.verified(Kind::file, "/inc/c.h", identity(3), digest_of("c")));

  std::string key;
  util::Digest d;
  EXPECT_TRUE(VerifiedIdentities::parse_record(good, key, d));
  EXPECT_EQ(d, digest_of("a"));
  EXPECT_FALSE(VerifiedIdentities::parse_record(flipped, key, d));
  EXPECT_FALSE(VerifiedIdentities::parse_record(torn, key, d));
  EXPECT_FALSE(VerifiedIdentities::parse_record("", key, d));
}

TEST(VerifiedIdentities, AppendsAfterOtherWritersAndStartsOverPastItsBound) {
  util::TempDir dir("/tmp");
  const std::string file = dir.path() + "/identities";
  {
    VerifiedIdentities one(file);
    one.add(Kind::file, "/a", identity(1), digest_of("a"));
  }
  {
    VerifiedIdentities two(file);
    two.add(Kind::file, "/b", identity(2), digest_of("b"));
  }
  {
    VerifiedIdentities both(file);
    EXPECT_TRUE(both.verified(Kind::file, "/a", identity(1), digest_of("a")));
    EXPECT_TRUE(both.verified(Kind::file, "/b", identity(2), digest_of("b")));
  }
  // Past the bound the next writer starts the file over with its own records.
  util::write_file_atomic(file, std::string(VerifiedIdentities::kMaxBytes + 1, '\n'));
  {
    VerifiedIdentities writer(file);
    writer.add(Kind::file, "/c", identity(3), digest_of("c"));
  }
  EXPECT_LT(util::read_file(file).size(), 1000u);
  VerifiedIdentities after(file);
  EXPECT_TRUE(after.verified(Kind::file, "/c", identity(3), digest_of("c")));
}

}  // namespace
}  // namespace kache::core

namespace kache::core {
namespace {

// In a cache dir others may write, a FIFO or a link at <cache>/identities is never waited on or
// followed: it is no record, and the next flush replaces it by a file of its own.
TEST(VerifiedIdentities, APlantedFifoOrLinkIsReplacedNeverFollowed) {
  util::TempDir dir("/tmp");
  const std::string file = dir.path() + "/identities";
  const std::string outside = dir.path() + "/outside";
  util::write_file(outside, "outside\n");
  for (const bool fifo : {true, false}) {
    ::unlink(file.c_str());
    ASSERT_EQ(fifo ? ::mkfifo(file.c_str(), 0600) : ::symlink(outside.c_str(), file.c_str()), 0);
    {
      VerifiedIdentities ids(file);
      EXPECT_FALSE(ids.verified(Kind::file, "/inc/a.h", identity(1), digest_of("a")));  // no wait
      ids.add(Kind::file, "/inc/a.h", identity(1), digest_of("a"));
    }  // flushed
    struct stat st {};
    ASSERT_EQ(::lstat(file.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode)) << (fifo ? "fifo" : "link");
    EXPECT_TRUE(VerifiedIdentities(file).verified(Kind::file, "/inc/a.h", identity(1), digest_of("a")));
    EXPECT_EQ(util::read_file(outside), "outside\n");
  }
}

TEST(FileTimes, WholeSecondTimesAreTrustedOnlyTwoSecondsLater) {
  // A file system that stores whole seconds, or two (FAT behind NFS, SMB or FUSE): a file rewritten
  // within that span keeps its identity.
  util::FileIdentity coarse;
  coarse.mtime_ns = coarse.ctime_ns = 100'000'000'000;  // 100 s, no fraction
  EXPECT_TRUE(is_racy(coarse, 100'500'000'000, 0));
  EXPECT_TRUE(is_racy(coarse, 101'500'000'000, 0));
  EXPECT_TRUE(is_racy(coarse, 102'000'000'000, 0));
  EXPECT_FALSE(is_racy(coarse, 102'000'000'001, 0));
  // Nanosecond times: the file system's own margin only.
  util::FileIdentity fine = coarse;
  fine.mtime_ns = fine.ctime_ns = 100'000'000'123;
  EXPECT_FALSE(is_racy(fine, 100'500'000'000, 0));
  EXPECT_TRUE(is_racy(fine, 100'500'000'000, 500'000'000));
}

TEST(FileTimes, ContentIsReadOnlyAsTheIdentityStatted) {
  util::TempDir dir("/tmp");
  const std::string a = dir.path() + "/a", b = dir.path() + "/b";
  util::write_file(a, "content a");
  util::write_file(b, "content b");
  const auto ida = util::stat_identity(a);
  ASSERT_TRUE(ida);
  EXPECT_EQ(util::hash_file_as(a, *ida), util::sha256("content a"));
  // The path now names another file: its bytes are not a's.
  EXPECT_EQ(util::hash_file_as(b, *ida), std::nullopt);
  EXPECT_EQ(util::hash_file_as(dir.path() + "/gone", *ida), std::nullopt);

  const auto idd = util::stat_identity(dir.path());
  ASSERT_TRUE(idd);
  EXPECT_EQ(listing_digest_as(dir.path(), *idd), listing_digest(dir.path()));
  util::create_directories(dir.path() + "/other");
  const auto other = util::stat_identity(dir.path() + "/other");
  ASSERT_TRUE(other);
  EXPECT_EQ(listing_digest_as(dir.path(), *other), std::nullopt);
}

}  // namespace
}  // namespace kache::core
