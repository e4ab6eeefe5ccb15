#include "core/remote_url.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstdlib>

#include "core/config.hpp"
#include "util/text.hpp"

namespace kache::core {

namespace {

constexpr int kMaxTimeoutMs = 10 * 60 * 1000;

// Control bytes of a configured value are shown as \xNN: a message is one line of text, whatever the
// configuration holds (a NUL would also cut it short).
std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += c;
    }
  }
  return out;
}

[[noreturn]] void fail(std::string_view spec, const std::string& why) {
  throw RemoteUrlError("remote storage URL '" + printable(redact_unparsed(spec)) + "': " + printable(why));
}

bool is_unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// RFC 3986's unreserved characters stay as they are (userinfo).
std::string percent_encode(std::string_view text) { return util::percent_encode(text, "~"); }

std::optional<int> parse_int(std::string_view text, int min, int max) {
  int value = 0;
  if (text.empty() || text.size() > 9) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value < min || value > max) return std::nullopt;
  return value;
}

bool valid_host(std::string_view host, bool bracketed) {
  if (host.empty()) return false;
  for (char c : host) {
    const bool ok = bracketed ? (hex_value(c) >= 0 || c == ':' || c == '.') : (is_unreserved(c) && c != '~');
    if (!ok) return false;
  }
  return true;
}

bool valid_http_path(std::string_view path) {
  for (char c : path) {
    const auto b = static_cast<unsigned char>(c);
    if (b <= 0x20 || b >= 0x7f || c == '?' || c == '#' || c == '|' || c == '\\') return false;
  }
  return true;
}

// Splits "[userinfo@]host[:port]" and fills user, password, host, port.
void parse_authority(std::string_view spec, std::string_view authority, RemoteUrl& url) {
  const std::size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority.remove_prefix(at + 1);
    const std::size_t colon = userinfo.find(':');
    std::optional<std::string> user, password;
    if (colon != std::string_view::npos) {
      user = percent_decode(userinfo.substr(0, colon));
      password = percent_decode(userinfo.substr(colon + 1));
    } else if (url.is_redis()) {
      user = "";  // ccache's "redis://PASSWORD@host"
      password = percent_decode(userinfo);
    } else {
      user = percent_decode(userinfo);
    }
    const bool needs_password = colon != std::string_view::npos || url.is_redis();
    if (!user || (needs_password && !password)) {
      fail(spec, "bad percent-encoding in the credentials");
    }
    url.user = *user;
    if (password) {
      url.password = *password;
      url.password_in_url = true;
    }
    if (url.is_http() && url.user.empty() && url.password) {
      fail(spec, "HTTP basic authentication needs a user name before the password");
    }
  }
  std::string_view host = authority;
  std::string_view port;
  bool bracketed = false;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) fail(spec, "unterminated '[' in the host");
    port = host.substr(close + 1);
    host = host.substr(1, close - 1);
    bracketed = true;
    if (!port.empty()) {
      if (port.front() != ':') fail(spec, "unexpected text after ']'");
      port.remove_prefix(1);
      if (port.empty()) fail(spec, "empty port");
    }
  } else if (const std::size_t colon = host.find(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port.empty()) fail(spec, "empty port");
  }
  if (!valid_host(host, bracketed)) fail(spec, "missing or invalid host name");
  url.host = std::string(host);
  if (!port.empty()) {
    const auto p = parse_int(port, 1, 65535);
    if (!p) fail(spec, "the port must be a number from 1 to 65535");
    url.port = *p;
  }
}

// An AWS region name: lowercase letters, digits and '-' ("us-east-1", "eu-central-1"); S3-compatible
// servers take any such word ("garage", "auto").
bool valid_region(std::string_view region) {
  if (region.empty() || region.size() > 64) return false;
  for (char c : region) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

RemoteUrl parse_endpoint(std::string_view spec, std::string_view endpoint);

void parse_s3_attribute(std::string_view spec, std::string_view name, std::string_view value, RemoteUrl& url) {
  if (name == "region") {
    if (!valid_region(value)) fail(spec, "region takes a name of lowercase letters, digits and '-'");
    url.region = std::string(value);
  } else if (name == "endpoint") {
    (void)parse_endpoint(spec, value);
    url.endpoint = std::string(value);
  } else if (value == "path") {
    url.addressing = S3Addressing::path;
  } else if (value == "virtual") {
    url.addressing = S3Addressing::virtual_hosted;
  } else {
    fail(spec, "addressing must be path or virtual");
  }
}

void parse_attribute(std::string_view spec, std::string_view attribute, RemoteUrl& url) {
  const std::size_t eq = attribute.find('=');
  const std::string_view name = attribute.substr(0, eq);
  const std::optional<std::string_view> value =
      eq == std::string_view::npos ? std::nullopt : std::optional(attribute.substr(eq + 1));
  const auto timeout = [&]() {
    const auto ms = value ? parse_int(*value, 1, kMaxTimeoutMs) : std::nullopt;
    if (!ms) fail(spec, std::string(name) + " takes milliseconds, from 1 to " + std::to_string(kMaxTimeoutMs));
    return *ms;
  };
  if (name == "read-only") {
    if (value) fail(spec, "read-only takes no value");
    url.read_only = true;
  } else if (name == "connect-timeout") {
    url.connect_timeout_ms = timeout();
  } else if (name == "operation-timeout") {
    url.operation_timeout_ms = timeout();
  } else if (name == "region" || name == "endpoint" || name == "addressing") {
    if (url.scheme != Scheme::s3) fail(spec, std::string(name) + " applies to s3 URLs only");
    parse_s3_attribute(spec, name, value.value_or(""), url);
  } else if (name == "max-size") {
    if (url.scheme != Scheme::file) fail(spec, "max-size applies to file URLs only");
    if (!value || !parse_size(std::string(*value), url.max_size)) fail(spec, "max-size takes a size (e.g. 500G)");
  } else if (name == "shards") {
    // Read before the address (find_shards); here only its place among the attributes is checked.
    if (url.shards.empty()) fail(spec, "shards= needs one '*' in the URL's host[:port]");
  } else if (name == "layout") {
    if (!url.is_http()) fail(spec, "layout applies to http and https URLs only");
    if (value == "flat") {
      url.layout = HttpLayout::flat;
    } else if (value == "subdirs") {
      url.layout = HttpLayout::subdirs;
    } else if (value == "bazel") {
      url.layout = HttpLayout::bazel;
    } else {
      fail(spec, "layout must be flat, subdirs or bazel");
    }
  } else {
    fail(spec, "unknown attribute '" + std::string(name) +
                   "' (known: read-only, connect-timeout, operation-timeout, layout, region, endpoint, addressing, "
                   "shards, max-size)");
  }
}

// S3 bucket names: 3 to 63 lowercase letters, digits, '-' and '.' (AWS's rules; no credentials, no port).
bool valid_bucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

// s3://BUCKET[/PREFIX] and file:///PATH: no credentials or port in either (S3's come from the environment).
void parse_object_store(std::string_view spec, std::string_view text, RemoteUrl& url) {
  if (url.scheme == Scheme::file) {
    if (text.empty() || text.front() != '/') fail(spec, "expected file:///absolute/path");
    if (text.size() < 2 || !valid_http_path(text) || text.find('%') != std::string_view::npos) {
      fail(spec, "invalid character in the path (no blank, '%', '?', '#', '|' or '\\')");
    }
    while (text.size() > 1 && text.back() == '/') text.remove_suffix(1);
    url.path = std::string(text);
    return;
  }
  const std::size_t slash = text.find('/');
  const std::string_view bucket = text.substr(0, slash);
  if (!valid_bucket(bucket)) {
    fail(spec, "expected s3://BUCKET[/PREFIX], the bucket 3 to 63 lowercase letters, digits, '-' or '.'");
  }
  url.host = std::string(bucket);
  std::string_view prefix = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
  if (!valid_http_path(prefix) || prefix.find('%') != std::string_view::npos) {
    fail(spec, "invalid character in the prefix");
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  url.path = std::string(prefix);
}

}  // namespace

const char* scheme_name(Scheme scheme) {
  switch (scheme) {
    case Scheme::redis:
      return "redis";
    case Scheme::redis_unix:
      return "redis+unix";
    case Scheme::http:
      return "http";
    case Scheme::https:
      return "https";
    case Scheme::s3:
      return "s3";
    case Scheme::file:
      return "file";
  }
  return "?";
}

const char* layout_name(HttpLayout layout) {
  switch (layout) {
    case HttpLayout::flat:
      return "flat";
    case HttpLayout::subdirs:
      return "subdirs";
    case HttpLayout::bazel:
      return "bazel";
  }
  return "?";
}

RemoteSecrets RemoteSecrets::from_environment() {
  RemoteSecrets secrets;
  if (const char* p = std::getenv("KACHE_REMOTE_PASSWORD"); p && *p) secrets.password = p;
  if (const char* t = std::getenv("KACHE_REMOTE_BEARER_TOKEN"); t && *t) secrets.bearer_token = t;
  return secrets;
}

namespace {

// Attribute values that can be shown: the rest (a mistyped "password=", "token=", anything unknown) may
// carry a secret, so only its name is printed.
bool attribute_value_shown(std::string_view name) {
  return name == "connect-timeout" || name == "operation-timeout" || name == "layout" || name == "read-only" ||
         name == "region" || name == "endpoint" || name == "addressing" || name == "shards" ||
         name == "max-size";
}

// "name=value" kept for known names, "name=***" otherwise.
std::string redact_attribute(std::string_view attribute) {
  const std::size_t eq = attribute.find('=');
  // An endpoint= is shown as a URL is: a mistyped "http://user:secret@host" keeps its secret hidden.
  if (eq != std::string_view::npos && attribute.substr(0, eq) == "endpoint") {
    return "endpoint=" + redact_unparsed(attribute.substr(eq + 1));
  }
  if (eq == std::string_view::npos || attribute_value_shown(attribute.substr(0, eq))) return std::string(attribute);
  return std::string(attribute.substr(0, eq)) + "=***";
}

// A query ("?db=2", or a mistyped "?password=x"): only db's value is shown.
std::string redact_query(std::string_view query) {
  std::string out;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    const std::size_t eq = item.find('=');
    if (!out.empty()) out += '&';
    out += eq == std::string_view::npos || item.substr(0, eq) == "db" ? std::string(item)
                                                                      : std::string(item.substr(0, eq)) + "=***";
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

}  // namespace

std::string redact_unparsed(std::string_view spec) {
  const std::size_t bar = spec.find('|');
  std::string_view address = spec.substr(0, bar);
  std::string out;
  // Up to the last '@' before the attributes: a password with an unencoded '/' or '?' stays hidden. Without
  // "://" (a malformed URL) whatever precedes an '@' may still be credentials.
  const std::size_t start = address.find("://");
  const std::size_t authority = start == std::string_view::npos ? 0 : start + 3;
  const std::size_t at = address.rfind('@');
  if (at != std::string_view::npos && at >= authority) {
    out = std::string(address.substr(0, authority)) + "***";
    address.remove_prefix(at);
  } else {
    out = std::string(address.substr(0, authority));
    address.remove_prefix(authority);
  }
  const std::size_t question = address.find('?');
  out += address.substr(0, question);
  if (question != std::string_view::npos) out += "?" + redact_query(address.substr(question + 1));
  if (bar == std::string_view::npos) return out;
  std::string_view attributes = spec.substr(bar + 1);
  while (true) {
    const std::size_t next = attributes.find('|');
    out += "|" + redact_attribute(attributes.substr(0, next));
    if (next == std::string_view::npos) break;
    attributes.remove_prefix(next + 1);
  }
  return out;
}

std::string redact_remote_list(std::string_view list) {
  std::string out;
  std::size_t i = 0;
  while (i < list.size()) {
    const std::size_t blank = list.find_first_of(" \t\n\r", i);
    const std::size_t end = blank == std::string_view::npos ? list.size() : blank;
    if (end > i) out += redact_unparsed(list.substr(i, end - i));
    if (end < list.size()) out += list[end];
    i = end + 1;
  }
  return out;
}

int RemoteUrl::effective_port() const {
  if (port != 0) return port;
  switch (scheme) {
    case Scheme::redis:
      return 6379;
    case Scheme::http:
      return 80;
    case Scheme::https:
      return 443;
    case Scheme::redis_unix:
    case Scheme::s3:
    case Scheme::file:
      return 0;
  }
  return 0;
}

bool RemoteUrl::host_is_address() const {
  unsigned char address[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), address) == 1 || ::inet_pton(AF_INET6, host.c_str(), address) == 1;
}

std::string RemoteUrl::host_port() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != 0) out += ":" + std::to_string(port);
  return out;
}

std::string RemoteUrl::to_string(bool with_secrets) const {
  std::string out = std::string(scheme_name(scheme)) + "://";
  const bool show_password = password && password_in_url;
  if (!user.empty() || show_password) {
    out += percent_encode(user);
    if (show_password) out += ":" + (with_secrets ? percent_encode(*password) : std::string("***"));
    out += '@';
  }
  if (scheme == Scheme::redis_unix) {
    out += path;
    if (db != 0) out += "?db=" + std::to_string(db);
  } else if (scheme == Scheme::file) {
    out += path;
  } else if (scheme == Scheme::s3) {
    out += host + path;
  } else {
    out += shards.empty() ? host_port() : shard_address;
    if (is_http()) out += path;
    if (scheme == Scheme::redis && db != 0) out += "/" + std::to_string(db);
  }
  if (read_only) out += "|read-only";
  if (connect_timeout_ms != kDefaultConnectTimeoutMs) out += "|connect-timeout=" + std::to_string(connect_timeout_ms);
  if (operation_timeout_ms != kDefaultOperationTimeoutMs) {
    out += "|operation-timeout=" + std::to_string(operation_timeout_ms);
  }
  if (is_http() && layout != HttpLayout::subdirs) out += std::string("|layout=") + layout_name(layout);
  if (!region.empty()) out += "|region=" + region;
  if (!endpoint.empty()) out += "|endpoint=" + endpoint;
  if (addressing != S3Addressing::automatic) {
    out += addressing == S3Addressing::path ? "|addressing=path" : "|addressing=virtual";
  }
  if (max_size != 0) out += "|max-size=" + std::to_string(max_size);
  for (std::size_t i = 0; i < shards.size(); ++i) out += (i == 0 ? "|shards=" : ",") + shards[i];
  return out;
}

std::string RemoteUrl::identity() const {
  std::string out = std::string(scheme_name(scheme)) + "://";
  if (!user.empty()) out += percent_encode(user) + "@";
  if (scheme == Scheme::redis_unix) return out + path + "?db=" + std::to_string(db);
  if (scheme == Scheme::file) return out + path;
  // The same bucket behind two endpoints is two servers (their breakers fail apart).
  if (scheme == Scheme::s3) return out + host + path + (endpoint.empty() ? "" : "@" + endpoint);
  out += shards.empty() ? host_port() : shard_address;
  if (is_http()) return out + path;
  return out + "/" + std::to_string(db);
}

std::string RemoteUrl::http_base() const { return std::string(scheme_name(scheme)) + "://" + host_port() + path; }

namespace {

// A shard name stands where a host name or a port goes: letters, digits, '-' and '.'.
bool valid_shard_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!is_unreserved(c) || c == '~' || c == '_') return false;
  }
  return true;
}

// shards=a,b,c: fills url.shards and url.shard_address, and returns the address with the first name in
// place of the '*' (what is parsed as the URL); the address unchanged without shards=.
std::string find_shards(std::string_view spec, std::string_view address, RemoteUrl& url) {
  const std::size_t bar = spec.find('|');
  std::optional<std::string_view> list;
  for (std::string_view rest = bar == std::string_view::npos ? "" : spec.substr(bar + 1); !rest.empty();) {
    const std::size_t next = rest.find('|');
    const std::string_view attribute = rest.substr(0, next);
    if (attribute.starts_with("shards=")) list = attribute.substr(7);
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
  }
  if (!list) return std::string(address);
  const std::size_t sep = address.find("://");
  const std::string_view scheme = address.substr(0, sep == std::string_view::npos ? 0 : sep);
  if (scheme != "redis" && scheme != "http" && scheme != "https") fail(spec, "shards= applies to redis and http(s)");
  const std::size_t start = sep + 3;
  const std::size_t slash = address.find('/', start);
  const std::size_t end = slash == std::string_view::npos ? address.size() : slash;
  const std::size_t at = address.substr(0, end).rfind('@');
  const std::size_t host_start = at == std::string_view::npos || at < start ? start : at + 1;
  const std::string_view host_port = address.substr(host_start, end - host_start);
  const std::size_t star = host_port.find('*');
  if (star == std::string_view::npos || host_port.find('*', star + 1) != std::string_view::npos) {
    fail(spec, "shards= needs exactly one '*' in the URL's host[:port]");
  }
  while (!list->empty()) {
    const std::size_t comma = list->find(',');
    const std::string_view name = list->substr(0, comma);
    if (!valid_shard_name(name)) fail(spec, "a shard name is letters, digits, '-' and '.'");
    for (const auto& seen : url.shards) {
      if (seen == name) fail(spec, "a shard is named twice");
    }
    url.shards.emplace_back(name);
    *list = comma == std::string_view::npos ? "" : list->substr(comma + 1);
  }
  if (url.shards.empty()) fail(spec, "shards= needs at least one name");
  url.shard_address = std::string(host_port);
  std::string first(address);
  first.replace(host_start + star, 1, url.shards.front());
  return first;
}

Scheme scheme_named(std::string_view spec, std::string_view name) {
  for (Scheme scheme : {Scheme::redis, Scheme::redis_unix, Scheme::http, Scheme::https, Scheme::s3, Scheme::file}) {
    if (name == scheme_name(scheme)) return scheme;
  }
  fail(spec, "unsupported scheme '" + std::string(name) + "' (redis, redis+unix, http, https, s3, file)");
}

// redis+unix://[[user]:password@]/path?db=N: the authority is empty or credentials only.
void parse_socket_address(std::string_view spec, std::string_view text, RemoteUrl& url) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) fail(spec, "expected redis+unix:///absolute/path/to/socket");
  const std::string_view authority = text.substr(0, slash);
  if (!authority.empty()) {
    if (authority.back() != '@') fail(spec, "a redis+unix URL has no host: redis+unix:///path");
    parse_authority(spec, std::string(authority) + "localhost", url);
    url.host.clear();
  }
  std::string_view path = text.substr(slash);
  if (const std::size_t q = path.find('?'); q != std::string_view::npos) {
    const std::string_view query = path.substr(q + 1);
    path = path.substr(0, q);
    if (query.substr(0, 3) != "db=") fail(spec, "the only query is ?db=N");
    const auto db = parse_int(query.substr(3), 0, 1 << 20);
    if (!db) fail(spec, "the database must be a number");
    url.db = *db;
  }
  if (path.size() < 2 || !valid_http_path(path)) fail(spec, "missing or invalid socket path");
  url.path = std::string(path);
}

// redis://, http(s)://: [userinfo@]host[:port], then the database number (redis) or the path prefix.
void parse_server_address(std::string_view spec, std::string_view text, RemoteUrl& url) {
  const std::size_t slash = text.find('/');
  parse_authority(spec, text.substr(0, slash), url);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
  if (url.scheme == Scheme::redis) {
    if (path.size() > 1) {
      const auto db = parse_int(path.substr(1), 0, 1 << 20);
      if (!db) fail(spec, "the path of a redis URL is the database number");
      url.db = *db;
    }
  } else {
    if (!valid_http_path(path)) fail(spec, "invalid character in the path (no query or fragment)");
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    url.path = std::string(path);
  }
}

}  // namespace

std::vector<RemoteUrl> RemoteUrl::shard_urls() const {
  if (shards.empty()) return {*this};
  std::vector<RemoteUrl> out;
  for (const std::string& name : shards) {
    RemoteUrl one = *this;
    one.shards.clear();
    one.shard_address.clear();
    one.port = 0;
    std::string authority = shard_address;
    authority.replace(authority.find('*'), 1, name);
    parse_authority(authority, authority, one);
    out.push_back(std::move(one));
  }
  return out;
}

RemoteUrl parse_remote_url(std::string_view spec, const RemoteSecrets& secrets) {
  const std::size_t bar = spec.find('|');
  RemoteUrl url;
  const std::string address = find_shards(spec, spec.substr(0, bar), url);
  std::string_view text = address;
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) fail(spec, "expected scheme://...");
  url.scheme = scheme_named(spec, text.substr(0, sep));
  text.remove_prefix(sep + 3);

  if (url.scheme == Scheme::s3 || url.scheme == Scheme::file) {
    parse_object_store(spec, text, url);
  } else if (url.scheme == Scheme::redis_unix) {
    parse_socket_address(spec, text, url);
  } else {
    parse_server_address(spec, text, url);
  }

  if (bar != std::string_view::npos) {
    std::string_view rest = spec.substr(bar + 1);
    while (true) {
      const std::size_t next = rest.find('|');
      const std::string_view attribute = rest.substr(0, next);
      if (!attribute.empty()) parse_attribute(spec, attribute, url);
      if (next == std::string_view::npos) break;
      rest.remove_prefix(next + 1);
    }
  }

  if (!url.shards.empty()) {
    try {
      (void)url.shard_urls();  // every shard's host[:port] must parse, not only the first one's
    } catch (const RemoteUrlError& e) {
      fail(spec, std::string("a shard's address: ") + e.what());
    }
  }
  apply_secrets(url, secrets);
  return url;
}

namespace {

// An s3 endpoint= is an http(s) URL of a host and port alone: credentials go in the environment, and
// a path would make request paths ambiguous.
RemoteUrl parse_endpoint(std::string_view spec, std::string_view endpoint) {
  RemoteUrl server;
  try {
    server = parse_remote_url(endpoint, RemoteSecrets{});
  } catch (const RemoteUrlError&) {
    fail(spec, "endpoint takes http://HOST[:PORT] or https://HOST[:PORT]");
  }
  if (!server.is_http() || !server.user.empty() || server.password || !server.path.empty() ||
      endpoint.find('|') != std::string_view::npos) {
    fail(spec, "endpoint takes http://HOST[:PORT] or https://HOST[:PORT] (no credentials, no path)");
  }
  return server;
}

}  // namespace

void apply_secrets(RemoteUrl& url, const RemoteSecrets& secrets) {
  if (!url.password) {
    if (url.is_redis() || (url.is_http() && !url.user.empty())) url.password = secrets.password;
  }
  if (url.is_http() && url.user.empty() && secrets.bearer_token) url.bearer_token = secrets.bearer_token;
}

std::vector<RemoteUrl> parse_remote_urls(std::string_view list, const RemoteSecrets& secrets) {
  std::vector<RemoteUrl> urls;
  std::size_t pos = 0;
  while (pos < list.size()) {
    const std::size_t start = list.find_first_not_of(" \t\r\n", pos);
    if (start == std::string_view::npos) break;
    std::size_t end = list.find_first_of(" \t\r\n", start);
    if (end == std::string_view::npos) end = list.size();
    urls.push_back(parse_remote_url(list.substr(start, end - start), secrets));
    pos = end;
  }
  return urls;
}

}  // namespace kache::core
