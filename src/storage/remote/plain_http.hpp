#pragma once
// http:// without libcurl: Boost.Beast's HTTP/1.1 over one Asio TCP connection, kept alive for the
// process. Why not libcurl here too: Debian's libcurl pulls OpenSSL, GnuTLS, krb5, LDAP, SSH and
// nghttp2 along, and loading it costs ~5-7 ms per process (bench/results/remote-hit-breakdown.md),
// more than a whole cache hit; Beast is header-only and costs nothing until used. https:// stays with
// libcurl (curl_http.hpp): TLS, CA stores and their configuration are libcurl's business.
//
// Bounds: the connection attempt ends after connect-timeout, the whole request (connect included)
// after operation-timeout, both as RemoteError of kind timeout. A host that is not a numeric address
// is resolved by getaddrinfo on a thread of its own, waited for at most connect-timeout. A connection
// the server closed while idle is retried once on a new one.
#include <memory>

#include "storage/remote/http_exchange.hpp"
#include "storage/remote/remote_url.hpp"

namespace kache::storage::remote {

class PlainHttpConnection {
 public:
  explicit PlainHttpConnection(const RemoteUrl& url);
  ~PlainHttpConnection();
  PlainHttpConnection(const PlainHttpConnection&) = delete;
  PlainHttpConnection& operator=(const PlainHttpConnection&) = delete;

  HttpResponse perform(const HttpRequest& request);

 private:
  struct State;
  const RemoteUrl& url_;
  std::unique_ptr<State> state_;
};

}  // namespace kache::storage::remote
