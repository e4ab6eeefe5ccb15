#pragma once
// The scheme table: one row per URL scheme, naming its rules (what its URLs look like and their
// attributes, core::SchemeRules, given by its backend's file) and how its backend is made (the shape of
// compiler/registry). Adding a storage backend is its file in storage/remote/ (the backend and its
// rules) and its row here; core/remote_url parses with the rules the table lists (remote_schemes()),
// and the layered storage, doctor and maintenance reach every backend through make_remote_storage.
#include <memory>
#include <span>

#include "core/remote_url.hpp"
#include "storage/remote/remote_store.hpp"

namespace kache::storage::remote {

struct SchemeRow {
  const core::SchemeRules* rules;
  // Makes the scheme's backend for url. Does no I/O: connections open on first use.
  std::unique_ptr<RemoteBackend> (*make)(const core::RemoteUrl& url, const RemoteStoreOptions& options);
};

std::span<const SchemeRow> scheme_rows();
// Every row's rules, in the table's order: what configuration parsing is given.
core::RemoteSchemes remote_schemes();

// The backend of url's scheme; never null.
std::unique_ptr<RemoteBackend> make_remote_storage(const core::RemoteUrl& url, const RemoteStoreOptions& options);

}  // namespace kache::storage::remote
