#pragma once
// The remote stores a user configured, in the form ccache writes them: a space-separated list of URLs,
// each followed by attributes after '|':
//
//   redis://[[user]:password@]host[:port][/db]     (also "password@host", as ccache reads it)
//   redis+unix:///path/to/socket[?db=N]
//   http://[user[:password]@]host[:port][/path]     https://... likewise
//   s3://BUCKET[/PREFIX]                            (AWS S3 or an S3-compatible server, SigV4)
//   file:///PATH                                    (a directory shared over NFS or SMB)
//   attributes: read-only | connect-timeout=MS (100) | operation-timeout=MS (2000)
//               | layout=flat|subdirs|bazel (http and https; default subdirs)
//               | region=NAME (s3; us-east-1) | endpoint=http[s]://HOST[:PORT] (s3; AWS's own when absent)
//               | addressing=path|virtual (s3; virtual for AWS, path with an endpoint)
//               | max-size=SIZE (file; what `kache -c` trims the shared directory to; none by default)
//               | shards=NAME,NAME,... (redis and http(s), as ccache writes it: the one '*' in the URL's
//                 host[:port] stands for each name in turn, one server each; keys are spread over them by
//                 rendezvous hashing, see storage/remote/sharded_store.hpp)
//
// S3 credentials never appear in a URL: the S3 backend reads them from the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or the shared credentials file (storage/remote/aws_credentials).
//
// Secrets come from the URL (percent-encoded) or, when the URL has none, from the environment:
// KACHE_REMOTE_PASSWORD (the Redis password, or the HTTP basic-auth password of a URL naming a user)
// and KACHE_REMOTE_BEARER_TOKEN (HTTP without user: "Authorization: Bearer TOKEN"). redacted() is the
// only form that may be printed (--show-config, logs, error messages): every secret in it is "***".
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

enum class Scheme { redis, redis_unix, http, https, s3, file };
enum class HttpLayout {
  flat,     // <path>/<key>
  subdirs,  // <path>/<key[0..2)>/<key[2..)>
  bazel,    // <path>/ac/<64 hex digits> (a Bazel remote cache's action-cache namespace)
};
// How an S3 request names the bucket: in the host name (BUCKET.s3.REGION.amazonaws.com) or in the path
// (ENDPOINT/BUCKET/KEY). automatic: virtual-hosted on AWS, path-style with an endpoint= (MinIO, Ceph,
// Swift and most S3-compatible servers answer path-style on one host name).
enum class S3Addressing { automatic, path, virtual_hosted };

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
  std::string host;  // IPv6 addresses without the brackets; s3: the bucket; empty for redis+unix and file
  int port = 0;      // 0: not written, the scheme's default applies (see effective_port)
  // http(s) and s3: the path prefix, "" or "/a/b" (no trailing '/'); redis+unix: the socket's path; file:
  // the shared directory (absolute, no trailing '/').
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
  std::string region;    // s3: empty means us-east-1
  std::string endpoint;  // s3: "http[s]://host[:port]" of an S3-compatible server; empty: AWS
  S3Addressing addressing = S3Addressing::automatic;
  // shards=: the host[:port] as written, with its one '*', and the names that replace it (empty: one
  // server). host and port hold the first shard's.
  std::uint64_t max_size = 0;  // file: max-size= in bytes, 0 = none
  std::string shard_address;
  std::vector<std::string> shards;

  bool is_redis() const { return scheme == Scheme::redis || scheme == Scheme::redis_unix; }
  bool is_http() const { return scheme == Scheme::http || scheme == Scheme::https; }
  int effective_port() const;
  // Whether host is a numeric IPv4 or IPv6 address (connecting needs no name resolution).
  bool host_is_address() const;
  // Whether connecting needs a host name resolved (a TCP remote whose host is not a numeric address).
  bool needs_name_resolution() const {
    return scheme != Scheme::redis_unix && scheme != Scheme::file && !host_is_address();
  }
  // host[:port] as a URL or a Host header writes it (an IPv6 address in brackets).
  std::string host_port() const;
  // The URL and its non-default attributes. with_secrets=false is redacted(); with_secrets=true
  // parses back to this same RemoteUrl (given the same RemoteSecrets) and must never be printed.
  std::string to_string(bool with_secrets) const;
  std::string redacted() const { return to_string(false); }
  // What identifies the server and namespace (scheme, user, host, port, path or db), without secrets
  // or attributes: the breaker keys its state on it.
  std::string identity() const;
  // One URL per shard (the '*' of shard_address replaced by each name, no shards= of their own); just
  // this URL when it has no shards.
  std::vector<RemoteUrl> shard_urls() const;
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
