// Web identity (GitHub Actions' and EKS's OIDC tokens): the token file's JWT exchanged for a role's
// temporary credentials by STS AssumeRoleWithWebIdentity, an unsigned Query API request (the token is
// the proof). POSTed as a form, as the SDKs do: the token never goes into a URL (which proxies and
// servers log).
#include <ctime>

#include "storage/remote/aws_credential_sources.hpp"
#include "util/fs.hpp"
#include "util/text.hpp"

namespace kache::storage::remote {

namespace {

constexpr std::size_t kTokenFileLimit = 64 << 10;

std::string sts_endpoint(const std::string& region) {
  if (std::string endpoint = aws_endpoint_override("AWS_ENDPOINT_URL_STS"); !endpoint.empty()) {
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    return endpoint;
  }
  return region.empty() ? "https://sts.amazonaws.com" : "https://sts." + region + ".amazonaws.com";
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::optional<AwsCredentials> credentials_from_web_identity(const std::string& token_file, const std::string& role_arn,
                                                            const std::string& session_name, const std::string& region,
                                                            std::string& why) {
  const std::string source = "web identity token of role " + role_arn;
  std::string token;
  try {
    token = trimmed(util::read_file(token_file));
  } catch (const std::exception&) {
    why = "no AWS credentials: the web identity token file " + token_file + " cannot be read";
    return std::nullopt;
  }
  if (token.empty() || token.size() > kTokenFileLimit) {
    why = "no AWS credentials: the web identity token file " + token_file + " is empty or too large";
    return std::nullopt;
  }
  const std::string name = session_name.empty() ? "kache-" + std::to_string(std::time(nullptr)) : session_name;
  AwsServiceRequest request;
  request.method = HttpMethod::post;
  request.url = sts_endpoint(region) + "/";
  request.body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + util::percent_encode(role_arn) +
                 "&RoleSessionName=" + util::percent_encode(name) + "&WebIdentityToken=" + util::percent_encode(token);
  request.headers = {{"accept", "application/xml"}, {"content-type", "application/x-www-form-urlencoded"}};
  HttpResponse answer;
  try {
    answer = aws_service_exchange(request);
  } catch (const std::exception& e) {
    why = "no AWS credentials: STS could not be asked for the " + source + ": " + e.what();
    return std::nullopt;
  }
  if (answer.status != 200) {
    why = "no AWS credentials: STS refused the " + source + " (HTTP " + std::to_string(answer.status) + ")";
    return std::nullopt;
  }
  std::string parse_why;
  auto found = parse_sts_credentials(answer.body, parse_why);
  if (!found) {
    why = "no AWS credentials: " + parse_why + " for the " + source;
    return std::nullopt;
  }
  found->source = source;
  return found;
}

}  // namespace kache::storage::remote
