#pragma once
// Host names and the statically linked kache. getaddrinfo resolves a name through the system's NSS
// modules, which it loads with dlopen, and a static executable must never dlopen (its libc cannot
// initialize a second copy). So the static front hands every remote named by host name to kache-http
// (main.cpp), and if it ends up serving one itself (kache-http missing or unable to start), that
// remote fails with one sentence instead of resolving.
#include "storage/remote/remote_url.hpp"

namespace kache::storage::remote {

// Throws RemoteError (kind error) when this process is the static front and the URL names its host
// by name rather than by numeric address.
void require_resolvable(const RemoteUrl& url);

}  // namespace kache::storage::remote
