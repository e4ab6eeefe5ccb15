#pragma once
// The remote stores a user configured, in the form ccache writes them: a space-separated list of URLs,
// each followed by attributes after '|':
//
//   redis://[[user]:password@]host[:port][/db]     (also "password@host", as ccache reads it)
//   redis+unix:///path/to/socket[?db=N]
//   http://[user[:password]@]host[:port][/path]     https://... likewise
//   attributes: read-only | connect-timeout=MS (100) | operation-timeout=MS (2000)
//               | layout=flat|subdirs|bazel (http and https; default subdirs)
//
// Secrets come from the URL (percent-encoded) or, when the URL has none, from the environment:
// KACHE_REMOTE_PASSWORD (the Redis password, or the HTTP basic-auth password of a URL naming a user)
// and KACHE_REMOTE_BEARER_TOKEN (HTTP without user: "Authorization: Bearer TOKEN"). redacted() is the
// only form that may be printed (--show-config, logs, error messages): every secret in it is "***".
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

enum class Scheme { redis, redis_unix, http, https };
enum class HttpLayout {
  flat,     // <path>/<key>
  subdirs,  // <path>/<key[0..2)>/<key[2..)>
  bazel,    // <path>/ac/<64 hex digits> (a Bazel remote cache's action-cache namespace)
};

const char* scheme_name(Scheme scheme);
const char* layout_name(HttpLayout layout);

// Secrets the environment supplies (read once by the caller: parsing itself reads no environment).
struct RemoteSecrets {
  std::optional<std::string> password;      // KACHE_REMOTE_PASSWORD
  std::optional<std::string> bearer_token;  // KACHE_REMOTE_BEARER_TOKEN
  static RemoteSecrets from_environment();
};

class RemoteUrlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RemoteUrl {
  static constexpr int kDefaultConnectTimeoutMs = 100;
  static constexpr int kDefaultOperationTimeoutMs = 2000;

  Scheme scheme = Scheme::redis;
  std::string host;  // IPv6 addresses without the brackets; empty for redis+unix
  int port = 0;      // 0: not written, the scheme's default applies (see effective_port)
  // http(s): the path prefix, "" or "/a/b" (no trailing '/'); redis+unix: the socket's path.
  std::string path;
  int db = 0;  // redis, redis+unix
  std::string user;
  std::optional<std::string> password;      // from the URL, else from RemoteSecrets
  bool password_in_url = false;             // printed (redacted) only when it came from the URL
  std::optional<std::string> bearer_token;  // http(s) without user, from RemoteSecrets
  bool read_only = false;
  int connect_timeout_ms = kDefaultConnectTimeoutMs;
  int operation_timeout_ms = kDefaultOperationTimeoutMs;
  HttpLayout layout = HttpLayout::subdirs;

  bool is_redis() const { return scheme == Scheme::redis || scheme == Scheme::redis_unix; }
  bool is_http() const { return scheme == Scheme::http || scheme == Scheme::https; }
  int effective_port() const;
  // Whether host is a numeric IPv4 or IPv6 address (connecting needs no name resolution).
  bool host_is_address() const;
  // Whether connecting needs a host name resolved (a TCP remote whose host is not a numeric address).
  bool needs_name_resolution() const { return scheme != Scheme::redis_unix && !host_is_address(); }
  // host[:port] as a URL or a Host header writes it (an IPv6 address in brackets).
  std::string host_port() const;
  // The URL and its non-default attributes. with_secrets=false is redacted(); with_secrets=true
  // parses back to this same RemoteUrl (given the same RemoteSecrets) and must never be printed.
  std::string to_string(bool with_secrets) const;
  std::string redacted() const { return to_string(false); }
  // What identifies the server and namespace (scheme, user, host, port, path or db), without secrets
  // or attributes: the breaker keys its state on it.
  std::string identity() const;
  // http(s): scheme://host[:port]<path>, what request URLs start with (credentials go in a header, apart).
  std::string http_base() const;

  bool operator==(const RemoteUrl&) const = default;
};

// One URL with its attributes. Throws RemoteUrlError naming the problem (the URL in it redacted).
RemoteUrl parse_remote_url(std::string_view spec, const RemoteSecrets& secrets);
// Gives url the environment's secrets where the URL names none (parse_remote_url does this itself).
void apply_secrets(RemoteUrl& url, const RemoteSecrets& secrets);
// The whole configured list, split on blanks; an empty list gives no remotes.
std::vector<RemoteUrl> parse_remote_urls(std::string_view list, const RemoteSecrets& secrets);
// A spec that may not parse, with whatever sits where credentials would be replaced by "***".
// Attribute and query values other than the known harmless ones are "***" too. The one function every
// printed URL goes through when it may not parse.
std::string redact_unparsed(std::string_view spec);
// A whole configured list (URLs separated by blanks), each redact_unparsed: what a message may quote.
std::string redact_remote_list(std::string_view list);

}  // namespace kache::core
