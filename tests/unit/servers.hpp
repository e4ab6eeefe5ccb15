#pragma once
// Real servers for the remote-storage tests, each on a free loopback port in its own temporary
// directory, stopped by its destructor: Debian's redis-server and nginx (WebDAV, optional basic auth,
// bearer token or TLS), a test CA made with the openssl CLI, and a black-hole listener for timeouts.
// Servers run daemonized (their start command returns once they forked; we then wait until the port
// answers) and are stopped by SIGTERM to the pid in their pid file.
#include <optional>
#include <string>
#include <vector>

namespace kache::testing {

// The path of a server binary (PATH, then /usr/sbin and /usr/bin), or nullopt: tests skip then.
std::optional<std::string> find_server_binary(const std::string& name);
// A port that was free on 127.0.0.1 a moment ago (bound to port 0, then released).
int free_loopback_port();
// A fresh directory under /tmp with a short path (unix socket paths are limited to 107 bytes).
std::string make_temp_dir(const std::string& stem);

struct RedisOptions {
  std::optional<std::string> password;  // requirepass
  // ACL users as "name password": each gets all keys and commands.
  std::vector<std::pair<std::string, std::string>> users;
  bool unix_socket = false;
};

// The open sockets of this process that a child it runs would inherit (no FD_CLOEXEC), as "fd N".
std::vector<std::string> inheritable_sockets();

class RedisServer {
 public:
  explicit RedisServer(RedisOptions options = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  int port() const { return port_; }
  const std::string& socket_path() const { return socket_; }
  // Runs redis-cli-free checks through a raw RESP client: the value stored under a key, if any.
  std::optional<std::string> raw_get(const std::string& key) const;

 private:
  std::string dir_;
  std::string socket_;
  std::optional<std::string> password_;
  int port_ = 0;
};

struct NginxOptions {
  std::optional<std::pair<std::string, std::string>> basic_auth;  // user, password (htpasswd by openssl)
  std::optional<std::string> bearer_token;                        // required "Authorization: Bearer T"
  bool tls = false;                                               // serves https with a TestCa cert
  std::string http_directives;                                    // more of nginx's http block
};

// A CA and a server certificate for 127.0.0.1 and localhost, made by the openssl CLI.
struct TestCa {
  explicit TestCa(const std::string& dir);
  std::string ca_cert, server_cert, server_key;
};

class NginxServer {
 public:
  explicit NginxServer(NginxOptions options = {});
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;
  int port() const { return port_; }
  std::string base_url() const;                            // http(s)://127.0.0.1:PORT
  const std::string& data_dir() const { return data_; }    // the WebDAV root on disk
  const std::string& ca_cert() const { return ca_cert_; }  // with tls

 private:
  std::string dir_, data_, ca_cert_;
  bool tls_ = false;
  int port_ = 0;
};

// A loopback listener that never accepts. Connections complete in the kernel (queued), so a client
// waits for an answer that never comes: an operation timeout. With full_backlog the accept queue is
// filled first, so new SYNs are dropped and a connect itself times out.
class BlackHole {
 public:
  explicit BlackHole(bool full_backlog);
  ~BlackHole();
  BlackHole(const BlackHole&) = delete;
  BlackHole& operator=(const BlackHole&) = delete;
  int port() const { return port_; }

 private:
  int listener_ = -1;
  std::vector<int> fillers_;
  int port_ = 0;
};

}  // namespace kache::testing
