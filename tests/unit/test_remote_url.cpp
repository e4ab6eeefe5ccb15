// Unit tests for the remote storage URL list: ccache's forms, attributes, secrets and redaction.
#include <gtest/gtest.h>

#include "core/remote_url.hpp"
#include "storage/remote/http_storage.hpp"
#include "storage/remote/redis_storage.hpp"
#include "storage/remote/schemes.hpp"

namespace kache::core {
namespace {

RemoteUrl parse(std::string_view spec, const RemoteSecrets& secrets = {}) { return parse_remote_url(spec, secrets, kache::storage::remote::remote_schemes()); }

std::string error_of(std::string_view spec) {
  try {
    parse(spec);
  } catch (const RemoteUrlError& e) {
    return e.what();
  }
  return "";
}

// What a message may quote of a list that may not parse: no password, no value of an attribute or query
// that could hold one, whatever the shape.
TEST(RemoteUrl, RedactUnparsedHidesEverySecret) {
  const std::string pw = "pw-SECRET";
  for (const std::string& spec :
       {"redis://:" + pw + "@h", "redis://u:" + pw + "@h:1/2", "http://u:" + pw + "@h/p", "https://u:" + pw + "@[::1",
        "redis:/:" + pw + "@h", "redis://:" + pw + "/x@h", "redis://h|password=" + pw,
        "http://h|token=" + pw + "|layout=flat", "redis+unix:///s?db=1&password=" + pw, pw + "@h",
        "redis://:" + pw + "@h redis://:" + pw + "@g"}) {
    const std::string shown = redact_remote_list(spec, kache::storage::remote::remote_schemes());
    EXPECT_EQ(shown.find(pw), std::string::npos) << spec << " -> " << shown;
  }
  EXPECT_EQ(redact_unparsed("redis://:pw@h:1|connect-timeout=50|password=x", kache::storage::remote::remote_schemes()),
            "redis://***@h:1|connect-timeout=50|password=***");
  EXPECT_EQ(redact_unparsed("redis+unix:///s?db=1&token=x", kache::storage::remote::remote_schemes()), "redis+unix:///s?db=1&token=***");
  EXPECT_EQ(redact_remote_list("redis://h  http://u:p@g/x", kache::storage::remote::remote_schemes()), "redis://h  http://***@g/x");
}

TEST(RemoteUrl, RedisForms) {
  RemoteUrl u = parse("redis://cache.example.com");
  EXPECT_EQ(u.scheme, "redis");
  EXPECT_EQ(u.host, "cache.example.com");
  EXPECT_EQ(u.port, 0);
  EXPECT_EQ(u.effective_port(), 6379);
  EXPECT_EQ(storage::remote::redis_db(u), 0);
  EXPECT_FALSE(u.password);

  u = parse("redis://alice:s%40cret@10.0.0.5:6380/3");
  EXPECT_EQ(u.user, "alice");
  EXPECT_EQ(u.password, "s@cret");
  EXPECT_EQ(u.host, "10.0.0.5");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(storage::remote::redis_db(u), 3);

  u = parse("redis://:pw@host");  // password only (AUTH pw)
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "pw");
  u = parse("redis://pw@host");  // ccache's spelling of the same
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "pw");

  u = parse("redis://[::1]:7000/2");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(storage::remote::redis_db(u), 2);
  EXPECT_EQ(u.redacted(), "redis://[::1]:7000/2");
}

TEST(RemoteUrl, RedisUnix) {
  RemoteUrl u = parse("redis+unix:///run/redis/redis.sock?db=4|read-only");
  EXPECT_EQ(u.scheme, "redis+unix");
  EXPECT_EQ(u.path, "/run/redis/redis.sock");
  EXPECT_EQ(storage::remote::redis_db(u), 4);
  EXPECT_TRUE(u.read_only);
  EXPECT_EQ(u.redacted(), "redis+unix:///run/redis/redis.sock?db=4|read-only");
  u = parse("redis+unix://:pw@/tmp/r.sock");
  EXPECT_EQ(u.password, "pw");
  EXPECT_EQ(u.redacted(), "redis+unix://:***@/tmp/r.sock");
}

TEST(RemoteUrl, HttpFormsAndAttributes) {
  RemoteUrl u = parse("http://cache:8080/kache/ccache/|layout=bazel|connect-timeout=250|operation-timeout=5000");
  EXPECT_EQ(u.scheme, "http");
  EXPECT_EQ(u.host, "cache");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.path, "/kache/ccache");
  EXPECT_EQ(storage::remote::http_layout(u), storage::remote::HttpLayout::bazel);
  EXPECT_EQ(u.connect_timeout_ms, 250);
  EXPECT_EQ(u.operation_timeout_ms, 5000);
  EXPECT_EQ(u.http_base(), "http://cache:8080/kache/ccache");

  u = parse("https://bob:pa%3Ass@secure.example/c");
  EXPECT_EQ(u.scheme, "https");
  EXPECT_EQ(u.effective_port(), 443);
  EXPECT_EQ(u.user, "bob");
  EXPECT_EQ(u.password, "pa:ss");
  EXPECT_EQ(storage::remote::http_layout(u), storage::remote::HttpLayout::subdirs);
  EXPECT_EQ(u.connect_timeout_ms, 100);
  EXPECT_EQ(u.operation_timeout_ms, 2000);
  EXPECT_EQ(u.http_base(), "https://secure.example/c");  // credentials never in the request URL
}

TEST(RemoteUrl, List) {
  const auto urls = parse_remote_urls("  redis://a|read-only \n http://b/x\thttps://c ", {}, kache::storage::remote::remote_schemes());
  ASSERT_EQ(urls.size(), 3u);
  EXPECT_EQ(urls[0].host, "a");
  EXPECT_TRUE(urls[0].read_only);
  EXPECT_EQ(urls[1].path, "/x");
  EXPECT_EQ(urls[2].scheme, "https");
  EXPECT_TRUE(parse_remote_urls("   ", {}, kache::storage::remote::remote_schemes()).empty());
}

TEST(RemoteUrl, SecretsFromTheEnvironment) {
  const RemoteSecrets secrets{"envpw", "tok"};
  RemoteUrl u = parse("redis://host", secrets);
  EXPECT_EQ(u.password, "envpw");
  EXPECT_FALSE(u.password_in_url);
  EXPECT_EQ(u.redacted(), "redis://host");                             // nothing of the environment's secret printed
  EXPECT_EQ(parse("redis://:urlpw@host", secrets).password, "urlpw");  // the URL wins

  u = parse("http://host/c", secrets);
  EXPECT_EQ(u.bearer_token, "tok");
  EXPECT_FALSE(u.password);
  u = parse("http://carol@host/c", secrets);  // a named user takes the password, not the token
  EXPECT_EQ(u.password, "envpw");
  EXPECT_FALSE(u.bearer_token);
  EXPECT_EQ(u.redacted(), "http://carol@host/c");
}

TEST(RemoteUrl, RedactedHidesEverySecret) {
  for (const char* spec : {"redis://alice:hunter2@host:1/2", "redis://hunter2@host", "http://u:hunter2@h/p",
                           "https://u:hunter2@h|layout=flat", "redis+unix://:hunter2@/s.sock"}) {
    const RemoteUrl u = parse(spec);
    EXPECT_EQ(u.redacted().find("hunter2"), std::string::npos) << spec;
    EXPECT_NE(u.redacted().find("***"), std::string::npos) << spec;
    EXPECT_EQ(parse(u.to_string(true)), u) << spec;  // the secret form round-trips
  }
  EXPECT_EQ(parse("redis://alice:hunter2@host:1/2").redacted(), "redis://alice:***@host:1/2");
  // Errors redact too, also for URLs that do not parse.
  const std::string err = error_of("redis://alice:hunter2@host:99999");
  EXPECT_NE(err.find("65535"), std::string::npos) << err;
  EXPECT_EQ(err.find("hunter2"), std::string::npos) << err;
  EXPECT_EQ(error_of("redis://:hun/ter2@host").find("hun"), std::string::npos);
}

TEST(RemoteUrl, Errors) {
  EXPECT_NE(error_of("ftp://host").find("unsupported scheme 'ftp'"), std::string::npos);
  EXPECT_NE(error_of("host:6379").find("scheme://"), std::string::npos);
  EXPECT_NE(error_of("redis://").find("host"), std::string::npos);
  EXPECT_NE(error_of("redis://h:0").find("port"), std::string::npos);
  EXPECT_NE(error_of("redis://h:").find("empty port"), std::string::npos);
  EXPECT_NE(error_of("redis://h/x").find("database"), std::string::npos);
  EXPECT_NE(error_of("redis://h|layout=flat").find("http"), std::string::npos);
  EXPECT_NE(error_of("http://h|layout=deep").find("flat, subdirs or bazel"), std::string::npos);
  EXPECT_NE(error_of("http://h|connect-timeout=0").find("milliseconds"), std::string::npos);
  EXPECT_NE(error_of("http://h|connect-timeout=abc").find("milliseconds"), std::string::npos);
  EXPECT_NE(error_of("http://h|read-only=yes").find("no value"), std::string::npos);
  EXPECT_NE(error_of("http://h|shards=4").find("exactly one '*'"), std::string::npos);
  EXPECT_NE(error_of("http://h|weights=4").find("unknown attribute 'weights'"), std::string::npos);
  EXPECT_NE(error_of("http://h/a?b").find("query"), std::string::npos);
  EXPECT_NE(error_of("http://:pw@h").find("user name"), std::string::npos);
  EXPECT_NE(error_of("redis://%zz@h").find("percent"), std::string::npos);
  EXPECT_NE(error_of("redis+unix://host/sock").find("no host"), std::string::npos);
  EXPECT_NE(error_of("redis://[::1").find("'['"), std::string::npos);
  // Control bytes are shown escaped: a message stays one line, and a NUL does not cut it short.
  const std::string nul_err = error_of(std::string_view("redis://h\0\n:1", 13));
  EXPECT_NE(nul_err.find("redis://h\\x00\\x0a:1"), std::string::npos) << nul_err;
}

TEST(RemoteUrl, IdentityIgnoresAttributesAndSecrets) {
  EXPECT_EQ(parse("redis://:a@h:1/2|read-only").identity(), parse("redis://:b@h:1/2|connect-timeout=5").identity());
  EXPECT_NE(parse("redis://h/1").identity(), parse("redis://h/2").identity());
  EXPECT_NE(parse("http://h/a").identity(), parse("http://h/b").identity());
  EXPECT_EQ(parse("redis://:pw@h").identity().find("pw"), std::string::npos);
}

}  // namespace
}  // namespace kache::core
