// The AWS CLI's two INI files and the profile they describe together (aws_credential_sources.hpp).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#include "storage/remote/aws_credential_sources.hpp"
#include "util/fs.hpp"

namespace kache::storage::remote {

namespace {

std::string_view strip(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

std::string read_if_present(const std::string& path) {
  if (path.empty()) return "";
  try {
    return util::read_file(path);
  } catch (const std::exception&) {
    return "";  // a missing file is a profile without settings, as for the SDKs
  }
}

std::string file_named(const char* variable, const char* below_home) {
  std::string file = aws_env(variable);
  if (file.empty() && !aws_env("HOME").empty()) file = aws_env("HOME") + below_home;
  return file;
}

}  // namespace

std::string aws_env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string aws_endpoint_override(const char* service_variable) {
  std::string endpoint = aws_env(service_variable);
  if (endpoint.empty()) endpoint = aws_env("AWS_ENDPOINT_URL");
  return endpoint;
}

// Lines "[section]" and "key = value"; '#' and ';' start comments; an indented line continues a
// nested setting ("s3 =\n  max_concurrent_requests = 20"), which kache reads none of and skips.
AwsIni parse_aws_ini(std::string_view text) {
  AwsIni ini;
  AwsIniSection* section = nullptr;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const std::string_view line = strip(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      section = nullptr;
      const std::size_t close = line.find(']');
      if (close == std::string_view::npos) continue;
      const std::string_view after = strip(line.substr(close + 1));
      if (!after.empty() && after.front() != '#' && after.front() != ';') continue;  // "[x] # note" is "[x]"
      // "[profile  x ]" is "[profile x]": the words, one space between them.
      std::string name;
      std::string_view words = line.substr(1, close - 1);
      while (!(words = strip(words)).empty()) {
        const std::size_t end = std::min(words.find(' '), words.find('\t'));
        if (!name.empty()) name += ' ';
        name += words.substr(0, end);
        words.remove_prefix(end == std::string_view::npos ? words.size() : end);
      }
      section = &ini[name];
      continue;
    }
    const std::size_t eq = line.find('=');
    if (section == nullptr || eq == std::string_view::npos || raw.front() == ' ' || raw.front() == '\t') continue;
    std::string key(strip(line.substr(0, eq)));
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));  // as botocore
    (*section)[key] = std::string(strip(line.substr(eq + 1)));
  }
  return ini;
}

std::string AwsProfile::setting(std::string_view key) const {
  const auto it = settings.find(key);
  return it == settings.end() ? "" : it->second;
}

AwsProfile merge_aws_profile(const AwsIni& config, const AwsIni& credentials, std::string_view name) {
  AwsProfile profile;
  profile.name = std::string(name);
  // The config file's "[profile NAME]"; for default, "[default]" and "[profile default]" (botocore
  // reads both, the latter winning).
  std::vector<std::string> config_sections = {"profile " + std::string(name)};
  if (name == "default") config_sections.insert(config_sections.begin(), "default");
  for (const std::string& section : config_sections) {
    if (const auto it = config.find(section); it != config.end()) {
      for (const auto& [key, value] : it->second) profile.settings[key] = value;
      profile.found = true;
    }
  }
  if (const auto it = credentials.find(name); it != credentials.end()) {
    for (const auto& [key, value] : it->second) profile.settings[key] = value;
    profile.found = true;
  }
  if (const std::string session = profile.setting("sso_session"); !session.empty()) {
    if (const auto it = config.find("sso-session " + session); it != config.end()) profile.sso_session = it->second;
  }
  return profile;
}

AwsProfile load_aws_profile() {
  const std::string name = aws_env("AWS_PROFILE").empty() ? "default" : aws_env("AWS_PROFILE");
  const std::string config_file = file_named("AWS_CONFIG_FILE", "/.aws/config");
  const std::string credentials_file = file_named("AWS_SHARED_CREDENTIALS_FILE", "/.aws/credentials");
  const AwsIni credentials = parse_aws_ini(read_if_present(credentials_file));
  AwsProfile profile = merge_aws_profile(parse_aws_ini(read_if_present(config_file)), credentials, name);
  const auto in_credentials = credentials.find(name);
  const bool keys_there = in_credentials != credentials.end() && in_credentials->second.contains("aws_access_key_id");
  profile.keys_file = keys_there ? credentials_file : config_file;
  profile.credentials_file = credentials_file;
  profile.config_file = config_file;
  return profile;
}

}  // namespace kache::storage::remote
