#pragma once
// Where an S3 remote's credentials come from: the AWS SDKs' default chain, in its order, the first
// source that is configured deciding (a configured source that fails ends the chain with its reason,
// as the SDKs do, rather than falling through to a surprise identity):
//   1. the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN);
//   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (AWS_ROLE_SESSION_NAME), exchanged
//      at STS by AssumeRoleWithWebIdentity (aws_web_identity.cpp);
//   3. the profile AWS_PROFILE names ("default" without it) of the shared credentials file
//      (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials) and the config file (AWS_CONFIG_FILE,
//      ~/.aws/config): static keys, web_identity_token_file + role_arn, credential_process
//      (aws_credential_process.cpp), or SSO (aws_sso.cpp) (aws_profile.hpp);
//   4. ECS container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI
//      (aws_metadata.cpp);
//   5. EC2 instance metadata, IMDSv2 (aws_metadata.cpp), unless AWS_EC2_METADATA_DISABLED=true.
// Temporary credentials are kept in a private per-user directory until 5 minutes before they expire
// (aws_credential_cache.hpp), so each short-lived kache process does not ask the service again.
// Never in a URL, never printed: messages name the source ("AWS_ACCESS_KEY_ID", "web identity token
// of role arn:aws:iam::1:role/ci", "instance profile role R"), never keys or tokens.
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace kache::storage::remote {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;              // empty: long-term credentials
  std::string source;                     // where they came from, for messages
  std::optional<std::time_t> expiration;  // temporary credentials: when they stop working
};

// How long before their expiration temporary credentials are fetched anew (the SDKs' margin) by a new
// process, and how long before it a process stops using those it holds.
constexpr std::time_t kAwsRefreshMarginS = 5 * 60;
constexpr std::time_t kAwsInProcessMarginS = 60;

// Whether credentials are too close to their expiration to be used at `now` (never, without one).
bool needs_refresh(const AwsCredentials& credentials, std::time_t now);

// An ISO 8601 time as the AWS services and tools write it ("2026-12-08T01:00:00Z", with or without
// fractional seconds; "Z", "UTC" or an offset ±HH:MM / ±HHMM, applied); nullopt for anything else.
std::optional<std::time_t> parse_aws_time(std::string_view text);

// The profile's keys in a shared credentials file's text (INI: "[name]" sections of "key = value"
// lines, '#' and ';' comments); nullopt when the profile is absent or lacks either key.
std::optional<AwsCredentials> parse_credentials_file(std::string_view text, std::string_view profile);

// The answers of the services, each into credentials or nullopt with `why` set (one sentence, no
// secret in it). credential_process's stdout: {"Version": 1, "AccessKeyId", "SecretAccessKey",
// "SessionToken", "Expiration"}.
std::optional<AwsCredentials> parse_credential_process_output(std::string_view json, std::string& why);
// STS's XML: AssumeRoleWithWebIdentityResult/Credentials/{AccessKeyId, SecretAccessKey, SessionToken,
// Expiration}.
std::optional<AwsCredentials> parse_sts_credentials(std::string_view xml, std::string& why);
// The SSO portal's JSON: roleCredentials{accessKeyId, secretAccessKey, sessionToken, expiration (ms)}.
std::optional<AwsCredentials> parse_sso_role_credentials(std::string_view json, std::string& why);
// ECS's and EC2 instance metadata's JSON: {AccessKeyId, SecretAccessKey, Token, Expiration}.
std::optional<AwsCredentials> parse_metadata_credentials(std::string_view json, std::string& why);

// An AWS region name: lowercase letters, digits and '-' ("us-east-1"; S3-compatible servers take any
// such word, "garage"). Anything else could turn an endpoint's host name into another's.
bool valid_aws_region(std::string_view region);

// The region requests are signed for when the URL names none: AWS_REGION, AWS_DEFAULT_REGION, the
// profile's region; nullopt when none says, or when the one that says is no region name (then *why,
// when given, is one sentence naming the variable or profile).
std::optional<std::string> aws_region_from_environment(std::string* why = nullptr);

// The digest of a token (web identity, SSO, container authorization) in the keys of kept credentials:
// credentials are kept per identity, never per configuration alone.
std::string aws_token_digest(std::string_view token);

// Whether the credentials may go into request headers (printable ASCII only); else false with `why`
// naming their source, never the value.
bool printable_aws_credentials(const AwsCredentials& credentials, std::string& why);

// Resolves credentials along the chain above; nullopt with `why` set when there are none (a
// configuration mistake the doctor names). `region` is the S3 remote's, for STS's regional endpoint.
std::optional<AwsCredentials> find_aws_credentials(std::string& why, const std::string& region = "");

}  // namespace kache::storage::remote
