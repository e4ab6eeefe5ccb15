// Unit tests for the generic remote storage URL (core/remote_url): the list, the authority, the common
// attributes, shards=, secrets and redaction, read through a scheme of the test's own. Each scheme's own
// forms and attributes are tested with its backend (test_remote_redis, _http, _s3, _file).
#include <gtest/gtest.h>

#include "core/remote_url.hpp"

namespace kache::core {
namespace {

// "kv://[user[:password]@]host[:port][/path]|colour=NAME": an HTTP-like scheme with one attribute of its
// own (harmless to print, red by default), and "vault://": one whose attribute is a URL.
void parse_kv_address(std::string_view text, RemoteUrl& url) {
  const std::size_t slash = text.find('/');
  parse_authority(text.substr(0, slash), url, {.password_needs_user = "a password needs a user"});
  const std::string_view path = slash == std::string_view::npos ? std::string_view() : text.substr(slash);
  if (!valid_url_path(path)) throw RemoteUrlProblem("bad path");
  url.path = std::string(path);
}

void parse_colour(std::string_view, std::optional<std::string_view> value, RemoteUrl& url) {
  if (!value || value->empty()) throw RemoteUrlProblem("colour takes a name");
  url.set_attribute("colour", *value == "red" ? std::nullopt : std::optional<std::string>(*value));
}

void parse_mirror(std::string_view, std::optional<std::string_view> value, RemoteUrl& url) {
  url.set_attribute("mirror", std::string(value.value_or("")));
}

void take_secrets(RemoteUrl& url, const RemoteSecrets& secrets) {
  if (!url.password && !url.user.empty()) url.password = secrets.password;
  if (url.user.empty()) url.bearer_token = secrets.bearer_token;
}

constexpr std::string_view kColour[] = {"colour"};
constexpr std::string_view kMirror[] = {"mirror"};
constexpr std::string_view kShownQuery[] = {"page"};

constexpr SchemeRules kKv = {.name = "kv",
                             .family = "kv",
                             .default_port = 1234,
                             .shardable = true,
                             .attributes = kColour,
                             .attributes_apply_to = "kv URLs only",
                             .shown_attribute_values = kColour,
                             .parse_address = parse_kv_address,
                             .parse_attribute = parse_colour,
                             .apply_secrets = take_secrets};
constexpr SchemeRules kVault = {.name = "vault",
                                .family = "vault",
                                .attributes = kMirror,
                                .attributes_apply_to = "vault URLs only",
                                .url_attribute_values = kMirror,
                                .shown_query_values = kShownQuery,
                                .parse_address = parse_kv_address,
                                .parse_attribute = parse_mirror};
constexpr const SchemeRules* kSchemes[] = {&kKv, &kVault};

RemoteUrl parse(std::string_view spec, const RemoteSecrets& secrets = {}) {
  return parse_remote_url(spec, secrets, kSchemes);
}

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
  for (const std::string& spec : {"kv://:" + pw + "@h", "kv://u:" + pw + "@h:1/2", "kv://u:" + pw + "@[::1",
                                  "kv:/:" + pw + "@h", "kv://:" + pw + "/x@h", "kv://h|password=" + pw,
                                  "kv://h|token=" + pw + "|colour=blue", "kv:///s?page=1&password=" + pw, pw + "@h",
                                  "vault://h|mirror=kv://u:" + pw + "@m", "kv://:" + pw + "@h kv://:" + pw + "@g"}) {
    const std::string shown = redact_remote_list(spec, kSchemes);
    EXPECT_EQ(shown.find(pw), std::string::npos) << spec << " -> " << shown;
  }
  EXPECT_EQ(redact_unparsed("kv://:pw@h:1|connect-timeout=50|password=x|colour=blue", kSchemes),
            "kv://***@h:1|connect-timeout=50|password=***|colour=blue");
  EXPECT_EQ(redact_unparsed("kv:///s?page=1&token=x", kSchemes), "kv:///s?page=1&token=***");
  EXPECT_EQ(redact_unparsed("vault://h|mirror=kv://u:p@m", kSchemes), "vault://h|mirror=kv://***@m");
  EXPECT_EQ(redact_remote_list("kv://h  kv://u:p@g/x", kSchemes), "kv://h  kv://***@g/x");
  // Without the scheme's rules no value is known to be harmless.
  EXPECT_EQ(redact_unparsed("kv://h|colour=blue|read-only", {}), "kv://h|colour=***|read-only");
}

TEST(RemoteUrl, GenericParts) {
  RemoteUrl u = parse("kv://alice:s%40cret@[::1]:7000/a/b|colour=blue|connect-timeout=250|operation-timeout=5000");
  EXPECT_EQ(u.scheme, "kv");
  EXPECT_EQ(u.user, "alice");
  EXPECT_EQ(u.password, "s@cret");
  EXPECT_TRUE(u.password_in_url);
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(u.path, "/a/b");
  EXPECT_EQ(u.attribute("colour"), "blue");
  EXPECT_EQ(u.connect_timeout_ms, 250);
  EXPECT_EQ(u.operation_timeout_ms, 5000);
  EXPECT_EQ(u.host_port(), "[::1]:7000");
  EXPECT_TRUE(u.host_is_address());
  EXPECT_EQ(u.redacted(), "kv://alice:***@[::1]:7000/a/b|connect-timeout=250|operation-timeout=5000|colour=blue");
  EXPECT_EQ(parse(u.to_string(true)), u);  // the secret form round-trips

  u = parse("kv://cache.example|colour=red");
  EXPECT_EQ(u.effective_port(), 1234);  // the scheme's default
  EXPECT_FALSE(u.attribute("colour"));  // red is the default: not kept, not printed
  EXPECT_EQ(u.redacted(), "kv://cache.example");
  EXPECT_EQ(u.connect_timeout_ms, RemoteUrl::kDefaultConnectTimeoutMs);
  EXPECT_FALSE(u.host_is_address());
}

TEST(RemoteUrl, List) {
  const auto urls = parse_remote_urls("  kv://a|read-only \n kv://b/x\tvault://c ", {}, kSchemes);
  ASSERT_EQ(urls.size(), 3u);
  EXPECT_EQ(urls[0].host, "a");
  EXPECT_TRUE(urls[0].read_only);
  EXPECT_EQ(urls[1].path, "/x");
  EXPECT_EQ(urls[2].scheme, "vault");
  EXPECT_TRUE(parse_remote_urls("   ", {}, kSchemes).empty());
}

TEST(RemoteUrl, SecretsAsTheSchemeTakesThem) {
  const RemoteSecrets secrets{"envpw", "tok"};
  RemoteUrl u = parse("kv://carol@host", secrets);
  EXPECT_EQ(u.password, "envpw");
  EXPECT_FALSE(u.password_in_url);
  EXPECT_EQ(u.redacted(), "kv://carol@host");                            // nothing of the environment's secret printed
  EXPECT_EQ(parse("kv://carol:urlpw@host", secrets).password, "urlpw");  // the URL wins
  EXPECT_EQ(parse("kv://host", secrets).bearer_token, "tok");
  EXPECT_FALSE(parse("vault://host", secrets).password);  // a scheme without apply_secrets takes none
  // Errors redact too, also for URLs that do not parse.
  const std::string err = error_of("kv://alice:hunter2@host:99999");
  EXPECT_NE(err.find("65535"), std::string::npos) << err;
  EXPECT_EQ(err.find("hunter2"), std::string::npos) << err;
  EXPECT_EQ(error_of("kv://:hun/ter2@host").find("hun"), std::string::npos);
}

TEST(RemoteUrl, Errors) {
  EXPECT_NE(error_of("ftp://host").find("unsupported scheme 'ftp' (kv, vault)"), std::string::npos);
  EXPECT_NE(error_of("host:6379").find("scheme://"), std::string::npos);
  EXPECT_NE(error_of("kv://").find("host"), std::string::npos);
  EXPECT_NE(error_of("kv://h:0").find("port"), std::string::npos);
  EXPECT_NE(error_of("kv://h:").find("empty port"), std::string::npos);
  EXPECT_NE(error_of("kv://h|connect-timeout=0").find("milliseconds"), std::string::npos);
  EXPECT_NE(error_of("kv://h|connect-timeout=abc").find("milliseconds"), std::string::npos);
  EXPECT_NE(error_of("kv://h|read-only=yes").find("no value"), std::string::npos);
  EXPECT_NE(error_of("kv://h|colour=").find("'kv://h|colour=': colour takes a name"), std::string::npos);
  EXPECT_NE(error_of("kv://h|mirror=x").find("mirror applies to vault URLs only"), std::string::npos);
  EXPECT_NE(
      error_of("kv://h|weights=4")
          .find("unknown attribute 'weights' (known: read-only, connect-timeout, operation-timeout, colour, mirror, "
                "shards)"),
      std::string::npos);
  EXPECT_NE(error_of("kv://:pw@h").find("a password needs a user"), std::string::npos);
  EXPECT_NE(error_of("kv://%zz@h").find("percent"), std::string::npos);
  EXPECT_NE(error_of("kv://[::1").find("'['"), std::string::npos);
  // Control bytes are shown escaped: a message stays one line, and a NUL does not cut it short.
  const std::string nul_err = error_of(std::string_view("kv://h\0\n:1", 10));
  EXPECT_NE(nul_err.find("kv://h\\x00\\x0a:1"), std::string::npos) << nul_err;
}

TEST(RemoteUrl, Shards) {
  const RemoteUrl u = parse("kv://u:pw@cache-*:80/p|shards=a,b|colour=blue");
  EXPECT_EQ(u.shards, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(u.host, "cache-a");
  EXPECT_EQ(u.redacted(), "kv://u:***@cache-*:80/p|colour=blue|shards=a,b");
  const auto shards = u.shard_urls();
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[1].host_port(), "cache-b:80");
  EXPECT_EQ(shards[1].attribute("colour"), "blue");
  EXPECT_TRUE(shards[1].shards.empty());
  EXPECT_NE(error_of("kv://h|shards=4").find("exactly one '*'"), std::string::npos);
  EXPECT_NE(error_of("vault://*|shards=4").find("shards= applies to kv"), std::string::npos);
  EXPECT_NE(error_of("kv://*:1|shards=a,a").find("twice"), std::string::npos);
}

TEST(RemoteUrl, IdentityIgnoresSecretsAndCommonAttributes) {
  EXPECT_EQ(parse("kv://u:a@h:1/2|read-only").identity(), parse("kv://u:b@h:1/2|connect-timeout=5").identity());
  EXPECT_NE(parse("kv://h/a").identity(), parse("kv://h/b").identity());
  EXPECT_NE(parse("kv://h|colour=blue").identity(), parse("kv://h").identity());
  EXPECT_EQ(parse("kv://u:pw@h").identity().find("pw"), std::string::npos);
}

}  // namespace
}  // namespace kache::core
