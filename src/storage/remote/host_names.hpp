#pragma once
// Host names of remotes: resolved within the connect timeout, and never by the statically linked kache.
//
// getaddrinfo resolves a name through the system's NSS modules, which it loads with dlopen, and a static
// executable must never dlopen (its libc cannot initialize a second copy). So the static front hands
// every remote named by host name to kache-http (main.cpp), and if it ends up serving one itself
// (kache-http missing or unable to start), that remote fails with one sentence instead of resolving.
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "storage/remote/remote_url.hpp"

namespace kache::storage::remote {

// Throws RemoteError (kind error) when this process is the static front and the URL names its host
// by name rather than by numeric address.
void require_resolvable(const RemoteUrl& url);

// One address of a host, as getaddrinfo gives it (TCP, port included).
struct HostAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  // "127.0.0.1", "::1": the address as text, which connects without resolving again.
  std::string numeric_host() const;
};

// The addresses of url's host (a name or a numeric address) and port, IPv4 ones first (then the
// resolver's order): callers try them in order within one deadline. getaddrinfo blocks for as long
// as the system's resolver takes (seconds per server and attempt), so it runs on a thread of its own
// and is waited for until `until`; a thread still blocked then is left to finish on its own (or to end
// with the process). Throws RemoteError: kind timeout past `until`, kind error when the name does not
// resolve or require_resolvable refuses it.
std::vector<HostAddress> resolve_host_within(const RemoteUrl& url, std::chrono::steady_clock::time_point until);

}  // namespace kache::storage::remote
