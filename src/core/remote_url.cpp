#include "core/remote_url.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <utility>
#include <charconv>
#include <cstdlib>

#include "util/text.hpp"

namespace kache::core {

namespace {

constexpr int kMaxTimeoutMs = 10 * 60 * 1000;
// The attributes every backend honours, in the order they print (shards= prints last, after the scheme's).
constexpr std::string_view kCommonAttributes[] = {"read-only", "connect-timeout", "operation-timeout"};

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

[[noreturn]] void fail(std::string_view why) { throw RemoteUrlProblem(std::string(why)); }

RemoteUrlError quoted_error(std::string_view spec, std::string_view why, RemoteSchemes schemes) {
  return RemoteUrlError("remote storage URL '" + printable(redact_unparsed(spec, schemes)) + "': " + printable(why));
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

bool valid_host(std::string_view host, bool bracketed) {
  if (host.empty()) return false;
  for (char c : host) {
    const bool ok = bracketed ? (hex_value(c) >= 0 || c == ':' || c == '.') : (is_unreserved(c) && c != '~');
    if (!ok) return false;
  }
  return true;
}

bool contains(std::span<const std::string_view> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const SchemeRules* rules_named(RemoteSchemes schemes, std::string_view name) {
  for (const SchemeRules* rules : schemes) {
    if (rules->name == name) return rules;
  }
  return nullptr;
}

// Fills user and password from "user[:password]" (or a bare password, where the scheme reads it so).
void parse_userinfo(std::string_view userinfo, RemoteUrl& url, const UserinfoForm& form) {
  const std::size_t colon = userinfo.find(':');
  std::optional<std::string> user, password;
  if (colon != std::string_view::npos) {
    user = percent_decode(userinfo.substr(0, colon));
    password = percent_decode(userinfo.substr(colon + 1));
  } else if (form.bare_is_password) {
    user = "";
    password = percent_decode(userinfo);
  } else {
    user = percent_decode(userinfo);
  }
  const bool needs_password = colon != std::string_view::npos || form.bare_is_password;
  if (!user || (needs_password && !password)) fail("bad percent-encoding in the credentials");
  url.user = *user;
  if (password) {
    url.password = *password;
    url.password_in_url = true;
  }
  if (!form.password_needs_user.empty() && url.user.empty() && url.password) fail(form.password_needs_user);
}

}  // namespace

std::optional<int> parse_url_number(std::string_view text, int min, int max) {
  int value = 0;
  if (text.empty() || text.size() > 9) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value < min || value > max) return std::nullopt;
  return value;
}

bool valid_url_path(std::string_view path) {
  for (char c : path) {
    const auto b = static_cast<unsigned char>(c);
    if (b <= 0x20 || b >= 0x7f || c == '?' || c == '#' || c == '|' || c == '\\') return false;
  }
  return true;
}

void parse_authority(std::string_view authority, RemoteUrl& url, const UserinfoForm& form) {
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    parse_userinfo(authority.substr(0, at), url, form);
    authority.remove_prefix(at + 1);
  }
  std::string_view host = authority;
  std::string_view port;
  bool bracketed = false;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) fail("unterminated '[' in the host");
    port = host.substr(close + 1);
    host = host.substr(1, close - 1);
    bracketed = true;
    if (!port.empty()) {
      if (port.front() != ':') fail("unexpected text after ']'");
      port.remove_prefix(1);
      if (port.empty()) fail("empty port");
    }
  } else if (const std::size_t colon = host.find(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port.empty()) fail("empty port");
  }
  if (!valid_host(host, bracketed)) fail("missing or invalid host name");
  url.host = std::string(host);
  if (!port.empty()) {
    const auto p = parse_url_number(port, 1, 65535);
    if (!p) fail("the port must be a number from 1 to 65535");
    url.port = *p;
  }
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
bool attribute_value_shown(std::string_view name, RemoteSchemes schemes) {
  if (contains(kCommonAttributes, name) || name == "shards") return true;
  return std::any_of(schemes.begin(), schemes.end(),
                     [&](const SchemeRules* rules) { return contains(rules->shown_attribute_values, name); });
}

bool attribute_is_url(std::string_view name, RemoteSchemes schemes) {
  return std::any_of(schemes.begin(), schemes.end(),
                     [&](const SchemeRules* rules) { return contains(rules->url_attribute_values, name); });
}

// "name=value" kept for harmless names, "name=***" otherwise.
std::string redact_attribute(std::string_view attribute, RemoteSchemes schemes) {
  const std::size_t eq = attribute.find('=');
  if (eq == std::string_view::npos) return std::string(attribute);
  const std::string_view name = attribute.substr(0, eq);
  // A URL value is shown as a URL is: a mistyped "http://user:secret@host" keeps its secret hidden.
  if (attribute_is_url(name, schemes))
    return std::string(name) + "=" + redact_unparsed(attribute.substr(eq + 1), schemes);
  if (attribute_value_shown(name, schemes)) return std::string(attribute);
  return std::string(name) + "=***";
}

// A query ("?db=2", or a mistyped "?password=x"): only the values a scheme calls harmless are shown.
std::string redact_query(std::string_view query, RemoteSchemes schemes) {
  const auto shown = [&](std::string_view name) {
    return std::any_of(schemes.begin(), schemes.end(),
                       [&](const SchemeRules* rules) { return contains(rules->shown_query_values, name); });
  };
  std::string out;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    const std::size_t eq = item.find('=');
    if (!out.empty()) out += '&';
    out += eq == std::string_view::npos || shown(item.substr(0, eq)) ? std::string(item)
                                                                     : std::string(item.substr(0, eq)) + "=***";
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

}  // namespace

std::string redact_unparsed(std::string_view spec, RemoteSchemes schemes) {
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
  if (question != std::string_view::npos) out += "?" + redact_query(address.substr(question + 1), schemes);
  if (bar == std::string_view::npos) return out;
  std::string_view attributes = spec.substr(bar + 1);
  while (true) {
    const std::size_t next = attributes.find('|');
    out += "|" + redact_attribute(attributes.substr(0, next), schemes);
    if (next == std::string_view::npos) break;
    attributes.remove_prefix(next + 1);
  }
  return out;
}

std::string redact_remote_list(std::string_view list, RemoteSchemes schemes) {
  std::string out;
  std::size_t i = 0;
  while (i < list.size()) {
    const std::size_t blank = list.find_first_of(" \t\n\r", i);
    const std::size_t end = blank == std::string_view::npos ? list.size() : blank;
    if (end > i) out += redact_unparsed(list.substr(i, end - i), schemes);
    if (end < list.size()) out += list[end];
    i = end + 1;
  }
  return out;
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

std::optional<std::string> RemoteUrl::attribute(std::string_view name) const {
  for (const RemoteAttribute& a : attributes) {
    if (a.name == name) return a.value;
  }
  return std::nullopt;
}

void RemoteUrl::set_attribute(std::string_view name, std::optional<std::string> value) {
  std::erase_if(attributes, [&](const RemoteAttribute& a) { return a.name == name; });
  if (value) attributes.push_back({std::string(name), std::move(*value)});
}

std::string RemoteUrl::to_string(bool with_secrets) const {
  std::string out = scheme + "://";
  const bool show_password = password && password_in_url;
  if (!user.empty() || show_password) {
    out += percent_encode(user);
    if (show_password) out += ":" + (with_secrets ? percent_encode(*password) : std::string("***"));
    out += '@';
  }
  out += (shards.empty() ? host_port() : shard_address) + path;
  if (!query.empty()) out += "?" + query;
  if (read_only) out += "|read-only";
  if (connect_timeout_ms != kDefaultConnectTimeoutMs) out += "|connect-timeout=" + std::to_string(connect_timeout_ms);
  if (operation_timeout_ms != kDefaultOperationTimeoutMs) {
    out += "|operation-timeout=" + std::to_string(operation_timeout_ms);
  }
  for (const RemoteAttribute& a : attributes) out += "|" + a.name + "=" + a.value;
  for (std::size_t i = 0; i < shards.size(); ++i) out += (i == 0 ? "|shards=" : ",") + shards[i];
  return out;
}

std::string RemoteUrl::identity() const {
  std::string out = scheme + "://";
  if (!user.empty()) out += percent_encode(user) + "@";
  out += (shards.empty() ? host_port() : shard_address) + path;
  if (!query.empty()) out += "?" + query;
  // The scheme's attributes too: the same bucket behind two endpoints is two servers (their breakers
  // fail apart).
  for (const RemoteAttribute& a : attributes) out += "|" + a.name + "=" + a.value;
  return out;
}

std::string RemoteUrl::http_base() const { return scheme + "://" + host_port() + path; }

namespace {

// A shard name stands where a host name or a port goes: letters, digits, '-' and '.'.
bool valid_shard_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!is_unreserved(c) || c == '~' || c == '_') return false;
  }
  return true;
}

// "a and b": the families of the schemes that take shards=, each once.
std::string shardable_families(RemoteSchemes schemes) {
  std::vector<std::string_view> families;
  for (const SchemeRules* rules : schemes) {
    if (rules->shardable && !contains(families, rules->family)) families.push_back(rules->family);
  }
  std::string out;
  for (std::size_t i = 0; i < families.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == families.size() ? " and " : ", ") + std::string(families[i]);
  }
  return out;
}

std::optional<std::string_view> shards_attribute(std::string_view spec) {
  const std::size_t bar = spec.find('|');
  std::optional<std::string_view> list;
  for (std::string_view rest = bar == std::string_view::npos ? "" : spec.substr(bar + 1); !rest.empty();) {
    const std::size_t next = rest.find('|');
    const std::string_view attribute = rest.substr(0, next);
    if (attribute.starts_with("shards=")) list = attribute.substr(7);
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
  }
  return list;
}

void read_shard_names(std::string_view list, RemoteUrl& url) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    if (!valid_shard_name(name)) fail("a shard name is letters, digits, '-' and '.'");
    if (std::find(url.shards.begin(), url.shards.end(), name) != url.shards.end()) fail("a shard is named twice");
    url.shards.emplace_back(name);
    list = comma == std::string_view::npos ? "" : list.substr(comma + 1);
  }
  if (url.shards.empty()) fail("shards= needs at least one name");
}

// shards=a,b,c: fills url.shards and url.shard_address, and returns the address with the first name in
// place of the '*' (what is parsed as the URL); the address unchanged without shards=.
std::string find_shards(std::string_view spec, std::string_view address, RemoteUrl& url, RemoteSchemes schemes) {
  const std::optional<std::string_view> list = shards_attribute(spec);
  if (!list) return std::string(address);
  const std::size_t sep = address.find("://");
  const SchemeRules* rules = rules_named(schemes, address.substr(0, sep == std::string_view::npos ? 0 : sep));
  if (!rules || !rules->shardable) fail("shards= applies to " + shardable_families(schemes));
  const std::size_t start = sep + 3;
  const std::size_t slash = address.find('/', start);
  const std::size_t end = slash == std::string_view::npos ? address.size() : slash;
  const std::size_t at = address.substr(0, end).rfind('@');
  const std::size_t host_start = at == std::string_view::npos || at < start ? start : at + 1;
  const std::string_view host_port = address.substr(host_start, end - host_start);
  const std::size_t star = host_port.find('*');
  if (star == std::string_view::npos || host_port.find('*', star + 1) != std::string_view::npos) {
    fail("shards= needs exactly one '*' in the URL's host[:port]");
  }
  read_shard_names(*list, url);
  url.shard_address = std::string(host_port);
  std::string first(address);
  first.replace(host_start + star, 1, url.shards.front());
  return first;
}

const SchemeRules& scheme_named(std::string_view name, RemoteSchemes schemes) {
  if (const SchemeRules* rules = rules_named(schemes, name)) return *rules;
  std::string known;
  for (const SchemeRules* rules : schemes) known += (known.empty() ? "" : ", ") + std::string(rules->name);
  fail("unsupported scheme '" + std::string(name) + "' (" + known + ")");
}

// Another scheme's attribute given to this one, or one nobody knows.
[[noreturn]] void fail_foreign_attribute(std::string_view name, RemoteSchemes schemes) {
  for (const SchemeRules* rules : schemes) {
    if (contains(rules->attributes, name))
      fail(std::string(name) + " applies to " + std::string(rules->attributes_apply_to));
  }
  std::string known;
  for (std::string_view common : kCommonAttributes) known += std::string(common) + ", ";
  std::vector<std::string_view> listed;
  for (const SchemeRules* rules : schemes) {
    for (std::string_view own : rules->attributes) {
      if (!contains(listed, own)) listed.push_back(own);
    }
  }
  for (std::string_view own : listed) known += std::string(own) + ", ";
  fail("unknown attribute '" + std::string(name) + "' (known: " + known + "shards)");
}

void parse_attribute(std::string_view attribute, RemoteUrl& url, const SchemeRules& rules, RemoteSchemes schemes) {
  const std::size_t eq = attribute.find('=');
  const std::string_view name = attribute.substr(0, eq);
  const std::optional<std::string_view> value =
      eq == std::string_view::npos ? std::nullopt : std::optional(attribute.substr(eq + 1));
  const auto timeout = [&]() {
    const auto ms = value ? parse_url_number(*value, 1, kMaxTimeoutMs) : std::nullopt;
    if (!ms) fail(std::string(name) + " takes milliseconds, from 1 to " + std::to_string(kMaxTimeoutMs));
    return *ms;
  };
  if (name == "read-only") {
    if (value) fail("read-only takes no value");
    url.read_only = true;
  } else if (name == "connect-timeout") {
    url.connect_timeout_ms = timeout();
  } else if (name == "operation-timeout") {
    url.operation_timeout_ms = timeout();
  } else if (name == "shards") {
    // Read before the address (find_shards); here only its place among the attributes is checked.
    if (url.shards.empty()) fail("shards= needs one '*' in the URL's host[:port]");
  } else if (contains(rules.attributes, name)) {
    rules.parse_attribute(name, value, url);
  } else {
    fail_foreign_attribute(name, schemes);
  }
}

// The scheme's attributes in the order its rules print them, whatever order they were written in.
void order_attributes(RemoteUrl& url, const SchemeRules& rules) {
  const auto rank = [&](const RemoteAttribute& a) {
    return std::find(rules.attributes.begin(), rules.attributes.end(), a.name) - rules.attributes.begin();
  };
  // By rank, equal ranks in the written order: std::sort over (rank, position), not std::stable_sort
  // (libstdc++ 12's stable_sort takes std::get_temporary_buffer, which clang 19 warns is deprecated).
  std::vector<std::pair<std::ptrdiff_t, std::size_t>> order;
  for (std::size_t i = 0; i < url.attributes.size(); ++i) order.emplace_back(rank(url.attributes[i]), i);
  std::sort(order.begin(), order.end());
  std::vector<RemoteAttribute> sorted;
  for (const auto& [r, i] : order) sorted.push_back(std::move(url.attributes[i]));
  url.attributes = std::move(sorted);
}

RemoteUrl parse_checked(std::string_view spec, RemoteSchemes schemes) {
  const std::size_t bar = spec.find('|');
  RemoteUrl url;
  const std::string address = find_shards(spec, spec.substr(0, bar), url, schemes);
  std::string_view text = address;
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) fail("expected scheme://...");
  const SchemeRules& rules = scheme_named(text.substr(0, sep), schemes);
  url.scheme = std::string(rules.name);
  url.default_port = rules.default_port;
  rules.parse_address(text.substr(sep + 3), url);
  for (std::string_view rest = bar == std::string_view::npos ? "" : spec.substr(bar + 1);;) {
    const std::size_t next = rest.find('|');
    const std::string_view attribute = rest.substr(0, next);
    if (!attribute.empty()) parse_attribute(attribute, url, rules, schemes);
    if (next == std::string_view::npos) break;
    rest.remove_prefix(next + 1);
  }
  order_attributes(url, rules);
  if (!url.shards.empty()) {
    try {
      (void)url.shard_urls();  // every shard's host[:port] must parse, not only the first one's
    } catch (const RemoteUrlError& e) {
      fail(std::string("a shard's address: ") + e.what());
    }
  }
  return url;
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
    try {
      parse_authority(authority, one);
    } catch (const RemoteUrlProblem& e) {
      throw quoted_error(authority, e.what(), {});
    }
    out.push_back(std::move(one));
  }
  return out;
}

RemoteUrl parse_remote_url(std::string_view spec, const RemoteSecrets& secrets, RemoteSchemes schemes) {
  RemoteUrl url;
  try {
    url = parse_checked(spec, schemes);
  } catch (const RemoteUrlProblem& e) {
    throw quoted_error(spec, e.what(), schemes);
  }
  apply_secrets(url, secrets, schemes);
  return url;
}

void apply_secrets(RemoteUrl& url, const RemoteSecrets& secrets, RemoteSchemes schemes) {
  const SchemeRules* rules = rules_named(schemes, url.scheme);
  if (rules && rules->apply_secrets) rules->apply_secrets(url, secrets);
}

std::vector<RemoteUrl> parse_remote_urls(std::string_view list, const RemoteSecrets& secrets, RemoteSchemes schemes) {
  std::vector<RemoteUrl> urls;
  std::size_t pos = 0;
  while (pos < list.size()) {
    const std::size_t start = list.find_first_not_of(" \t\r\n", pos);
    if (start == std::string_view::npos) break;
    std::size_t end = list.find_first_of(" \t\r\n", start);
    if (end == std::string_view::npos) end = list.size();
    urls.push_back(parse_remote_url(list.substr(start, end - start), secrets, schemes));
    pos = end;
  }
  return urls;
}

}  // namespace kache::core
