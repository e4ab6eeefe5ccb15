#pragma once
// Host names of remotes, resolved by c-ares within the connect timeout.
//
// glibc's getaddrinfo resolves through the system's NSS modules, which it loads with dlopen: a statically
// linked kache must never do that (its libc cannot initialize a second copy), and getaddrinfo's own
// waiting is not bounded by anything kache sets (seconds per DNS server and attempt). c-ares is linked
// statically, reads /etc/hosts (or the file CARES_HOSTS names) and /etc/resolv.conf itself (in the order
// /etc/nsswitch.conf gives), and is driven here with poll() until the deadline, so a dead DNS server
// costs at most connect-timeout.
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/remote_url.hpp"

namespace kache::storage::remote {

// One address of a host (TCP, port included).
struct HostAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  // "127.0.0.1", "::1": the address as text, which connects without resolving again.
  std::string numeric_host() const;
};

// The addresses of url's host (a name or a numeric address) and port, IPv4 ones first (then the
// resolver's order): callers try them in order within one deadline. Throws RemoteError: kind timeout
// past `until`, kind error when the name does not resolve.
std::vector<HostAddress> resolve_host_within(const core::RemoteUrl& url, std::chrono::steady_clock::time_point until);

// The same, asking the DNS servers in `dns_servers` (c-ares's "host:port,..." form) instead of
// /etc/resolv.conf's: what tests use to stand in for a DNS server that never answers.
std::vector<HostAddress> resolve_host_within(const core::RemoteUrl& url, std::chrono::steady_clock::time_point until,
                                             const std::string& dns_servers);

}  // namespace kache::storage::remote
