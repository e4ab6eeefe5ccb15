#pragma once
// https:// through libcurl, loaded on first use (curl_loader.hpp): TLS, certificate checks against
// remote.ca_file or the system's CAs. One easy handle, and so one connection, kept for the process.
// Timeouts: CURLOPT_CONNECTTIMEOUT_MS and CURLOPT_TIMEOUT_MS (the whole transfer), as RemoteError of
// kind timeout; refused, TLS and DNS failures are errors.
#include <string>

#include "storage/remote/http_exchange.hpp"
#include "storage/remote/remote_url.hpp"

namespace kache::storage::remote {

class CurlConnection {
 public:
  CurlConnection(const RemoteUrl& url, std::string ca_file);
  ~CurlConnection();
  CurlConnection(const CurlConnection&) = delete;
  CurlConnection& operator=(const CurlConnection&) = delete;

  // `url_text` is the whole request URL (the request's target appended to scheme://host:port).
  HttpResponse perform(const HttpRequest& request, const std::string& url_text);
  // Whether libcurl can be loaded; when not, *why says so in one sentence.
  static bool available(std::string* why);

 private:
  const RemoteUrl& url_;
  std::string ca_file_;
  std::string authorization_;
  void* handle_ = nullptr;  // CURL*, created on first use
};

}  // namespace kache::storage::remote
