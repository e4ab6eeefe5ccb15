// Requests to the AWS credential services (STS, the SSO portal, ECS, instance metadata) over the one
// HTTP client, HttpConnection, with the service's own short deadlines.
#include "storage/remote/aws_credential_sources.hpp"
#include "storage/remote/http_connection.hpp"
#include "storage/remote/http_storage.hpp"
#include "storage/remote/remote_failure.hpp"

namespace kache::storage::remote {

namespace {

// http[s]://HOST[:PORT][/PATH][?QUERY] into the server and the request target ("/" at least).
core::RemoteUrl service_server(std::string_view url, std::string& target) {
  const auto bad = [&] {
    return RemoteError(RemoteFailure::Kind::error, "not an http(s) URL of a credential service: " + std::string(url));
  };
  const std::size_t colon = url.find("://");
  if (colon == std::string_view::npos) throw bad();
  core::RemoteUrl server;
  server.scheme = std::string(url.substr(0, colon));
  if (server.scheme == "http") {
    server.default_port = http_scheme.default_port;
  } else if (server.scheme == "https") {
    server.default_port = https_scheme.default_port;
  } else {
    throw bad();
  }
  std::string_view rest = url.substr(colon + 3);
  const std::size_t path_at = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_at);
  target = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (!target.empty() && target.front() == '?') target.insert(0, "/");
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) throw bad();
    server.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw bad();
      port = authority.substr(close + 2);
    }
  } else {
    const std::size_t port_at = authority.rfind(':');
    server.host = std::string(authority.substr(0, port_at));
    if (port_at != std::string_view::npos) port = authority.substr(port_at + 1);
  }
  if (server.host.empty() || server.host.find('@') != std::string::npos) throw bad();
  if (!port.empty()) {
    int value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || value > 65535) throw bad();
      value = value * 10 + (c - '0');
    }
    if (value == 0 || value > 65535) throw bad();
    server.port = value;
  }
  return server;
}

}  // namespace

bool header_safe(std::string_view value) {
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

void with_aws_service(const std::string& base, int connect_ms, int total_ms,
                      const std::function<void(const AwsAsk&)>& use) {
  std::string base_target;
  core::RemoteUrl server = service_server(base, base_target);
  server.connect_timeout_ms = connect_ms;
  server.operation_timeout_ms = total_ms;
  HttpConnection connection(server, "");
  if (base_target == "/") base_target.clear();
  use([&](HttpMethod method, std::string_view path, std::vector<std::pair<std::string, std::string>> headers) {
    const std::string target = base_target + std::string(path);
    HttpRequest request;
    request.method = method;
    request.target = target;
    request.max_body = kAnswerBodyLimit;
    request.headers = std::move(headers);
    return connection.perform(request);
  });
}

HttpResponse aws_service_exchange(const AwsServiceRequest& request) {
  std::string target;
  core::RemoteUrl server = service_server(request.url, target);
  server.connect_timeout_ms = request.connect_ms;
  server.operation_timeout_ms = request.total_ms;
  HttpConnection connection(server, "");
  HttpRequest http;
  http.method = request.method;
  http.target = target;
  http.max_body = kAnswerBodyLimit;
  http.headers = request.headers;
  http.body = request.body;
  return connection.perform(http);
}

}  // namespace kache::storage::remote
