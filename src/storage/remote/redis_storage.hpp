#pragma once
// A Redis server as a store (hiredis, linked statically): values under "<prefix><key>" with GET, SET and
// DEL; binary-safe. Connects on first use with the URL's connect timeout; AUTH (user and password, or
// password only) and SELECT db are sent with the first command, in one write, and their replies read
// before its own (one round trip, not three); every command, its queued AUTH and SELECT included, must
// be answered within the operation timeout: a deadline, not a bound on each read (each socket read and
// write waits at most what is left of it). The connection is kept for the process and dropped after any failure.
//
// Failures throw RemoteError: refused, reset or closed connection and error replies = error; connect or
// command that ran past its timeout (a black-holed server) = timeout; AUTH refused, or a command
// answered NOAUTH/WRONGPASS/NOPERM = auth. A read-only URL makes put and remove do nothing.
//
// Its URLs (redis_scheme, redis_unix_scheme: the scheme table's rows):
//   redis://[[user]:password@]host[:port][/db]     (also "password@host", as ccache reads it); port 6379
//   redis+unix://[[user]:password@]/path/to/socket[?db=N]
// No attributes of their own; redis:// takes shards=. The password, when the URL has none, is
// KACHE_REMOTE_PASSWORD's.
#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/remote_url.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/remote_store.hpp"

struct redisContext;
struct redisReply;

namespace kache::storage::remote {

extern const core::SchemeRules redis_scheme;
extern const core::SchemeRules redis_unix_scheme;
// The database a redis or redis+unix URL selects (0 when it names none).
int redis_db(const core::RemoteUrl& url);

class RedisStorage final : public RemoteBackend {
 public:
  // every_remote_read_only: remote.read_only (RemoteBackend decides with the URL's own read-only).
  explicit RedisStorage(core::RemoteUrl url, std::string key_prefix = "kache:", bool every_remote_read_only = false);
  ~RedisStorage() override;
  std::string name() const override { return url_.redacted(); }
  std::optional<std::string> get(std::string_view key) override;
  const core::RemoteUrl& url() const { return url_; }

 protected:
  void write(std::string_view key, std::string_view value) override;
  void erase(std::string_view key) override;

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
  using Clock = std::chrono::steady_clock;
  void connect();
  // Queues one command, without waiting for its reply.
  void append(std::initializer_list<std::string_view> args, const char* doing);
  // Reads the next reply by `deadline`; a failed read, an error reply or the deadline passing throws
  // (and drops the connection).
  Reply read_reply(const char* doing, Clock::time_point deadline);
  void flush(Clock::time_point deadline, const char* doing);
  void bound_next_io(Clock::time_point deadline, const char* doing);
  static long left_ms(Clock::time_point deadline);
  [[noreturn]] void fail_deadline(const char* doing);
  // Runs one command: the connection's queued AUTH and SELECT replies first, then its own.
  Reply command(std::initializer_list<std::string_view> args, const char* doing);
  [[noreturn]] void fail_from_context(const char* doing);

  core::RemoteUrl url_;
  std::string prefix_;
  std::unique_ptr<redisContext, ContextDeleter> context_;
  std::vector<const char*> queued_;  // commands sent on this connection whose replies are still unread
};

}  // namespace kache::storage::remote
