// HttpStorage against a real nginx (Debian's, WebDAV module) started per test on a free loopback port:
// plain, basic auth, bearer token, HTTPS with a CA made by the test; a black hole for the timeouts.
#include <gtest/gtest.h>

#include <filesystem>
#include <chrono>
#include <random>
#include <thread>

#include "servers.hpp"
#include "storage/remote/http_storage.hpp"
#include "storage/remote/schemes.hpp"
#include "util/fs.hpp"

namespace kache::storage::remote {
namespace {

namespace fs = std::filesystem;

#define SKIP_WITHOUT_NGINX() \
  if (!testing::find_server_binary("nginx")) GTEST_SKIP() << "nginx is not installed (scripts/setup-tests.sh)"

const std::string kKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

core::RemoteUrl url_of(const std::string& spec, const core::RemoteSecrets& secrets = {}) {
  return core::parse_remote_url(spec, secrets, remote_schemes());
}

core::RemoteSecrets password_secret(const std::string& password) {
  core::RemoteSecrets secrets;
  secrets.password = password;
  return secrets;
}

core::RemoteSecrets token_secret(const std::string& token) {
  core::RemoteSecrets secrets;
  secrets.bearer_token = token;
  return secrets;
}

std::string binary_value(std::size_t n) {
  std::mt19937 rng(11);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

RemoteFailure::Kind failure_kind(const std::function<void()>& action, std::string* message = nullptr) {
  try {
    action();
  } catch (const RemoteError& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no RemoteError thrown";
  return RemoteFailure::Kind::error;
}

std::string error_of(const std::string& spec) {
  try {
    url_of(spec);
  } catch (const core::RemoteUrlError& e) {
    return e.what();
  }
  return "";
}

// http:// and https:// URLs (http_scheme's and https_scheme's rules): the path prefix, layout=, basic
// authentication or a bearer token.
TEST(HttpUrl, FormsAndAttributes) {
  core::RemoteUrl u = url_of("http://cache:8080/kache/ccache/|layout=bazel|connect-timeout=250|operation-timeout=5000");
  EXPECT_EQ(u.scheme, "http");
  EXPECT_EQ(u.host, "cache");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.path, "/kache/ccache");
  EXPECT_EQ(http_layout(u), HttpLayout::bazel);
  EXPECT_EQ(u.connect_timeout_ms, 250);
  EXPECT_EQ(u.operation_timeout_ms, 5000);
  EXPECT_EQ(u.http_base(), "http://cache:8080/kache/ccache");
  EXPECT_EQ(u.redacted(), "http://cache:8080/kache/ccache|connect-timeout=250|operation-timeout=5000|layout=bazel");
  EXPECT_EQ(url_of("http://h|layout=subdirs").redacted(), "http://h");  // the default is not printed

  u = url_of("https://bob:pa%3Ass@secure.example/c");
  EXPECT_EQ(u.scheme, "https");
  EXPECT_EQ(u.effective_port(), 443);
  EXPECT_EQ(u.user, "bob");
  EXPECT_EQ(u.password, "pa:ss");
  EXPECT_EQ(http_layout(u), HttpLayout::subdirs);
  EXPECT_EQ(u.http_base(), "https://secure.example/c");  // credentials never in the request URL
  EXPECT_EQ(url_of("http://h").effective_port(), 80);
}

TEST(HttpUrl, SecretsFromTheEnvironment) {
  const core::RemoteSecrets secrets{"envpw", "tok"};
  core::RemoteUrl u = url_of("http://host/c", secrets);
  EXPECT_EQ(u.bearer_token, "tok");
  EXPECT_FALSE(u.password);
  u = url_of("http://carol@host/c", secrets);  // a named user takes the password, not the token
  EXPECT_EQ(u.password, "envpw");
  EXPECT_FALSE(u.bearer_token);
  EXPECT_EQ(u.redacted(), "http://carol@host/c");
  for (const char* spec : {"http://u:hunter2@h/p", "https://u:hunter2@h|layout=flat"}) {
    const core::RemoteUrl parsed = url_of(spec);
    EXPECT_EQ(parsed.redacted().find("hunter2"), std::string::npos) << spec;
    EXPECT_EQ(url_of(parsed.to_string(true)), parsed) << spec;  // the secret form round-trips
  }
}

TEST(HttpUrl, Errors) {
  EXPECT_NE(error_of("http://h|layout=deep").find("flat, subdirs or bazel"), std::string::npos);
  EXPECT_NE(error_of("http://h|layout").find("flat, subdirs or bazel"), std::string::npos);
  EXPECT_NE(error_of("http://h/a?b").find("query"), std::string::npos);
  EXPECT_NE(error_of("http://:pw@h").find("user name"), std::string::npos);
  EXPECT_NE(error_of("http://h|region=x").find("region applies to s3 URLs only"), std::string::npos);
}

TEST(RemoteHttp, KeyUrlsByLayout) {
  // No server: only the request URLs.
  EXPECT_EQ(HttpStorage(url_of("http://h:81/c/")).key_url("abcdef"), "http://h:81/c/ab/cdef");
  EXPECT_EQ(HttpStorage(url_of("http://h|layout=flat")).key_url("abcdef"), "http://h/abcdef");
  EXPECT_EQ(HttpStorage(url_of("https://u:pw@h/x|layout=bazel")).key_url(kKey), "https://h/x/ac/" + kKey);
  // Bazel takes exactly 64 hex digits: other keys are hashed into that form (always the same one).
  const std::string hashed = HttpStorage(url_of("http://h|layout=bazel")).key_url("short");
  EXPECT_EQ(hashed.size(), std::string("http://h/ac/").size() + 64);
  EXPECT_EQ(hashed, HttpStorage(url_of("http://h|layout=bazel")).key_url("short"));
}

TEST(RemoteHttp, GetPutRemoveOnWebDav) {
  SKIP_WITHOUT_NGINX();
  testing::NginxServer server;
  for (const char* layout : {"flat", "subdirs", "bazel"}) {
    SCOPED_TRACE(layout);
    HttpStorage store(url_of(server.base_url() + "/cache/|layout=" + layout));
    EXPECT_EQ(store.get(kKey), std::nullopt);  // 404 = miss
    const std::string value = binary_value(2 << 20);
    store.put(kKey, value);
    EXPECT_EQ(store.get(kKey), value);
    store.put(kKey, "replaced");
    EXPECT_EQ(store.get(kKey), "replaced");
    store.remove(kKey);
    EXPECT_EQ(store.get(kKey), std::nullopt);
    store.remove(kKey);  // DELETE of a missing key: 404, fine
  }
  // What the server holds, by layout, read from its disk (the default layout through the factory).
  const auto subdirs = make_remote_storage(url_of(server.base_url() + "/cache"), {});
  subdirs->put(kKey, "on disk");
  EXPECT_EQ(util::read_file(server.data_dir() + "/cache/01/" + kKey.substr(2)), "on disk");
  HttpStorage bazel(url_of(server.base_url() + "|layout=bazel"));
  bazel.put(kKey, "bazel");
  EXPECT_EQ(util::read_file(server.data_dir() + "/ac/" + kKey), "bazel");
}

TEST(RemoteHttp, ReadOnlyWritesNothing) {
  SKIP_WITHOUT_NGINX();
  testing::NginxServer server;
  HttpStorage writer(url_of(server.base_url()));
  writer.put(kKey, "v");
  HttpStorage reader(url_of(server.base_url() + "|read-only"));
  EXPECT_EQ(reader.get(kKey), "v");
  reader.put(kKey, "changed");
  reader.remove(kKey);
  EXPECT_EQ(writer.get(kKey), "v");
}

// Read-only is decided once, when the backend is made: the URL's own read-only or remote.read_only
// (RemoteStoreOptions::read_only) for every remote. A read-only backend writes nothing, so the dead
// server below is never asked; a writable one is, and fails.
TEST(RemoteBackend, ReadOnlyIsDecidedWhenTheBackendIsMade) {
  RemoteStoreOptions every_remote_read_only;
  every_remote_read_only.read_only = true;
  for (const std::string dead : {"http://127.0.0.1:1/cache", "redis://127.0.0.1:1"}) {
    EXPECT_TRUE(make_remote_storage(url_of(dead + "|read-only"), {})->read_only()) << dead;
    EXPECT_FALSE(make_remote_storage(url_of(dead), {})->read_only()) << dead;
    const auto backend = make_remote_storage(url_of(dead), every_remote_read_only);
    EXPECT_TRUE(backend->read_only()) << dead;
    EXPECT_NO_THROW(backend->put(kKey, "v")) << dead;
    EXPECT_NO_THROW(backend->remove(kKey)) << dead;
    EXPECT_THROW(make_remote_storage(url_of(dead), {})->put(kKey, "v"), RemoteError) << dead;
  }
}

TEST(RemoteHttp, BasicAuth) {
  SKIP_WITHOUT_NGINX();
  testing::NginxOptions options;
  options.basic_auth = {"kache", "p@ss word"};
  testing::NginxServer server(options);
  const std::string hostport = server.base_url().substr(std::string("http://").size());
  HttpStorage good(url_of("http://kache:p%40ss%20word@" + hostport));
  good.put(kKey, "v");
  EXPECT_EQ(good.get(kKey), "v");
  HttpStorage from_env(url_of("http://kache@" + hostport, password_secret("p@ss word")));
  EXPECT_EQ(from_env.get(kKey), "v");

  std::string message;
  HttpStorage wrong(url_of("http://kache:hunter2@" + hostport));
  EXPECT_EQ(failure_kind([&] { wrong.get(kKey); }, &message), RemoteFailure::Kind::auth);
  EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  EXPECT_NE(message.find("401"), std::string::npos) << message;
  HttpStorage anonymous(url_of(server.base_url()));
  EXPECT_EQ(failure_kind([&] { anonymous.put(kKey, "x"); }), RemoteFailure::Kind::auth);
  EXPECT_EQ(good.get(kKey), "v");
}

TEST(RemoteHttp, BearerToken) {
  SKIP_WITHOUT_NGINX();
  testing::NginxOptions options;
  options.bearer_token = "t0ken";
  testing::NginxServer server(options);
  HttpStorage good(url_of(server.base_url(), token_secret("t0ken")));
  good.put(kKey, "v");
  EXPECT_EQ(good.get(kKey), "v");
  HttpStorage wrong(url_of(server.base_url(), token_secret("other")));
  EXPECT_EQ(failure_kind([&] { wrong.get(kKey); }), RemoteFailure::Kind::auth);
}

TEST(RemoteHttp, HttpsWithTheConfiguredCa) {
  SKIP_WITHOUT_NGINX();
  testing::NginxOptions options;
  options.tls = true;
  testing::NginxServer server(options);
  ASSERT_EQ(server.base_url().substr(0, 8), "https://");
  HttpStorage trusted(url_of(server.base_url() + "/c"), server.ca_cert());
  trusted.put(kKey, "over tls");
  EXPECT_EQ(trusted.get(kKey), "over tls");
  // Without the CA the server's certificate is not trusted: an error, not a miss.
  // Generous limits: loading the system's CA store on a loaded machine can outlast the 2 s default,
  // and this checks the kind of failure, not its speed.
  HttpStorage untrusted(url_of(server.base_url() + "/c|connect-timeout=10000|operation-timeout=30000"));
  std::string message;
  EXPECT_EQ(failure_kind([&] { untrusted.get(kKey); }, &message), RemoteFailure::Kind::error);
  EXPECT_NE(message.find("certificate"), std::string::npos) << message;
}

// The certificate must name the host the URL names: "localhost" (in the test certificate, resolved from
// /etc/hosts) is trusted, a name that resolves to the same server but is not in the certificate is not.
// CARES_HOSTS points c-ares at a hosts file of the test's own.
TEST(RemoteHttp, HttpsByHostNameChecksTheName) {
  SKIP_WITHOUT_NGINX();
  testing::NginxOptions options;
  options.tls = true;
  testing::NginxServer server(options);
  const std::string port = server.base_url().substr(server.base_url().rfind(':'));
  HttpStorage by_name(url_of("https://localhost" + port + "/c|connect-timeout=10000"), server.ca_cert());
  by_name.put(kKey, "by name");
  EXPECT_EQ(by_name.get(kKey), "by name");

  const std::string hosts = server.data_dir() + "/../hosts";
  util::write_file(hosts, "127.0.0.1 other.kache.test\n");
  ::setenv("CARES_HOSTS", hosts.c_str(), 1);
  HttpStorage other(url_of("https://other.kache.test" + port + "/c|connect-timeout=10000"), server.ca_cert());
  std::string message;
  const auto kind = failure_kind([&] { other.get(kKey); }, &message);
  ::unsetenv("CARES_HOSTS");
  EXPECT_EQ(kind, RemoteFailure::Kind::error);
  EXPECT_NE(message.find("certificate"), std::string::npos) << message;
}

TEST(RemoteHttp, OtherStatusesAreErrors) {
  SKIP_WITHOUT_NGINX();
  testing::NginxServer server;
  // A directory where the value's file would go: nginx answers PUT with 409/500, GET with 403-or-301.
  fs::create_directories(server.data_dir() + "/" + kKey);
  HttpStorage flat(url_of(server.base_url() + "|layout=flat"));
  std::string message;
  const auto kind = failure_kind([&] { flat.put(kKey, "v"); }, &message);
  EXPECT_NE(kind, RemoteFailure::Kind::timeout) << message;
  EXPECT_NE(message.find("PUT"), std::string::npos) << message;
}

TEST(RemoteHttp, RefusedIsAnErrorAndABlackHoleTimesOut) {
  HttpStorage nobody(url_of("http://127.0.0.1:" + std::to_string(testing::free_loopback_port())));
  EXPECT_EQ(failure_kind([&] { nobody.get(kKey); }), RemoteFailure::Kind::error);

  // The test finishing shows the waits are bounded; nothing asserts how long they took.
  testing::BlackHole silent(false);
  HttpStorage no_answer(url_of("http://127.0.0.1:" + std::to_string(silent.port()) + "|operation-timeout=200"));
  EXPECT_EQ(failure_kind([&] { no_answer.get(kKey); }), RemoteFailure::Kind::timeout);
  testing::BlackHole full(true);
  HttpStorage no_connect(url_of("http://127.0.0.1:" + std::to_string(full.port()) + "|connect-timeout=200"));
  EXPECT_EQ(failure_kind([&] { no_connect.get(kKey); }), RemoteFailure::Kind::timeout);
}

TEST(RemoteHttp, AnOversizedBodyIsNotReadWhole) {
  SKIP_WITHOUT_NGINX();
  for (const bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "https" : "http");
    testing::NginxOptions options;
    options.tls = tls;
    testing::NginxServer server(options);
    HttpStorage writer(url_of(server.base_url()), server.ca_cert());
    writer.put(kKey, binary_value(3 << 20));
    writer.put("small", "v");
    HttpStorage reader(url_of(server.base_url()), server.ca_cert(), 1 << 20);
    EXPECT_THROW(reader.get(kKey), OversizedValue);
    // The connection the large body was left on is not reused for the next answer.
    EXPECT_EQ(reader.get("small"), "v");
    EXPECT_THROW(reader.get(kKey), OversizedValue);
  }
}

// An error page over kAnswerBodyLimit is an error, neither a miss read whole nor an oversized value,
// over http and https alike; one under it is a miss.
TEST(RemoteHttp, AnErrorPageOverItsBoundIsAnErrorOnBothConnections) {
  SKIP_WITHOUT_NGINX();
  for (const bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "https" : "http");
    testing::NginxOptions options;
    options.tls = tls;
    options.http_directives = "error_page 404 /error-page.html;";
    testing::NginxServer server(options);
    const std::string page = server.data_dir() + "/error-page.html";
    HttpStorage reader(url_of(server.base_url()), server.ca_cert());
    util::write_file(page, std::string(kAnswerBodyLimit - 1000, 'e'));
    EXPECT_EQ(reader.get(kKey), std::nullopt);
    util::write_file(page, std::string(kAnswerBodyLimit + 1000, 'e'));
    std::string message;
    EXPECT_EQ(failure_kind([&] { reader.get(kKey); }, &message), RemoteFailure::Kind::error);
    EXPECT_NE(message.find("exceeds " + std::to_string(kAnswerBodyLimit) + " bytes"), std::string::npos) << message;
  }
}

TEST(RemoteHttp, AConnectionTheServerClosedIsReplaced) {
  SKIP_WITHOUT_NGINX();
  // nginx closes an idle keep-alive connection after 1 s without a word, and answers the third request
  // of a connection with "Connection: close".
  testing::NginxOptions options;
  options.http_directives = "keepalive_timeout 1s; keepalive_requests 3;";
  testing::NginxServer server(options);
  HttpStorage store(url_of(server.base_url()));
  store.put(kKey, "v");
  for (int i = 0; i < 7; ++i) EXPECT_EQ(store.get(kKey), "v");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(store.get(kKey), "v");
  store.put(kKey, "w");
  EXPECT_EQ(store.get(kKey), "w");
}

TEST(RemoteHttp, TheConnectionIsNotInheritedByTheCompiler) {
  SKIP_WITHOUT_NGINX();
  testing::NginxServer server;
  HttpStorage store(url_of(server.base_url()));
  EXPECT_EQ(store.get(kKey), std::nullopt);  // the kept-alive connection is open now
  EXPECT_EQ(testing::inheritable_sockets(), std::vector<std::string>{});
}

TEST(RemoteHttp, HostNamesAreResolved) {
  SKIP_WITHOUT_NGINX();
  testing::NginxServer server;
  const std::string port = server.base_url().substr(server.base_url().rfind(':') + 1);
  HttpStorage by_name(url_of("http://localhost:" + port));
  by_name.put(kKey, "named");
  EXPECT_EQ(by_name.get(kKey), "named");
  HttpStorage nowhere(url_of("http://no-such-host.invalid:" + port + "|connect-timeout=2000"));
  EXPECT_NE(failure_kind([&] { nowhere.get(kKey); }), RemoteFailure::Kind::auth);
}

}  // namespace
}  // namespace kache::storage::remote
