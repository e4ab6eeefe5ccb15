#include "storage/remote/http_storage.hpp"

#include <openssl/evp.h>

#include <algorithm>

#include "util/hash.hpp"
#include "util/text.hpp"

namespace kache::storage::remote {

std::uint64_t answer_body_bound(const HttpRequest& request, long status) {
  const bool value = request.method == HttpMethod::get && status == 200;
  return value ? request.max_body : std::min(request.max_body, kAnswerBodyLimit);
}

void throw_body_over_bound(const core::RemoteUrl& url, const HttpRequest& request, long status) {
  const std::string what = url.redacted() + ": the answer's body (HTTP " + std::to_string(status) + ") exceeds " +
                           std::to_string(answer_body_bound(request, status)) + " bytes";
  if (request.method == HttpMethod::get && status == 200) throw OversizedValue(what);
  throw RemoteError(RemoteFailure::Kind::error, what);
}

std::string authorization_header(const core::RemoteUrl& url) {
  if (!url.user.empty()) {
    const std::string credentials = url.user + ":" + url.password.value_or("");
    std::string encoded(4 * ((credentials.size() + 2) / 3) + 1, '\0');
    const int n = ::EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                    reinterpret_cast<const unsigned char*>(credentials.data()),
                                    static_cast<int>(credentials.size()));
    encoded.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return "Basic " + encoded;
  }
  if (url.bearer_token) return "Bearer " + *url.bearer_token;
  return "";
}

namespace {

bool is_sha256_hex(std::string_view key) {
  if (key.size() != 64) return false;
  for (char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Keys are hex digests; anything else is percent-encoded so it stays one path segment.
std::string path_segment(std::string_view key) { return util::percent_encode(key); }

}  // namespace

HttpStorage::HttpStorage(core::RemoteUrl url, std::string ca_file, std::uint64_t max_body, bool every_remote_read_only)
    : RemoteBackend(url, every_remote_read_only),
      url_(std::move(url)),
      ca_file_(std::move(ca_file)),
      max_body_(max_body) {}

HttpStorage::~HttpStorage() = default;

std::string HttpStorage::key_path(std::string_view key) const {
  const std::string segment = path_segment(key);
  switch (url_.layout) {
    case core::HttpLayout::flat:
      return "/" + segment;
    case core::HttpLayout::subdirs:
      if (segment.size() < 3) return "/" + segment;
      return "/" + segment.substr(0, 2) + "/" + segment.substr(2);
    case core::HttpLayout::bazel:
      // Bazel's action cache takes exactly 64 hex digits; other keys are hashed into that form.
      return "/ac/" + (is_sha256_hex(key) ? std::string(key) : util::sha256(key).hex());
  }
  return "/" + segment;
}

std::string HttpStorage::key_url(std::string_view key) const { return url_.http_base() + key_path(key); }

HttpResponse HttpStorage::perform(HttpMethod method, std::string_view key, std::string_view upload) {
  const std::string target = url_.path + key_path(key);
  HttpRequest request;
  request.method = method;
  request.target = target;
  request.body = upload;
  request.max_body = method == HttpMethod::get ? max_body_ : kAnswerBodyLimit;
  HttpResponse response;
  if (!connection_) connection_ = std::make_unique<HttpConnection>(url_, ca_file_);
  response = connection_->perform(request);
  if (response.status == 401 || response.status == 403) {
    throw RemoteError(RemoteFailure::Kind::auth, url_.redacted() + ": the server refused the credentials (HTTP " +
                                                     std::to_string(response.status) + ")");
  }
  return response;
}

namespace {

[[noreturn]] void unexpected_status(const core::RemoteUrl& url, const char* method, long status) {
  throw RemoteError(RemoteFailure::Kind::error,
                    url.redacted() + ": " + method + " answered HTTP " + std::to_string(status));
}

}  // namespace

std::optional<std::string> HttpStorage::get(std::string_view key) {
  HttpResponse r = perform(HttpMethod::get, key, {});
  if (r.status == 200) return std::move(r.body);
  if (r.status == 404) return std::nullopt;
  unexpected_status(url_, "GET", r.status);
}

void HttpStorage::write(std::string_view key, std::string_view value) {
  const HttpResponse r = perform(HttpMethod::put, key, value);
  if (r.status < 200 || r.status > 299) unexpected_status(url_, "PUT", r.status);
}

void HttpStorage::erase(std::string_view key) {
  const HttpResponse r = perform(HttpMethod::remove, key, {});
  if ((r.status < 200 || r.status > 299) && r.status != 404) unexpected_status(url_, "DELETE", r.status);
}

}  // namespace kache::storage::remote
