// Credentials a machine hands its programs: ECS (and EKS Pod Identity) container credentials, and
// EC2 instance metadata (IMDSv2: a session token by PUT first, then the role's credentials with it).
#include <arpa/inet.h>

#include "storage/remote/aws_credential_cache.hpp"
#include "storage/remote/aws_credential_sources.hpp"
#include "util/fs.hpp"
#include "util/text.hpp"

namespace kache::storage::remote {

namespace {

constexpr const char* kEcsHost = "http://169.254.170.2";
constexpr const char* kImdsEndpoint = "http://169.254.169.254";
// A machine that is no EC2 instance must not wait long on every compile: a second to connect.
constexpr int kConnectMs = 1000;
constexpr int kTotalMs = 3000;

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

bool loopback_or_metadata_host(std::string_view host) {
  in_addr v4{};
  const bool loopback_v4 = ::inet_pton(AF_INET, std::string(host).c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
  return loopback_v4 || host == "localhost" || host == "::1" || host == "169.254.170.2" || host == "169.254.170.23" ||
         host == "fd00:ec2::23";
}

}  // namespace

bool container_url_allowed(std::string_view url) {
  if (url.starts_with("https://")) return true;
  if (!url.starts_with("http://")) return false;
  std::string_view authority = url.substr(7);
  authority = authority.substr(0, authority.find_first_of("/?"));
  if (!authority.empty() && authority.front() == '[') {
    return loopback_or_metadata_host(authority.substr(1, authority.find(']') - 1));
  }
  return loopback_or_metadata_host(authority.substr(0, authority.rfind(':')));
}

std::optional<AwsCredentials> credentials_from_container(std::string& why) {
  const std::string relative = aws_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const std::string full = aws_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (relative.empty() && full.empty()) return std::nullopt;
  const std::string url = relative.empty() ? full : kEcsHost + relative;
  if (relative.empty() && !container_url_allowed(full)) {
    why =
        "no AWS credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to a loopback, ECS or EKS "
        "address";
    return std::nullopt;
  }
  std::string token = aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (const std::string token_file = aws_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); !token_file.empty()) {
    try {
      token = trimmed(util::read_file(token_file));
    } catch (const std::exception&) {
      why = "no AWS credentials: AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + token_file + " cannot be read";
      return std::nullopt;
    }
  }
  if (!header_safe(token)) {
    why = "no AWS credentials: the container authorization token holds control characters";
    return std::nullopt;
  }
  // Kept per authorization token: another task's token is asked anew.
  const std::string key = "container\n" + url + "\n" + aws_token_digest(token);
  return cached_or_fetched(key, [&]() -> std::optional<AwsCredentials> {
    AwsServiceRequest request;
    request.url = url;
    request.connect_ms = kConnectMs;
    request.total_ms = kTotalMs;
    if (!token.empty()) request.headers = {{"authorization", token}};
    HttpResponse answer;
    try {
      answer = aws_service_exchange(request);
    } catch (const std::exception& e) {
      why = std::string("no AWS credentials: the container credentials endpoint could not be asked: ") + e.what();
      return std::nullopt;
    }
    if (answer.status != 200) {
      why = "no AWS credentials: the container credentials endpoint answered HTTP " + std::to_string(answer.status);
      return std::nullopt;
    }
    std::string parse_why;
    auto found = parse_metadata_credentials(answer.body, parse_why);
    if (!found) {
      why = "no AWS credentials: " + parse_why + " of the container credentials endpoint";
      return std::nullopt;
    }
    found->source = "container credentials";
    return found;
  });
}

std::optional<AwsCredentials> credentials_from_instance_metadata(std::string& why) {
  std::string disabled = aws_env("AWS_EC2_METADATA_DISABLED");
  for (char& c : disabled) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (disabled == "true") return std::nullopt;
  std::string endpoint = aws_env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) endpoint = kImdsEndpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return cached_or_fetched("imds\n" + endpoint, [&]() -> std::optional<AwsCredentials> {
    std::optional<AwsCredentials> found;
    try {
      with_aws_service(endpoint, kConnectMs, kTotalMs, [&](const AwsAsk& ask) {
        const HttpResponse token =
            ask(HttpMethod::put, "/latest/api/token", {{"x-aws-ec2-metadata-token-ttl-seconds", "21600"}});
        if (token.status != 200 || token.body.empty() || !header_safe(token.body)) {
          why = "no AWS credentials: instance metadata refused a session token (HTTP " + std::to_string(token.status) +
                ")";
          return;
        }
        const std::vector<std::pair<std::string, std::string>> with_token = {{"x-aws-ec2-metadata-token", token.body}};
        const std::string base = "/latest/meta-data/iam/security-credentials/";
        const HttpResponse roles = ask(HttpMethod::get, base, with_token);
        const std::string role = trimmed(roles.body.substr(0, roles.body.find('\n')));
        if (roles.status != 200 || role.empty() || !header_safe(role)) {
          why = "no AWS credentials: this instance has no instance profile role (HTTP " + std::to_string(roles.status) +
                ")";
          return;
        }
        const HttpResponse document = ask(HttpMethod::get, base + util::percent_encode(role), with_token);
        std::string parse_why;
        if (document.status == 200) found = parse_metadata_credentials(document.body, parse_why);
        if (!found) {
          why = "no AWS credentials: instance profile role " + role + " has no usable credentials" +
                (parse_why.empty() ? "" : ": " + parse_why);
          return;
        }
        found->source = "instance profile role " + role;
      });
    } catch (const std::exception& e) {
      why = std::string("no AWS credentials: instance metadata could not be asked: ") + e.what();
      return std::nullopt;
    }
    return found;
  });
}

}  // namespace kache::storage::remote
