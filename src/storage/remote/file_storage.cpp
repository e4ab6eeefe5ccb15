#include "storage/remote/file_storage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include "core/config.hpp"
#include "storage/remote/remote_failure.hpp"
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

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name != "." && name != "..") out.emplace_back(name);
  }
  ::closedir(d);
  return out;
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

std::string FileStorage::key_path(std::string_view key) const {
  const std::string name(key);
  if (name.size() < 3) return util::join_path(url_.path, name);
  return util::join_path(util::join_path(url_.path, name.substr(0, 2)), name);
}

void FileStorage::check_mounted() {
  if (checked_) return;
  struct stat st {};
  if (::stat(url_.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw RemoteError(RemoteFailure::Kind::error,
                      name() + ": " + url_.path + " is not a directory (is the share mounted?)");
  }
  checked_ = true;
}

std::optional<std::string> FileStorage::get(std::string_view key) {
  check_mounted();
  const std::string path = key_path(key);
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    if (errno == ENOENT || errno == ESTALE) return std::nullopt;  // not there, or replaced meanwhile
    throw RemoteError(RemoteFailure::Kind::error, name() + ": open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return std::nullopt;
  if (static_cast<std::uint64_t>(st.st_size) > max_body_) throw OversizedValue(name() + ": " + path + " is too large");
  std::string value(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < value.size()) {
    const ssize_t n = ::read(file.fd, value.data() + got, value.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ESTALE) return std::nullopt;
    if (n < 0) throw RemoteError(RemoteFailure::Kind::error, name() + ": read " + path + ": " + std::strerror(errno));
    if (n == 0) break;  // cut short meanwhile: what was read fails the entry's check
    got += static_cast<std::size_t>(n);
  }
  value.resize(got);
  if (!read_only() && std::time(nullptr) - st.st_mtime > kRefreshAfterS) (void)::futimens(file.fd, nullptr);
  return value;
}

void FileStorage::write(std::string_view key, std::string_view value) {
  check_mounted();
  const std::string path = key_path(key);
  try {
    util::create_directories(util::dirname(path));
    util::write_file_atomic(path, value);
  } catch (const std::exception& e) {
    throw RemoteError(RemoteFailure::Kind::error, name() + ": " + e.what());
  }
}

void FileStorage::erase(std::string_view key) {
  check_mounted();
  const std::string path = key_path(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw RemoteError(RemoteFailure::Kind::error, name() + ": unlink " + path + ": " + std::strerror(errno));
  }
}

std::vector<FileStorage::Value> FileStorage::values(std::int64_t abandoned_after_s) {
  check_mounted();
  const std::time_t now = std::time(nullptr);
  std::vector<Value> out;
  for (const std::string& shard : names_in(url_.path)) {
    const std::string dir = util::join_path(url_.path, shard);
    for (const std::string& name : names_in(dir)) {
      const std::string path = util::join_path(dir, name);
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (is_key_name(name)) {
        out.push_back({path, static_cast<std::int64_t>(st.st_mtime), static_cast<std::uint64_t>(st.st_size)});
      } else if (name.starts_with(".tmp.") && abandoned_after_s >= 0 && now - st.st_mtime > abandoned_after_s) {
        ::unlink(path.c_str());  // left by a writer that died
      }
    }
  }
  return out;
}

std::uint64_t FileStorage::evict_older_than(std::int64_t max_age_s) {
  const std::time_t now = std::time(nullptr);
  std::uint64_t removed = 0;
  for (const Value& v : values(std::max<std::int64_t>(max_age_s, kRefreshAfterS))) {
    if (now - v.mtime > max_age_s && ::unlink(v.path.c_str()) == 0) ++removed;
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
    if (::unlink(v.path.c_str()) == 0) ++removed;
    total -= v.size;  // gone either way: removed here, or by another machine meanwhile
  }
  return removed;
}

}  // namespace kache::storage::remote
