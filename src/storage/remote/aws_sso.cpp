// IAM Identity Center (SSO) profiles: `aws sso login` leaves an access token in ~/.aws/sso/cache, and
// the SSO portal trades it for a role's temporary credentials. kache never logs in itself (that takes
// a browser); an expired token is one sentence naming the command that renews it.
#include <openssl/sha.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "storage/remote/aws_credential_cache.hpp"
#include "storage/remote/aws_credential_sources.hpp"
#include "util/fs.hpp"
#include "util/text.hpp"

namespace kache::storage::remote {

std::string sso_cache_file_name(std::string_view session_or_start_url) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  ::SHA1(reinterpret_cast<const unsigned char*>(session_or_start_url.data()), session_or_start_url.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name;
  for (unsigned char b : digest) {
    name += kHex[b >> 4];
    name += kHex[b & 15];
  }
  return name + ".json";
}

namespace {

std::string session_setting(const AwsProfile& profile, const char* key) {
  if (const auto it = profile.sso_session.find(key); it != profile.sso_session.end()) return it->second;
  return profile.setting(key);
}

}  // namespace

std::optional<AwsCredentials> credentials_from_sso(const AwsProfile& profile, std::string& why) {
  const std::string session = profile.setting("sso_session");
  const std::string region = session_setting(profile, "sso_region");
  const std::string start_url = session_setting(profile, "sso_start_url");
  const std::string account = profile.setting("sso_account_id"), role = profile.setting("sso_role_name");
  const std::string login = "run `aws sso login --profile " + profile.name + "`";
  if (region.empty() || account.empty() || role.empty() || (session.empty() && start_url.empty())) {
    why = "no AWS credentials: profile " + profile.name +
          " lacks one of sso_region, sso_account_id, sso_role_name and sso_session (or sso_start_url)";
    return std::nullopt;
  }
  if (!valid_aws_region(region) && aws_endpoint_override("AWS_ENDPOINT_URL_SSO").empty()) {
    why = "no AWS credentials: the sso_region of profile " + profile.name +
          " is not a region name (lowercase letters, digits and '-')";
    return std::nullopt;
  }
  const std::string token_file =
      aws_env("HOME") + "/.aws/sso/cache/" + sso_cache_file_name(session.empty() ? start_url : session);
  std::string token;
  std::optional<std::time_t> expires;
  try {
    const auto cached = nlohmann::json::parse(util::read_file(token_file), nullptr, false);
    if (cached.is_object() && cached.value("accessToken", nlohmann::json()).is_string() &&
        cached.value("expiresAt", nlohmann::json()).is_string()) {
      token = cached["accessToken"].get<std::string>();
      expires = parse_aws_time(cached["expiresAt"].get<std::string>());
    }
  } catch (const std::exception&) {
    why = "no AWS credentials: profile " + profile.name + " has no SSO login in " + token_file + ": " + login;
    return std::nullopt;
  }
  if (token.empty() || !expires || !header_safe(token)) {
    why = "no AWS credentials: the SSO token of profile " + profile.name + " is unreadable: " + login;
    return std::nullopt;
  }
  if (*expires <= std::time(nullptr)) {
    why = "no AWS credentials: the SSO token of profile " + profile.name + " has expired: " + login;
    return std::nullopt;
  }
  std::string endpoint = aws_endpoint_override("AWS_ENDPOINT_URL_SSO");
  if (endpoint.empty()) endpoint = "https://portal.sso." + region + ".amazonaws.com";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const std::string source = "SSO role " + role + " of account " + account + " (profile " + profile.name + ")";
  // Kept per SSO token: another login (another person's, a renewed one) is asked anew.
  const std::string key =
      "sso\n" + profile.name + "\n" + account + "\n" + role + "\n" + endpoint + "\n" + aws_token_digest(token);
  return cached_or_fetched(key, [&]() -> std::optional<AwsCredentials> {
    AwsServiceRequest request;
    request.url = endpoint + "/federation/credentials?role_name=" + util::percent_encode(role) +
                  "&account_id=" + util::percent_encode(account);
    request.headers = {{"x-amz-sso_bearer_token", token}};
    HttpResponse answer;
    try {
      answer = aws_service_exchange(request);
    } catch (const std::exception& e) {
      why = "no AWS credentials: the SSO portal could not be asked for the " + source + ": " + e.what();
      return std::nullopt;
    }
    if (answer.status == 401 || answer.status == 403) {
      why = "no AWS credentials: the SSO portal refused the token of profile " + profile.name + ": " + login;
      return std::nullopt;
    }
    if (answer.status != 200) {
      why = "no AWS credentials: the SSO portal answered HTTP " + std::to_string(answer.status) + " for the " + source;
      return std::nullopt;
    }
    std::string parse_why;
    auto found = parse_sso_role_credentials(answer.body, parse_why);
    if (!found) {
      why = "no AWS credentials: " + parse_why + " for the " + source;
      return std::nullopt;
    }
    found->source = source;
    return found;
  });
}

}  // namespace kache::storage::remote
