// Fuzzes what the S3 remote reads from outside: an S3 server's error body (<Code>, <Message>), its Date
// header, the AWS shared credentials file, and the answers of the credential services (credential_process,
// STS, the SSO portal, ECS and instance metadata). Properties: nothing throws; the error's code and message
// hold no control byte and at most 200 bytes each, and come from the body; a parsed date prints back (as
// x-amz-date) to the digits it was read from; a profile's keys, when found, are non-empty text of the file;
// credentials from an answer have both keys, or a reason instead; an AWS time prints back to its date.
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
  for (auto parse : {parse_credential_process_output, parse_sts_credentials, parse_sso_role_credentials,
                     parse_metadata_credentials}) {
    std::string why;
    if (const auto found = parse(text, why)) {
      KACHE_FUZZ_CHECK(!found->access_key_id.empty() && !found->secret_access_key.empty());
    } else {
      KACHE_FUZZ_CHECK(!why.empty());
    }
  }
  if (const auto when = parse_aws_time(text); when && text[0] != '0') {  // strftime's %Y does not pad
    const std::string back = amz_date(*when);  // "YYYYMMDDTHHMMSSZ"
    KACHE_FUZZ_CHECK(back.substr(0, 4) == text.substr(0, 4) && back.substr(4, 2) == text.substr(5, 2) &&
                     back.substr(6, 2) == text.substr(8, 2));
  }
  return 0;
}
