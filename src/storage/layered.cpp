#include "storage/layered.hpp"

#include <utility>

namespace kache::storage {

LayeredStorage::LayeredStorage(std::unique_ptr<LocalStorage> local, std::vector<std::unique_ptr<Storage>> remotes,
                               core::PartsEncoding encoding)
    : local_(std::move(local)), remotes_(std::move(remotes)), encoding_(encoding) {
  levels_.push_back({local_.get(), std::nullopt});
  for (const auto& r : remotes_) levels_.push_back({r.get(), std::nullopt});
}

// Whether a store's answer can be used; a failure switches a remote off (never the local store).
template <typename T>
bool LayeredStorage::usable(std::size_t level, StorageResult<T>& r) {
  if (r) return true;
  if (level > 0) levels_[level].failure = r.error();
  return false;
}

// The local store reads its own files (read_local: the fast paths, no copy of the body); the remotes
// are asked for bytes, which are checked and decoded here and written back above.
template <typename T, typename ReadLocal, typename Wrap>
StorageResult<std::optional<T>> LayeredStorage::lookup(std::string_view key, ReadLocal read_local, Wrap wrap) {
  auto local = read_local();
  if (local && *local) return local;
  for (std::size_t i = 1; i < levels_.size(); ++i) {
    if (levels_[i].failure) continue;
    if (auto value = fetch_from(i, key)) return std::optional<T>(wrap(std::move(*value)));
  }
  if (!local) return local.error();
  return std::optional<T>();
}

// A remote's value for key, checked and written back into the stores above it; nullopt when it has
// none, fails, or holds a damaged value (removed there).
std::optional<std::string> LayeredStorage::fetch_from(std::size_t level, std::string_view key) {
  auto r = levels_[level].store->get(key);
  if (!usable(level, r) || !*r) return std::nullopt;
  std::string bytes = std::move(**r);
  auto value = core::decode_value(std::string(bytes));
  if (!value) {
    ++corrupt_found_;
    (void)levels_[level].store->remove(key);  // best effort, as the local store drops a damaged file
    return std::nullopt;
  }
  write_back(level, key, bytes);
  return std::move(*value);
}

void LayeredStorage::write_back(std::size_t below, std::string_view key, std::string_view bytes) {
  for (std::size_t i = local_writes_ ? 0 : 1; i < below; ++i) {
    if (levels_[i].failure) continue;
    auto r = levels_[i].store->put(key, bytes);
    usable(i, r);
  }
}

// Reports the local store's outcome; with local writes off (remote.only), the first remote's.
StorageStatus LayeredStorage::put_everywhere(std::string_view key, std::string_view bytes) {
  std::optional<StorageStatus> first;
  if (local_writes_) first = local_->put(key, bytes);
  for (std::size_t i = 1; i < levels_.size(); ++i) {
    if (levels_[i].failure) {
      if (!first) first = *levels_[i].failure;
      continue;
    }
    auto r = levels_[i].store->put(key, bytes);
    if (!first) first = r;
    usable(i, r);
  }
  if (!first) return StorageFailure{StorageFailure::Kind::error, "no store to write to"};
  return *first;
}

void LayeredStorage::add_counts(std::map<std::string, std::uint64_t>& counts) const {
  for (const auto& r : remotes_) r->add_counts(counts);
}

StorageLookup LayeredStorage::get_record(std::string_view key) {
  return lookup<std::string>(
      key, [&] { return local_->read_value(key); }, [](std::string v) { return v; });
}

StorageStatus LayeredStorage::put_record(std::string_view key, std::string_view value) {
  return put_everywhere(key, core::encode_raw(value));
}

StorageStatus LayeredStorage::put_local_record(std::string_view key, std::string_view value) {
  if (!local_writes_) return util::Done{};
  return local_->put(key, core::encode_raw(value));
}

StorageResult<std::optional<Parts>> LayeredStorage::get_parts(std::string_view key, const std::string& body_dir) {
  return lookup<Parts>(
      key, [&] { return local_->read_parts(key, body_dir); },
      [](std::string v) {
        return Parts{std::move(v), "", 0, nullptr};
      });
}

StorageStatus LayeredStorage::put_parts(std::string_view key, std::string_view head, std::string_view body) {
  return put_everywhere(key, core::encode_parts(head, body, encoding_));
}

StorageStatus LayeredStorage::put_local_parts(std::string_view key, std::string_view head, std::string_view body) {
  if (!local_writes_) return util::Done{};
  return local_->put(key, core::encode_parts(head, body, encoding_));
}

// A failed removal does not switch a store off: a read-only cache just keeps the value.
void LayeredStorage::remove(std::string_view key) {
  for (auto& level : levels_) {
    if (!level.failure) (void)level.store->remove(key);
  }
}

}  // namespace kache::storage
