#include "storage/remote/schemes.hpp"

#include <stdexcept>

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
  return std::make_unique<S3Storage>(url, options.ca_file, options.max_entry_size, options.read_only);
}

std::unique_ptr<RemoteBackend> make_file(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  return std::make_unique<FileStorage>(url, options.max_entry_size, options.read_only);
}

constexpr SchemeRow kSchemes[] = {
    {core::Scheme::redis, make_redis}, {core::Scheme::redis_unix, make_redis},
    {core::Scheme::http, make_http},   {core::Scheme::https, make_http},
    {core::Scheme::s3, make_s3},       {core::Scheme::file, make_file},
};

}  // namespace

std::span<const SchemeRow> scheme_rows() { return kSchemes; }

std::unique_ptr<RemoteBackend> make_remote_storage(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  for (const SchemeRow& row : kSchemes) {
    if (row.scheme == url.scheme) return row.make(url, options);
  }
  // core/remote_url parses no scheme without a row (a unit test holds the two lists together).
  throw std::logic_error(std::string("no storage backend for the scheme ") + core::scheme_name(url.scheme));
}

}  // namespace kache::storage::remote
