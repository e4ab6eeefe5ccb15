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

// [userinfo@]host[:port] then the path prefix, kept without a trailing '/'.
void parse_http_address(std::string_view text, core::RemoteUrl& url) {
  const std::size_t slash = text.find('/');
  core::parse_authority(text.substr(0, slash), url,
                        {.password_needs_user = "HTTP basic authentication needs a user name before the password"});
  std::string_view path = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
  if (!core::valid_url_path(path)) throw core::RemoteUrlProblem("invalid character in the path (no query or fragment)");
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  url.path = std::string(path);
}

constexpr std::string_view kLayoutNames[] = {"flat", "subdirs", "bazel"};  // in HttpLayout's order

void parse_http_attribute(std::string_view, std::optional<std::string_view> value, core::RemoteUrl& url) {
  const auto known = std::find(std::begin(kLayoutNames), std::end(kLayoutNames), value.value_or(""));
  if (!value || known == std::end(kLayoutNames)) throw core::RemoteUrlProblem("layout must be flat, subdirs or bazel");
  // subdirs is the default, which a URL does not print.
  url.set_attribute("layout", *known == "subdirs" ? std::nullopt : std::optional<std::string>(*known));
}

// A user's password, when the URL has none, is KACHE_REMOTE_PASSWORD; without a user, the bearer token.
void take_http_secrets(core::RemoteUrl& url, const core::RemoteSecrets& secrets) {
  if (!url.password && !url.user.empty()) url.password = secrets.password;
  if (url.user.empty() && secrets.bearer_token) url.bearer_token = secrets.bearer_token;
}

constexpr std::string_view kHttpAttributes[] = {"layout"};

constexpr core::SchemeRules http_rules(std::string_view name, int default_port) {
  return {
      .name = name,
      .family = "http(s)",
      .default_port = default_port,
      .shardable = true,
      .attributes = kHttpAttributes,
      .attributes_apply_to = "http and https URLs only",
      .shown_attribute_values = kHttpAttributes,
      .parse_address = parse_http_address,
      .parse_attribute = parse_http_attribute,
      .apply_secrets = take_http_secrets,
  };
}

}  // namespace

const core::SchemeRules http_scheme = http_rules("http", 80);
const core::SchemeRules https_scheme = http_rules("https", 443);

HttpLayout http_layout(const core::RemoteUrl& url) {
  const std::optional<std::string> layout = url.attribute("layout");
  if (!layout) return HttpLayout::subdirs;
  const auto known = std::find(std::begin(kLayoutNames), std::end(kLayoutNames), *layout);
  return known == std::end(kLayoutNames) ? HttpLayout::subdirs
                                         : static_cast<HttpLayout>(known - std::begin(kLayoutNames));
}

HttpStorage::HttpStorage(core::RemoteUrl url, std::string ca_file, std::uint64_t max_body, bool every_remote_read_only)
    : RemoteBackend(url, every_remote_read_only),
      url_(std::move(url)),
      ca_file_(std::move(ca_file)),
      max_body_(max_body) {}

HttpStorage::~HttpStorage() = default;

std::string HttpStorage::key_path(std::string_view key) const {
  const std::string segment = path_segment(key);
  switch (http_layout(url_)) {
    case HttpLayout::flat:
      return "/" + segment;
    case HttpLayout::subdirs:
      if (segment.size() < 3) return "/" + segment;
      return "/" + segment.substr(0, 2) + "/" + segment.substr(2);
    case HttpLayout::bazel:
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
