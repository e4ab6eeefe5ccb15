// Unit tests for the S3 remote: the SigV4 signer against AWS's published examples, the s3:// URL, the
// request paths of both addressing styles, the credentials file, the error body and the Date header.
// The store itself is tested against a real S3 server (Swift's s3api) in tests/integration/test_s3.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/remote_url.hpp"
#include "storage/remote/aws_credentials.hpp"
#include "storage/remote/s3_storage.hpp"
#include "storage/remote/schemes.hpp"
#include "storage/remote/sigv4.hpp"

namespace kache::storage::remote {
namespace {

const std::string kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// AWS S3 API Reference, "Signature Calculations for the Authorization Header: Transferring Payload in a
// Single Chunk", Example: GET Object (the first 10 bytes of examplebucket/test.txt).
TEST(SigV4, AwsS3GetObjectExample) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/test.txt";
  r.amz_date = "20130524T000000Z";
  r.payload_sha256 = kEmptySha256;
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", kEmptySha256},
               {"x-amz-date", "20130524T000000Z"}};
  const SigV4Signature s =
      sign_v4(r, "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3");
  EXPECT_EQ(
      s.canonical_request,
      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\nx-amz-content-sha256:" + kEmptySha256 +
          "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha256);
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

// AWS's Signature Version 4 test suite, get-vanilla (service "service", no payload header).
TEST(SigV4, TestSuiteGetVanilla) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/";
  r.amz_date = "20150830T123600Z";
  r.payload_sha256 = kEmptySha256;
  r.headers = {{"X-Amz-Date", "20150830T123600Z"}, {"Host", "example.amazonaws.com"}};
  const SigV4Signature s =
      sign_v4(r, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "service");
  EXPECT_EQ(s.canonical_request,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + kEmptySha256);
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(s.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4, HeaderValuesAreTrimmedAndRepeatedOnesJoined) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/";
  r.amz_date = "20150830T123600Z";
  r.payload_sha256 = kEmptySha256;
  r.headers = {{"host", "h"}, {"My-Header1", "  a   b  c "}, {"my-header2", "x"}, {"MY-HEADER2", "y"}};
  const std::string c = sign_v4(r, "k", "s", "r", "s3").canonical_request;
  EXPECT_NE(c.find("my-header1:a b c\nmy-header2:x,y\n\nhost;my-header1;my-header2\n"), std::string::npos) << c;
}

TEST(SigV4, Dates) {
  EXPECT_EQ(amz_date(1369353600), "20130524T000000Z");
  EXPECT_EQ(parse_http_date("Fri, 24 May 2013 00:00:00 GMT"), std::optional<std::time_t>(1369353600));
  EXPECT_EQ(parse_http_date("Sun, 06 Dec 2026 04:17:06 GMT"), std::optional<std::time_t>(1796530626));
  for (const char* bad :
       {"", "Fri, 24 Mey 2013 00:00:00 GMT", "Fri, 24 May 2013 00:00:00 UTC", "Fri, 24 May 2013 24:00:00 GMT",
        "Friday, 24-May-13 00:00:00 GMT", "Fri, 2x May 2013 00:00:00 GMT"}) {
    EXPECT_EQ(parse_http_date(bad), std::nullopt) << bad;
  }
}

TEST(S3Url, FormsAndAttributes) {
  const auto u = core::parse_remote_url(
      "s3://team-cache/kache/ci|region=eu-central-1|endpoint=http://127.0.0.1:8080|addressing=virtual", {},
      remote_schemes());
  EXPECT_EQ(u.scheme, "s3");
  EXPECT_EQ(u.host, "team-cache");
  EXPECT_EQ(u.path, "/kache/ci");
  EXPECT_EQ(s3_region(u), "eu-central-1");
  EXPECT_EQ(u.attribute("endpoint"), "http://127.0.0.1:8080");
  EXPECT_EQ(s3_addressing(u), S3Addressing::virtual_hosted);
  EXPECT_EQ(core::parse_remote_url(u.to_string(true), {}, remote_schemes()), u);
  EXPECT_EQ(u.redacted(), u.to_string(true));  // no secret in an s3 URL
  EXPECT_EQ(s3_region(core::parse_remote_url("s3://bkt", {}, remote_schemes())), "us-east-1");
  try {
    core::parse_remote_url("s3://bucket|endpoint=http://user:hunter2@h", {}, remote_schemes());
    ADD_FAILURE() << "an endpoint with credentials parsed";
  } catch (const core::RemoteUrlError& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
  for (const char* bad : {"s3://B", "s3://ab", "s3://bucket|endpoint=ftp://h", "s3://bucket|endpoint=http://u:p@h",
                          "s3://bucket|endpoint=http://h/path", "s3://bucket|region=EU", "s3://bucket|addressing=x",
                          "redis://h|region=x", "s3://user:pw@bucket"}) {
    EXPECT_THROW(core::parse_remote_url(bad, {}, remote_schemes()), core::RemoteUrlError) << bad;
  }
}

// The rules' order, whatever the written one; an endpoint= is redacted as a URL is, region= shown.
TEST(S3Url, PrintedOrderAndRedaction) {
  const core::RemoteSchemes schemes = remote_schemes();
  EXPECT_EQ(core::parse_remote_url("s3://bkt|addressing=path|endpoint=http://h:9|region=x", {}, schemes).redacted(),
            "s3://bkt|region=x|endpoint=http://h:9|addressing=path");
  EXPECT_EQ(core::redact_unparsed("s3://bkt|endpoint=http://u:pw@h|region=x|secret=y", schemes),
            "s3://bkt|endpoint=http://***@h|region=x|secret=***");
}

TEST(S3Url, PathAndVirtualHostedAddressing) {
  const auto aws = core::parse_remote_url("s3://bkt/p+q|region=eu-west-3", {}, remote_schemes());
  S3Storage virtual_hosted(aws, "", UINT64_MAX, false);
  EXPECT_EQ(virtual_hosted.server().host, "bkt.s3.eu-west-3.amazonaws.com");
  EXPECT_EQ(virtual_hosted.server().scheme, "https");
  EXPECT_EQ(virtual_hosted.object_path("abc"), "/p%2Bq/abc");
  S3Storage path(core::parse_remote_url("s3://bkt|addressing=path", {}, remote_schemes()), "", UINT64_MAX, false);
  EXPECT_EQ(path.server().host, "s3.us-east-1.amazonaws.com");
  EXPECT_EQ(path.object_path("abc"), "/bkt/abc");
  S3Storage endpoint(
      core::parse_remote_url("s3://bkt/x|endpoint=http://127.0.0.1:9|operation-timeout=5", {}, remote_schemes()), "",
      UINT64_MAX, false);
  EXPECT_EQ(endpoint.server().host_port(), "127.0.0.1:9");
  EXPECT_EQ(endpoint.server().operation_timeout_ms, 5);
  EXPECT_EQ(endpoint.object_path("abc"), "/bkt/x/abc");
}

TEST(S3Errors, CodeAndMessage) {
  const auto e = parse_s3_error(
      "<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The request "
      "signature we calculated does not match\x01</Message><RequestId>x</RequestId></Error>");
  EXPECT_EQ(e.code, "SignatureDoesNotMatch");
  EXPECT_EQ(e.message, "The request signature we calculated does not match");
  EXPECT_EQ(parse_s3_error("<Code>unterminated").code, "");
  EXPECT_EQ(parse_s3_error("").message, "");
  EXPECT_EQ(parse_s3_error("<Code>" + std::string(1000, 'a') + "</Code>").code.size(), 200u);
}

TEST(AwsCredentials, ProfilesOfTheSharedFile) {
  const std::string text =
      "# comment\n[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key=SECRETDEFAULT\r\n\n"
      "[ ci ]\n; another\naws_access_key_id=AKCI\naws_secret_access_key = SECRETCI \naws_session_token = TOK\n"
      "[broken]\naws_access_key_id=only\n";
  const auto d = parse_credentials_file(text, "default");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->access_key_id, "AKDEFAULT");
  EXPECT_EQ(d->secret_access_key, "SECRETDEFAULT");
  const auto ci = parse_credentials_file(text, "ci");
  ASSERT_TRUE(ci);
  EXPECT_EQ(ci->secret_access_key, "SECRETCI");
  EXPECT_EQ(ci->session_token, "TOK");
  EXPECT_FALSE(parse_credentials_file(text, "broken"));
  EXPECT_FALSE(parse_credentials_file(text, "absent"));
}

// The environment first, then the profile of the file AWS_SHARED_CREDENTIALS_FILE names; a message
// names the source, never a key.
TEST(AwsCredentials, EnvironmentThenProfile) {
  const std::string file = ::testing::TempDir() + "kache-aws-credentials";
  std::ofstream(file) << "[team]\naws_access_key_id=AKFILE\naws_secret_access_key=SECRETFILE\n";
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", file.c_str(), 1);
  ::setenv("AWS_PROFILE", "team", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "SECRETENV", 1);
  std::string why;
  auto c = find_aws_credentials(why);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->access_key_id, "AKENV");
  // One key alone stops the chain (botocore's PartialCredentialsError), never falls through.
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY"), std::string::npos) << why;
  ::unsetenv("AWS_ACCESS_KEY_ID");
  c = find_aws_credentials(why);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->secret_access_key, "SECRETFILE");
  EXPECT_EQ(c->source, "profile team of " + file);
  ::setenv("AWS_PROFILE", "other", 1);
  EXPECT_FALSE(find_aws_credentials(why));
  EXPECT_NE(why.find("profile other, but neither " + file), std::string::npos) << why;
  EXPECT_EQ(why.find("SECRET"), std::string::npos) << why;
  for (const char* v : {"AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE", "AWS_ACCESS_KEY_ID"}) ::unsetenv(v);
  std::remove(file.c_str());
}

TEST(S3Doctor, ClockSkewRows) {
  using Level = core::DoctorStatus;
  EXPECT_EQ(clock_skew_finding("s3://b", 1000, 1030).status, Level::ok);
  EXPECT_EQ(clock_skew_finding("s3://b", 1000, 1000 + 600).status, Level::warn);
  const core::DoctorRow behind = clock_skew_finding("s3://b", 1000 + 3600, 1000);
  EXPECT_EQ(behind.status, Level::fail);
  EXPECT_NE(behind.value.find("3600 s behind"), std::string::npos) << behind.value;
  EXPECT_NE(behind.message.find("15 minutes"), std::string::npos) << behind.message;
  EXPECT_EQ(clock_skew_finding("s3://b", std::nullopt, 1000).status, Level::warn);
}

}  // namespace
}  // namespace kache::storage::remote
