// Unit tests for the AWS credential chain's parts: the INI files and profiles, the answers of each
// service (credential_process, STS, the SSO portal, ECS and instance metadata), the SSO cache's file
// name, expiry, and the private per-user credential cache. The services themselves are stood in for on
// loopback, and the credentials proven on a real S3 server, in tests/integration/test_aws_credentials.py.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

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
  EXPECT_FALSE(parse_aws_time("2026-13-08T01:00:00Z"));
  EXPECT_FALSE(parse_aws_time("2026-02-31T01:00:00Z"));
  EXPECT_FALSE(parse_aws_time(""));
}

TEST(AwsCredentials, TimesWithOffsetsAndUtc) {
  EXPECT_EQ(parse_aws_time("2026-12-08T03:00:00+02:00"), 1796691600);
  EXPECT_EQ(parse_aws_time("2026-12-08T03:00:00+0200"), 1796691600);
  EXPECT_EQ(parse_aws_time("2026-12-07T20:30:00-04:30"), 1796691600);
  EXPECT_EQ(parse_aws_time("2026-12-07T20:30:00.5-0430"), 1796691600);
  EXPECT_EQ(parse_aws_time("2026-12-08T01:00:00UTC"), 1796691600);  // old aws-cli SSO caches
  EXPECT_FALSE(parse_aws_time("2026-12-08T01:00:00+2:00"));
  EXPECT_FALSE(parse_aws_time("2026-12-08T01:00:00+02:0"));
  EXPECT_FALSE(parse_aws_time("2026-12-08T01:00:00+24:00"));
  EXPECT_FALSE(parse_aws_time("2026-12-08T01:00:00 UTC"));
  EXPECT_FALSE(parse_aws_time("2026-12-08T01:00:00+02:00x"));
}

TEST(AwsCredentials, IniSectionsAsBotocoreReadsThem) {
  const AwsIni config = parse_aws_ini(
      "[profile default]\nRegion = eu-west-3\n"
      "[profile  spaced ]  # a note\nregion = us-west-1\n"
      "[profile commented] ; another\nAWS_Access_Key_ID = AKC\naws_secret_access_key = SKC\n");
  const AwsIni none;
  EXPECT_EQ(merge_aws_profile(config, none, "default").setting("region"), "eu-west-3");
  EXPECT_TRUE(merge_aws_profile(config, none, "default").found);
  EXPECT_EQ(merge_aws_profile(config, none, "spaced").setting("region"), "us-west-1");
  EXPECT_EQ(merge_aws_profile(config, none, "commented").setting("aws_access_key_id"), "AKC");
  // [default] and [profile default] together: both read, the latter's settings winning.
  const AwsIni both = parse_aws_ini("[default]\nregion = a-1\noutput = json\n[profile default]\nregion = b-2\n");
  EXPECT_EQ(merge_aws_profile(both, none, "default").setting("region"), "b-2");
  EXPECT_EQ(merge_aws_profile(both, none, "default").setting("output"), "json");
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
  ASSERT_EQ(::stat((dir + "/runtime/kache-aws").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/runtime/kache-aws")) {
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  // Long-term keys are never copied out of the user's own files.
  keep_aws_credentials("static", AwsCredentials{"AK", "SK", "", "profile p", std::nullopt});
  EXPECT_FALSE(cached_aws_credentials("static", now));
  // A directory others can read is not used.
  ::chmod((dir + "/runtime/kache-aws").c_str(), 0755);
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

// A loopback HTTP service for one test: answers each request (one per connection) with what `answer`
// makes of its text, and counts them.
class LoopbackService {
 public:
  using Answer = std::function<std::pair<int, std::string>(const std::string& request)>;
  explicit LoopbackService(Answer answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("loopback service");
    }
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    ::pipe2(stop_, O_CLOEXEC);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackService() {
    (void)!::write(stop_[1], "x", 1);
    thread_.join();
    ::close(listener_);
    ::close(stop_[0]);
    ::close(stop_[1]);
  }
  const std::string& url() const { return url_; }
  int calls() const { return calls_; }
  std::string last_request() {
    std::lock_guard<std::mutex> hold(mutex_);
    return last_;
  }

 private:
  void serve() {
    while (true) {
      pollfd fds[2] = {{listener_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 || fds[1].revents != 0) return;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string request;
      char buf[4096];
      std::size_t need = std::string::npos;
      while (need == std::string::npos || request.size() < need) {
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got <= 0) break;
        request.append(buf, static_cast<std::size_t>(got));
        const std::size_t end = request.find("\r\n\r\n");
        if (need == std::string::npos && end != std::string::npos) {
          std::string lower = request.substr(0, end);
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          const std::size_t at = lower.find("content-length:");
          need = end + 4 + (at == std::string::npos ? 0 : std::stoul(lower.substr(at + 15)));
        }
      }
      ++calls_;
      {
        std::lock_guard<std::mutex> hold(mutex_);
        last_ = request;
      }
      const auto [status, body] = answer_(request);
      const std::string response = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      (void)!::write(fd, response.data(), response.size());
      ::close(fd);
    }
  }
  Answer answer_;
  int listener_ = -1;
  int stop_[2] = {-1, -1};
  std::string url_;
  std::atomic<int> calls_{0};
  std::mutex mutex_;
  std::string last_;
  std::thread thread_;
};

std::string metadata_document(const std::string& key_id, const std::string& token = "T") {
  return "{\"AccessKeyId\": \"" + key_id + "\", \"SecretAccessKey\": \"S\", \"Token\": \"" + token +
         "\", \"Expiration\": \"2099-01-01T00:00:00Z\"}";
}

std::string sts_document(const std::string& key_id) {
  return "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>" + key_id +
         "</AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken>"
         "<Expiration>2099-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
         "</AssumeRoleWithWebIdentityResponse>";
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Kept credentials are another job's only with the same token: job B with another (or an invalid)
// token at the same path and role is sent to the service, which refuses it.
TEST(AwsCredentialCache, KeptPerIdentityNotPerConfiguration) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "identity");
  LoopbackService service([](const std::string& request) -> std::pair<int, std::string> {
    if (request.find("authorization: token-a") != std::string::npos ||
        request.find("Authorization: token-a") != std::string::npos) {
      return {200, metadata_document("ASIA-A")};
    }
    if (request.find("token-of-job-a") != std::string::npos) return {200, sts_document("ASIA-WEB-A")};
    return {403, "<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>"};
  });
  // The container's authorization token.
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", service.url() + "/creds");
  write_text(dir + "/ecs-token", "token-a");
  env.set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir + "/ecs-token");
  std::string why;
  auto c = find_aws_credentials(why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->access_key_id, "ASIA-A");
  write_text(dir + "/ecs-token", "token-b");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_EQ(service.calls(), 2);
  write_text(dir + "/ecs-token", "token-a");
  EXPECT_TRUE(find_aws_credentials(why)) << why;
  EXPECT_EQ(service.calls(), 2);  // job A's own are kept
  env.unset("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  env.unset("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  // The web identity token file's content.
  env.set("AWS_WEB_IDENTITY_TOKEN_FILE", dir + "/jwt");
  env.set("AWS_ROLE_ARN", "arn:aws:iam::1:role/ci");
  env.set("AWS_ENDPOINT_URL_STS", service.url());
  write_text(dir + "/jwt", "token-of-job-a");
  c = find_aws_credentials(why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->access_key_id, "ASIA-WEB-A");
  // POSTed as a form, the token in the body, never in the URL.
  const std::string sent = service.last_request();
  EXPECT_EQ(sent.rfind("POST / HTTP/1.1\r\n", 0), 0u) << sent.substr(0, sent.find('\n'));
  EXPECT_NE(sent.find("application/x-www-form-urlencoded"), std::string::npos);
  EXPECT_NE(sent.find("\r\n\r\nAction=AssumeRoleWithWebIdentity&"), std::string::npos);
  write_text(dir + "/jwt", "token-of-job-b");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("STS refused"), std::string::npos) << why;
  EXPECT_EQ(service.calls(), 4);
}

// The SSO access token is part of the key too.
TEST(AwsCredentialCache, SsoKeptPerAccessToken) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "sso-identity");
  LoopbackService service([](const std::string& request) -> std::pair<int, std::string> {
    if (request.find("sso-token-a") != std::string::npos) {
      return {200, R"({"roleCredentials": {"accessKeyId": "ASIA-SSO", "secretAccessKey": "S",
                       "sessionToken": "T", "expiration": 4070908800000}})"};
    }
    return {401, "{}"};
  });
  write_text(dir + "/config", "[profile dev]\nsso_session = corp\nsso_account_id = 1\nsso_role_name = R\n"
                              "[sso-session corp]\nsso_start_url = https://x/start\nsso_region = eu-west-1\n");
  std::filesystem::create_directories(dir + "/.aws/sso/cache");
  const std::string cache = dir + "/.aws/sso/cache/" + sso_cache_file_name("corp");
  write_text(cache, R"({"accessToken": "sso-token-a", "expiresAt": "2099-01-01T00:00:00Z"})");
  env.set("AWS_PROFILE", "dev");
  env.set("AWS_ENDPOINT_URL_SSO", service.url());
  std::string why;
  ASSERT_TRUE(find_aws_credentials(why)) << why;
  write_text(cache, R"({"accessToken": "sso-token-b", "expiresAt": "2099-01-01T00:00:00Z"})");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("refused the token of profile dev"), std::string::npos) << why;
  EXPECT_EQ(service.calls(), 2);
}

// A credential_process that writes forever is stopped at 64 KiB, not read until the time limit.
TEST(AwsCredentials, CredentialProcessThatWritesForeverIsStopped) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "forever");
  write_text(dir + "/config", "[profile yes]\ncredential_process = /usr/bin/yes\n");
  env.set("AWS_PROFILE", "yes");
  std::string why;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("printed more than 64 KiB"), std::string::npos) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// The helper reads /dev/null, never the compile's stdin.
TEST(AwsCredentials, CredentialProcessStdinIsDevNull) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "stdin");
  write_text(dir + "/helper.sh",
             "#!/bin/sh\n[ /dev/stdin -ef /dev/null ] || exit 3\n"
             "echo '{\"Version\": 1, \"AccessKeyId\": \"AKIN\", \"SecretAccessKey\": \"SKIN\"}'\n");
  ::chmod((dir + "/helper.sh").c_str(), 0755);
  write_text(dir + "/config", "[profile in]\ncredential_process = " + dir + "/helper.sh\n");
  env.set("AWS_PROFILE", "in");
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const int saved = ::dup(0);
  ::dup2(p[0], 0);
  std::string why;
  const auto c = find_aws_credentials(why);
  ::dup2(saved, 0);
  ::close(saved);
  ::close(p[0]);
  ::close(p[1]);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(c->access_key_id, "AKIN");
}

// role_arn with source_profile or credential_source is a reason, never a fall-through to the
// container's or the instance's identity.
TEST(AwsCredentials, AssumedRoleProfilesStopTheChain) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "assume");
  LoopbackService service([](const std::string&) -> std::pair<int, std::string> {
    return {200, metadata_document("ASIA-CONTAINER")};
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", service.url() + "/creds");
  write_text(dir + "/config",
             "[profile chained]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n"
             "[profile base]\naws_access_key_id = AKB\naws_secret_access_key = SKB\n"
             "[profile sourced]\nrole_arn = arn:aws:iam::1:role/r\ncredential_source = Ec2InstanceMetadata\n");
  std::string why;
  env.set("AWS_PROFILE", "chained");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("profile chained uses role_arn with source_profile, which kache does not support"),
            std::string::npos)
      << why;
  env.set("AWS_PROFILE", "sourced");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("profile sourced uses role_arn with credential_source"), std::string::npos) << why;
  EXPECT_EQ(service.calls(), 0);
}

// A value that could end a header and add another is refused, the reason naming the source only.
TEST(AwsCredentials, UnprintableCredentialsAreRefusedNamingTheSource) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "unprintable");
  std::string why;
  env.set("AWS_ACCESS_KEY_ID", "AKENV");
  env.set("AWS_SECRET_ACCESS_KEY", "SKENV");
  env.set("AWS_SESSION_TOKEN", "tok\r\nx-evil: 1");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"), std::string::npos) << why;
  EXPECT_EQ(why.find("evil"), std::string::npos) << why;
  env.unset("AWS_ACCESS_KEY_ID");
  env.unset("AWS_SECRET_ACCESS_KEY");
  env.unset("AWS_SESSION_TOKEN");
  write_text(dir + "/config",
             "[profile proc]\ncredential_process = /bin/echo '{\"Version\": 1, \"AccessKeyId\": "
             "\"AK\\r\\nx-evil: 1\", \"SecretAccessKey\": \"SK\"}'\n"
             "[profile keys]\naws_access_key_id = AK\x01x\naws_secret_access_key = SK\n");
  env.set("AWS_PROFILE", "proc");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("credential_process of profile proc"), std::string::npos) << why;
  EXPECT_EQ(why.find("evil"), std::string::npos) << why;
  env.set("AWS_PROFILE", "keys");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("profile keys"), std::string::npos) << why;
  env.unset("AWS_PROFILE");
  LoopbackService service([](const std::string&) -> std::pair<int, std::string> {
    return {200, metadata_document("ASIA", "T\\r\\nx-evil: 1")};
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", service.url() + "/creds");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("container credentials"), std::string::npos) << why;
  EXPECT_EQ(why.find("evil"), std::string::npos) << why;
}

// A region is a name, never a host part: AWS_REGION=x.evil.com:443/ would send the request elsewhere.
TEST(AwsCredentials, RegionFromTheEnvironmentIsValidated) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "region");
  env.set("AWS_ACCESS_KEY_ID", "AKENV");
  env.set("AWS_SECRET_ACCESS_KEY", "SKENV");
  std::string why;
  env.set("AWS_REGION", "x.evil.com:443/");
  EXPECT_FALSE(aws_region_from_environment());
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("AWS_REGION is not a region name"), std::string::npos) << why;
  env.unset("AWS_REGION");
  env.set("AWS_DEFAULT_REGION", "eu west");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("AWS_DEFAULT_REGION"), std::string::npos) << why;
  env.unset("AWS_DEFAULT_REGION");
  write_text(dir + "/config", "[default]\nregion = evil.com#\n");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("region of profile default"), std::string::npos) << why;
  write_text(dir + "/config", "[default]\nregion = eu-west-1\n");
  EXPECT_TRUE(find_aws_credentials(why)) << why;
  // The SSO portal's host is named by sso_region: the bearer token must not go elsewhere.
  env.unset("AWS_ACCESS_KEY_ID");
  env.unset("AWS_SECRET_ACCESS_KEY");
  write_text(dir + "/config", "[profile dev]\nsso_start_url = https://x/start\nsso_region = evil.com:443/x\n"
                              "sso_account_id = 1\nsso_role_name = R\n");
  env.set("AWS_PROFILE", "dev");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("the sso_region of profile dev is not a region name"), std::string::npos) << why;
}

// One of the two keys alone is a mistake that stops the chain (botocore's PartialCredentialsError).
TEST(AwsCredentials, OneEnvironmentKeyAloneStopsTheChain) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "partial");
  write_text(dir + "/config", "[default]\naws_access_key_id = AKP\naws_secret_access_key = SKP\n");
  std::string why;
  env.set("AWS_ACCESS_KEY_ID", "AKENV");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY"), std::string::npos) << why;
  env.unset("AWS_ACCESS_KEY_ID");
  env.set("AWS_SECRET_ACCESS_KEY", "SKENV");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID"), std::string::npos) << why;
  env.unset("AWS_SECRET_ACCESS_KEY");
  EXPECT_TRUE(find_aws_credentials(why)) << why;
}

// Without a private XDG_RUNTIME_DIR the credentials go to ~/.cache/kache-aws, outside kache's default
// cache dir (~/.cache/kache, which may be group-shared); a planted link or a directory others may
// write is not used, and the credentials are then fetched but not kept.
TEST(AwsCredentialCache, PrivateDirectoryOutsideTheCacheDir) {
  ScopedEnv env;
  const std::string dir = isolated_chain(env, "where");
  env.unset("XDG_RUNTIME_DIR");
  const std::time_t now = std::time(nullptr);
  const AwsCredentials c{"ASIAW", "SKW", "TW", "s", now + 3600};
  keep_aws_credentials("k", c);
  EXPECT_TRUE(cached_aws_credentials("k", now));
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/.cache/kache-aws"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/.cache/kache"));
  // An XDG_RUNTIME_DIR others may enter is not used.
  ::chmod((dir + "/runtime").c_str(), 0755);
  env.set("XDG_RUNTIME_DIR", dir + "/runtime");
  EXPECT_TRUE(cached_aws_credentials("k", now));
  EXPECT_FALSE(std::filesystem::exists(dir + "/runtime/kache-aws"));
  env.unset("XDG_RUNTIME_DIR");
  int calls = 0;
  const auto fetch = [&]() -> std::optional<AwsCredentials> {
    ++calls;
    return c;
  };
  // A planted link to a private directory elsewhere.
  std::filesystem::remove_all(dir + "/.cache/kache-aws");
  std::filesystem::create_directories(dir + "/elsewhere");
  ::chmod((dir + "/elsewhere").c_str(), 0700);
  std::filesystem::create_directory_symlink(dir + "/elsewhere", dir + "/.cache/kache-aws");
  EXPECT_TRUE(cached_or_fetched("k", fetch));
  EXPECT_TRUE(cached_or_fetched("k", fetch));
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/elsewhere"));
  // A directory its group may write.
  std::filesystem::remove(dir + "/.cache/kache-aws");
  std::filesystem::create_directories(dir + "/.cache/kache-aws");
  ::chmod((dir + "/.cache/kache-aws").c_str(), 0770);
  EXPECT_TRUE(cached_or_fetched("k", fetch));
  EXPECT_TRUE(cached_or_fetched("k", fetch));
  EXPECT_EQ(calls, 4);
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/.cache/kache-aws"));
#ifndef KACHE_TEST_WITHOUT_FIX
  // Never below the configured cache dir.
  ::chmod((dir + "/.cache/kache-aws").c_str(), 0700);
  set_aws_credential_cache_exclusion(dir + "/.cache");
  EXPECT_EQ(aws_credential_directory_path(), "");
  EXPECT_TRUE(cached_or_fetched("k", fetch));
  EXPECT_EQ(calls, 5);
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/.cache/kache-aws"));
  set_aws_credential_cache_exclusion(dir + "/cache");
  EXPECT_EQ(aws_credential_directory_path(), dir + "/.cache/kache-aws");
  set_aws_credential_cache_exclusion("");
#endif
}

// Parallel compiles: one fetches, the others wait for what it keeps.
TEST(AwsCredentialCache, ParallelFetchesAskOnce) {
  ScopedEnv env;
  isolated_chain(env, "stampede");
  std::atomic<int> calls{0}, entered{0};
  std::mutex mutex;
  std::condition_variable all_in;
  const std::time_t now = std::time(nullptr);
  const auto fetch = [&]() -> std::optional<AwsCredentials> {
    ++calls;
    std::unique_lock<std::mutex> hold(mutex);
    all_in.wait_for(hold, std::chrono::seconds(5), [&] { return entered == 8; });
    return AwsCredentials{"ASIAP", "SKP", "TP", "s", now + 3600};
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      {
        std::lock_guard<std::mutex> hold(mutex);
        ++entered;
      }
      all_in.notify_all();
      EXPECT_TRUE(cached_or_fetched("parallel", fetch));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace kache::storage::remote
