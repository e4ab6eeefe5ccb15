#pragma once
// http:// and https:// in this process: Boost.Beast's HTTP/1.1 over one Asio TCP connection, kept alive
// for the process, with TLS by OpenSSL (linked statically, like everything else in kache) through
// Asio's ssl::stream for https. Why not libcurl: Debian's libcurl pulls OpenSSL, GnuTLS, krb5, LDAP,
// SSH and nghttp2 along, ships no static archive, and loading it cost ~5-7 ms per process
// (bench/results/remote-hit-breakdown.md), more than a whole cache hit; Beast is header-only and costs
// nothing until used.
//
// Bounds: name resolution and the TCP connection end after connect-timeout, the whole request (TLS
// handshake included) after operation-timeout, both as RemoteError of kind timeout. A host that is not
// a numeric address is resolved by c-ares (host_names.hpp). A connection the server closed while idle
// is retried once on a new one.
//
// https: the server's certificate is verified against the system's CAs and, when given, the extra CAs
// of `ca_file` (remote.ca_file) besides them. The system's CAs: OpenSSL's default paths, SSL_CERT_FILE and SSL_CERT_DIR
// honoured, then the usual bundle locations of Debian, Fedora, SUSE and Alpine, as a static OpenSSL's compiled-in
// directory may not exist on this host), and must name the URL's host (a DNS name, or an IP address in its
// subjectAltName); the host name is sent as SNI.
#include <chrono>
#include <memory>
#include <string>

#include "core/remote_url.hpp"
#include "storage/remote/http_exchange.hpp"

namespace kache::storage::remote {

class HttpConnection {
 public:
  HttpConnection(const core::RemoteUrl& url, std::string ca_file);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  HttpResponse perform(const HttpRequest& request);

 private:
  struct State;
  // Opens the connection (resolve, connect, TLS handshake for https) within its deadlines.
  void connect(std::chrono::steady_clock::time_point deadline);
  // One request and its answer on the open connection (perform retries a stale reused connection once).
  HttpResponse exchange(const HttpRequest& request, bool reused);

  const core::RemoteUrl& url_;
  std::string ca_file_;
  std::unique_ptr<State> state_;
};

}  // namespace kache::storage::remote
