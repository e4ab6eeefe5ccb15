#include "storage/remote/aws_credentials.hpp"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "storage/remote/aws_credential_cache.hpp"
#include "storage/remote/aws_credential_sources.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::storage::remote {

namespace {

using Json = nlohmann::json;

// A string member of a JSON object, "" when absent or of another type.
std::string text_member(const Json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// The text between the first <tag> and its </tag>; "" when absent.
std::string xml_element(std::string_view xml, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  const std::size_t start = xml.find(open);
  if (start == std::string_view::npos) return "";
  const std::size_t end = xml.find(close, start + open.size());
  if (end == std::string_view::npos) return "";
  return std::string(xml.substr(start + open.size(), end - start - open.size()));
}

// Credentials are complete with both keys, and temporary ones with a readable expiration.
std::optional<AwsCredentials> complete(AwsCredentials found, const std::string& expiration, const char* what,
                                       std::string& why) {
  if (found.access_key_id.empty() || found.secret_access_key.empty()) {
    why = std::string(what) + " lacks an access key id or a secret access key";
    return std::nullopt;
  }
  if (!expiration.empty()) {
    found.expiration = parse_aws_time(expiration);
    if (!found.expiration) {
      why = std::string(what) + " has an unreadable Expiration";
      return std::nullopt;
    }
  }
  return found;
}

std::optional<Json> json_object(std::string_view text, const char* what, std::string& why) {
  Json parsed = Json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    why = std::string(what) + " is not a JSON object";
    return std::nullopt;
  }
  return parsed;
}

bool digits(std::string_view text, std::size_t from, std::size_t count, int& out) {
  if (text.size() < from + count) return false;
  out = 0;
  for (std::size_t i = from; i < from + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

}  // namespace

bool needs_refresh(const AwsCredentials& credentials, std::time_t now) {
  return credentials.expiration && *credentials.expiration - kAwsRefreshMarginS <= now;
}

std::optional<std::time_t> parse_aws_time(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then optional fractional seconds, then Z, UTC (old aws-cli SSO caches) or an
  // offset: +HH:MM, -HH:MM, +HHMM, -HHMM.
  std::tm tm{};
  int year = 0, month = 0, day = 0;
  if (!digits(text, 0, 4, year) || text.size() < 19 || text[4] != '-' || !digits(text, 5, 2, month) || text[7] != '-' ||
      !digits(text, 8, 2, day) || (text[10] != 'T' && text[10] != 't') || !digits(text, 11, 2, tm.tm_hour) ||
      text[13] != ':' || !digits(text, 14, 2, tm.tm_min) || text[16] != ':' || !digits(text, 17, 2, tm.tm_sec)) {
    return std::nullopt;
  }
  std::string_view rest = text.substr(19);
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') rest.remove_prefix(1);
  }
  long offset_s = 0;
  if (rest != "Z" && rest != "z" && rest != "UTC") {
    int hours = 0, minutes = 0;
    const bool colon = rest.size() == 6 && rest[3] == ':';
    if ((rest.size() != 5 && !colon) || (rest.front() != '+' && rest.front() != '-') || !digits(rest, 1, 2, hours) ||
        !digits(rest, colon ? 4 : 3, 2, minutes) || hours > 23 || minutes > 59) {
      return std::nullopt;
    }
    offset_s = (rest.front() == '-' ? -1L : 1L) * (hours * 3600L + minutes * 60L);
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  const std::tm asked = tm;
  const std::time_t when = ::timegm(&tm);
  // timegm moves a day that does not exist (February 31) into the next month: not a time AWS writes.
  if (tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon) return std::nullopt;
  return when - offset_s;  // 01:00+02:00 is 23:00 UTC
}

std::optional<AwsCredentials> parse_credentials_file(std::string_view text, std::string_view profile) {
  const AwsIni ini = parse_aws_ini(text);
  const auto section = ini.find(profile);
  if (section == ini.end()) return std::nullopt;
  AwsCredentials found;
  const auto value = [&](const char* key) {
    const auto it = section->second.find(key);
    return it == section->second.end() ? std::string() : it->second;
  };
  found.access_key_id = value("aws_access_key_id");
  found.secret_access_key = value("aws_secret_access_key");
  found.session_token = value("aws_session_token");
  if (found.access_key_id.empty() || found.secret_access_key.empty()) return std::nullopt;
  return found;
}

std::optional<AwsCredentials> parse_credential_process_output(std::string_view json, std::string& why) {
  const char* what = "the credential_process output";
  const std::optional<Json> object = json_object(json, what, why);
  if (!object) return std::nullopt;
  const auto version = object->find("Version");
  if (version == object->end() || !version->is_number_integer() || version->get<int>() != 1) {
    why = std::string(what) + " has no \"Version\": 1";
    return std::nullopt;
  }
  return complete({text_member(*object, "AccessKeyId"), text_member(*object, "SecretAccessKey"),
                   text_member(*object, "SessionToken"), "", std::nullopt},
                  text_member(*object, "Expiration"), what, why);
}

std::optional<AwsCredentials> parse_sts_credentials(std::string_view xml, std::string& why) {
  const std::string credentials = xml_element(xml, "Credentials");
  if (credentials.empty()) {
    why = "STS answered without Credentials";
    return std::nullopt;
  }
  AwsCredentials found{xml_element(credentials, "AccessKeyId"), xml_element(credentials, "SecretAccessKey"),
                       xml_element(credentials, "SessionToken"), "", std::nullopt};
  const std::string expiration = xml_element(credentials, "Expiration");
  if (expiration.empty()) {
    why = "STS answered credentials without an Expiration";
    return std::nullopt;
  }
  return complete(std::move(found), expiration, "STS's answer", why);
}

std::optional<AwsCredentials> parse_sso_role_credentials(std::string_view json, std::string& why) {
  const char* what = "the SSO portal's answer";
  const std::optional<Json> object = json_object(json, what, why);
  if (!object) return std::nullopt;
  const auto role = object->find("roleCredentials");
  if (role == object->end() || !role->is_object()) {
    why = std::string(what) + " has no roleCredentials";
    return std::nullopt;
  }
  const auto expiration = role->find("expiration");
  if (expiration == role->end() || !expiration->is_number_integer()) {
    why = std::string(what) + " has no expiration";
    return std::nullopt;
  }
  auto found = complete({text_member(*role, "accessKeyId"), text_member(*role, "secretAccessKey"),
                         text_member(*role, "sessionToken"), "", std::nullopt},
                        "", what, why);
  if (found) found->expiration = static_cast<std::time_t>(expiration->get<long long>() / 1000);
  return found;
}

std::optional<AwsCredentials> parse_metadata_credentials(std::string_view json, std::string& why) {
  const char* what = "the credentials document";
  const std::optional<Json> object = json_object(json, what, why);
  if (!object) return std::nullopt;
  return complete({text_member(*object, "AccessKeyId"), text_member(*object, "SecretAccessKey"),
                   text_member(*object, "Token"), "", std::nullopt},
                  text_member(*object, "Expiration"), what, why);
}

bool valid_aws_region(std::string_view region) {
  if (region.empty() || region.size() > 64) return false;
  for (char c : region) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

std::optional<std::string> aws_region_from_environment(std::string* why) {
  const auto checked = [&](const std::string& region, const std::string& where) -> std::optional<std::string> {
    if (valid_aws_region(region)) return region;
    if (why) *why = "no AWS credentials: " + where + " is not a region name (lowercase letters, digits and '-')";
    return std::nullopt;
  };
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (!aws_env(name).empty()) return checked(aws_env(name), name);
  }
  const AwsProfile profile = load_aws_profile();
  const std::string region = profile.setting("region");
  if (!region.empty()) return checked(region, "the region of profile " + profile.name);
  return std::nullopt;
}

std::string aws_token_digest(std::string_view token) { return util::sha256(token).hex(); }

namespace {

std::optional<AwsCredentials> from_environment(std::string& why) {
  AwsCredentials found{aws_env("AWS_ACCESS_KEY_ID"), aws_env("AWS_SECRET_ACCESS_KEY"), aws_env("AWS_SESSION_TOKEN"),
                       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", std::nullopt};
  if (found.access_key_id.empty() && found.secret_access_key.empty()) return std::nullopt;
  // One without the other is a mistake (botocore's PartialCredentialsError), not a reason to go on.
  if (found.access_key_id.empty() || found.secret_access_key.empty()) {
    why = found.access_key_id.empty() ? "no AWS credentials: AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID"
                                      : "no AWS credentials: AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY";
    return std::nullopt;
  }
  return found;
}

std::optional<AwsCredentials> web_identity(const std::string& token_file, const std::string& role_arn,
                                           const std::string& session_name, const std::string& region,
                                           std::string& why) {
  const auto fetch = [&] { return credentials_from_web_identity(token_file, role_arn, session_name, region, why); };
  // Kept per token, not per configuration: another job's token (or an invalid one) must reach STS.
  std::string token;
  try {
    token = util::read_file(token_file);
  } catch (const std::exception&) {
    return fetch();  // names the unreadable file
  }
  return cached_or_fetched("web-identity\n" + role_arn + "\n" + token_file + "\n" +
                               aws_endpoint_override("AWS_ENDPOINT_URL_STS") + "\n" + aws_token_digest(token),
                           fetch);
}

// The profile's own way to credentials, in the SDKs' order; nullopt with `why` empty when it names
// none.
std::optional<AwsCredentials> from_profile(const AwsProfile& profile, const std::string& region, std::string& why) {
  const std::string where = "profile " + profile.name;
  // The SDKs assume the role with the source's credentials; kache does not, and must not go on to
  // another identity (the container's, the instance's) instead.
  if (!profile.setting("role_arn").empty()) {
    for (const char* source : {"source_profile", "credential_source"}) {
      if (profile.setting(source).empty()) continue;
      why = "no AWS credentials: " + where + " uses role_arn with " + source +
            ", which kache does not support: give kache the role's credentials another way (web identity, "
            "credential_process, SSO, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)";
      return std::nullopt;
    }
  }
  if (!profile.setting("aws_access_key_id").empty() && !profile.setting("aws_secret_access_key").empty()) {
    AwsCredentials found{profile.setting("aws_access_key_id"), profile.setting("aws_secret_access_key"),
                         profile.setting("aws_session_token"), where + " of " + profile.keys_file, std::nullopt};
    return found;
  }
  if (!profile.setting("web_identity_token_file").empty()) {
    if (profile.setting("role_arn").empty()) {
      why = "no AWS credentials: " + where + " names web_identity_token_file without role_arn";
      return std::nullopt;
    }
    return web_identity(profile.setting("web_identity_token_file"), profile.setting("role_arn"),
                        profile.setting("role_session_name"), region, why);
  }
  if (!profile.setting("credential_process").empty()) {
    const std::string command = profile.setting("credential_process");
    return cached_or_fetched("process\n" + profile.name + "\n" + command,
                             [&] { return credentials_from_process(command, profile.name, why); });
  }
  if (!profile.setting("sso_session").empty() || !profile.setting("sso_start_url").empty()) {
    return credentials_from_sso(profile, why);  // kept per SSO token there
  }
  return std::nullopt;
}

std::optional<AwsCredentials> find_unchecked(std::string& why, const std::string& remote_region) {
  std::string region_why;
  const std::optional<std::string> environment_region = aws_region_from_environment(&region_why);
  if (!region_why.empty()) {
    why = region_why;
    return std::nullopt;
  }
  if (auto found = from_environment(why)) return found;
  if (!why.empty()) return std::nullopt;
  const std::string region = environment_region.value_or(remote_region);
  const std::string token_file = aws_env("AWS_WEB_IDENTITY_TOKEN_FILE");
  if (!token_file.empty()) {
    if (aws_env("AWS_ROLE_ARN").empty()) {
      why = "no AWS credentials: AWS_WEB_IDENTITY_TOKEN_FILE is set without AWS_ROLE_ARN";
      return std::nullopt;
    }
    return web_identity(token_file, aws_env("AWS_ROLE_ARN"), aws_env("AWS_ROLE_SESSION_NAME"), region, why);
  }
  const AwsProfile profile = load_aws_profile();
  if (auto found = from_profile(profile, region, why)) return found;
  if (!why.empty()) return std::nullopt;
  if (!profile.found && !aws_env("AWS_PROFILE").empty()) {
    why = "no AWS credentials: AWS_PROFILE names profile " + profile.name + ", but neither " +
          profile.credentials_file + " nor " + profile.config_file + " has it";
    return std::nullopt;
  }
  if (auto found = credentials_from_container(why)) return found;
  if (!why.empty()) return std::nullopt;
  if (auto found = credentials_from_instance_metadata(why)) return found;
  // Instance metadata is the last resort, asked on any machine: its failure alone would mislead.
  const std::string none =
      "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set, "
      "no web identity, profile " +
      profile.name + " has none (" + profile.credentials_file + ", " + profile.config_file +
      "), no container credentials";
  const std::string_view prefix = "no AWS credentials: ";
  why = why.empty() ? none + ", and instance metadata is disabled"
                    : none + ", and " + (why.starts_with(prefix) ? why.substr(prefix.size()) : why);
  return std::nullopt;
}

}  // namespace

bool printable_aws_credentials(const AwsCredentials& credentials, std::string& why) {
  if (header_safe(credentials.access_key_id) && header_safe(credentials.secret_access_key) &&
      header_safe(credentials.session_token)) {
    return true;
  }
  why = "no AWS credentials: the " + credentials.source +
        " gave an access key id, secret access key or session token with control characters or bytes outside "
        "printable ASCII";
  return false;
}

std::optional<AwsCredentials> find_aws_credentials(std::string& why, const std::string& remote_region) {
  why.clear();
  std::optional<AwsCredentials> found = find_unchecked(why, remote_region);
  // Whatever the source, a value that would end a header (the key id in Authorization, the session
  // token in x-amz-security-token) and add its own is refused.
  if (found && !printable_aws_credentials(*found, why)) return std::nullopt;
  return found;
}

}  // namespace kache::storage::remote
