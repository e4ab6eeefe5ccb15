#pragma once
// The remote stores a user configured, in the form ccache writes them: a space-separated list of URLs,
// each followed by attributes after '|':
//
//   scheme://[userinfo@]host[:port][/path][?query]|attribute|name=value|...
//
// This file knows the generic URL alone: its parts, the attributes every backend honours (read-only,
// connect-timeout=MS (100), operation-timeout=MS (2000), shards=NAME,NAME,... where the one '*' in the
// URL's host[:port] stands for each name in turn, see storage/remote/sharded_store.hpp), and the rest as
// name/value pairs. What a scheme means (which form of URL it takes, its own attributes, their checks,
// defaults and printed order, which values are harmless to print) is its backend's: each gives its
// SchemeRules, and storage/remote/schemes.cpp's table hands them to the parser (RemoteSchemes) through
// the callers; core names no scheme.
//
// Secrets come from the URL (percent-encoded) or, when the URL has none, from the environment
// (RemoteSecrets: KACHE_REMOTE_PASSWORD, KACHE_REMOTE_BEARER_TOKEN), as the scheme's rules take them.
// redacted() is the only form that may be printed (--show-config, logs, error messages): every secret in
// it is "***".
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

// Secrets the environment supplies (read once by the caller: parsing itself reads no environment).
struct RemoteSecrets {
  std::optional<std::string> password;      // KACHE_REMOTE_PASSWORD
  std::optional<std::string> bearer_token;  // KACHE_REMOTE_BEARER_TOKEN
  static RemoteSecrets from_environment();
};

// A URL that does not parse: the message quotes it, redacted.
class RemoteUrlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a scheme's rules throw: the reason alone; parse_remote_url quotes the URL (redacted) before it.
class RemoteUrlProblem : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One attribute of a scheme's own ("region=eu-west-3"), as its rules keep it.
struct RemoteAttribute {
  std::string name;
  std::string value;
  bool operator==(const RemoteAttribute&) const = default;
};

struct RemoteUrl {
  static constexpr int kDefaultConnectTimeoutMs = 100;
  static constexpr int kDefaultOperationTimeoutMs = 2000;

  std::string scheme;  // as written before "://"
  std::string user;
  std::optional<std::string> password;      // from the URL, else from RemoteSecrets
  bool password_in_url = false;             // printed (redacted) only when it came from the URL
  std::optional<std::string> bearer_token;  // from RemoteSecrets, where the scheme takes one
  std::string host;                         // IPv6 addresses without the brackets; empty where none
  int port = 0;                             // 0: not written (see effective_port)
  int default_port = 0;                     // the scheme's, set by its rules; 0: none
  std::string path;                         // as the scheme's rules keep it ("" or "/a/b")
  std::string query;                        // without the '?', as the scheme's rules keep it; mostly empty
  bool read_only = false;
  int connect_timeout_ms = kDefaultConnectTimeoutMs;
  int operation_timeout_ms = kDefaultOperationTimeoutMs;
  // The scheme's own attributes, in its printed order, those at their default left out.
  std::vector<RemoteAttribute> attributes;
  // shards=: the host[:port] as written, with its one '*', and the names that replace it (empty: one
  // server). host and port hold the first shard's.
  std::string shard_address;
  std::vector<std::string> shards;

  int effective_port() const { return port != 0 ? port : default_port; }
  // Whether host is a numeric IPv4 or IPv6 address (connecting needs no name resolution).
  bool host_is_address() const;
  // host[:port] as a URL or a Host header writes it (an IPv6 address in brackets).
  std::string host_port() const;
  // The value of one of the scheme's attributes; nullopt when not given (or at its default).
  std::optional<std::string> attribute(std::string_view name) const;
  // Sets (a value) or removes (nullopt: the default) one of the scheme's attributes.
  void set_attribute(std::string_view name, std::optional<std::string> value);
  // The URL and its non-default attributes. with_secrets=false is redacted(); with_secrets=true
  // parses back to this same RemoteUrl (given the same RemoteSecrets) and must never be printed.
  std::string to_string(bool with_secrets) const;
  std::string redacted() const { return to_string(false); }
  // What identifies the server and namespace (scheme, user, address, path, query and the attributes
  // that name a server), without secrets or other attributes: the breaker keys its state on it.
  std::string identity() const;
  // One URL per shard (the '*' of shard_address replaced by each name, no shards= of their own); just
  // this URL when it has no shards.
  std::vector<RemoteUrl> shard_urls() const;
  // scheme://host[:port]<path>, what request URLs of an HTTP-speaking server start with.
  std::string http_base() const;

  bool operator==(const RemoteUrl&) const = default;
};

// One scheme's rules, given by its backend (storage/remote/*_storage.cpp) and listed in the scheme table.
// The functions throw RemoteUrlProblem with the reason.
struct SchemeRules {
  std::string_view name = {};    // as written before "://"
  std::string_view family = {};  // how the shards= message names it ("http(s)" for http and https)
  int default_port = 0;
  bool shardable = false;                             // takes shards=
  std::span<const std::string_view> attributes = {};  // its own attributes, in the order they print
  std::string_view attributes_apply_to = {};          // "... applies to <this>" when given to another scheme
  std::span<const std::string_view> shown_attribute_values = {};  // values harmless to print
  std::span<const std::string_view> url_attribute_values = {};    // values printed as a redacted URL
  std::span<const std::string_view> shown_query_values = {};      // query items whose value is harmless
  // What follows "scheme://" up to the attributes (shards= already resolved), into url.
  void (*parse_address)(std::string_view address, RemoteUrl& url) = nullptr;
  // One of `attributes` (value: nullopt when written without '='), into url.attributes.
  void (*parse_attribute)(std::string_view name, std::optional<std::string_view> value, RemoteUrl& url) = nullptr;
  // Gives url the environment's secrets the scheme takes, where the URL names none.
  void (*apply_secrets)(RemoteUrl& url, const RemoteSecrets& secrets) = nullptr;
};

// The schemes a parse knows, in the table's order (storage/remote/schemes.hpp's remote_schemes()).
using RemoteSchemes = std::span<const SchemeRules* const>;

// How a scheme reads the userinfo of its authority.
struct UserinfoForm {
  bool bare_is_password = false;              // "secret@host" is a password (ccache's redis spelling)
  std::string_view password_needs_user = {};  // the reason a password without a user is refused; empty: allowed
};
// Splits "[userinfo@]host[:port]" and fills user, password, host, port. Throws RemoteUrlProblem.
void parse_authority(std::string_view authority, RemoteUrl& url, const UserinfoForm& form = {});
// A decimal number from min to max, nothing else; nullopt otherwise.
std::optional<int> parse_url_number(std::string_view text, int min, int max);
// A path without blanks, control bytes, '?', '#', '|' or '\'.
bool valid_url_path(std::string_view path);

// One URL with its attributes. Throws RemoteUrlError naming the problem (the URL in it redacted).
RemoteUrl parse_remote_url(std::string_view spec, const RemoteSecrets& secrets, RemoteSchemes schemes);
// Gives url the environment's secrets where the URL names none (parse_remote_url does this itself).
void apply_secrets(RemoteUrl& url, const RemoteSecrets& secrets, RemoteSchemes schemes);
// The whole configured list, split on blanks; an empty list gives no remotes.
std::vector<RemoteUrl> parse_remote_urls(std::string_view list, const RemoteSecrets& secrets, RemoteSchemes schemes);
// A spec that may not parse, with whatever sits where credentials would be replaced by "***".
// Attribute and query values other than the ones a scheme calls harmless are "***" too. The one function
// every printed URL goes through when it may not parse.
std::string redact_unparsed(std::string_view spec, RemoteSchemes schemes);
// A whole configured list (URLs separated by blanks), each redact_unparsed: what a message may quote.
std::string redact_remote_list(std::string_view list, RemoteSchemes schemes);

}  // namespace kache::core
