#pragma once
// An HTTP(S) server as a store: GET, PUT and DELETE of <base>/<layout path of key> (a WebDAV share,
// a Bazel remote cache's /ac/, any server that stores what is PUT). http:// and https:// go through
// Boost.Beast in this process, TLS by OpenSSL (http_connection.hpp).
//
// Statuses: GET 200 = the value, 404 = miss; PUT any 2xx; DELETE any 2xx or 404; 401 and 403 = auth;
// anything else = error. Failures to get an answer: past connect-timeout or operation-timeout =
// timeout, the rest (refused, TLS, DNS) = error. A GET's value over max_body (remote.max_entry_size)
// throws OversizedValue without being read whole; other answers' bodies are bounded by
// kAnswerBodyLimit (http_exchange.hpp), past which they are errors. Credentials: basic auth
// (user and password from the URL or KACHE_REMOTE_PASSWORD), else a bearer token
// (KACHE_REMOTE_BEARER_TOKEN). HTTPS verifies the server against the system's CAs and, when given,
// ca_file's (remote.ca_file) besides them. A read-only URL makes put and remove do nothing. One connection is kept for
// the process (keep-alive); not for use by two threads.
//
// Its URLs (http_scheme, https_scheme: the scheme table's rows), ports 80 and 443:
//   http://[user[:password]@]host[:port][/path]     https://... likewise; shards= taken
//   attribute: layout=flat|subdirs|bazel (default subdirs), how a key becomes a path (HttpLayout)
#include <cstdint>
#include <memory>
#include <string>

#include "core/remote_url.hpp"
#include "storage/remote/http_connection.hpp"
#include "storage/remote/http_exchange.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/remote_store.hpp"

namespace kache::storage::remote {

extern const core::SchemeRules http_scheme;
extern const core::SchemeRules https_scheme;

enum class HttpLayout {
  flat,     // <path>/<key>
  subdirs,  // <path>/<key[0..2)>/<key[2..)>
  bazel,    // <path>/ac/<64 hex digits> (a Bazel remote cache's action-cache namespace)
};
// The layout= of an http(s) URL (subdirs when it has none).
HttpLayout http_layout(const core::RemoteUrl& url);

class HttpStorage final : public RemoteBackend {
 public:
  // every_remote_read_only: remote.read_only (RemoteBackend decides with the URL's own read-only).
  explicit HttpStorage(core::RemoteUrl url, std::string ca_file = "", std::uint64_t max_body = UINT64_MAX,
                       bool every_remote_read_only = false);
  ~HttpStorage() override;
  HttpStorage(const HttpStorage&) = delete;
  HttpStorage& operator=(const HttpStorage&) = delete;

  std::string name() const override { return url_.redacted(); }
  std::optional<std::string> get(std::string_view key) override;
  const core::RemoteUrl& url() const { return url_; }

  // The request URL of a key under the URL's layout (no credentials in it).
  std::string key_url(std::string_view key) const;

 protected:
  void write(std::string_view key, std::string_view value) override;
  void erase(std::string_view key) override;

 private:
  // Where a key lies below the URL's path, under its layout: "/ab/cdef", "/abcdef" or "/ac/<64 hex>".
  std::string key_path(std::string_view key) const;
  HttpResponse perform(HttpMethod method, std::string_view key, std::string_view upload);

  core::RemoteUrl url_;
  std::string ca_file_;
  std::uint64_t max_body_;
  std::unique_ptr<HttpConnection> connection_;  // made on first use
};

}  // namespace kache::storage::remote
