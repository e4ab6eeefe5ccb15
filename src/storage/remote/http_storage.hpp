#pragma once
// An HTTP(S) server as a store: GET, PUT and DELETE of <base>/<layout path of key> (a WebDAV share,
// a Bazel remote cache's /ac/, any server that stores what is PUT). libcurl is loaded on first use
// (curl_loader.hpp); without it every call fails with one sentence saying the remote is disabled.
//
// Statuses: GET 200 = the value, 404 = miss; PUT any 2xx; DELETE any 2xx or 404; 401 and 403 = auth;
// anything else = error. curl's own failures: past connect-timeout or operation-timeout = timeout,
// the rest (refused, TLS, DNS) = error. Credentials: basic auth (user and password from the URL or
// KACHE_REMOTE_PASSWORD), else a bearer token (KACHE_REMOTE_BEARER_TOKEN). HTTPS verifies the server
// against ca_file when given (remote.ca_file), else the system's CAs. A read-only URL makes put and
// remove do nothing. One connection is kept for the process (keep-alive); not for use by two threads.
#include <string>

#include "storage/remote/remote_failure.hpp"
#include "storage/remote/remote_store.hpp"
#include "storage/remote/remote_url.hpp"

namespace kache::storage::remote {

class HttpStorage final : public RemoteBackend {
 public:
  explicit HttpStorage(RemoteUrl url, std::string ca_file = "");
  ~HttpStorage() override;
  HttpStorage(const HttpStorage&) = delete;
  HttpStorage& operator=(const HttpStorage&) = delete;

  std::string name() const override { return url_.redacted(); }
  std::optional<std::string> get(std::string_view key) override;
  void put(std::string_view key, std::string_view value) override;
  void remove(std::string_view key) override;
  const RemoteUrl& url() const { return url_; }

  // The request URL of a key under the URL's layout (no credentials in it).
  std::string key_url(std::string_view key) const;
  // Whether libcurl can be loaded; when not, *why says so in one sentence.
  static bool available(std::string* why = nullptr);

 private:
  enum class Method { get, put, remove };
  struct Response {
    long status = 0;
    std::string body;
  };
  Response perform(Method method, std::string_view key, std::string_view upload);

  RemoteUrl url_;
  std::string ca_file_;
  void* handle_ = nullptr;  // CURL*, created on first use
};

}  // namespace kache::storage::remote
