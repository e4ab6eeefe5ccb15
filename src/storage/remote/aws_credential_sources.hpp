#pragma once
// The sources of aws_credentials.hpp's chain, one file each, and what they share: the AWS CLI's INI
// files, the environment, and one bounded HTTP exchange with a credential service. Every source
// returns nullopt with `why` set (one sentence naming the source, never a key or token).
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/remote/aws_credentials.hpp"
#include "storage/remote/http_exchange.hpp"

namespace kache::storage::remote {

// The value of an environment variable, "" when unset.
std::string aws_env(const char* name);

// An AWS CLI INI file: section name ("default", "profile ci", "sso-session corp") → key → value.
using AwsIniSection = std::map<std::string, std::string, std::less<>>;
using AwsIni = std::map<std::string, AwsIniSection, std::less<>>;
AwsIni parse_aws_ini(std::string_view text);

// One profile's settings: the config file's "[profile NAME]" ("[default]" for default) under the
// credentials file's "[NAME]" (the credentials file wins, as in the SDKs), and the "[sso-session S]"
// its sso_session names.
struct AwsProfile {
  std::string name;
  AwsIniSection settings;
  AwsIniSection sso_session;
  bool found = false;     // in either file
  std::string keys_file;  // the file its aws_access_key_id came from, for messages
  std::string credentials_file, config_file;
  std::string setting(std::string_view key) const;
};
AwsProfile merge_aws_profile(const AwsIni& config, const AwsIni& credentials, std::string_view name);
// The profile AWS_PROFILE names ("default" without it), from the files the environment names.
AwsProfile load_aws_profile();

// One request to a credential service at `url` (http[s]://HOST[:PORT][/PATH][?QUERY]); throws
// RemoteError when it cannot be sent or answered within connect_ms / total_ms.
struct AwsServiceRequest {
  HttpMethod method = HttpMethod::get;
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // POST's
  int connect_ms = 1000;
  int total_ms = 5000;
};
HttpResponse aws_service_exchange(const AwsServiceRequest& request);
// Several requests on one connection to the same server (IMDSv2's token, then its two reads): calls
// `ask` with a function that performs one request of a path on `base`.
using AwsAsk = std::function<HttpResponse(HttpMethod, std::string_view path,
                                          std::vector<std::pair<std::string, std::string>> headers)>;
void with_aws_service(const std::string& base, int connect_ms, int total_ms,
                      const std::function<void(const AwsAsk&)>& use);

// Whether a value may go into a request header: printable ASCII only, so a token read from a file or
// an answer cannot end the header and add its own.
bool header_safe(std::string_view value);

// The service endpoint the environment sets for `service_variable` (AWS_ENDPOINT_URL_STS), else
// AWS_ENDPOINT_URL, else "".
std::string aws_endpoint_override(const char* service_variable);

std::optional<AwsCredentials> credentials_from_web_identity(const std::string& token_file, const std::string& role_arn,
                                                            const std::string& session_name, const std::string& region,
                                                            std::string& why);
std::optional<AwsCredentials> credentials_from_process(const std::string& command, const std::string& profile,
                                                       std::string& why);
std::optional<AwsCredentials> credentials_from_sso(const AwsProfile& profile, std::string& why);
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI; nullopt with `why` empty when neither is set.
std::optional<AwsCredentials> credentials_from_container(std::string& why);
std::optional<AwsCredentials> credentials_from_instance_metadata(std::string& why);

// ~/.aws/sso/cache's file name for an sso-session's name (or a legacy profile's sso_start_url): the
// SHA-1 of it in lower-case hex, ".json" after it.
std::string sso_cache_file_name(std::string_view session_or_start_url);
// Whether AWS_CONTAINER_CREDENTIALS_FULL_URI may name this URL: https anywhere, http only to loopback,
// ECS's 169.254.170.2 or EKS's 169.254.170.23 / fd00:ec2::23 (the SDKs' rule: a token is sent there).
bool container_url_allowed(std::string_view url);

}  // namespace kache::storage::remote
