// HttpStorage's http:// path (Boost.Beast) against a scripted loopback server: answers nginx never
// gives (interim 1xx answers, bytes after a complete answer, a body dripped slower than the operation
// timeout, a body until close, chunked bodies) and the request as it goes on the wire (Host, basic
// auth). Each connection is served on its own thread; a script writes the answer for each request.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/remote/http_storage.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/schemes.hpp"

namespace kache::storage::remote {
namespace {

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// One request (head and Content-Length body) from fd, or "" at end of stream.
std::string read_request(int fd, std::string& pending, bool with_body = true) {
  while (pending.find("\r\n\r\n") == std::string::npos) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    pending.append(buf, static_cast<std::size_t>(n));
  }
  const std::size_t head_end = pending.find("\r\n\r\n") + 4;
  std::size_t length = 0;
  if (const std::size_t cl = pending.find("Content-Length: "); cl != std::string::npos && cl < head_end) {
    length = std::stoul(pending.substr(cl + 16));
  }
  if (!with_body) length = 0;
  while (pending.size() < head_end + length) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    pending.append(buf, static_cast<std::size_t>(n));
  }
  std::string request = pending.substr(0, head_end + length);
  pending.erase(0, head_end + length);
  return request;
}

// The request's target: "GET /a HTTP/1.1" -> "/a".
std::string target_of(const std::string& request) {
  const std::size_t sp = request.find(' ');
  return request.substr(sp + 1, request.find(' ', sp + 1) - sp - 1);
}

std::string ok(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class ScriptedServer {
 public:
  // answer(fd, request) writes the answer; returning false closes the connection.
  using Answer = std::function<bool(int fd, const std::string& request)>;
  explicit ScriptedServer(Answer answer, bool ipv6 = false, bool read_bodies = true)
      : answer_(std::move(answer)), read_bodies_(read_bodies) {
    listener_ = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage addr{};
    socklen_t len;
    if (ipv6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
      a6->sin6_family = AF_INET6;
      a6->sin6_addr = in6addr_loopback;
      len = sizeof *a6;
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
      a4->sin_family = AF_INET;
      a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a4;
    }
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(listener_, 16) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(ipv6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                       : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    acceptor_ = std::thread([this] {
      for (;;) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        const std::lock_guard lock(mutex_);
        connections_.push_back(fd);
        ++accepted_;
        workers_.emplace_back([this, fd] {
          std::string pending;
          for (;;) {
            const std::string request = read_request(fd, pending, read_bodies_);
            if (request.empty()) break;
            {
              const std::lock_guard lock(mutex_);
              requests_.push_back(request);
            }
            if (!answer_(fd, request)) break;
          }
          ::shutdown(fd, SHUT_RDWR);
        });
      }
    });
  }
  ~ScriptedServer() {
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    std::vector<std::thread> workers;
    {
      const std::lock_guard lock(mutex_);
      for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
      workers = std::move(workers_);
    }
    for (auto& w : workers) w.join();
    for (int fd : connections_) ::close(fd);
    ::close(listener_);
  }
  int port() const { return port_; }
  std::vector<std::string> requests() const {
    const std::lock_guard lock(mutex_);
    return requests_;
  }
  int accepted() const {
    const std::lock_guard lock(mutex_);
    return accepted_;
  }

 private:
  Answer answer_;
  bool read_bodies_ = true;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::vector<std::thread> workers_;
  std::vector<int> connections_;
  std::vector<std::string> requests_;
  int accepted_ = 0;
};

core::RemoteUrl url_of(const std::string& spec, const core::RemoteSecrets& secrets = {}) {
  return core::parse_remote_url(spec, secrets, remote_schemes());
}

RemoteFailure::Kind failure_kind(const std::function<void()>& action) {
  try {
    action();
  } catch (const RemoteError& e) {
    std::printf("  (%s)\n", e.what());
    return e.kind();
  }
  ADD_FAILURE() << "no RemoteError thrown";
  return RemoteFailure::Kind::error;
}

std::string base(const ScriptedServer& server) { return "http://127.0.0.1:" + std::to_string(server.port()); }

// What get() gave: the value, "<miss>", or "<Type: message>".
std::string outcome(const std::function<std::optional<std::string>()>& get) {
  try {
    auto v = get();
    return v ? *v : "<miss>";
  } catch (const OversizedValue& e) {
    return std::string("<OversizedValue: ") + e.what() + ">";
  } catch (const RemoteError& e) {
    return std::string("<RemoteError") + (e.kind() == RemoteFailure::Kind::timeout ? "(timeout)" : "") + ": " +
           e.what() + ">";
  } catch (const std::exception& e) {
    return std::string("<exception: ") + e.what() + ">";
  }
}

// RFC 9110 15.2: a client must parse and ignore interim (1xx) answers it did not ask for, e.g.
// "103 Early Hints" (CDNs, nginx >= 1.29 early_hints) or WebDAV's "102 Processing". Beast's parser
// takes a 1xx as a complete answer without body; HttpStorage then fails the request and leaves the
// final answer on the kept-alive connection, where the next request reads it as its own.
TEST(RemoteHttpWire, InterimAnswersAreSkippedAndNeverTakenForTheNextOne) {
  ScriptedServer server([](int fd, const std::string& request) {
    send_all(fd, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    send_all(fd, ok("value of " + target_of(request)));
    return true;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat"));
  EXPECT_EQ(outcome([&] { return store.get("a"); }), "value of /a");
  EXPECT_EQ(outcome([&] { return store.get("b"); }), "value of /b");
  EXPECT_EQ(outcome([&] { return store.get("c"); }), "value of /c");
}

// Bytes after a complete answer, sent before the next request was written, are no answer to it
// (libcurl drops such a connection: "Excess found"). Here they are taken as the next key's value.
TEST(RemoteHttpWire, BytesAfterACompleteAnswerAreNotTheNextAnswer) {
  ScriptedServer server([](int fd, const std::string& request) {
    std::string answer = ok("value of " + target_of(request));
    if (target_of(request) == "/a") answer += ok("bytes nobody asked for");
    send_all(fd, answer);
    return true;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat"));
  EXPECT_EQ(outcome([&] { return store.get("a"); }), "value of /a");
  EXPECT_EQ(outcome([&] { return store.get("b"); }), "value of /b");
}

// A body dripped one byte at a time, each within the timeout but the whole far beyond it: the
// operation-timeout bounds the whole request.
TEST(RemoteHttpWire, ASlowDripIsBoundedByTheOperationTimeout) {
  std::atomic<bool> stop{false};
  ScriptedServer server([&](int fd, const std::string&) {
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
    for (int i = 0; i < 100 && !stop; ++i) {
      send_all(fd, "x");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // 5 s in all
    }
    return false;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat|operation-timeout=500"));
  const std::string got = outcome([&] { return store.get("a"); });
  stop = true;
  EXPECT_EQ(got.rfind("<RemoteError(timeout)", 0), 0u) << got;
}

// A body up to the close without "Connection: close", then the next request on a fresh connection.
TEST(RemoteHttpWire, ABodyUntilCloseThenANewConnection) {
  ScriptedServer server([](int fd, const std::string& request) {
    send_all(fd, "HTTP/1.1 200 OK\r\n\r\nvalue of " + target_of(request));
    return false;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat"));
  EXPECT_EQ(outcome([&] { return store.get("a"); }), "value of /a");
  EXPECT_EQ(outcome([&] { return store.get("b"); }), "value of /b");
}

TEST(RemoteHttpWire, ChunkedBodiesAndTheirBound) {
  ScriptedServer server([](int fd, const std::string& request) {
    const std::string body = "value of " + target_of(request);
    char size[16];
    std::snprintf(size, sizeof size, "%zx", body.size());
    send_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size) + "\r\n" + body +
                     "\r\n0\r\n\r\n");
    return true;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat"), "", 12);
  EXPECT_EQ(outcome([&] { return store.get("a"); }), "value of /a");
  EXPECT_EQ(outcome([&] { return store.get("long-key"); }).rfind("<OversizedValue", 0), 0u);
  EXPECT_EQ(outcome([&] { return store.get("b"); }), "value of /b");
}

// A late answer to a request that timed out is never the next request's answer. The answer to /a is
// held until the client has given up on it, so it is late however slow the machine; the next request
// has the default operation timeout (a 300 ms one gave a loaded machine 300 ms for a new connection
// and its answer, and an 800 ms sleep raced the 300 ms timeout).
TEST(RemoteHttpWire, ALateAnswerIsNotTheNextOne) {
  std::mutex mutex;
  std::condition_variable given_up_cv;
  bool given_up = false;
  ScriptedServer server([&](int fd, const std::string& request) {
    if (target_of(request) == "/a") {
      std::unique_lock lock(mutex);
      given_up_cv.wait_for(lock, std::chrono::seconds(60), [&] { return given_up; });
    }
    send_all(fd, ok("value of " + target_of(request)));
    return true;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat"));
  const std::string a = outcome([&] { return store.get("a"); });
  {
    const std::lock_guard lock(mutex);
    given_up = true;
  }
  given_up_cv.notify_all();  // the late answer goes out now, before the server reads another request
  EXPECT_EQ(a.rfind("<RemoteError(timeout)", 0), 0u) << a;
  EXPECT_EQ(outcome([&] { return store.get("b"); }), "value of /b");
}

// An error page larger than the bound is an error answer, not an oversized value (a miss that the
// breaker counts as a success).
TEST(RemoteHttpWire, ALargeErrorPageIsAnError) {
  ScriptedServer server([](int fd, const std::string&) {
    const std::string page(4096, 'e');
    send_all(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4096\r\n\r\n" + page);
    return true;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat"), "", 1024);
  EXPECT_EQ(outcome([&] { return store.get("a"); }).rfind("<RemoteError", 0), 0u)
      << outcome([&] { return store.get("a"); });
}

TEST(RemoteHttpWire, HostAndBasicAuthOnTheWire) {
  ScriptedServer server([](int fd, const std::string& request) {
    send_all(fd, ok("value of " + target_of(request)));
    return true;
  });
  // user "us er", password "p:ä ss" (UTF-8): base64("us er:p:\xc3\xa4 ss").
  HttpStorage store(url_of("http://us%20er:p%3A%C3%A4%20ss@127.0.0.1:" + std::to_string(server.port()) +
                           "/c%20d|layout=flat"));
  EXPECT_EQ(outcome([&] { return store.get("k/1"); }), "value of /c%20d/k%2F1");
  ASSERT_EQ(server.requests().size(), 1u);
  const std::string req = server.requests()[0];
  EXPECT_NE(req.find("\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"), std::string::npos) << req;
  EXPECT_NE(req.find("\r\nAuthorization: Basic dXMgZXI6cDrDpCBzcw==\r\n"), std::string::npos) << req;
  EXPECT_EQ(req.find("p:"), std::string::npos) << req;
}

TEST(RemoteHttpWire, Ipv6LiteralAndItsHostHeader) {
  std::unique_ptr<ScriptedServer> server;
  try {
    server = std::make_unique<ScriptedServer>(
        [](int fd, const std::string& request) {
          send_all(fd, ok("value of " + target_of(request)));
          return true;
        },
        true);
  } catch (const std::exception&) {
    GTEST_SKIP() << "no IPv6 loopback";
  }
  HttpStorage store(url_of("http://[::1]:" + std::to_string(server->port()) + "|layout=flat"));
  EXPECT_EQ(outcome([&] { return store.get("a"); }), "value of /a");
  ASSERT_EQ(server->requests().size(), 1u);
  EXPECT_NE(server->requests()[0].find("\r\nHost: [::1]:" + std::to_string(server->port()) + "\r\n"),
            std::string::npos)
      << server->requests()[0];
}

}  // namespace
}  // namespace kache::storage::remote

namespace kache::storage::remote {
namespace {

// The answer to a PUT claims a body of 100 TB: kache must neither try to hold it nor wait past the
// operation timeout; either way the store reports a RemoteError (a degraded remote, never a crash).
TEST(RemoteHttpWire, AHugeClaimedBodyOnAPutIsARemoteError) {
  ScriptedServer server([](int fd, const std::string&) {
    send_all(fd, "HTTP/1.1 201 Created\r\nContent-Length: 100000000000000\r\n\r\nabc");
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    return false;
  });
  HttpStorage store(url_of(base(server) + "|layout=flat|operation-timeout=300"));
  std::string got = outcome([&] {
    store.put("a", "v");
    return std::optional<std::string>("put returned");
  });
  EXPECT_EQ(got.rfind("<RemoteError", 0), 0u) << got;
}

}  // namespace
}  // namespace kache::storage::remote

namespace kache::storage::remote {
namespace {

// A server that refuses the credentials as soon as it has read the request's head, and closes without
// reading the 4 MB body (as servers do for 401/413): the store should say "refused the credentials".
TEST(RemoteHttpWire, AnEarlyRefusalOfAPutIsAnAuthFailure) {
  ScriptedServer server(
      [](int fd, const std::string&) {
        send_all(fd, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return false;
      },
      false, false);
  HttpStorage store(url_of(base(server) + "|layout=flat"));
  EXPECT_EQ(failure_kind([&] { store.put("a", std::string(4 << 20, 'v')); }), RemoteFailure::Kind::auth);
}

}  // namespace
}  // namespace kache::storage::remote
