#include "storage/remote/http_storage.hpp"

#include <cstring>

#include "storage/remote/curl_loader.hpp"
#include "storage/remote/sigpipe_guard.hpp"
#include "util/hash.hpp"

namespace kache::storage::remote {

namespace {

const CurlApi& api_or_throw(const RemoteUrl& url) {
  std::string why;
  const CurlApi* api = load_curl(&why);
  if (!api) throw RemoteError(RemoteFailure::Kind::error, url.redacted() + ": " + why);
  return *api;
}

bool is_sha256_hex(std::string_view key) {
  if (key.size() != 64) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Keys are hex digests; anything else is percent-encoded so it stays one path segment.
std::string path_segment(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : key) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (plain) {
      out += c;
    } else {
      out += '%';
      out += kHex[static_cast<unsigned char>(c) >> 4];
      out += kHex[static_cast<unsigned char>(c) & 15];
    }
  }
  return out;
}

struct Upload {
  std::string_view data;
  std::size_t offset = 0;
};

std::size_t write_body(char* ptr, std::size_t size, std::size_t nmemb, void* userdata) {
  static_cast<std::string*>(userdata)->append(ptr, size * nmemb);
  return size * nmemb;
}

std::size_t read_upload(char* buffer, std::size_t size, std::size_t nitems, void* userdata) {
  auto* upload = static_cast<Upload*>(userdata);
  const std::size_t n = std::min(size * nitems, upload->data.size() - upload->offset);
  std::memcpy(buffer, upload->data.data() + upload->offset, n);
  upload->offset += n;
  return n;
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

HttpStorage::HttpStorage(RemoteUrl url, std::string ca_file) : url_(std::move(url)), ca_file_(std::move(ca_file)) {}

HttpStorage::~HttpStorage() {
  if (handle_) {
    const SigpipeGuard sigpipe;  // closing a TLS connection writes to it
    if (const CurlApi* api = load_curl(nullptr)) api->easy_cleanup(static_cast<CURL*>(handle_));
  }
}

bool HttpStorage::available(std::string* why) { return load_curl(why) != nullptr; }

std::string HttpStorage::key_url(std::string_view key) const {
  const std::string segment = path_segment(key);
  std::string out = url_.http_base();
  switch (url_.layout) {
    case HttpLayout::flat:
      return out + "/" + segment;
    case HttpLayout::subdirs:
      if (segment.size() < 3) return out + "/" + segment;
      return out + "/" + segment.substr(0, 2) + "/" + segment.substr(2);
    case HttpLayout::bazel:
      // Bazel's action cache takes exactly 64 hex digits; other keys are hashed into that form.
      return out + "/ac/" + (is_sha256_hex(key) ? std::string(key) : util::sha256(key).hex());
  }
  return out + "/" + segment;
}

HttpStorage::Response HttpStorage::perform(Method method, std::string_view key, std::string_view upload_data) {
  const CurlApi& api = api_or_throw(url_);
  if (!handle_) {
    handle_ = api.easy_init();
    if (!handle_) throw RemoteError(RemoteFailure::Kind::error, url_.redacted() + ": curl_easy_init failed");
  }
  CURL* curl = static_cast<CURL*>(handle_);
  api.easy_reset(curl);  // clears the previous request's options; keeps the open connection

  const std::string request_url = key_url(key);
  Response response;
  Upload upload{upload_data, 0};
  char error_text[CURL_ERROR_SIZE] = "";
  HeaderList headers{api};
  headers.add("Expect:");  // no 100-continue round trip before a PUT body
  if (url_.bearer_token) headers.add("Authorization: Bearer " + *url_.bearer_token);

  api.easy_setopt(curl, CURLOPT_URL, request_url.c_str());
  api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(url_.connect_timeout_ms));
  api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(url_.operation_timeout_ms));
  api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, &write_body);
  api.easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  if (!url_.user.empty()) {
    api.easy_setopt(curl, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    api.easy_setopt(curl, CURLOPT_USERNAME, url_.user.c_str());
    api.easy_setopt(curl, CURLOPT_PASSWORD, url_.password ? url_.password->c_str() : "");
  }
  if (!ca_file_.empty()) api.easy_setopt(curl, CURLOPT_CAINFO, ca_file_.c_str());
  switch (method) {
    case Method::get:
      break;
    case Method::put:
      api.easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      api.easy_setopt(curl, CURLOPT_READFUNCTION, &read_upload);
      api.easy_setopt(curl, CURLOPT_READDATA, &upload);
      api.easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(upload_data.size()));
      break;
    case Method::remove:
      api.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
      break;
  }

  const CURLcode code = [&] {
    const SigpipeGuard sigpipe;
    return api.easy_perform(curl);
  }();
  if (code != CURLE_OK) {
    const auto kind = code == CURLE_OPERATION_TIMEDOUT ? RemoteFailure::Kind::timeout : RemoteFailure::Kind::error;
    throw RemoteError(kind, url_.redacted() + ": " + (error_text[0] ? error_text : api.easy_strerror(code)));
  }
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  if (response.status == 401 || response.status == 403) {
    throw RemoteError(RemoteFailure::Kind::auth, url_.redacted() + ": the server refused the credentials (HTTP " +
                                                     std::to_string(response.status) + ")");
  }
  return response;
}

namespace {

[[noreturn]] void unexpected_status(const RemoteUrl& url, const char* method, long status) {
  throw RemoteError(RemoteFailure::Kind::error,
                    url.redacted() + ": " + method + " answered HTTP " + std::to_string(status));
}

}  // namespace

std::optional<std::string> HttpStorage::get(std::string_view key) {
  Response r = perform(Method::get, key, {});
  if (r.status == 200) return std::move(r.body);
  if (r.status == 404) return std::nullopt;
  unexpected_status(url_, "GET", r.status);
}

void HttpStorage::put(std::string_view key, std::string_view value) {
  if (url_.read_only) return;
  const Response r = perform(Method::put, key, value);
  if (r.status < 200 || r.status > 299) unexpected_status(url_, "PUT", r.status);
}

void HttpStorage::remove(std::string_view key) {
  if (url_.read_only) return;
  const Response r = perform(Method::remove, key, {});
  if ((r.status < 200 || r.status > 299) && r.status != 404) unexpected_status(url_, "DELETE", r.status);
}

}  // namespace kache::storage::remote
