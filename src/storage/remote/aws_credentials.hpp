#pragma once
// Where an S3 remote's credentials come from, in the order the AWS command-line tools use (the parts
// kache supports): AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN for temporary
// credentials), else the profile AWS_PROFILE names ("default" without it) in the shared credentials file
// (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials). Never in a URL, never printed: messages name
// the source ("AWS_ACCESS_KEY_ID", "profile ci of /home/u/.aws/credentials"), not the keys.
#include <optional>
#include <string>
#include <string_view>

namespace kache::storage::remote {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: long-term credentials
  std::string source;         // where they came from, for messages
};

// The profile's keys in a shared credentials file's text (INI: "[name]" sections of "key = value"
// lines, '#' and ';' comments); nullopt when the profile is absent or lacks either key.
std::optional<AwsCredentials> parse_credentials_file(std::string_view text, std::string_view profile);

// Resolves credentials from the environment and the shared file; nullopt with `why` set when there are
// none (a configuration mistake the doctor names).
std::optional<AwsCredentials> find_aws_credentials(std::string& why);

}  // namespace kache::storage::remote
