#include "storage/remote/redis_storage.hpp"

#include "storage/remote/host_names.hpp"
#include "storage/remote/sigpipe_guard.hpp"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

namespace kache::storage::remote {

namespace {

timeval to_timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  return tv;
}

bool starts_with(const char* text, std::size_t len, std::string_view prefix) {
  return len >= prefix.size() && std::memcmp(text, prefix.data(), prefix.size()) == 0;
}

// An error reply that says the credentials are missing, wrong or not allowed to do this.
bool is_auth_reply(const redisReply& r) {
  const auto n = static_cast<std::size_t>(r.len);
  return starts_with(r.str, n, "NOAUTH") || starts_with(r.str, n, "WRONGPASS") || starts_with(r.str, n, "NOPERM") ||
         starts_with(r.str, n, "ERR invalid password") || starts_with(r.str, n, "ERR AUTH");
}

constexpr int kMaxDb = 1 << 20;

// The database number, kept in the path as "/N" (redis://) or the query as "db=N" (redis+unix://), and
// left out when 0, as it prints.
std::string db_text(int db, std::string_view form) { return db == 0 ? "" : std::string(form) + std::to_string(db); }

// redis://: [userinfo@]host[:port], then the database number.
void parse_server_address(std::string_view text, core::RemoteUrl& url) {
  const std::size_t slash = text.find('/');
  core::parse_authority(text.substr(0, slash), url, {.bare_is_password = true});
  const std::string_view path = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
  if (path.size() > 1) {
    const auto db = core::parse_url_number(path.substr(1), 0, kMaxDb);
    if (!db) throw core::RemoteUrlProblem("the path of a redis URL is the database number");
    url.path = db_text(*db, "/");
  }
}

// redis+unix://[[user]:password@]/path?db=N: the authority is empty or credentials only.
void parse_socket_address(std::string_view text, core::RemoteUrl& url) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) throw core::RemoteUrlProblem("expected redis+unix:///absolute/path/to/socket");
  const std::string_view authority = text.substr(0, slash);
  if (!authority.empty()) {
    if (authority.back() != '@') throw core::RemoteUrlProblem("a redis+unix URL has no host: redis+unix:///path");
    core::parse_authority(std::string(authority) + "localhost", url, {.bare_is_password = true});
    url.host.clear();
  }
  std::string_view path = text.substr(slash);
  if (const std::size_t q = path.find('?'); q != std::string_view::npos) {
    const std::string_view query = path.substr(q + 1);
    path = path.substr(0, q);
    if (query.substr(0, 3) != "db=") throw core::RemoteUrlProblem("the only query is ?db=N");
    const auto db = core::parse_url_number(query.substr(3), 0, kMaxDb);
    if (!db) throw core::RemoteUrlProblem("the database must be a number");
    url.query = db_text(*db, "db=");
  }
  if (path.size() < 2 || !core::valid_url_path(path)) throw core::RemoteUrlProblem("missing or invalid socket path");
  url.path = std::string(path);
}

void take_password(core::RemoteUrl& url, const core::RemoteSecrets& secrets) {
  if (!url.password) url.password = secrets.password;
}

constexpr std::string_view kShownQuery[] = {"db"};

}  // namespace

const core::SchemeRules redis_scheme = {
    .name = "redis",
    .family = "redis",
    .default_port = 6379,
    .shardable = true,
    .parse_address = parse_server_address,
    .apply_secrets = take_password,
};

const core::SchemeRules redis_unix_scheme = {
    .name = "redis+unix",
    .family = "redis",
    .shown_query_values = kShownQuery,
    .parse_address = parse_socket_address,
    .apply_secrets = take_password,
};

int redis_db(const core::RemoteUrl& url) {
  const std::string& text = url.scheme == redis_unix_scheme.name ? url.query : url.path;
  const std::size_t digits = text.find_first_of("0123456789");
  return digits == std::string::npos ? 0 : std::stoi(text.substr(digits));
}

void RedisStorage::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }
void RedisStorage::ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

RedisStorage::RedisStorage(core::RemoteUrl url, std::string key_prefix, bool every_remote_read_only)
    : RemoteBackend(url, every_remote_read_only), url_(std::move(url)), prefix_(std::move(key_prefix)) {}

RedisStorage::~RedisStorage() = default;

void RedisStorage::fail_from_context(const char* doing) {
  // errno right after the failed call tells a timeout (the socket timeouts give EAGAIN, a connect past
  // its deadline ETIMEDOUT) from a refusal or reset.
  const int saved_errno = errno;
  const redisContext* c = context_.get();
  RemoteFailure::Kind kind = RemoteFailure::Kind::error;
  std::string detail = c ? c->errstr : "out of memory";
  if (c && c->err == REDIS_ERR_IO &&
      (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT ||
       std::strstr(c->errstr, "timed out") || std::strstr(c->errstr, "temporarily unavailable"))) {
    kind = RemoteFailure::Kind::timeout;
  }
#ifdef REDIS_ERR_TIMEOUT  // hiredis >= 1.0 reports timeouts by name
  if (c && c->err == REDIS_ERR_TIMEOUT) kind = RemoteFailure::Kind::timeout;
#endif
  if (c && c->err == REDIS_ERR_EOF) detail = "the server closed the connection";
  context_.reset();
  throw RemoteError(kind, url_.redacted() + ": " + doing + ": " + detail);
}

void RedisStorage::append(std::initializer_list<std::string_view> args, const char* doing) {
  constexpr std::size_t kMaxArgs = 4;  // AUTH user password is the longest
  if (args.size() > kMaxArgs) throw std::logic_error("RedisStorage::append: too many arguments");
  const char* argv[kMaxArgs];
  std::size_t lens[kMaxArgs];
  int argc = 0;
  for (auto a : args) {
    argv[argc] = a.data();
    lens[argc] = a.size();
    ++argc;
  }
  if (redisAppendCommandArgv(context_.get(), argc, argv, lens) != REDIS_OK) fail_from_context(doing);
  queued_.push_back(doing);
}

// The milliseconds left until deadline (at least 1: a socket timeout of 0 would mean none), or 0 when
// it has passed.
long RedisStorage::left_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<long>(left);
}

[[noreturn]] void RedisStorage::fail_deadline(const char* doing) {
  context_.reset();
  throw RemoteError(RemoteFailure::Kind::timeout, url_.redacted() + ": " + doing + ": operation timed out");
}

// Each socket read and write waits at most what is left of the operation's deadline (SO_RCVTIMEO and
// SO_SNDTIMEO set before each), so a server that answers a byte at a time cannot stretch the operation
// past it: redisGetReply's own loop would wait the whole timeout again for every byte.
void RedisStorage::bound_next_io(Clock::time_point deadline, const char* doing) {
  const long left = left_ms(deadline);
  if (left == 0) fail_deadline(doing);
  if (redisSetTimeout(context_.get(), to_timeval(static_cast<int>(left))) != REDIS_OK) fail_from_context(doing);
}

// Sends what is queued on the connection, within the deadline.
void RedisStorage::flush(Clock::time_point deadline, const char* doing) {
  int done = 0;
  while (!done) {
    bound_next_io(deadline, doing);
    errno = 0;
    if (redisBufferWrite(context_.get(), &done) != REDIS_OK) fail_from_context(doing);
  }
}

// Reads one reply within the deadline; a failed read or an error reply throws, and the connection is
// dropped then (its state after a failure is unknown).
RedisStorage::Reply RedisStorage::read_reply(const char* doing, Clock::time_point deadline) {
  void* raw = nullptr;
  while (true) {
    if (redisGetReplyFromReader(context_.get(), &raw) != REDIS_OK) fail_from_context(doing);
    if (raw) break;
    bound_next_io(deadline, doing);
    errno = 0;
    if (redisBufferRead(context_.get()) != REDIS_OK) fail_from_context(doing);
  }
  Reply reply(static_cast<redisReply*>(raw));
  if (reply->type == REDIS_REPLY_ERROR) {
    const bool auth = std::string_view(doing) == "AUTH" || is_auth_reply(*reply);
    std::string message = url_.redacted() + ": " + doing + ": " + std::string(reply->str, reply->len);
    context_.reset();
    throw RemoteError(auth ? RemoteFailure::Kind::auth : RemoteFailure::Kind::error, std::move(message));
  }
  return reply;
}

RedisStorage::Reply RedisStorage::command(std::initializer_list<std::string_view> args, const char* doing) {
  // One deadline for the whole exchange (the queued AUTH and SELECT included): operation_timeout_ms.
  const auto deadline = Clock::now() + std::chrono::milliseconds(url_.operation_timeout_ms);
  append(args, doing);
  flush(deadline, doing);
  // The replies come in the order the commands were sent: a refused AUTH is reported as such, before
  // the NOAUTH the command itself then gets.
  const std::vector<const char*> queued = std::exchange(queued_, {});
  for (std::size_t i = 0; i + 1 < queued.size(); ++i) read_reply(queued[i], deadline);
  return read_reply(doing, deadline);
}

void RedisStorage::connect() {
  if (context_) return;
  queued_.clear();
  const auto connect_until = Clock::now() + std::chrono::milliseconds(url_.connect_timeout_ms);
  if (url_.scheme == redis_unix_scheme.name) {
    errno = 0;
    context_.reset(redisConnectUnixWithTimeout(url_.path.c_str(), to_timeval(url_.connect_timeout_ms)));
  } else {
    // hiredis resolves a host name with a getaddrinfo that its timeout does not bound (seconds per DNS
    // server and attempt): names are resolved here, within connect-timeout, and hiredis is given the
    // numeric addresses, tried in order (IPv4 first, as hiredis did) within what is left of it.
    std::vector<std::string> hosts;
    if (url_.host_is_address()) {
      hosts.push_back(url_.host);
    } else {
      for (const HostAddress& a : resolve_host_within(url_, connect_until)) {
        if (std::string h = a.numeric_host(); !h.empty()) hosts.push_back(std::move(h));
      }
    }
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(connect_until - Clock::now()).count();
      if (left <= 0) {
        context_.reset();
        throw RemoteError(RemoteFailure::Kind::timeout, url_.redacted() + ": connect timed out");
      }
      errno = 0;
      context_.reset(redisConnectWithTimeout(hosts[i].c_str(), url_.effective_port(),
                                             to_timeval(static_cast<int>(left))));
      if (context_ && !context_->err) break;
      if (i + 1 < hosts.size()) context_.reset();
    }
    if (hosts.empty()) {
      throw RemoteError(RemoteFailure::Kind::error, url_.redacted() + ": " + url_.host + " has no usable address");
    }
  }
  if (!context_ || context_->err) fail_from_context("connect");
  // hiredis opens its socket without SOCK_CLOEXEC: the compiler kache runs must not inherit it.
  ::fcntl(context_->fd, F_SETFD, FD_CLOEXEC);
  if (redisSetTimeout(context_.get(), to_timeval(url_.operation_timeout_ms)) != REDIS_OK) {
    fail_from_context("set timeout");
  }
  if (url_.password) {
    if (url_.user.empty()) {
      append({"AUTH", *url_.password}, "AUTH");
    } else {
      append({"AUTH", url_.user, *url_.password}, "AUTH");
    }
  }
  if (const int db = redis_db(url_); db != 0) append({"SELECT", std::to_string(db)}, "SELECT");
}

std::optional<std::string> RedisStorage::get(std::string_view key) {
  const SigpipeGuard sigpipe;
  connect();
  const Reply reply = command({"GET", prefix_ + std::string(key)}, "GET");
  if (reply->type == REDIS_REPLY_STRING) return std::string(reply->str, reply->len);
  if (reply->type == REDIS_REPLY_NIL) return std::nullopt;
  context_.reset();
  throw RemoteError(RemoteFailure::Kind::error,
                    url_.redacted() + ": GET: unexpected reply type " + std::to_string(reply->type));
}

void RedisStorage::write(std::string_view key, std::string_view value) {
  const SigpipeGuard sigpipe;
  connect();
  command({"SET", prefix_ + std::string(key), value}, "SET");
}

void RedisStorage::erase(std::string_view key) {
  const SigpipeGuard sigpipe;
  connect();
  command({"DEL", prefix_ + std::string(key)}, "DEL");
}

}  // namespace kache::storage::remote
