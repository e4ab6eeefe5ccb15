#include "servers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "util/fs.hpp"
#include "util/process.hpp"

namespace kache::testing {

namespace {

namespace fs = std::filesystem;

util::ProcessResult run_checked(const std::string& exe, const std::vector<std::string>& argv) {
  util::ProcessResult r = util::run_capture(exe, argv, util::current_environment());
  if (!r.ok()) {
    throw std::runtime_error(argv.front() + " failed (exit " + std::to_string(r.exit_code) + "): " + r.err + r.out);
  }
  return r;
}

std::string openssl() {
  auto bin = find_server_binary("openssl");
  if (!bin) throw std::runtime_error("openssl is not installed");
  return *bin;
}

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

bool port_answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in addr = loopback(port);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// The socket file appears at bind(), a moment before listen(): only a connect proves it serves.
bool unix_socket_answers(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, sizeof addr.sun_path - 1);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Servers start in well under a second; 20 s covers a loaded machine. Not a timed assertion: the
// test fails only if the server never comes up.
void wait_until(const std::function<bool()>& ready, const std::string& what) {
  for (int i = 0; i < 2000; ++i) {
    if (ready()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error(what + " did not come up");
}

// A daemonized server listens a moment before it writes its pid file (redis: port answering first in
// 9 of 30 starts measured): until the file holds a whole line, the server could not be stopped.
bool pid_file_written(const std::string& pid_file) {
  try {
    const std::string text = util::read_file(pid_file);
    return !text.empty() && text.back() == '\n';
  } catch (const std::exception&) {
    return false;
  }
}

void stop_by_pid_file(const std::string& pid_file) {
  std::string text;
  try {
    text = util::read_file(pid_file);
  } catch (const std::exception&) {
    return;
  }
  const pid_t pid = static_cast<pid_t>(std::atol(text.c_str()));
  if (pid <= 1) return;
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 1000 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (::kill(pid, 0) == 0) ::kill(pid, SIGKILL);
}

}  // namespace

std::optional<std::string> find_server_binary(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = std::string(path ? path : "") + ":/usr/sbin:/usr/bin:/sbin";
  return util::find_executable(name, dirs);
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::system_error(errno, std::generic_category(), "bind 127.0.0.1:0");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string make_temp_dir(const std::string& stem) {
  std::string pattern = "/tmp/" + stem + "-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::system_error(errno, std::generic_category(), "mkdtemp");
  return pattern;
}

// ---- redis ----------------------------------------------------------------------------------------

RedisServer::RedisServer(RedisOptions options) : password_(options.password) {
  const auto bin = find_server_binary("redis-server");
  if (!bin) throw std::runtime_error("redis-server is not installed");
  dir_ = make_temp_dir("kache-redis");
  port_ = free_loopback_port();
  std::vector<std::string> argv = {"redis-server",
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "yes",
                                   "--pidfile",
                                   dir_ + "/redis.pid",
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   dir_ + "/redis.log"};
  if (options.unix_socket) {
    socket_ = dir_ + "/redis.sock";
    argv.insert(argv.end(), {"--unixsocket", socket_, "--unixsocketperm", "700"});
  }
  if (options.password) argv.insert(argv.end(), {"--requirepass", *options.password});
  for (const auto& [name, pass] : options.users) {
    argv.insert(argv.end(), {"--user", name, "on", ">" + pass, "~*", "&*", "+@all"});
  }
  run_checked(*bin, argv);
  const int port = port_;
  wait_until([port] { return port_answers(port); }, "redis-server on port " + std::to_string(port_));
  const std::string pid_file = dir_ + "/redis.pid";
  wait_until([pid_file] { return pid_file_written(pid_file); }, "redis-server's pid file");
  if (!socket_.empty()) {
    const std::string socket = socket_;
    wait_until([socket] { return unix_socket_answers(socket); }, "redis-server's unix socket");
  }
}

RedisServer::~RedisServer() {
  stop_by_pid_file(dir_ + "/redis.pid");
  util::remove_all(dir_);
}

std::optional<std::string> RedisServer::raw_get(const std::string& key) const {
  redisContext* c = redisConnect("127.0.0.1", port_);
  if (!c || c->err) throw std::runtime_error("raw_get: cannot connect");
  if (password_) freeReplyObject(redisCommand(c, "AUTH %s", password_->c_str()));
  auto* reply = static_cast<redisReply*>(redisCommand(c, "GET %b", key.data(), key.size()));
  std::optional<std::string> out;
  if (reply && reply->type == REDIS_REPLY_STRING) out = std::string(reply->str, reply->len);
  freeReplyObject(reply);
  redisFree(c);
  return out;
}

// ---- TLS material ---------------------------------------------------------------------------------

TestCa::TestCa(const std::string& dir) {
  const std::string bin = openssl();
  ca_cert = dir + "/ca.crt";
  server_cert = dir + "/server.crt";
  server_key = dir + "/server.key";
  const std::string ca_key = dir + "/ca.key", csr = dir + "/server.csr", ext = dir + "/server.ext";
  // EC keys: generated in milliseconds, unlike RSA on a loaded machine.
  run_checked(bin, {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", ca_key, "-out", ca_cert, "-days", "2", "-subj", "/CN=kache test CA"});
  run_checked(bin, {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    server_key, "-out", csr, "-subj", "/CN=localhost"});
  util::write_file(ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  run_checked(bin, {"openssl", "x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial", "-out",
                    server_cert, "-days", "2", "-extfile", ext});
}

// ---- nginx ----------------------------------------------------------------------------------------

NginxServer::NginxServer(NginxOptions options) : tls_(options.tls) {
  const auto bin = find_server_binary("nginx");
  if (!bin) throw std::runtime_error("nginx is not installed");
  dir_ = make_temp_dir("kache-nginx");
  data_ = dir_ + "/data";
  util::create_directories(data_);
  util::create_directories(dir_ + "/tmp");
  port_ = free_loopback_port();

  std::string location =
      "      dav_methods PUT DELETE;\n      create_full_put_path on;\n"
      "      dav_access user:rw group:rw all:r;\n";
  if (options.basic_auth) {
    const auto& [user, password] = *options.basic_auth;
    const std::string hash = run_checked(openssl(), {"openssl", "passwd", "-apr1", password}).out;
    util::write_file(dir_ + "/htpasswd", user + ":" + hash);
    location += "      auth_basic \"kache\";\n      auth_basic_user_file " + dir_ + "/htpasswd;\n";
  }
  if (options.bearer_token) {
    location += "      if ($http_authorization != \"Bearer " + *options.bearer_token + "\") { return 401; }\n";
  }
  std::string listen = "    listen 127.0.0.1:" + std::to_string(port_);
  if (options.tls) {
    const TestCa ca(dir_);
    ca_cert_ = ca.ca_cert;
    listen += " ssl;\n    ssl_certificate " + ca.server_cert + ";\n    ssl_certificate_key " + ca.server_key + ";\n";
  } else {
    listen += ";\n";
  }
  const std::string tmp = dir_ + "/tmp";
  const std::string config = std::string(::geteuid() == 0 ? "user root;\n" : "") +  // the WebDAV root belongs to us
                             "worker_processes 1;\n"
                             "daemon on;\n"
                             "pid " +
                             dir_ +
                             "/nginx.pid;\n"
                             "error_log " +
                             dir_ +
                             "/error.log;\n"
                             "events { worker_connections 64; }\n"
                             "http {\n"
                             "  access_log off;\n"
                             "  client_max_body_size 0;\n" +
                             options.http_directives + "\n"
                             "  client_body_temp_path " +
                             tmp +
                             "/body;\n"
                             "  proxy_temp_path " +
                             tmp +
                             "/proxy;\n"
                             "  fastcgi_temp_path " +
                             tmp +
                             "/fastcgi;\n"
                             "  uwsgi_temp_path " +
                             tmp +
                             "/uwsgi;\n"
                             "  scgi_temp_path " +
                             tmp +
                             "/scgi;\n"
                             "  server {\n" +
                             listen + "    root " + data_ +
                             ";\n"
                             "    location / {\n" +
                             location +
                             "    }\n"
                             "  }\n"
                             "}\n";
  util::write_file(dir_ + "/nginx.conf", config);
  run_checked(*bin, {"nginx", "-p", dir_, "-c", dir_ + "/nginx.conf", "-e", dir_ + "/error.log"});
  const int port = port_;
  wait_until([port] { return port_answers(port); }, "nginx on port " + std::to_string(port_));
  const std::string pid_file = dir_ + "/nginx.pid";
  wait_until([pid_file] { return pid_file_written(pid_file); }, "nginx's pid file");
}

NginxServer::~NginxServer() {
  stop_by_pid_file(dir_ + "/nginx.pid");
  util::remove_all(dir_);
}

std::string NginxServer::base_url() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

// ---- black hole -----------------------------------------------------------------------------------

BlackHole::BlackHole(bool full_backlog) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(0);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, full_backlog ? 0 : 64) != 0) {
    throw std::system_error(errno, std::generic_category(), "black hole listener");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (full_backlog) {
    // Backlog 0 admits one queued connection; these fill the queue so later SYNs are dropped.
    for (int i = 0; i < 2; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
      fillers_.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the handshakes settle
  }
}

BlackHole::~BlackHole() {
  for (int fd : fillers_) ::close(fd);
  ::close(listener_);
}

std::vector<std::string> inheritable_sockets() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) out.push_back("fd " + std::to_string(fd));
  }
  return out;
}

}  // namespace kache::testing
