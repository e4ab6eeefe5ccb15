#include "storage/remote/remote_factory.hpp"

#include "storage/remote/file_storage.hpp"
#include "storage/remote/http_storage.hpp"
#include "storage/remote/redis_storage.hpp"
#include "storage/remote/s3_storage.hpp"

namespace kache::storage::remote {

std::unique_ptr<RemoteBackend> make_remote_storage(const core::RemoteUrl& url, const RemoteStoreOptions& options) {
  switch (url.scheme) {
    case core::Scheme::redis:
    case core::Scheme::redis_unix:
      return std::make_unique<RedisStorage>(url, options.key_prefix, options.read_only);
    case core::Scheme::s3:
      return std::make_unique<S3Storage>(url, options.ca_file, options.max_entry_size, options.read_only);
    case core::Scheme::file:
      return std::make_unique<FileStorage>(url, options.max_entry_size, options.read_only);
    case core::Scheme::http:
    case core::Scheme::https:
      return std::make_unique<HttpStorage>(url, options.ca_file, options.max_entry_size, options.read_only);
  }
  return std::make_unique<HttpStorage>(url, options.ca_file, options.max_entry_size, options.read_only);
}

}  // namespace kache::storage::remote
