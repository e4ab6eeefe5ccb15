#pragma once
// The scheme table: one row per URL scheme, naming how its backend is made (the shape of
// compiler/registry). Adding a storage backend is its file in storage/remote/ and its row here; the
// layered storage, doctor and maintenance reach every backend through make_remote_storage.
#include <memory>
#include <span>

#include "core/remote_url.hpp"
#include "storage/remote/remote_store.hpp"

namespace kache::storage::remote {

struct SchemeRow {
  core::Scheme scheme;
  // Makes the scheme's backend for url. Does no I/O: connections open on first use.
  std::unique_ptr<RemoteBackend> (*make)(const core::RemoteUrl& url, const RemoteStoreOptions& options);
};

// Every scheme core/remote_url parses, one row each.
std::span<const SchemeRow> scheme_rows();

// The backend of url's scheme; never null.
std::unique_ptr<RemoteBackend> make_remote_storage(const core::RemoteUrl& url, const RemoteStoreOptions& options);

}  // namespace kache::storage::remote
