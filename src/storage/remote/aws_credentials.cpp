#include "storage/remote/aws_credentials.hpp"

#include <cstdlib>

#include "util/fs.hpp"

namespace kache::storage::remote {

namespace {

std::string_view strip(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::optional<AwsCredentials> parse_credentials_file(std::string_view text, std::string_view profile) {
  AwsCredentials found;
  bool in_profile = false;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = strip(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      in_profile = line.back() == ']' && strip(line.substr(1, line.size() - 2)) == profile;
      continue;
    }
    const std::size_t eq = line.find('=');
    if (!in_profile || eq == std::string_view::npos) continue;
    const std::string_view key = strip(line.substr(0, eq));
    const std::string value(strip(line.substr(eq + 1)));
    if (key == "aws_access_key_id") found.access_key_id = value;
    if (key == "aws_secret_access_key") found.secret_access_key = value;
    if (key == "aws_session_token") found.session_token = value;
  }
  if (found.access_key_id.empty() || found.secret_access_key.empty()) return std::nullopt;
  return found;
}

std::optional<AwsCredentials> find_aws_credentials(std::string& why) {
  AwsCredentials from_env{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN"),
                          "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"};
  if (!from_env.access_key_id.empty() && !from_env.secret_access_key.empty()) return from_env;
  std::string file = env("AWS_SHARED_CREDENTIALS_FILE");
  if (file.empty() && !env("HOME").empty()) file = env("HOME") + "/.aws/credentials";
  const std::string profile = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
  std::string text;
  try {
    text = util::read_file(file);
  } catch (const std::exception&) {
    why = "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set, and " +
          (file.empty() ? std::string("no credentials file is named") : file + " cannot be read");
    return std::nullopt;
  }
  auto found = parse_credentials_file(text, profile);
  if (!found) {
    why =
        "no AWS credentials: profile " + profile + " of " + file + " lacks aws_access_key_id or aws_secret_access_key";
    return std::nullopt;
  }
  found->source = "profile " + profile + " of " + file;
  return found;
}

}  // namespace kache::storage::remote
