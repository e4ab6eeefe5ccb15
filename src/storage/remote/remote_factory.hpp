#pragma once
// The URL scheme → backend table: what the layered storage calls for each configured remote.
#include <memory>
#include <string>

#include "core/remote_url.hpp"
#include "storage/remote/remote_store.hpp"

namespace kache::storage::remote {

// Never null. Creating a store does no I/O: connections open on first use.
std::unique_ptr<RemoteBackend> make_remote_storage(const core::RemoteUrl& url, const RemoteStoreOptions& options);

}  // namespace kache::storage::remote
