#pragma once
// One HTTP request and its answer, as the two connections behind HttpStorage see them: PlainHttpConnection
// (http://, Boost.Beast in this process) and CurlConnection (https://, libcurl loaded on first use).
// Both throw RemoteError for what the server did not answer (refused, timed out, TLS, DNS) and
// OversizedValue for a body over the caller's bound; a status code, whatever it is, is an answer.
#include <cstdint>
#include <string>
#include <string_view>

#include "storage/remote/remote_url.hpp"

namespace kache::storage::remote {

enum class HttpMethod { get, put, remove };

struct HttpRequest {
  HttpMethod method = HttpMethod::get;
  std::string_view target;  // the path, "/cache/ab/cdef" (origin form, already percent-encoded)
  std::string_view body;    // PUT only
  std::uint64_t max_body = UINT64_MAX;  // a longer response body throws OversizedValue, unread
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

// The "Authorization" header value for the URL's credentials ("Basic ..." or "Bearer ..."), empty
// when it has none.
std::string authorization_header(const RemoteUrl& url);

}  // namespace kache::storage::remote
