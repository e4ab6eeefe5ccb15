#include "storage/remote/sigv4.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "util/hash.hpp"

namespace kache::storage::remote {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Leading and trailing blanks dropped, inner runs of blanks made one space.
std::string trimmed(std::string_view value) {
  std::string out;
  bool blank = false;
  for (char c : value) {
    if (c == ' ' || c == '\t') {
      blank = !out.empty();
      continue;
    }
    if (blank) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

std::string_view as_text(const util::Digest& d) {
  return {reinterpret_cast<const char*>(d.bytes.data()), d.bytes.size()};
}

}  // namespace

SigV4Signature sign_v4(const SigV4Request& request, std::string_view access_key_id, std::string_view secret,
                       std::string_view region, std::string_view service) {
  // By name, a repeated name's values in their order: the position is the tie-break (std::sort, not
  // std::stable_sort, whose buffer libstdc++ 12 takes from a function clang 19 warns is deprecated).
  std::vector<std::tuple<std::string, std::size_t, std::string>> sorted;
  for (const auto& [name, value] : request.headers) sorted.emplace_back(lower(name), sorted.size(), trimmed(value));
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<std::string, std::string>> headers;
  for (auto& h : sorted) headers.emplace_back(std::move(std::get<0>(h)), std::move(std::get<2>(h)));
  std::string canonical_headers, signed_headers;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.back() = ',';  // a repeated header: its values joined by commas, in order
      canonical_headers += headers[i].second + "\n";
      continue;
    }
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + headers[i].first;
  }
  SigV4Signature out;
  out.canonical_request = request.method + "\n" + request.canonical_uri + "\n" + request.canonical_query + "\n" +
                          canonical_headers + "\n" + signed_headers + "\n" + request.payload_sha256;
  const std::string date = request.amz_date.substr(0, 8);
  const std::string scope = date + "/" + std::string(region) + "/" + std::string(service) + "/aws4_request";
  out.string_to_sign =
      "AWS4-HMAC-SHA256\n" + request.amz_date + "\n" + scope + "\n" + util::sha256(out.canonical_request).hex();
  util::Digest key = util::hmac_sha256("AWS4" + std::string(secret), date);
  key = util::hmac_sha256(as_text(key), region);
  key = util::hmac_sha256(as_text(key), service);
  key = util::hmac_sha256(as_text(key), "aws4_request");
  out.signature = util::hmac_sha256(as_text(key), out.string_to_sign).hex();
  out.authorization = "AWS4-HMAC-SHA256 Credential=" + std::string(access_key_id) + "/" + scope +
                      ",SignedHeaders=" + signed_headers + ",Signature=" + out.signature;
  return out;
}

std::string amz_date(std::time_t when) {
  std::tm utc{};
  ::gmtime_r(&when, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

std::optional<std::time_t> parse_http_date(std::string_view date) {
  // "Sun, 06 Nov 1994 08:49:37 GMT": exactly 29 bytes.
  if (date.size() != 29 || date.substr(3, 2) != ", " || date.substr(25) != " GMT") return std::nullopt;
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  const auto digits = [&](std::size_t at, std::size_t n) -> int {
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (date[i] < '0' || date[i] > '9') return -1;
      v = v * 10 + (date[i] - '0');
    }
    return v;
  };
  const std::size_t month = kMonths.find(date.substr(8, 3));
  std::tm t{};
  t.tm_mday = digits(5, 2);
  t.tm_year = digits(12, 4) - 1900;
  t.tm_hour = digits(17, 2);
  t.tm_min = digits(20, 2);
  t.tm_sec = digits(23, 2);
  if (month == std::string_view::npos || month % 3 != 0 || date[7] != ' ' || date[11] != ' ' || date[16] != ' ' ||
      date[19] != ':' || date[22] != ':' || t.tm_mday < 1 || t.tm_mday > 31 || t.tm_year < 70 || t.tm_hour < 0 ||
      t.tm_hour > 23 || t.tm_min < 0 || t.tm_min > 59 || t.tm_sec < 0 || t.tm_sec > 59) {
    return std::nullopt;
  }
  t.tm_mon = static_cast<int>(month / 3);
  return ::timegm(&t);
}

}  // namespace kache::storage::remote
