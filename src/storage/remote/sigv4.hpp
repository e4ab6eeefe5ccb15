#pragma once
// AWS Signature Version 4 for S3 requests (s3_storage.hpp): the canonical request, the string to sign, the
// signing key derived from the secret and the scope, and the Authorization header, as AWS's "Signature
// Version 4 signing process" describes them. HMAC-SHA-256 and SHA-256 come from util/hash (OpenSSL).
// Checked against AWS's published examples (tests/unit/test_remote_s3.cpp: S3's "GET object" example
// and the test suite's get-vanilla).
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kache::storage::remote {

struct SigV4Request {
  std::string method;           // "GET", "PUT", "HEAD", "DELETE"
  std::string canonical_uri;    // the path as sent, already percent-encoded ("/bucket/prefix/key")
  std::string canonical_query;  // sorted "name=value&..." or empty
  // Every header that is signed (host and x-amz-date at least), any case; values are trimmed and their
  // inner runs of blanks collapsed, names lower-cased and sorted, as the canonical form requires.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload_sha256;  // hex SHA-256 of the body (the x-amz-content-sha256 value)
  std::string amz_date;        // "20130524T000000Z": the request time, UTC
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      // 64 hex digits
  std::string authorization;  // the Authorization header's value
};

SigV4Signature sign_v4(const SigV4Request& request, std::string_view access_key_id, std::string_view secret,
                       std::string_view region, std::string_view service);

// "20130524T000000Z" for a time in seconds since the epoch.
std::string amz_date(std::time_t when);
// An HTTP Date header ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 9110's IMF-fixdate) as seconds since the
// epoch; nullopt for anything else (the clock-skew check then says the server sent no usable date).
std::optional<std::time_t> parse_http_date(std::string_view date);

}  // namespace kache::storage::remote
