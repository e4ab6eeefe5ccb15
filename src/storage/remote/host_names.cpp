#include "storage/remote/host_names.hpp"

#include <netdb.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "storage/remote/curl_loader.hpp"
#include "storage/remote/remote_failure.hpp"

namespace kache::storage::remote {

void require_resolvable(const RemoteUrl& url) {
  if (!url.needs_name_resolution()) return;
  // The static front refuses dynamic loading first thing in main (refuse_curl_loading): a refusal on
  // record is what says this process is linked statically.
  if (curl_loading_refusal().empty()) return;
  throw RemoteError(RemoteFailure::Kind::error,
                    url.redacted() + ": this kache is linked statically and cannot resolve host names; use a "
                                     "numeric address, or install kache-http beside it");
}

std::string HostAddress::numeric_host() const {
  char text[NI_MAXHOST] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&storage), length, text, sizeof(text), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
    return "";
  }
  return text;
}

std::vector<HostAddress> resolve_host_within(const RemoteUrl& url, std::chrono::steady_clock::time_point until) {
  require_resolvable(url);
  struct Shared {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    int rc = 0;
    std::vector<HostAddress> addresses;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, host = url.host, port = std::to_string(url.effective_port())] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    std::vector<HostAddress> addresses;
    for (const addrinfo* a = found; a; a = a->ai_next) {
      if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
      HostAddress address;
      std::memcpy(&address.storage, a->ai_addr, a->ai_addrlen);
      address.length = a->ai_addrlen;
      addresses.push_back(address);
    }
    if (found) ::freeaddrinfo(found);
    const std::lock_guard lock(shared->mutex);
    shared->rc = rc;
    shared->addresses = std::move(addresses);
    shared->done = true;
    shared->done_cv.notify_all();
  }).detach();
  std::unique_lock lock(shared->mutex);
  if (!shared->done_cv.wait_until(lock, until, [&] { return shared->done; })) {
    throw RemoteError(RemoteFailure::Kind::timeout,
                      url.redacted() + ": resolving " + url.host + " took longer than connect-timeout");
  }
  if (shared->rc != 0 || shared->addresses.empty()) {
    throw RemoteError(RemoteFailure::Kind::error, url.redacted() + ": cannot resolve " + url.host + " (" +
                                                      (shared->rc ? ::gai_strerror(shared->rc) : "no address") + ")");
  }
  // IPv4 first: an attempt may take all of what is left of connect-timeout, and a name whose IPv6 route
  // drops packets (a firewall dropping IPv6, far more common than one dropping IPv4) must not lose a
  // server that answers on IPv4. hiredis, which resolved Redis names before, used IPv4 alone when a
  // name had any.
  std::stable_partition(shared->addresses.begin(), shared->addresses.end(),
                        [](const HostAddress& a) { return a.storage.ss_family == AF_INET; });
  return shared->addresses;
}

}  // namespace kache::storage::remote
