#include "storage/open.hpp"

#include <memory>
#include <utility>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/log.hpp"
#include "storage/remote/remote_failure.hpp"
#include "storage/remote/remote_store.hpp"
#include "storage/remote/schemes.hpp"
#include "storage/remote/sharded_store.hpp"
#include "util/fs.hpp"

namespace kache::storage {

namespace {

// One configured URL's store: its server, or its shards behind one ShardedStore, each with its breaker.
std::unique_ptr<Storage> open_remote(const core::RemoteUrl& url, const remote::RemoteStoreOptions& options) {
  if (url.shards.empty()) {
    return std::make_unique<remote::RemoteStore>(remote::make_remote_storage(url, options), url.identity(), options);
  }
  std::vector<std::unique_ptr<Storage>> shards;
  for (const auto& shard : url.shard_urls()) {
    shards.push_back(
        std::make_unique<remote::RemoteStore>(remote::make_remote_storage(shard, options), shard.identity(), options));
  }
  return std::make_unique<remote::ShardedStore>(url.redacted(), url.shards, std::move(shards));
}

}  // namespace

core::RemoteSchemes remote_url_schemes() { return remote::remote_schemes(); }

LayeredStorage open_storage(const core::Config& cfg) {
  auto local = std::make_unique<LocalStorage>(LocalStorageOptions{cfg.cache_dir, cfg.max_size});
  std::vector<std::unique_ptr<Storage>> remotes;
  if (!cfg.remote_urls.empty()) {
    remote::RemoteStoreOptions options;
    bool urls_usable = true;
    options.ca_file = cfg.remote_ca_file;
    options.breaker_dir = util::join_path(cfg.cache_dir, "remote-state");
    options.cache_dir = cfg.cache_dir;
    options.read_only = cfg.remote_read_only;
    if (!cfg.remote_signing_key_file.empty()) {
      try {
        options.signing_key = util::read_file(cfg.remote_signing_key_file);
      } catch (const std::exception& e) {
        // Without its key kache would accept unsigned values: no remotes at all instead.
        core::log().warn("cannot read remote.signing_key_file {}: {}; remote storage is off",
                         cfg.remote_signing_key_file, e.what());
        urls_usable = false;
      }
      // A key short enough to guess signs nothing: 16 bytes at least (`openssl rand -hex 32 > FILE`).
      constexpr std::size_t kShortestSigningKey = 16;
      if (urls_usable && options.signing_key.size() < kShortestSigningKey) {
        core::log().warn(
            "remote.signing_key_file {} holds {} bytes, fewer than {}; remote storage is off (write a "
            "longer secret, e.g. `openssl rand -hex 32 > {}`)",
            cfg.remote_signing_key_file, options.signing_key.size(), kShortestSigningKey, cfg.remote_signing_key_file);
        urls_usable = false;
      }
    }
    // Parsed when the configuration was read (a bad list is one warning there and no remotes here).
    if (urls_usable) {
      for (const auto& url : cfg.remote_urls) remotes.push_back(open_remote(url, options));
    }
  }
  LayeredStorage layered(std::move(local), std::move(remotes),
                         core::PartsEncoding{cfg.compression, cfg.compression_level});
  // remote.only: an ephemeral machine reads its local store (empty, or filled by this build's own
  // lookups) but writes only to the remotes.
  if (cfg.remote_only && !cfg.remote_urls.empty()) layered.set_local_writes(false);
  return layered;
}

namespace {

// The servers behind the configured URLs: a sharded URL's shards each answer for themselves.
std::vector<core::RemoteUrl> remote_servers(const core::Config& cfg) {
  std::vector<core::RemoteUrl> servers;
  for (const auto& url : cfg.remote_urls) {
    for (auto& shard : url.shard_urls()) servers.push_back(std::move(shard));
  }
  return servers;
}

// The options the doctor and maintenance make backends with: no breaker, no signing (they read no value).
remote::RemoteStoreOptions inspection_options(const core::Config& cfg) {
  remote::RemoteStoreOptions options;
  options.ca_file = cfg.remote_ca_file;
  options.read_only = cfg.remote_read_only;
  options.cache_dir = cfg.cache_dir;
  return options;
}

}  // namespace

std::vector<core::DoctorRow> probe_remote_stores(const core::Config& cfg, std::string_view probe_key) {
  std::vector<core::DoctorRow> rows;
  const remote::RemoteStoreOptions options = inspection_options(cfg);
  for (const auto& url : remote_servers(cfg)) {
    try {
      for (auto& row : remote::make_remote_storage(url, options)->probe(probe_key)) rows.push_back(std::move(row));
    } catch (const std::exception& e) {
      rows.push_back(remote::remote_row("reachable", core::DoctorStatus::fail, url.redacted(),
                                        fmt::format("{}.", e.what()), "correct remote.storage, or remove it"));
    }
  }
  return rows;
}

std::vector<MaintenanceOutcome> maintain_remote_stores(const core::Config& cfg, const Maintenance& what) {
  std::vector<MaintenanceOutcome> outcomes;
  const remote::RemoteStoreOptions options = inspection_options(cfg);
  for (const auto& url : remote_servers(cfg)) {
    const auto backend = remote::make_remote_storage(url, options);
    try {
      if (auto outcome = backend->maintain(what)) outcomes.push_back(std::move(*outcome));
    } catch (const remote::RemoteError& e) {
      outcomes.push_back(MaintenanceOutcome{backend->name(), 0, 0, e.what()});
    }
  }
  return outcomes;
}

}  // namespace kache::storage
