#pragma once
// How the floors above reach the configured stores: open them (the engine's compiles, the commands'
// walks of the local store), ask them for `kache doctor`'s rows, and maintain them (`kache -c`,
// `kache --evict-older-than`). commands/ includes from storage/ only this header and storage/storage.hpp;
// which backend serves a URL is the scheme table's business (storage/remote/schemes.hpp).
#include <string_view>
#include <vector>

#include "core/doctor_rows.hpp"
#include "core/remote_url.hpp"
#include "storage/layered.hpp"
#include "storage/storage.hpp"

namespace kache::core {
struct Config;
}

namespace kache::storage {

// The URL schemes remote.storage may name, each with its backend's rules: what core::load_config is
// given (core knows no scheme of its own).
core::RemoteSchemes remote_url_schemes();

// The stores the configuration names, for the pipeline and the CLI alike: the local store, then one
// store per remote URL (a sharded URL's shards behind one); nothing connects yet.
LayeredStorage open_storage(const core::Config& cfg);

// `kache doctor`'s rows of the configured remotes (section "remote"): each server's own probe, a sharded
// URL's shards each answering for themselves; a backend that cannot be made is one failing "reachable"
// row. probe_key is read, and written and removed unless the remote is read-only.
std::vector<core::DoctorRow> probe_remote_stores(const core::Config& cfg, std::string_view probe_key);

// Each configured remote that keeps its own files, maintained (evicted by age or trimmed to its
// max-size=), in the configured order; remotes with nothing to do give no outcome. Read-only remotes
// (their |read-only, or remote.read_only) are never changed.
std::vector<MaintenanceOutcome> maintain_remote_stores(const core::Config& cfg, const Maintenance& what);

}  // namespace kache::storage
