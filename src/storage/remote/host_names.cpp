#include "storage/remote/host_names.hpp"

#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <cstring>
#include <mutex>

#include "storage/remote/remote_failure.hpp"

namespace kache::storage::remote {

namespace {

using Clock = std::chrono::steady_clock;

// What the lookup's callback leaves for the loop that drives it.
struct Lookup {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<HostAddress> addresses;
};

void on_addresses(void* arg, int status, int /*timeouts*/, ares_addrinfo* result) {
  auto* lookup = static_cast<Lookup*>(arg);
  lookup->done = true;
  lookup->status = status;
  for (const ares_addrinfo_node* node = result ? result->nodes : nullptr; node; node = node->ai_next) {
    if (node->ai_addrlen > sizeof(sockaddr_storage)) continue;
    HostAddress address;
    std::memcpy(&address.storage, node->ai_addr, node->ai_addrlen);
    address.length = static_cast<socklen_t>(node->ai_addrlen);
    lookup->addresses.push_back(address);
  }
  if (result) ::ares_freeaddrinfo(result);
}

// One c-ares channel for one lookup; destroying it closes its sockets (before any compiler runs) and
// ends a lookup still waiting, whose callback then runs with ARES_EDESTRUCTION.
class Channel {
 public:
  Channel(const core::RemoteUrl& url, const std::string& dns_servers) {
    static std::once_flag library;
    std::call_once(library, [] { ::ares_library_init(ARES_LIB_INIT_ALL); });
    if (const int rc = ::ares_init(&channel_); rc != ARES_SUCCESS) {
      channel_ = nullptr;
      throw RemoteError(RemoteFailure::Kind::error,
                        url.redacted() + ": cannot start the resolver (" + ::ares_strerror(rc) + ")");
    }
    if (!dns_servers.empty()) ::ares_set_servers_ports_csv(channel_, dns_servers.c_str());
  }
  ~Channel() {
    if (channel_) ::ares_destroy(channel_);
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ares_channel get() const { return channel_; }

 private:
  ares_channel channel_ = nullptr;
};

// Runs the channel's sockets and timers until the lookup ends; false when `until` came first.
bool drive_until(ares_channel channel, const Lookup& lookup, Clock::time_point until) {
  while (!lookup.done) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    ares_socket_t sockets[ARES_GETSOCK_MAXNUM];
    const int bits = ::ares_getsock(channel, sockets, ARES_GETSOCK_MAXNUM);
    pollfd fds[ARES_GETSOCK_MAXNUM];
    nfds_t count = 0;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      const short events = static_cast<short>((ARES_GETSOCK_READABLE(bits, i) ? POLLIN : 0) |
                                              (ARES_GETSOCK_WRITABLE(bits, i) ? POLLOUT : 0));
      if (events) fds[count++] = pollfd{sockets[i], events, 0};
    }
    timeval most{static_cast<time_t>(left / 1000), static_cast<suseconds_t>(left % 1000) * 1000};
    timeval wait{};
    const timeval* next = ::ares_timeout(channel, &most, &wait);
    const int wait_ms = static_cast<int>(next->tv_sec * 1000 + (next->tv_usec + 999) / 1000);
    const int ready = ::poll(fds, count, wait_ms);
    if (ready <= 0) {
      ::ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // the resolver's own timeouts
      continue;
    }
    for (nfds_t i = 0; i < count; ++i) {
      const bool readable = fds[i].revents & (POLLIN | POLLERR | POLLHUP);
      const bool writable = fds[i].revents & POLLOUT;
      if (readable || writable)
        ::ares_process_fd(channel, readable ? fds[i].fd : ARES_SOCKET_BAD, writable ? fds[i].fd : ARES_SOCKET_BAD);
    }
  }
  return true;
}

std::vector<HostAddress> numeric_address(const core::RemoteUrl& url) {
  HostAddress address;
  const auto port = htons(static_cast<std::uint16_t>(url.effective_port()));
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
  if (::inet_pton(AF_INET, url.host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = port;
    address.length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, url.host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = port;
    address.length = sizeof(sockaddr_in6);
  }
  return {address};
}

}  // namespace

std::string HostAddress::numeric_host() const {
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = storage.ss_family == AF_INET6
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr);
  if (::inet_ntop(storage.ss_family, raw, text, sizeof(text)) == nullptr) return "";
  return text;
}

std::vector<HostAddress> resolve_host_within(const core::RemoteUrl& url, Clock::time_point until) {
  return resolve_host_within(url, until, "");
}

std::vector<HostAddress> resolve_host_within(const core::RemoteUrl& url, Clock::time_point until,
                                             const std::string& dns_servers) {
  if (url.host_is_address()) return numeric_address(url);
  Lookup lookup;  // outlives the channel, whose destruction may still call back
  {
    const Channel channel(url, dns_servers);
    ares_addrinfo_hints hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    // ARES_AI_ENVHOSTS: CARES_HOSTS, when set, names the hosts file read in place of /etc/hosts (a name
    // of one's own without root; the tests' way to give a name two addresses).
    hints.ai_flags = ARES_AI_NUMERICSERV | ARES_AI_ENVHOSTS;
    const std::string port = std::to_string(url.effective_port());
    ::ares_getaddrinfo(channel.get(), url.host.c_str(), port.c_str(), &hints, on_addresses, &lookup);
    if (!drive_until(channel.get(), lookup, until)) {
      throw RemoteError(RemoteFailure::Kind::timeout,
                        url.redacted() + ": resolving " + url.host + " took longer than connect-timeout");
    }
  }
  if (lookup.status != ARES_SUCCESS || lookup.addresses.empty()) {
    throw RemoteError(RemoteFailure::Kind::error,
                      url.redacted() + ": cannot resolve " + url.host + " (" +
                          (lookup.status != ARES_SUCCESS ? ::ares_strerror(lookup.status) : "no address") + ")");
  }
  // IPv4 first: an attempt may take all of what is left of connect-timeout, and a name whose IPv6 route
  // drops packets (a firewall dropping IPv6, far more common than one dropping IPv4) must not lose a
  // server that answers on IPv4. hiredis, which resolved Redis names before, used IPv4 alone when a
  // name had any.
  // (Two passes rather than std::stable_partition, whose buffer libstdc++ 12 takes from a function
  // clang 19 reports as deprecated.)
  std::vector<HostAddress> ordered;
  for (const bool v4 : {true, false}) {
    for (const HostAddress& a : lookup.addresses) {
      if ((a.storage.ss_family == AF_INET) == v4) ordered.push_back(a);
    }
  }
  return ordered;
}

}  // namespace kache::storage::remote
