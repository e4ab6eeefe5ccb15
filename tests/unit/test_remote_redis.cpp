// RedisStorage against a real redis-server (Debian's), started per test on a free loopback port.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <random>

#include "servers.hpp"
#include "storage/remote/redis_storage.hpp"
#include "storage/remote/schemes.hpp"
#include "storage/remote/sigpipe_guard.hpp"

namespace kache::storage::remote {
namespace {

#define SKIP_WITHOUT_REDIS() \
  if (!testing::find_server_binary("redis-server")) GTEST_SKIP() << "redis-server is not installed (scripts/setup-tests.sh)"

core::RemoteUrl url_of(const std::string& spec, const core::RemoteSecrets& secrets = {}) {
  return core::parse_remote_url(spec, secrets, remote_schemes());
}

std::string error_of(const std::string& spec) {
  try {
    url_of(spec);
  } catch (const core::RemoteUrlError& e) {
    return e.what();
  }
  return "";
}

std::string local(int port) { return "redis://127.0.0.1:" + std::to_string(port); }

std::string binary_value(std::size_t n) {
  std::mt19937 rng(7);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  s[0] = '\0';  // NUL and CR/LF bytes must survive
  s[1] = '\r';
  s[2] = '\n';
  return s;
}

RemoteFailure::Kind failure_kind(const std::function<void()>& action) {
  try {
    action();
  } catch (const RemoteError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no RemoteError thrown";
  return RemoteFailure::Kind::error;
}

// redis:// URLs (redis_scheme's rules): ccache's forms, the database as the path, a bare userinfo as the
// password.
TEST(RedisUrl, Forms) {
  core::RemoteUrl u = url_of("redis://cache.example.com");
  EXPECT_EQ(u.scheme, "redis");
  EXPECT_EQ(u.host, "cache.example.com");
  EXPECT_EQ(u.port, 0);
  EXPECT_EQ(u.effective_port(), 6379);
  EXPECT_EQ(redis_db(u), 0);
  EXPECT_FALSE(u.password);

  u = url_of("redis://alice:s%40cret@10.0.0.5:6380/3");
  EXPECT_EQ(u.user, "alice");
  EXPECT_EQ(u.password, "s@cret");
  EXPECT_EQ(u.host, "10.0.0.5");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(redis_db(u), 3);
  EXPECT_EQ(url_of("redis://h/03").redacted(), "redis://h/3");  // the database as it prints
  EXPECT_EQ(url_of("redis://h/0").redacted(), "redis://h");

  u = url_of("redis://:pw@host");  // password only (AUTH pw)
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "pw");
  u = url_of("redis://pw@host");  // ccache's spelling of the same
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "pw");

  u = url_of("redis://[::1]:7000/2");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(redis_db(u), 2);
  EXPECT_EQ(u.redacted(), "redis://[::1]:7000/2");
}

TEST(RedisUrl, UnixSocket) {
  core::RemoteUrl u = url_of("redis+unix:///run/redis/redis.sock?db=4|read-only");
  EXPECT_EQ(u.scheme, "redis+unix");
  EXPECT_EQ(u.path, "/run/redis/redis.sock");
  EXPECT_EQ(redis_db(u), 4);
  EXPECT_TRUE(u.read_only);
  EXPECT_EQ(u.redacted(), "redis+unix:///run/redis/redis.sock?db=4|read-only");
  u = url_of("redis+unix://:pw@/tmp/r.sock");
  EXPECT_EQ(u.password, "pw");
  EXPECT_EQ(u.redacted(), "redis+unix://:***@/tmp/r.sock");
  // Only the database's value of a query is shown: a mistyped secret stays hidden.
  EXPECT_EQ(core::redact_unparsed("redis+unix:///s?db=1&token=x", remote_schemes()), "redis+unix:///s?db=1&token=***");
}

TEST(RedisUrl, PasswordFromTheEnvironment) {
  const core::RemoteSecrets secrets{"envpw", "tok"};
  core::RemoteUrl u = url_of("redis://host", secrets);
  EXPECT_EQ(u.password, "envpw");
  EXPECT_FALSE(u.password_in_url);
  EXPECT_FALSE(u.bearer_token);
  EXPECT_EQ(u.redacted(), "redis://host");                              // nothing of the environment's secret printed
  EXPECT_EQ(url_of("redis://:urlpw@host", secrets).password, "urlpw");  // the URL wins
  EXPECT_EQ(url_of("redis://alice:hunter2@host:1/2").redacted(), "redis://alice:***@host:1/2");
  for (const char* spec : {"redis://alice:hunter2@host:1/2", "redis://hunter2@host", "redis+unix://:hunter2@/s.sock"}) {
    EXPECT_EQ(url_of(url_of(spec).to_string(true)), url_of(spec)) << spec;  // the secret form round-trips
  }
}

TEST(RedisUrl, Errors) {
  EXPECT_NE(error_of("redis://h/x").find("database"), std::string::npos);
  EXPECT_NE(error_of("redis://h|layout=flat").find("layout applies to http and https URLs only"), std::string::npos);
  EXPECT_NE(error_of("redis+unix://host/sock").find("no host"), std::string::npos);
  EXPECT_NE(error_of("redis+unix:///s?x=1").find("?db=N"), std::string::npos);
  EXPECT_NE(error_of("redis+unix:///s|shards=a").find("shards= applies to redis and http(s)"), std::string::npos);
}

TEST(RemoteRedis, GetPutRemoveBinaryValuesUnderThePrefix) {
  SKIP_WITHOUT_REDIS();
  testing::RedisServer server;
  RedisStorage store(url_of(local(server.port())));
  EXPECT_EQ(store.get("abc123"), std::nullopt);
  const std::string value = binary_value(3 << 20);
  store.put("abc123", value);
  EXPECT_EQ(store.get("abc123"), value);
  EXPECT_EQ(server.raw_get("kache:abc123"), value);  // what the server holds, read independently
  EXPECT_EQ(server.raw_get("abc123"), std::nullopt);
  store.put("abc123", "");
  EXPECT_EQ(store.get("abc123"), "");  // an empty value is a value, not a miss
  store.remove("abc123");
  EXPECT_EQ(store.get("abc123"), std::nullopt);
  store.remove("abc123");  // removing a missing key is fine
}

TEST(RemoteRedis, DatabaseNumberAndReadOnly) {
  SKIP_WITHOUT_REDIS();
  testing::RedisServer server;
  RedisStorage db0(url_of(local(server.port())));
  RedisStorage db5(url_of(local(server.port()) + "/5"));
  db5.put("k", "in five");
  EXPECT_EQ(db5.get("k"), "in five");
  EXPECT_EQ(db0.get("k"), std::nullopt);
  EXPECT_EQ(server.raw_get("kache:k"), std::nullopt);  // raw_get reads database 0

  RedisStorage read_only(url_of(local(server.port()) + "/5|read-only"));
  EXPECT_EQ(read_only.get("k"), "in five");
  read_only.put("k", "changed");
  read_only.remove("k");
  EXPECT_EQ(db5.get("k"), "in five");
}

TEST(RemoteRedis, TheConnectionIsNotInheritedByTheCompiler) {
  SKIP_WITHOUT_REDIS();
  testing::RedisServer server;
  RedisStorage store(url_of("redis://127.0.0.1:" + std::to_string(server.port())));
  EXPECT_EQ(store.get("k"), std::nullopt);  // the kept connection is open now
  EXPECT_EQ(testing::inheritable_sockets(), std::vector<std::string>{});
}

TEST(RemoteRedis, UnixSocket) {
  SKIP_WITHOUT_REDIS();
  testing::RedisOptions options;
  options.unix_socket = true;
  testing::RedisServer server(options);
  RedisStorage store(url_of("redis+unix://" + server.socket_path() + "?db=1"));
  store.put("k", "over the socket");
  EXPECT_EQ(store.get("k"), "over the socket");
}

TEST(RemoteRedis, PasswordAndAclUser) {
  SKIP_WITHOUT_REDIS();
  testing::RedisOptions options;
  options.password = "s3cret";
  options.users = {{"alice", "wonder land"}};
  testing::RedisServer server(options);
  RedisStorage by_password(url_of("redis://:s3cret@127.0.0.1:" + std::to_string(server.port())));
  by_password.put("k", "v");
  EXPECT_EQ(by_password.get("k"), "v");
  EXPECT_EQ(server.raw_get("kache:k"), "v");

  RedisStorage by_user(url_of("redis://alice:wonder%20land@127.0.0.1:" + std::to_string(server.port())));
  EXPECT_EQ(by_user.get("k"), "v");

  // The password from the environment's secrets.
  core::RemoteSecrets secrets;
  secrets.password = "s3cret";
  RedisStorage by_env(core::parse_remote_url(local(server.port()), secrets, remote_schemes()));
  EXPECT_EQ(by_env.get("k"), "v");
}

TEST(RemoteRedis, WrongOrMissingPasswordIsAnAuthFailure) {
  SKIP_WITHOUT_REDIS();
  testing::RedisOptions options;
  options.password = "s3cret";
  options.users = {{"alice", "pw"}};
  testing::RedisServer server(options);
  const std::string port = std::to_string(server.port());
  RedisStorage wrong(url_of("redis://:hunter2@127.0.0.1:" + port));
  try {
    wrong.get("k");
    FAIL() << "no failure";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.kind(), RemoteFailure::Kind::auth) << e.what();
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("***"), std::string::npos) << e.what();
  }
  RedisStorage wrong_user(url_of("redis://alice:nope@127.0.0.1:" + port));
  EXPECT_EQ(failure_kind([&] { wrong_user.put("k", "v"); }), RemoteFailure::Kind::auth);
  RedisStorage none(url_of(local(server.port())));
  EXPECT_EQ(failure_kind([&] { none.get("k"); }), RemoteFailure::Kind::auth);  // NOAUTH
}

TEST(RemoteRedis, RefusedAndDeadServersAreErrors) {
  SKIP_WITHOUT_REDIS();
  RedisStorage nobody(url_of(local(testing::free_loopback_port())));
  EXPECT_EQ(failure_kind([&] { nobody.get("k"); }), RemoteFailure::Kind::error);

  std::optional<testing::RedisServer> server(std::in_place);
  RedisStorage store(url_of(local(server->port())));
  store.put("k", "v");
  server.reset();  // the server goes away under an open connection
  EXPECT_EQ(failure_kind([&] { store.get("k"); }), RemoteFailure::Kind::error);
  EXPECT_EQ(failure_kind([&] { store.get("k"); }), RemoteFailure::Kind::error);  // reconnect refused
}

TEST(RemoteRedis, BlackHoledServerTimesOut) {
  // No redis needed. The test finishing at all shows the waits are bounded (ctest's timeout would
  // catch a hang); no assertion on how long they took.
  testing::BlackHole silent(false);
  RedisStorage store(url_of(local(silent.port()) + "|operation-timeout=200"));
  EXPECT_EQ(failure_kind([&] { store.get("k"); }), RemoteFailure::Kind::timeout);
  EXPECT_EQ(failure_kind([&] { store.put("k", "v"); }), RemoteFailure::Kind::timeout);

  testing::BlackHole full(true);
  RedisStorage never_connects(url_of(local(full.port()) + "|connect-timeout=200"));
  EXPECT_EQ(failure_kind([&] { never_connects.get("k"); }), RemoteFailure::Kind::timeout);
}

TEST(RemoteSigpipe, AWriteToAClosedPeerDoesNotKillTheProcess) {
  // What a server closing the connection under a write does to hiredis or OpenSSL: a write to a pipe
  // without reader raises SIGPIPE, which kills the process by default. Under the guard it is consumed.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  {
    const SigpipeGuard guard;
    errno = 0;
    EXPECT_EQ(::write(fds[1], "x", 1), -1);
    EXPECT_EQ(errno, EPIPE);
  }
  ::close(fds[1]);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

}  // namespace
}  // namespace kache::storage::remote
