#include "storage/remote/s3_storage.hpp"

#include <cstdlib>

#include "storage/remote/http_storage.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/schemes.hpp"
#include "storage/remote/sigv4.hpp"
#include "util/hash.hpp"
#include "util/text.hpp"

namespace kache::storage::remote {

namespace {

// SigV4 refuses a request whose x-amz-date is more than 15 minutes from the server's clock.
constexpr std::time_t kSkewRefusedS = 15 * 60;
constexpr std::time_t kSkewWarnS = 5 * 60;
constexpr std::size_t kErrorTextLimit = 200;

// The text between <tag> and </tag>, control bytes dropped, at most kErrorTextLimit bytes.
std::string element(std::string_view body, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  const std::size_t start = body.find(open);
  if (start == std::string_view::npos) return "";
  const std::size_t from = start + open.size();
  const std::size_t end = body.find(close, from);
  if (end == std::string_view::npos) return "";
  std::string out;
  for (char c : body.substr(from, std::min(end - from, kErrorTextLimit))) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b != 0x7f) out += c;
  }
  return out;
}

// S3 paths: every byte but the unreserved ones and '/' percent-encoded (SigV4 signs this same form).
std::string uri_encode_path(std::string_view path) { return util::percent_encode(path, "~/"); }

bool signature_refusal(const std::string& code) {
  return code == "SignatureDoesNotMatch" || code == "InvalidAccessKeyId" || code == "RequestTimeTooSkewed" ||
         code == "AuthorizationHeaderMalformed" || code == "AccessDenied" || code == "InvalidToken" ||
         code == "ExpiredToken";
}

bool path_style(const core::RemoteUrl& url) {
  const S3Addressing addressing = s3_addressing(url);
  if (addressing == S3Addressing::automatic) return url.attribute("endpoint").has_value();
  return addressing == S3Addressing::path;
}

// S3 bucket names: 3 to 63 lowercase letters, digits, '-' and '.' (AWS's rules; no credentials, no port).
bool valid_bucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

// BUCKET[/PREFIX]: the bucket as the host, the prefix as the path (no trailing '/').
void parse_s3_address(std::string_view text, core::RemoteUrl& url) {
  const std::size_t slash = text.find('/');
  const std::string_view bucket = text.substr(0, slash);
  if (!valid_bucket(bucket)) {
    throw core::RemoteUrlProblem(
        "expected s3://BUCKET[/PREFIX], the bucket 3 to 63 lowercase letters, digits, '-' or '.'");
  }
  url.host = std::string(bucket);
  std::string_view prefix = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
  if (!core::valid_url_path(prefix) || prefix.find('%') != std::string_view::npos) {
    throw core::RemoteUrlProblem("invalid character in the prefix");
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  url.path = std::string(prefix);
}

// An endpoint= is an http(s) URL of a host and port alone: credentials go in the environment, and a path
// would make request paths ambiguous.
void check_endpoint(std::string_view endpoint) {
  core::RemoteUrl server;
  try {
    server = core::parse_remote_url(endpoint, core::RemoteSecrets{}, remote_schemes());
  } catch (const core::RemoteUrlError&) {
    throw core::RemoteUrlProblem("endpoint takes http://HOST[:PORT] or https://HOST[:PORT]");
  }
  const bool http = server.scheme == http_scheme.name || server.scheme == https_scheme.name;
  if (!http || !server.user.empty() || server.password || !server.path.empty()) {
    throw core::RemoteUrlProblem("endpoint takes http://HOST[:PORT] or https://HOST[:PORT] (no credentials, no path)");
  }
}

void parse_s3_attribute(std::string_view name, std::optional<std::string_view> given, core::RemoteUrl& url) {
  const std::string_view value = given.value_or("");
  if (name == "region") {
    if (!valid_aws_region(value)) throw core::RemoteUrlProblem("region takes a name of lowercase letters, digits and '-'");
  } else if (name == "endpoint") {
    check_endpoint(value);
  } else if (value != "path" && value != "virtual") {
    throw core::RemoteUrlProblem("addressing must be path or virtual");
  }
  url.set_attribute(name, std::string(value));
}

constexpr std::string_view kS3Attributes[] = {"region", "endpoint", "addressing"};
constexpr std::string_view kS3ShownValues[] = {"region", "addressing"};
constexpr std::string_view kS3UrlValues[] = {"endpoint"};

}  // namespace

const core::SchemeRules s3_scheme = {
    .name = "s3",
    .family = "s3",
    .attributes = kS3Attributes,
    .attributes_apply_to = "s3 URLs only",
    .shown_attribute_values = kS3ShownValues,
    .url_attribute_values = kS3UrlValues,
    .parse_address = parse_s3_address,
    .parse_attribute = parse_s3_attribute,
};

S3Addressing s3_addressing(const core::RemoteUrl& url) {
  const std::optional<std::string> addressing = url.attribute("addressing");
  if (!addressing) return S3Addressing::automatic;
  return *addressing == "path" ? S3Addressing::path : S3Addressing::virtual_hosted;
}

std::string s3_region(const core::RemoteUrl& url) {
  if (std::optional<std::string> region = url.attribute("region")) return *region;
  return aws_region_from_environment().value_or("us-east-1");
}

core::RemoteUrl s3_endpoint(const core::RemoteUrl& url) {
  core::RemoteUrl server;
  if (const std::optional<std::string> endpoint = url.attribute("endpoint")) {
    // Checked when url was parsed: an http(s) URL of a host and port alone.
    server = core::parse_remote_url(*endpoint, core::RemoteSecrets{}, remote_schemes());
  } else {
    server.scheme = std::string(https_scheme.name);
    server.default_port = https_scheme.default_port;
    const std::string bucket_part = s3_addressing(url) == S3Addressing::path ? "" : url.host + ".";
    server.host = bucket_part + "s3." + s3_region(url) + ".amazonaws.com";
  }
  server.connect_timeout_ms = url.connect_timeout_ms;
  server.operation_timeout_ms = url.operation_timeout_ms;
  return server;
}

S3Error parse_s3_error(std::string_view body) { return {element(body, "Code"), element(body, "Message")}; }

S3Storage::S3Storage(core::RemoteUrl url, std::string ca_file, std::uint64_t max_body, bool every_remote_read_only)
    : RemoteBackend(url, every_remote_read_only),
      url_(std::move(url)),
      region_(s3_region(url_)),
      server_(s3_endpoint(url_)),
      ca_file_(std::move(ca_file)),
      max_body_(max_body) {}

S3Storage::~S3Storage() = default;

std::string S3Storage::bucket_path() const { return path_style(url_) ? "/" + url_.host : "/"; }

std::string S3Storage::object_path(std::string_view key) const {
  const std::string bucket = path_style(url_) ? "/" + url_.host : "";
  return uri_encode_path(bucket + url_.path + "/" + std::string(key));
}

const AwsCredentials& S3Storage::credentials() {
  // A compile may outlast temporary credentials taken before it (the lookup) and used after it (the
  // store): those about to expire are resolved again before a request is signed with them.
  const std::time_t now = std::time(nullptr);
  if (credentials_ && credentials_->expiration && *credentials_->expiration - kAwsInProcessMarginS <= now) {
    credentials_.reset();
  }
  if (!credentials_) {
    std::string why;
    credentials_ = find_aws_credentials(why, region_);
    if (!credentials_) throw RemoteError(RemoteFailure::Kind::auth, name() + ": " + why);
  }
  return *credentials_;
}

HttpResponse S3Storage::send(HttpMethod method, const std::string& path, std::string_view body, bool sign) {
  static constexpr const char* kMethods[] = {"GET", "PUT", "DELETE", "HEAD", "POST"};
  HttpRequest request;
  request.method = method;
  request.target = path;
  request.body = body;
  request.max_body = method == HttpMethod::get ? max_body_ : kAnswerBodyLimit;
  if (sign) {
    const AwsCredentials& keys = credentials();
    SigV4Request canonical;
    canonical.method = kMethods[static_cast<int>(method)];
    canonical.canonical_uri = path;
    canonical.payload_sha256 = util::sha256(body).hex();
    canonical.amz_date = amz_date(std::time(nullptr));
    canonical.headers = {{"host", server_.host_port()},
                         {"x-amz-content-sha256", canonical.payload_sha256},
                         {"x-amz-date", canonical.amz_date}};
    if (!keys.session_token.empty()) canonical.headers.emplace_back("x-amz-security-token", keys.session_token);
    const SigV4Signature signature =
        sign_v4(canonical, keys.access_key_id, keys.secret_access_key, region_, "s3");
    request.headers.assign(canonical.headers.begin() + 1, canonical.headers.end());  // Host goes out anyway
    request.headers.emplace_back("authorization", signature.authorization);
  }
  if (!connection_) connection_ = std::make_unique<HttpConnection>(server_, ca_file_);
  return connection_->perform(request);
}

void S3Storage::refused(const char* method, const HttpResponse& r) const {
  const S3Error error = parse_s3_error(r.body);
  std::string what = name() + ": " + method + " answered HTTP " + std::to_string(r.status);
  if (!error.code.empty()) what += " " + error.code;
  if (!error.message.empty()) what += " (" + error.message + ")";
  if (error.code == "RequestTimeTooSkewed") {
    what +=
        "; this machine's clock and the server's differ by more than 15 minutes, past which SigV4 "
        "requests are refused";
  }
  const bool auth = r.status == 401 || r.status == 403 || signature_refusal(error.code);
  throw RemoteError(auth ? RemoteFailure::Kind::auth : RemoteFailure::Kind::error, what);
}

std::optional<std::string> S3Storage::get(std::string_view key) {
  HttpResponse r = send(HttpMethod::get, object_path(key), {});
  if (r.status == 200) return std::move(r.body);
  if (r.status == 404 && parse_s3_error(r.body).code != "NoSuchBucket") return std::nullopt;
  refused("GET", r);
}

void S3Storage::write(std::string_view key, std::string_view value) {
  const HttpResponse r = send(HttpMethod::put, object_path(key), value);
  if (r.status < 200 || r.status > 299) refused("PUT", r);
}

void S3Storage::erase(std::string_view key) {
  const HttpResponse r = send(HttpMethod::remove, object_path(key), {});
  if ((r.status < 200 || r.status > 299) && r.status != 404) refused("DELETE", r);
}

core::DoctorRow clock_skew_finding(const std::string& name, std::optional<std::time_t> server_time, std::time_t local) {
  using Level = core::DoctorStatus;
  const std::string rule = "SigV4 requests are refused when the two clocks differ by more than 15 minutes";
  if (!server_time) {
    return remote_row("clock-skew", Level::warn, name + ": unknown", "the server sent no Date header to compare with.",
                      "");
  }
  const std::time_t skew = *server_time - local;
  const std::time_t size = std::llabs(skew);
  const std::string value = name + ": this machine's clock is " + std::to_string(size) + " s " +
                            (skew > 0 ? "behind" : "ahead of") + " the server's";
  if (size <= kSkewWarnS) return remote_row("clock-skew", Level::ok, value, "", "");
  return remote_row("clock-skew", size > kSkewRefusedS ? Level::fail : Level::warn, value, rule + ".",
                    "synchronize this machine's clock (NTP: systemd-timesyncd, chrony)");
}

std::vector<core::DoctorRow> S3Storage::probe(std::string_view probe_key) {
  using Level = core::DoctorStatus;
  const std::string shown = name();
  std::vector<core::DoctorRow> rows;
  HttpResponse head;
  try {
    head = send(HttpMethod::head, bucket_path(), {}, false);
  } catch (const std::exception& e) {
    rows.push_back(remote_row("reachable", Level::fail, shown,
                              std::string(e.what()) + ": every compile skips this remote.",
                              "start the server, or correct the URL's endpoint= or region=, or remove it"));
    return rows;
  }
  rows.push_back(
      remote_row("reachable", Level::ok, shown + ": answers (HTTP " + std::to_string(head.status) + ")", "", ""));
  rows.push_back(clock_skew_finding(shown, parse_http_date(head.date), std::time(nullptr)));
  try {
    (void)get(probe_key);
    rows.push_back(remote_row("authenticated", Level::ok,
                              shown + ": signed requests accepted (credentials from " + credentials().source + ")", "",
                              ""));
  } catch (const std::exception& e) {
    rows.push_back(remote_row("authenticated", Level::fail, shown,
                              std::string(e.what()) + ": every compile skips this remote.",
                              "give credentials the server accepts (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                              "AWS_PROFILE, web identity, container or instance credentials: docs/remote-storage.md), "
                              "and check region="));
    return rows;
  }
  if (read_only()) {
    rows.push_back(remote_row("writable", Level::ok, shown + ": read-only (as configured)", "", ""));
    return rows;
  }
  try {
    put(probe_key, "kache doctor");
    remove(probe_key);
    rows.push_back(remote_row("writable", Level::ok, shown + ": yes", "", ""));
  } catch (const std::exception& e) {
    rows.push_back(
        remote_row("writable", Level::fail, shown, std::string(e.what()) + ": entries are not shared.",
                   "grant these credentials s3:PutObject and s3:DeleteObject on the bucket, or mark it read-only"));
  }
  return rows;
}

}  // namespace kache::storage::remote
