#pragma once
// The URL scheme → backend table: what the layered storage calls for each configured remote.
#include <memory>
#include <string>

#include "storage/remote/remote_url.hpp"
#include "storage/storage.hpp"

namespace kache::storage::remote {

struct RemoteStoreOptions {
  std::string ca_file;                 // remote.ca_file: extra CA for https (empty: the system's)
  std::string key_prefix = "kache:";   // Redis keys are <prefix><key>
};

// Never null. Creating a store does no I/O: connections open, and libcurl loads, on first use.
std::unique_ptr<Storage> make_remote_storage(const RemoteUrl& url, const RemoteStoreOptions& options);

}  // namespace kache::storage::remote
