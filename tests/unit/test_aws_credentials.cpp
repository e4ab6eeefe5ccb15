// Unit tests for the AWS credential chain's parts: the INI files and profiles, the answers of each
// service (credential_process, STS, the SSO portal, ECS and instance metadata), the SSO cache's file
// name, expiry, and the private per-user credential cache. The services themselves are stood in for on
// loopback, and the credentials proven on a real S3 server, in tests/integration/test_aws_credentials.py.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "storage/remote/aws_credential_cache.hpp"
#include "storage/remote/aws_credential_sources.hpp"
#include "storage/remote/aws_credentials.hpp"

namespace kache::storage::remote {
namespace {

// Sets environment variables for one test and restores them after it.
class ScopedEnv {
 public:
  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  void remember(const char* name) {
    for (const auto& [n, v] : saved_) {
      if (n == name) return;
    }
    const char* value = std::getenv(name);
    saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A chain with nothing configured: no keys, no profile files, no web identity, no container, no
// instance metadata, and a private credential cache of the test's own.
std::string isolated_chain(ScopedEnv& env, const std::string& name) {
  const std::string dir = ::testing::TempDir() + "kache-aws-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/runtime");
  ::chmod((dir + "/runtime").c_str(), 0700);
  for (const char* v :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_REGION",
        "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"}) {
    env.unset(v);
  }
  env.set("AWS_SHARED_CREDENTIALS_FILE", dir + "/credentials");
  env.set("AWS_CONFIG_FILE", dir + "/config");
  env.set("AWS_EC2_METADATA_DISABLED", "true");
  env.set("XDG_RUNTIME_DIR", dir + "/runtime");
  env.set("HOME", dir);
  return dir;
}

TEST(AwsCredentials, TimesAsTheServicesWriteThem) {
  EXPECT_EQ(parse_aws_time("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_aws_time("2026-12-08T01:00:00Z"), 1796691600);
  EXPECT_EQ(parse_aws_time("2026-12-08T01:00:00.123Z"), 1796691600);
  EXPECT_EQ(parse_aws_time("2026-12-08T01:00:00+00:00"), 1796691600);
  EXPECT_FALSE(parse_aws_time("2026-12-08 01:00:00"));
  EXPECT_FALSE(parse_aws_time("2026-12-08T01:00:00+02:00"));
  EXPECT_FALSE(parse_aws_time("2026-13-08T01:00:00Z"));
  EXPECT_FALSE(parse_aws_time("2026-02-31T01:00:00Z"));
  EXPECT_FALSE(parse_aws_time(""));
}

TEST(AwsCredentials, RefreshedFiveMinutesBeforeExpiry) {
  AwsCredentials c{"AK", "SK", "", "", std::nullopt};
  EXPECT_FALSE(needs_refresh(c, 1'000'000));  // long-term keys never expire
  c.expiration = 1000 + kAwsRefreshMarginS + 1;
  EXPECT_FALSE(needs_refresh(c, 1000));
  c.expiration = 1000 + kAwsRefreshMarginS;
  EXPECT_TRUE(needs_refresh(c, 1000));
  c.expiration = 1000 + 120;  // two minutes ahead: fetched anew
  EXPECT_TRUE(needs_refresh(c, 1000));
}

TEST(AwsCredentials, ProfileFromConfigAndCredentialsFiles) {
  const AwsIni config = parse_aws_ini(
      "[default]\nregion = eu-west-1\n"
      "[profile ci]\nregion=us-west-2\ncredential_process = /bin/helper --json\ns3 =\n  max_concurrent_requests = 20\n"
      "[profile sso]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Dev\n"
      "[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = eu-central-1\n"
      "[ci]\nregion = ignored-in-the-config-file\n");
  const AwsIni credentials = parse_aws_ini("[ci]\naws_access_key_id = AKCI\naws_secret_access_key = SKCI\n");
  const AwsProfile ci = merge_aws_profile(config, credentials, "ci");
  EXPECT_TRUE(ci.found);
  EXPECT_EQ(ci.setting("region"), "us-west-2");
  EXPECT_EQ(ci.setting("credential_process"), "/bin/helper --json");
  EXPECT_EQ(ci.setting("aws_access_key_id"), "AKCI");
  EXPECT_EQ(ci.setting("max_concurrent_requests"), "");  // nested settings are not the profile's own
  EXPECT_EQ(merge_aws_profile(config, credentials, "default").setting("region"), "eu-west-1");
  const AwsProfile sso = merge_aws_profile(config, credentials, "sso");
  EXPECT_EQ(sso.sso_session.at("sso_region"), "eu-central-1");
  EXPECT_FALSE(merge_aws_profile(config, credentials, "absent").found);
}

TEST(AwsCredentials, CredentialProcessOutput) {
  std::string why;
  auto c = parse_credential_process_output(
      R"({"Version": 1, "AccessKeyId": "AKP", "SecretAccessKey": "SKP", "SessionToken": "TP",
          "Expiration": "2026-12-08T01:00:00Z"})",
      why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->access_key_id, "AKP");
  EXPECT_EQ(c->session_token, "TP");
  EXPECT_EQ(c->expiration, 1796691600);
  c = parse_credential_process_output(R"({"Version": 1, "AccessKeyId": "AKP", "SecretAccessKey": "SKP"})", why);
  ASSERT_TRUE(c) << why;
  EXPECT_FALSE(c->expiration);
  EXPECT_FALSE(parse_credential_process_output(R"({"AccessKeyId": "AKP", "SecretAccessKey": "SKP"})", why));
  EXPECT_NE(why.find("Version"), std::string::npos) << why;
  EXPECT_FALSE(parse_credential_process_output(R"({"Version": 1, "AccessKeyId": "AKP"})", why));
  EXPECT_FALSE(parse_credential_process_output(
      R"({"Version": 1, "AccessKeyId": "AKP", "SecretAccessKey": "SKP", "Expiration": "soon"})", why));
  EXPECT_FALSE(parse_credential_process_output("not json", why));
  EXPECT_EQ(why.find("SKP"), std::string::npos) << why;
}

TEST(AwsCredentials, StsAnswer) {
  const std::string xml =
      "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
      "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAX</AccessKeyId>"
      "<SecretAccessKey>SKX</SecretAccessKey><SessionToken>TX</SessionToken>"
      "<Expiration>2026-12-08T01:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
      "</AssumeRoleWithWebIdentityResponse>";
  std::string why;
  const auto c = parse_sts_credentials(xml, why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->access_key_id, "ASIAX");
  EXPECT_EQ(c->secret_access_key, "SKX");
  EXPECT_EQ(c->session_token, "TX");
  EXPECT_EQ(c->expiration, 1796691600);
  EXPECT_FALSE(parse_sts_credentials("<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>", why));
  EXPECT_FALSE(parse_sts_credentials(
      "<Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey></Credentials>", why));
}

TEST(AwsCredentials, SsoPortalAnswer) {
  std::string why;
  const auto c = parse_sso_role_credentials(
      R"({"roleCredentials": {"accessKeyId": "ASIAS", "secretAccessKey": "SKS", "sessionToken": "TS",
          "expiration": 1796691600123}})",
      why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->access_key_id, "ASIAS");
  EXPECT_EQ(c->expiration, 1796691600);  // milliseconds in the answer
  EXPECT_FALSE(parse_sso_role_credentials(R"({"roleCredentials": {"accessKeyId": "A", "secretAccessKey": "S"}})", why));
  EXPECT_FALSE(parse_sso_role_credentials(R"({})", why));
}

TEST(AwsCredentials, ContainerAndInstanceMetadataDocument) {
  std::string why;
  const auto c = parse_metadata_credentials(
      R"({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "ASIAM", "SecretAccessKey": "SKM",
          "Token": "TM", "Expiration": "2026-12-08T01:00:00Z"})",
      why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->session_token, "TM");
  EXPECT_EQ(c->expiration, 1796691600);
  EXPECT_FALSE(parse_metadata_credentials(R"({"AccessKeyId": "ASIAM"})", why));
}

TEST(AwsCredentials, SsoCacheFileIsTheSha1OfTheSessionName) {
  EXPECT_EQ(sso_cache_file_name("my-sso"), "0ad374308c5a4e22f723adf10145eafad7c4031c.json");
  EXPECT_EQ(sso_cache_file_name("https://my-sso-portal.awsapps.com/start"),
            "c7aaaf71fcc8777ae2475525ed049d39fe16c484.json");
}

TEST(AwsCredentials, ContainerFullUriOnlyToLoopbackOrTheContainerHosts) {
  EXPECT_TRUE(container_url_allowed("http://127.0.0.1:8080/creds"));
  EXPECT_TRUE(container_url_allowed("http://localhost/creds"));
  EXPECT_TRUE(container_url_allowed("http://169.254.170.2/v2/credentials/x"));
  EXPECT_TRUE(container_url_allowed("http://169.254.170.23/v1/credentials"));
  EXPECT_TRUE(container_url_allowed("http://[fd00:ec2::23]/v1/credentials"));
  EXPECT_TRUE(container_url_allowed("https://creds.example.com/x"));
  EXPECT_FALSE(container_url_allowed("http://creds.example.com/x"));
  EXPECT_FALSE(container_url_allowed("http://127.0.0.1.example.com/x"));
  EXPECT_FALSE(container_url_allowed("ftp://127.0.0.1/x"));
}

TEST(AwsCredentialCache, KeptPrivatelyUntilFiveMinutesBeforeExpiry) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "cache");
  const std::time_t now = std::time(nullptr);
  AwsCredentials c{"ASIAC", "SKC", "TC", "web identity token of role r", now + 3600};
  keep_aws_credentials("key one", c);
  const auto back = cached_aws_credentials("key one", now);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->secret_access_key, "SKC");
  EXPECT_EQ(back->source, "web identity token of role r");
  EXPECT_FALSE(cached_aws_credentials("key two", now));
  EXPECT_FALSE(cached_aws_credentials("key one", now + 3600 - kAwsRefreshMarginS));
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/runtime/kache/aws").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/runtime/kache/aws")) {
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  // Long-term keys are never copied out of the user's own files.
  keep_aws_credentials("static", AwsCredentials{"AK", "SK", "", "profile p", std::nullopt});
  EXPECT_FALSE(cached_aws_credentials("static", now));
  // A directory others can read is not used.
  ::chmod((dir + "/runtime/kache/aws").c_str(), 0755);
  EXPECT_FALSE(cached_aws_credentials("key one", now));
}

TEST(AwsCredentialCache, FetchesOnlyWhenNothingGoodIsKept) {
  ScopedEnv env;
  isolated_chain(env, "fetch");
  int calls = 0;
  const auto fetch = [&](std::time_t expires) {
    return [&calls, expires]() -> std::optional<AwsCredentials> {
      ++calls;
      return AwsCredentials{"ASIAF", "SKF", "TF", "s", expires};
    };
  };
  const std::time_t now = std::time(nullptr);
  EXPECT_TRUE(cached_or_fetched("near", fetch(now + 120)));
  EXPECT_TRUE(cached_or_fetched("near", fetch(now + 3600)));  // two minutes left: fetched again
  EXPECT_TRUE(cached_or_fetched("near", fetch(now + 3600)));  // now kept
  EXPECT_EQ(calls, 2);
}

TEST(AwsCredentials, ChainOrder) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "chain");
  std::string why;
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("no AWS credentials"), std::string::npos) << why;
  std::ofstream(dir + "/config") << "[profile proc]\nregion = eu-north-1\ncredential_process = /bin/echo "
                                    "'{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": \"SKPROC\"}'\n"
                                    "[profile webid]\nweb_identity_token_file = " +
                                        dir + "/token\n";
  env.set("AWS_PROFILE", "proc");
  auto c = find_aws_credentials(why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->access_key_id, "AKPROC");
  EXPECT_EQ(c->source, "credential_process of profile proc");
  EXPECT_EQ(aws_region_from_environment(), "eu-north-1");
  env.set("AWS_REGION", "ap-south-1");
  EXPECT_EQ(aws_region_from_environment(), "ap-south-1");
  // Web identity comes before the profile; without a role it is a reason, not a fall-through.
  env.set("AWS_WEB_IDENTITY_TOKEN_FILE", dir + "/token");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("AWS_ROLE_ARN"), std::string::npos) << why;
  env.unset("AWS_WEB_IDENTITY_TOKEN_FILE");
  env.set("AWS_PROFILE", "webid");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("without role_arn"), std::string::npos) << why;
  env.set("AWS_PROFILE", "absent");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("profile absent"), std::string::npos) << why;
  // The environment's keys come before everything.
  env.set("AWS_ACCESS_KEY_ID", "AKENV");
  env.set("AWS_SECRET_ACCESS_KEY", "SKENV");
  c = find_aws_credentials(why);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->access_key_id, "AKENV");
}

// A credential_process is bounded: its output (64 KiB), and a failure is a reason naming the profile.
TEST(AwsCredentials, CredentialProcessBounds) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "process");
  std::ofstream(dir + "/config") << "[profile big]\ncredential_process = /usr/bin/head -c 70000 /dev/zero\n"
                                    "[profile failing]\ncredential_process = /bin/false\n"
                                    "[profile absent]\ncredential_process = no-such-kache-helper --json\n";
  std::string why;
  env.set("AWS_PROFILE", "big");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("more than 64 KiB"), std::string::npos) << why;
  env.set("AWS_PROFILE", "failing");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("credential_process of profile failing failed (exit status 1)"), std::string::npos) << why;
  env.set("AWS_PROFILE", "absent");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("no-such-kache-helper, which is not found in PATH"), std::string::npos) << why;
}

TEST(AwsCredentials, HeaderValuesArePrintable) {
  EXPECT_TRUE(header_safe("AQAEAFgx-token_value=="));
  EXPECT_FALSE(header_safe("token\r\nx-injected: 1"));
  EXPECT_FALSE(header_safe(std::string("a\0b", 3)));
}

TEST(AwsCredentials, ExpiredSsoTokenNamesTheLoginCommand) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "sso");
  std::ofstream(dir + "/config") << "[profile dev]\nsso_session = corp\nsso_account_id = 1\nsso_role_name = R\n"
                                    "[sso-session corp]\nsso_start_url = https://x/start\nsso_region = eu-west-1\n";
  std::filesystem::create_directories(dir + "/.aws/sso/cache");
  std::ofstream(dir + "/.aws/sso/cache/" + sso_cache_file_name("corp"))
      << R"({"accessToken": "TOKEN-SECRET", "expiresAt": "2020-01-01T00:00:00Z"})";
  env.set("AWS_PROFILE", "dev");
  std::string why;
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("run `aws sso login --profile dev`"), std::string::npos) << why;
  EXPECT_EQ(why.find("TOKEN-SECRET"), std::string::npos) << why;
}

}  // namespace
}  // namespace kache::storage::remote
