#include "storage/remote/schemes.hpp"

#include <array>
#include <stdexcept>

#include "storage/remote/aws_credential_cache.hpp"
#include "storage/remote/file_storage.hpp"
#include "storage/remote/http_storage.hpp"
#include "storage/remote/redis_storage.hpp"
#include "storage/remote/s3_storage.hpp"

namespace kache::storage::remote {

namespace {

std::unique_ptr<RemoteBackend> make_redis(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  return std::make_unique<RedisStorage>(url, options.key_prefix, options.read_only);
}

std::unique_ptr<RemoteBackend> make_http(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  return std::make_unique<HttpStorage>(url, options.ca_file, options.max_entry_size, options.read_only);
}

std::unique_ptr<RemoteBackend> make_s3(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  if (!options.cache_dir.empty()) set_aws_credential_cache_exclusion(options.cache_dir);
  return std::make_unique<S3Storage>(url, options.ca_file, options.max_entry_size, options.read_only);
}

std::unique_ptr<RemoteBackend> make_file(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  return std::make_unique<FileStorage>(url, options.max_entry_size, options.read_only);
}

// The order is the one messages list the schemes in ("unsupported scheme 'ftp' (redis, ...)").
constexpr SchemeRow kSchemes[] = {
    {&redis_scheme, make_redis}, {&redis_unix_scheme, make_redis},
    {&http_scheme, make_http},   {&https_scheme, make_http},
    {&s3_scheme, make_s3},       {&file_scheme, make_file},
};

}  // namespace

std::span<const SchemeRow> scheme_rows() { return kSchemes; }

core::RemoteSchemes remote_schemes() {
  static const auto rules = [] {
    std::array<const core::SchemeRules*, std::size(kSchemes)> out{};
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = kSchemes[i].rules;
    return out;
  }();
  return rules;
}

std::unique_ptr<RemoteBackend> make_remote_storage(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  for (const SchemeRow& row : kSchemes) {
    if (row.rules->name == url.scheme) return row.make(url, options);
  }
  // A URL parsed with remote_schemes() names one of the rows.
  throw std::logic_error("no storage backend for the scheme " + url.scheme);
}

}  // namespace kache::storage::remote
