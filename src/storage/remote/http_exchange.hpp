#pragma once
// One HTTP request and its answer, as the connection behind HttpStorage sees them (HttpConnection:
// http:// and https://, Boost.Beast in this process). It throws RemoteError for what the server did
// not answer (refused, timed out, TLS, DNS) or for an answer body over its bound, and OversizedValue for a value (a GET's 200) over the caller's bound; a
// status code, whatever it is, is an answer.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/remote_url.hpp"

namespace kache::storage::remote {

enum class HttpMethod { get, put, remove, head, post };  // post: credential services only (STS)

// The most of an error page, or of the answer to a PUT or DELETE, that is read (only their status
// matters); only a GET's 200 is allowed the request's max_body.
constexpr std::uint64_t kAnswerBodyLimit = 64 << 10;

struct HttpRequest {
  HttpMethod method = HttpMethod::get;
  std::string_view target;  // the path, "/cache/ab/cdef" (origin form, already percent-encoded)
  std::string_view body;    // PUT and POST only
  std::uint64_t max_body = UINT64_MAX;  // a longer value (a GET's 200) throws OversizedValue, unread
  // Headers sent besides Host, User-Agent and the connection's own Authorization (which one named here
  // replaces): an S3 request's signature and its x-amz-* headers.
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpResponse {
  long status = 0;
  std::string body;  // empty for HEAD
  std::string date;  // the Date header as sent, empty if none (S3's clock-skew check)
};

// The bound on an answer's body: a value (a GET's 200) is allowed the request's max_body; an error
// page or the answer to a PUT or DELETE is small, and kAnswerBodyLimit bounds it.
std::uint64_t answer_body_bound(const HttpRequest& request, long status);

// What an answer whose body exceeds answer_body_bound throws: OversizedValue for a value (a miss,
// counted apart), RemoteError for anything else (an error, not an oversized value).
[[noreturn]] void throw_body_over_bound(const core::RemoteUrl& url, const HttpRequest& request, long status);

// The "Authorization" header value for the URL's credentials ("Basic ..." or "Bearer ..."), empty
// when it has none.
std::string authorization_header(const core::RemoteUrl& url);

}  // namespace kache::storage::remote
