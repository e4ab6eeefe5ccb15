// Fuzzes what the S3 remote reads from outside: an S3 server's error body (<Code>, <Message>), its Date
// header, and the AWS shared credentials file. Properties: nothing throws; the error's code and message
// hold no control byte and at most 200 bytes each, and come from the body; a parsed date prints back (as
// x-amz-date) to the digits it was read from; a profile's keys, when found, are non-empty text of the file.
#include <string>

#include "fuzz_check.hpp"
#include "storage/remote/aws_credentials.hpp"
#include "storage/remote/s3_storage.hpp"
#include "storage/remote/sigv4.hpp"

using namespace kache::storage::remote;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = kache::fuzz::as_view(data, size);
  const S3Error error = parse_s3_error(text);
  for (const std::string* part : {&error.code, &error.message}) {
    KACHE_FUZZ_CHECK(part->size() <= 200);
    for (char c : *part) KACHE_FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
  if (const auto when = parse_http_date(text)) {
    const std::string back = amz_date(*when);  // "YYYYMMDDTHHMMSSZ"
    KACHE_FUZZ_CHECK(back.substr(0, 4) == text.substr(12, 4));
    KACHE_FUZZ_CHECK(back.substr(9, 2) == text.substr(17, 2));
  }
  for (const char* profile : {"default", "ci"}) {
    if (const auto found = parse_credentials_file(text, profile)) {
      KACHE_FUZZ_CHECK(!found->access_key_id.empty() && !found->secret_access_key.empty());
      KACHE_FUZZ_CHECK(text.find(found->access_key_id) != std::string_view::npos);
      KACHE_FUZZ_CHECK(text.find(found->secret_access_key) != std::string_view::npos);
    }
  }
  return 0;
}
