#include "storage/remote/curl_http.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "storage/remote/curl_loader.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/sigpipe_guard.hpp"

namespace kache::storage::remote {

namespace {

const CurlApi& api_or_throw(const RemoteUrl& url) {
  std::string why;
  const CurlApi* api = load_curl(&why);
  if (!api) throw RemoteError(RemoteFailure::Kind::error, url.redacted() + ": " + why);
  return *api;
}

struct Upload {
  std::string_view data;
  std::size_t offset = 0;
};

struct Download {
  const CurlApi* api = nullptr;
  CURL* curl = nullptr;
  const HttpRequest* request = nullptr;
  bool bounded = false;  // the bound was set from the status, at the body's first bytes
  std::string body;
  std::uint64_t max = UINT64_MAX;
  bool oversized = false;
};

std::size_t write_body(char* ptr, std::size_t size, std::size_t nmemb, void* userdata) {
  auto* download = static_cast<Download*>(userdata);
  if (!download->bounded) {
    long status = 0;
    download->api->easy_getinfo(download->curl, CURLINFO_RESPONSE_CODE, &status);
    download->max = answer_body_bound(*download->request, status);
    download->bounded = true;
  }
  if (download->body.size() + size * nmemb > download->max) {
    download->oversized = true;
    return 0;  // curl ends the transfer with CURLE_WRITE_ERROR
  }
  download->body.append(ptr, size * nmemb);
  return size * nmemb;
}

std::size_t read_upload(char* buffer, std::size_t size, std::size_t nitems, void* userdata) {
  auto* upload = static_cast<Upload*>(userdata);
  const std::size_t n = std::min(size * nitems, upload->data.size() - upload->offset);
  std::memcpy(buffer, upload->data.data() + upload->offset, n);
  upload->offset += n;
  return n;
}

int close_on_exec(void*, curl_socket_t fd, curlsocktype) {
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return CURL_SOCKOPT_OK;
}

struct HeaderList {
  const CurlApi& api;
  curl_slist* list = nullptr;
  ~HeaderList() { api.slist_free_all(list); }
  void add(const std::string& header) {
    if (curl_slist* grown = api.slist_append(list, header.c_str())) list = grown;
  }
};

}  // namespace

CurlConnection::CurlConnection(const RemoteUrl& url, std::string ca_file)
    : url_(url), ca_file_(std::move(ca_file)), authorization_(authorization_header(url)) {}

CurlConnection::~CurlConnection() {
  if (handle_) {
    const SigpipeGuard sigpipe;  // closing a TLS connection writes to it
    if (const CurlApi* api = load_curl(nullptr)) api->easy_cleanup(static_cast<CURL*>(handle_));
  }
}

bool CurlConnection::available(std::string* why) { return load_curl(why) != nullptr; }

HttpResponse CurlConnection::perform(const HttpRequest& request, const std::string& url_text) {
  const CurlApi& api = api_or_throw(url_);
  if (!handle_) {
    handle_ = api.easy_init();
    if (!handle_) throw RemoteError(RemoteFailure::Kind::error, url_.redacted() + ": curl_easy_init failed");
  }
  CURL* curl = static_cast<CURL*>(handle_);
  api.easy_reset(curl);  // clears the previous request's options; keeps the open connection

  Download download;
  download.api = &api;
  download.curl = curl;
  download.request = &request;
  Upload upload{request.body, 0};
  char error_text[CURL_ERROR_SIZE] = "";
  HeaderList headers{api};
  headers.add("Expect:");  // no 100-continue round trip before a PUT body
  if (!authorization_.empty()) headers.add("Authorization: " + authorization_);

  api.easy_setopt(curl, CURLOPT_URL, url_text.c_str());
  api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(url_.connect_timeout_ms));
  api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(url_.operation_timeout_ms));
  api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, &write_body);
  api.easy_setopt(curl, CURLOPT_WRITEDATA, &download);
  if (!ca_file_.empty()) api.easy_setopt(curl, CURLOPT_CAINFO, ca_file_.c_str());
  switch (request.method) {
    case HttpMethod::get:
      break;
    case HttpMethod::put:
      api.easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      api.easy_setopt(curl, CURLOPT_READFUNCTION, &read_upload);
      api.easy_setopt(curl, CURLOPT_READDATA, &upload);
      api.easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
      break;
    case HttpMethod::remove:
      api.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
      break;
  }

  // Sockets curl opens must not reach the compiler kache runs.
  api.easy_setopt(curl, CURLOPT_SOCKOPTFUNCTION, &close_on_exec);
  const CURLcode code = [&] {
    const SigpipeGuard sigpipe;
    return api.easy_perform(curl);
  }();
  if (download.oversized) {
    long status = 0;
    api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    throw_body_over_bound(url_, request, status);
  }
  if (code != CURLE_OK) {
    const auto kind = code == CURLE_OPERATION_TIMEDOUT ? RemoteFailure::Kind::timeout : RemoteFailure::Kind::error;
    throw RemoteError(kind, url_.redacted() + ": " + (error_text[0] ? error_text : api.easy_strerror(code)));
  }
  HttpResponse response;
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  response.body = std::move(download.body);
  return response;
}

}  // namespace kache::storage::remote
