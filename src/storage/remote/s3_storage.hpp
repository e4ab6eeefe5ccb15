#pragma once
// An S3 bucket as a store (AWS S3, or an S3-compatible server through endpoint=: MinIO, Ceph, R2, Swift's
// s3api): whole objects <prefix>/<key> by GET, PUT, DELETE and HEAD, each signed with AWS Signature
// Version 4 (sigv4.hpp) over x-amz-content-sha256 of its payload (no chunked signing), sent over the
// HTTP connection of http_connection.hpp (keep-alive, the URL's timeouts, TLS by OpenSSL). Credentials
// come from aws_credentials.hpp, read on first use.
//
// Answers: GET 200 = the value, 404 NoSuchKey = miss; PUT 2xx; DELETE 2xx or 404. 401, 403 and the
// signature's own refusals (SignatureDoesNotMatch, InvalidAccessKeyId, RequestTimeTooSkewed,
// AuthorizationHeaderMalformed) = auth; 404 NoSuchBucket and anything else = error. The error body's
// S3 code and message (parse_s3_error) go into the failure's message. One connection per process;
// not for use by two threads.
//
// Its URLs (s3_scheme, the scheme table's row): s3://BUCKET[/PREFIX], no credentials in them (they come
// from the AWS SDKs' chain, aws_credentials.hpp), no port, no shards=.
//   attributes: region=NAME (AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1)
//               | endpoint=http[s]://HOST[:PORT] (an S3-compatible server; AWS's own when absent) | addressing=path|virtual (S3Addressing; virtual for AWS, path with an
//               endpoint)
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "core/remote_url.hpp"
#include "storage/remote/aws_credentials.hpp"
#include "storage/remote/http_connection.hpp"
#include "storage/remote/http_exchange.hpp"
#include "storage/remote/remote_store.hpp"

namespace kache::storage::remote {

// An S3 error body's <Code> and <Message> (printable, bounded); empty when it has none.
struct S3Error {
  std::string code;
  std::string message;
};
S3Error parse_s3_error(std::string_view body);

extern const core::SchemeRules s3_scheme;

// How an S3 request names the bucket: in the host name (BUCKET.s3.REGION.amazonaws.com) or in the path
// (ENDPOINT/BUCKET/KEY). automatic: virtual-hosted on AWS, path-style with an endpoint= (MinIO, Ceph,
// Swift and most S3-compatible servers answer path-style on one host name).
enum class S3Addressing { automatic, path, virtual_hosted };
S3Addressing s3_addressing(const core::RemoteUrl& url);

class S3Storage final : public RemoteBackend {
 public:
  // every_remote_read_only: remote.read_only (RemoteBackend decides with the URL's own read-only).
  S3Storage(core::RemoteUrl url, std::string ca_file, std::uint64_t max_body, bool every_remote_read_only);
  ~S3Storage() override;
  S3Storage(const S3Storage&) = delete;
  S3Storage& operator=(const S3Storage&) = delete;

  std::string name() const override { return url_.redacted(); }
  std::optional<std::string> get(std::string_view key) override;
  // reachable (any answer to an unsigned HEAD of the bucket), clock-skew (the server's Date against this
  // machine's clock), authenticated (a signed GET accepted), writable (a PUT and a DELETE, or read-only).
  std::vector<core::DoctorRow> probe(std::string_view probe_key) override;

  // The request path of a key (path-style: /BUCKET/PREFIX/KEY; virtual-hosted: /PREFIX/KEY).
  std::string object_path(std::string_view key) const;
  // The HTTP server requests go to.
  const core::RemoteUrl& server() const { return server_; }

 protected:
  void write(std::string_view key, std::string_view value) override;
  void erase(std::string_view key) override;

 private:
  std::string bucket_path() const;
  // One request; signed unless `sign` is false (the doctor's reachability probe).
  HttpResponse send(HttpMethod method, const std::string& path, std::string_view body, bool sign = true);
  const AwsCredentials& credentials();
  // Throws the RemoteError an answer that is neither success nor miss means.
  [[noreturn]] void refused(const char* method, const HttpResponse& r) const;

  core::RemoteUrl url_;
  std::string region_;  // s3_region, read once: without region= it may come from the AWS config file
  core::RemoteUrl server_;
  std::string ca_file_;
  std::uint64_t max_body_;
  std::optional<AwsCredentials> credentials_;
  std::unique_ptr<HttpConnection> connection_;  // made on first use
};

// The region requests are signed for: the URL's region=, else AWS_REGION, AWS_DEFAULT_REGION or the
// profile's region, else us-east-1.
std::string s3_region(const core::RemoteUrl& url);
// The HTTP server requests go to (http or https, host, port and the URL's timeouts): the endpoint=,
// else AWS's host for the region (with the bucket in it unless addressing=path).
core::RemoteUrl s3_endpoint(const core::RemoteUrl& url);

// One sentence on the clock skew the doctor found: seconds the server's clock is ahead of this one.
core::DoctorRow clock_skew_finding(const std::string& name, std::optional<std::time_t> server_time, std::time_t local);

}  // namespace kache::storage::remote
