#include "storage/remote/file_storage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>
#include <vector>

#include "core/config.hpp"
#include "storage/remote/remote_failure.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"

namespace kache::storage::remote {

namespace {

// A hit's mtime refresh costs a metadata write on the server: once an hour is enough for an age measured
// in days.
constexpr std::time_t kRefreshAfterS = 3600;

bool is_key_name(std::string_view name) {
  if (name.empty() || name.front() == '.') return false;
  for (char c : name) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '_')) return false;
  }
  return true;
}

// /PATH: the shared directory, kept without a trailing '/'.
void parse_file_address(std::string_view text, core::RemoteUrl& url) {
  if (text.empty() || text.front() != '/') throw core::RemoteUrlProblem("expected file:///absolute/path");
  if (text.size() < 2 || !core::valid_url_path(text) || text.find('%') != std::string_view::npos) {
    throw core::RemoteUrlProblem("invalid character in the path (no blank, '%', '?', '#', '|' or '\\')");
  }
  while (text.size() > 1 && text.back() == '/') text.remove_suffix(1);
  url.path = std::string(text);
}

// max-size=SIZE, kept in bytes; 0 is none, the default, which a URL does not print.
void parse_file_attribute(std::string_view, std::optional<std::string_view> value, core::RemoteUrl& url) {
  std::uint64_t bytes = 0;
  if (!value || !core::parse_size(std::string(*value), bytes)) {
    throw core::RemoteUrlProblem("max-size takes a size (e.g. 500G)");
  }
  url.set_attribute("max-size", bytes == 0 ? std::nullopt : std::optional(std::to_string(bytes)));
}

constexpr std::string_view kFileAttributes[] = {"max-size"};

}  // namespace

const core::SchemeRules file_scheme = {
    .name = "file",
    .family = "file",
    .attributes = kFileAttributes,
    .attributes_apply_to = "file URLs only",
    .shown_attribute_values = kFileAttributes,
    .parse_address = parse_file_address,
    .parse_attribute = parse_file_attribute,
};

std::uint64_t file_max_size(const core::RemoteUrl& url) {
  const std::optional<std::string> bytes = url.attribute("max-size");
  return bytes ? std::stoull(*bytes) : 0;
}

FileStorage::FileStorage(core::RemoteUrl url, std::uint64_t max_body, bool every_remote_read_only)
    : RemoteBackend(url, every_remote_read_only), url_(std::move(url)), max_body_(max_body) {}

std::string FileStorage::key_relative(std::string_view key) {
  const std::string name(key);
  return name.size() < 3 ? name : name.substr(0, 2) + "/" + name;
}

std::string FileStorage::key_path(std::string_view key) const { return util::join_path(url_.path, key_relative(key)); }

const util::Beneath& FileStorage::share() {
  const std::lock_guard<std::mutex> lock(opening_);
  if (share_) return *share_;
  try {
    share_.emplace(url_.path);
  } catch (const std::system_error&) {
    throw RemoteError(RemoteFailure::Kind::error, name() + ": " + url_.path + " is not a directory (is the share mounted?)");
  }
  return *share_;
}

std::optional<std::string> FileStorage::get(std::string_view key) {
  const util::Beneath& dir = share();
  const std::string path = key_path(key);
  std::string refused;
  util::UniqueFd file;
  try {
    file = dir.open_regular(key_relative(key), O_RDONLY, 0, &refused);
  } catch (const std::system_error& e) {
    if (e.code().value() == ESTALE) return std::nullopt;  // replaced meanwhile
    throw RemoteError(RemoteFailure::Kind::error, name() + ": " + e.what());
  }
  if (file.get() < 0) return std::nullopt;  // not there, or something planted there: the next put replaces it
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) return std::nullopt;
  if (static_cast<std::uint64_t>(st.st_size) > max_body_) throw OversizedValue(name() + ": " + path + " is too large");
  std::string value(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < value.size()) {
    const ssize_t n = ::read(file.get(), value.data() + got, value.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ESTALE) return std::nullopt;
    if (n < 0) throw RemoteError(RemoteFailure::Kind::error, name() + ": read " + path + ": " + std::strerror(errno));
    if (n == 0) break;  // cut short meanwhile: what was read fails the entry's check
    got += static_cast<std::size_t>(n);
  }
  value.resize(got);
  if (!read_only() && std::time(nullptr) - st.st_mtime > kRefreshAfterS) (void)::futimens(file.get(), nullptr);
  return value;
}

namespace {

// The shard directory of a key, made a real directory: a link, file or FIFO planted in its place is
// removed (never followed) and the directory created in its stead.
void make_shard_directory(const util::Beneath& dir, const std::string& shard) {
  std::string refused;
  if (dir.create_directories(shard, 0777, &refused)) return;
  if (!dir.unlink_file(shard)) dir.remove_plant(shard);
  if (!dir.create_directories(shard, 0777, &refused)) {
    throw std::system_error(ELOOP, std::generic_category(), dir.path() + "/" + shard + " is " + refused);
  }
}

}  // namespace

void FileStorage::write(std::string_view key, std::string_view value) {
  const util::Beneath& dir = share();
  const std::string relative = key_relative(key);
  const std::size_t cut = relative.rfind('/');
  const std::string shard = cut == std::string::npos ? std::string() : relative.substr(0, cut);
  util::CacheUmaskScope cache_umask;  // a share a group writes needs group-writable shards and values
  try {
    if (!shard.empty()) make_shard_directory(dir, shard);
    // A temporary file renamed over the key: a link or FIFO there is replaced, a directory removed first.
    std::string refused;
    if (!dir.write_atomic(relative, value, 0666, &refused))
      throw std::system_error(ELOOP, std::generic_category(), dir.path() + "/" + shard + " is " + refused);
  } catch (const std::exception& e) {
    throw RemoteError(RemoteFailure::Kind::error, name() + ": " + e.what());
  }
}

void FileStorage::erase(std::string_view key) {
  const util::Beneath& dir = share();
  const std::string relative = key_relative(key);
  if (dir.unlink_file(relative)) return;
  const int err = errno;
  const std::optional<struct stat> st = dir.lstat(relative);
  // Gone already, or something planted that the next put replaces: nothing to erase.
  if (!st || !S_ISREG(st->st_mode)) return;
  throw RemoteError(RemoteFailure::Kind::error, name() + ": unlink " + key_path(key) + ": " + std::strerror(err));
}

namespace {

using util::Listing;

// The names in an open listing, less "." and "..", each with its lstat (links not followed).
std::vector<std::pair<std::string, struct stat>> entries_of(Listing& listing) {
  std::vector<std::pair<std::string, struct stat>> out;
  if (!listing.open()) return out;
  while (const dirent* e = listing.next()) {
    const std::string_view name = e->d_name;
    struct stat st {};
    if (name == "." || name == ".." || ::fstatat(listing.fd(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.emplace_back(std::string(name), st);
  }
  return out;
}

}  // namespace

std::vector<FileStorage::Value> FileStorage::values(std::int64_t abandoned_after_s) {
  const util::Beneath& dir = share();
  const std::time_t now = std::time(nullptr);
  std::vector<Value> out;
  Listing top(dir.open_directory("."));
  for (const auto& [shard, shard_st] : entries_of(top)) {
    if (!S_ISDIR(shard_st.st_mode)) continue;  // a link is never entered, a file is no shard
    Listing listing(dir.open_directory(shard));
    for (const auto& [entry, st] : entries_of(listing)) {
      if (!S_ISREG(st.st_mode)) continue;
      if (is_key_name(entry)) {
        out.push_back({shard + "/" + entry, static_cast<std::int64_t>(st.st_mtime), static_cast<std::uint64_t>(st.st_size)});
      } else if (entry.starts_with(".tmp.") && abandoned_after_s >= 0 && now - st.st_mtime > abandoned_after_s) {
        ::unlinkat(listing.fd(), entry.c_str(), 0);  // left by a writer that died
      }
    }
  }
  return out;
}

std::uint64_t FileStorage::evict_older_than(std::int64_t max_age_s) {
  const std::time_t now = std::time(nullptr);
  std::uint64_t removed = 0;
  for (const Value& v : values(std::max<std::int64_t>(max_age_s, kRefreshAfterS))) {
    if (now - v.mtime > max_age_s && share().unlink_file(v.path)) ++removed;
  }
  return removed;
}

std::optional<MaintenanceOutcome> FileStorage::maintain(const Maintenance& what) {
  // No lock spans machines: whichever machine runs this maintains the directory for all of them, and a
  // value removed under a reader is a miss there.
  if (read_only()) return std::nullopt;
  if (what.kind == Maintenance::Kind::evict_older_than) {
    return MaintenanceOutcome{name(), evict_older_than(what.max_age_s), 0, ""};
  }
  const std::uint64_t max_size = file_max_size(url_);
  if (max_size == 0) return std::nullopt;
  return MaintenanceOutcome{name(), trim_to_max_size(), max_size, ""};
}

std::uint64_t FileStorage::trim_to_max_size() {
  const std::uint64_t max_size = file_max_size(url_);
  if (max_size == 0) return 0;
  std::vector<Value> all = values(kRefreshAfterS);
  std::uint64_t total = 0;
  for (const Value& v : all) total += v.size;
  std::sort(all.begin(), all.end(), [](const Value& a, const Value& b) { return a.mtime < b.mtime; });
  std::uint64_t removed = 0;
  for (const Value& v : all) {
    if (total <= max_size) break;
    if (share().unlink_file(v.path)) ++removed;
    total -= v.size;  // gone either way: removed here, or by another machine meanwhile
  }
  return removed;
}

}  // namespace kache::storage::remote
