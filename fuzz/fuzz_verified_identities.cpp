// Fuzzes the reader of <cache>/identities (core/verified_identities.hpp): arbitrary bytes as the file.
// Properties: loading never throws; a record parsed from the input carries a digest that its own
// line's checksum vouched for (re-parsing the line gives the same); what add() appends on top of any
// content is found by the next reader.
#include <unistd.h>

#include <string>

#include "core/verified_identities.hpp"
#include "fuzz_check.hpp"
#include "util/fs.hpp"

using namespace kache;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = [] {
    std::string d = "/tmp/kache-fuzz-identities." + std::to_string(::getpid());
    util::create_directories(d);
    return d + "/identities";
  }();
  const std::string_view input = kache::fuzz::as_view(data, size);
  std::string key, key2;
  util::Digest digest, digest2;
  if (core::VerifiedIdentities::parse_record(input, key, digest)) {
    KACHE_FUZZ_CHECK(core::VerifiedIdentities::parse_record(input, key2, digest2));
    KACHE_FUZZ_CHECK(key == key2 && digest == digest2);
  }
  util::write_file(path, input);
  util::FileIdentity id;
  id.dev = 1;
  id.ino = 2;
  id.size = 3;
  id.mtime_ns = 4;
  id.ctime_ns = 5;
  const util::Digest mine = util::sha256("fuzz");
  {
    core::VerifiedIdentities memo(path);
    (void)memo.verified(core::VerifiedIdentities::Kind::file, "/fuzz/a.h", id, mine);
    memo.add(core::VerifiedIdentities::Kind::file, "/fuzz/a.h", id, mine);
  }
  core::VerifiedIdentities next(path);
  // Input that ends inside a line makes the appended record part of that (torn) line: only a file that
  // ends at a line break must keep it.
  if (input.empty() || input.back() == '\n') {
    KACHE_FUZZ_CHECK(next.verified(core::VerifiedIdentities::Kind::file, "/fuzz/a.h", id, mine));
  }
  return 0;
}
