#include "storage/remote/http_connection.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "storage/remote/host_names.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/sigpipe_guard.hpp"

namespace kache::storage::remote {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// A reused keep-alive connection the server had closed: the request is sent again on a new one.
struct StaleConnection {};
using AnswerParser = http::response_parser<http::string_body>;

bool closed_by_peer(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::ssl::error::stream_truncated;
}

bool readable_file(const char* path) { return path && ::access(path, R_OK) == 0; }

// The system's CAs. A static OpenSSL looks in the directory compiled into it (Debian's: /usr/lib/ssl,
// which links to /etc/ssl/certs), honouring SSL_CERT_FILE and SSL_CERT_DIR; on a host whose OpenSSL
// lives elsewhere that directory is missing, and the distribution's bundle is loaded instead.
void trust_system_cas(SSL_CTX* ctx) {
  ::SSL_CTX_set_default_verify_paths(ctx);
  if (std::getenv(X509_get_default_cert_file_env()) || std::getenv(X509_get_default_cert_dir_env())) return;
  if (readable_file(X509_get_default_cert_file()) || readable_file(X509_get_default_cert_dir())) return;
  for (const char* bundle : {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                             "/etc/ssl/ca-bundle.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
                             "/etc/ssl/cert.pem"}) {
    if (readable_file(bundle) && ::SSL_CTX_load_verify_locations(ctx, bundle, nullptr) == 1) return;
  }
}

}  // namespace

struct HttpConnection::State {
  net::io_context io;
  std::optional<net::ssl::context> tls;                          // https: made on the first connection
  std::optional<beast::tcp_stream> plain;                        // http
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;   // https
  beast::flat_buffer buffer;
  bool connected = false;
  std::string authorization;

  beast::tcp_stream& tcp() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  // Calls use(stream) with the stream requests go through: TLS over TCP, or TCP.
  template <typename Use>
  void with_stream(Use use) {
    if (secure) {
      use(*secure);
    } else {
      use(*plain);
    }
  }

  // Starts one asynchronous operation and runs it to its end (the stream's expiry ends it early with
  // beast::error::timeout).
  template <typename Initiate>
  beast::error_code run(Initiate initiate) {
    beast::error_code result = net::error::would_block;
    initiate([&result](beast::error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run();
    return result;
  }

  // No TLS close_notify: the process is about to end, and the server learns the same from the FIN.
  void close() {
    if (plain || secure) {
      beast::error_code ignored;
      tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
      tcp().close();
    }
    buffer.clear();
    connected = false;
  }

  // The parts of one exchange, in order (HttpConnection::exchange).
  bool send(const HttpRequest& request, const core::RemoteUrl& url, bool reused, AnswerParser& parser);
  // head: the answer has no body (a HEAD's), whatever its Content-Length says.
  void skip_interim_answers(std::optional<AnswerParser>& parser, const core::RemoteUrl& url, bool head);
  void read_body(const HttpRequest& request, const core::RemoteUrl& url, AnswerParser& parser);
  // Closes the connection and makes the RemoteError for what failed.
  RemoteError fail(const core::RemoteUrl& url, const beast::error_code& ec, const char* doing);
};

HttpConnection::HttpConnection(const core::RemoteUrl& url, std::string ca_file)
    : url_(url), ca_file_(std::move(ca_file)), state_(std::make_unique<State>()) {
  state_->authorization = authorization_header(url);
  // Beast reads as much as the buffer has room for, 512 bytes at first: a 30 KB entry took 68 reads,
  // each with its epoll wait and timer update. Room for 256 KiB (untouched memory until read into)
  // takes an entry in a few reads.
  state_->buffer.reserve(256 << 10);
}

HttpConnection::~HttpConnection() {
  if (state_->connected) state_->close();
}

namespace {

template <typename Body>
void prepare(http::request<Body>& req, const HttpRequest& request, const core::RemoteUrl& url,
             const std::string& auth) {
  req.version(11);
  req.target(beast::string_view(request.target.data(), request.target.size()));
  req.set(http::field::host, url.host_port());
  req.set(http::field::user_agent, "kache/" KACHE_VERSION);
  if (!auth.empty()) req.set(http::field::authorization, auth);
  for (const auto& [name, value] : request.headers) req.set(name, value);
  req.keep_alive(true);
}

RemoteError failure(const core::RemoteUrl& url, const beast::error_code& ec, const char* doing) {
  const bool timeout = ec == beast::error::timeout;
  return RemoteError(timeout ? RemoteFailure::Kind::timeout : RemoteFailure::Kind::error,
                     url.redacted() + ": " + doing + (timeout ? " timed out" : " failed: " + ec.message()));
}

}  // namespace

void HttpConnection::connect(Clock::time_point deadline) {
  State& s = *state_;
  const Clock::time_point connect_until =
      std::min(deadline, Clock::now() + std::chrono::milliseconds(url_.connect_timeout_ms));
  std::vector<tcp::endpoint> endpoints;
  for (const HostAddress& a : resolve_host_within(url_, connect_until)) {
    tcp::endpoint endpoint;
    std::memcpy(endpoint.data(), &a.storage, a.length);
    endpoint.resize(a.length);
    endpoints.push_back(endpoint);
  }
  if (url_.scheme == "https") {
    if (!s.tls) {
      // No openssl.cnf: a system's config may name providers or engines to load as shared objects (a
      // FIPS provider, say), which a static program must not dlopen; the built-in defaults suffice.
      ::OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
      net::ssl::context tls(net::ssl::context::tls_client);
      tls.set_verify_mode(net::ssl::verify_peer);
      // remote.ca_file is an extra CA (a private server's), trusted beside the system's, never instead.
      trust_system_cas(tls.native_handle());
      if (!ca_file_.empty() && ::SSL_CTX_load_verify_locations(tls.native_handle(), ca_file_.c_str(), nullptr) != 1) {
        throw RemoteError(RemoteFailure::Kind::error, url_.redacted() + ": cannot read the CA file " + ca_file_);
      }
      s.tls.emplace(std::move(tls));
    }
    s.secure.emplace(s.io, *s.tls);
    SSL* ssl = s.secure->native_handle();
    if (url_.host_is_address()) {
      ::X509_VERIFY_PARAM_set1_ip_asc(::SSL_get0_param(ssl), url_.host.c_str());
    } else {
      ::SSL_set_tlsext_host_name(ssl, url_.host.c_str());
      ::SSL_set1_host(ssl, url_.host.c_str());
    }
  } else {
    s.plain.emplace(s.io);
  }
  s.tcp().expires_at(connect_until);
  beast::error_code ec = s.run([&](auto handler) { s.tcp().async_connect(endpoints, std::move(handler)); });
  if (ec) {
    s.close();
    throw failure(url_, ec, "connecting");
  }
  // Asio opens sockets without SOCK_CLOEXEC: the compiler kache runs must not inherit this one.
  ::fcntl(s.tcp().socket().native_handle(), F_SETFD, FD_CLOEXEC);
  if (s.secure) {
    s.tcp().expires_at(deadline);
    ec = s.run([&](auto handler) { s.secure->async_handshake(net::ssl::stream_base::client, std::move(handler)); });
    if (ec) {
      s.close();
      throw failure(url_, ec, "the TLS handshake");
    }
  }
  s.connected = true;
}

// Sends the request and reads the answer's header meanwhile: a server may answer (401, 413) before it
// has read a PUT's body and stop reading, and the rest of the body is then not sent. Returns whether
// the whole request went out.
bool HttpConnection::State::send(const HttpRequest& request, const core::RemoteUrl& url, bool reused,
                                 AnswerParser& parser) {
  const bool with_body = request.method == HttpMethod::put || request.method == HttpMethod::post;
  http::request<http::span_body<const char>> put{
      request.method == HttpMethod::post ? http::verb::post : http::verb::put, "", 11};
  const http::verb verb = request.method == HttpMethod::get    ? http::verb::get
                          : request.method == HttpMethod::head ? http::verb::head
                                                               : http::verb::delete_;
  http::request<http::empty_body> other{verb, "", 11};
  if (with_body) {
    prepare(put, request, url, authorization);
    put.body() = http::span_body<const char>::value_type(request.body.data(), request.body.size());
    put.prepare_payload();
  } else {
    prepare(other, request, url, authorization);
    other.prepare_payload();
  }
  bool sent = false;
  beast::error_code write_ec, read_ec = net::error::would_block;
  const auto on_written = [&](beast::error_code ec, std::size_t) {
    sent = !ec;
    write_ec = ec;
  };
  with_stream([&](auto& stream) {
    if (with_body) {
      http::async_write(stream, put, on_written);
    } else {
      http::async_write(stream, other, on_written);
    }
    http::async_read_header(stream, buffer, parser, [&](beast::error_code ec, std::size_t) {
      read_ec = ec;
      if (!ec && !sent && parser.get().result_int() >= 200) {
        beast::error_code ignored;
        tcp().socket().cancel(ignored);  // ends the write: the server has answered
      }
    });
  });
  io.restart();
  io.run();
  if (read_ec) {
    if (reused && !parser.got_some() && (closed_by_peer(read_ec) || closed_by_peer(write_ec))) throw StaleConnection{};
    if (write_ec && write_ec != net::error::operation_aborted && !closed_by_peer(write_ec)) {
      throw fail(url, write_ec, "sending the request");
    }
    throw fail(url, read_ec, "reading the answer");
  }
  return sent;
}

// Interim answers (100 Continue, 102 Processing, 103 Early Hints) come before the answer.
void HttpConnection::State::skip_interim_answers(std::optional<AnswerParser>& parser, const core::RemoteUrl& url,
                                                 bool head) {
  while (parser->get().result_int() / 100 == 1 && parser->get().result_int() != 101) {
    parser.emplace();
    if (head) parser->skip(true);
    beast::error_code ec;
    with_stream([&](auto& stream) {
      ec = run([&](auto handler) { http::async_read_header(stream, buffer, *parser, std::move(handler)); });
    });
    if (ec) throw fail(url, ec, "reading the answer");
  }
}

// Reads the answer's body within answer_body_bound; a larger one ends the connection and throws.
void HttpConnection::State::read_body(const HttpRequest& request, const core::RemoteUrl& url, AnswerParser& parser) {
  const long status = static_cast<long>(parser.get().result_int());
  if (request.method == HttpMethod::head) return;  // no body follows, whatever Content-Length says
  const std::uint64_t limit = answer_body_bound(request, status);
  const auto too_large = [&] {
    close();  // the rest of the body is never read: this connection is done
    throw_body_over_bound(url, request, status);
  };
  // Compared here, before Beast reserves a claimed length: body_limit alone let a response whose
  // Content-Length exceeded it be read whole (measured with Boost 1.74; RemoteHttp tests).
  if (parser.content_length() && *parser.content_length() > limit) too_large();
  parser.body_limit(limit);
  if (!parser.is_done()) {
    beast::error_code ec;
    with_stream([&](auto& stream) {
      ec = run([&](auto handler) { http::async_read(stream, buffer, parser, std::move(handler)); });
    });
    if (ec == http::error::body_limit) too_large();
    if (ec) throw fail(url, ec, "reading the answer");
  }
}

RemoteError HttpConnection::State::fail(const core::RemoteUrl& url, const beast::error_code& ec, const char* doing) {
  close();
  return failure(url, ec, doing);
}

HttpResponse HttpConnection::exchange(const HttpRequest& request, bool reused) {
  State& s = *state_;
  std::optional<AnswerParser> parser(std::in_place);
  if (request.method == HttpMethod::head) parser->skip(true);
  const bool sent = s.send(request, url_, reused, *parser);
  s.skip_interim_answers(parser, url_, request.method == HttpMethod::head);
  s.read_body(request, url_, *parser);
  HttpResponse response;
  response.status = static_cast<long>(parser->get().result_int());
  if (const auto date = parser->get().find(http::field::date); date != parser->get().end()) {
    response.date = std::string(date->value());
  }
  // The connection serves the next request only when this exchange ended cleanly: the whole request
  // went out, the server keeps the connection, and nothing follows the answer (bytes after it are
  // no answer to anything this client asked).
  const bool reusable = sent && parser->keep_alive() && s.buffer.size() == 0;
  response.body = std::move(parser->get().body());
  if (!reusable) s.close();
  return response;
}

HttpResponse HttpConnection::perform(const HttpRequest& request) {
  const SigpipeGuard sigpipe;  // Asio sends with MSG_NOSIGNAL; kept for whatever else writes
  State& s = *state_;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(url_.operation_timeout_ms);
  for (int attempt = 0;; ++attempt) {
    const bool reused = s.connected;
    if (!s.connected) connect(deadline);
    try {
      s.tcp().expires_at(deadline);
      return exchange(request, reused);
    } catch (const StaleConnection&) {
      s.close();
      if (attempt > 0) {
        throw RemoteError(RemoteFailure::Kind::error, url_.redacted() + ": the server closed the connection");
      }
    } catch (...) {
      s.close();  // whatever went wrong mid-exchange, what is left on this connection is unknown
      throw;
    }
  }
}

}  // namespace kache::storage::remote
