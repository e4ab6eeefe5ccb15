#include "storage/local/local_storage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include "core/entry_format.hpp"
#include "util/cache_umask.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"
#include "util/lock.hpp"
#include "util/scoped_file.hpp"

namespace kache::storage {

namespace container = core::container;

namespace {

constexpr int kShards = 16;
constexpr char kHexDigits[] = "0123456789abcdef";
// A temp file this old belongs to a writer that died (kill -9, power loss); a live put takes far less.
constexpr std::int64_t kStaleTempNs = 3600ll * 1'000'000'000;
constexpr std::string_view kTempPrefix = ".tmp.";

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

void check_key(std::string_view key) {
  // Keys become path components: only lowercase hex, long enough for the two directory levels.
  if (key.size() < 3 ||
      !std::all_of(key.begin(), key.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    throw std::invalid_argument("invalid cache key: " + std::string(key));
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

std::uint64_t sub_sat(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

// Exclusive flock on <dir>/<name> for the lifetime of the object. flock locks belong to the open file
// description, so this excludes other processes and other LocalStorage objects alike.
class ShardLock {
 public:
  explicit ShardLock(const std::string& shard_dir, const char* name = "lock") {
    util::create_directories(shard_dir);
    std::string path = util::join_path(shard_dir, name);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) throw_errno(errno, "open " + path);
    try {
      util::lock_bounded(fd_, LOCK_EX, path);  // util::LockTimeout when a stopped process holds it
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
  ~ShardLock() { ::close(fd_); }  // closing releases the lock
  ShardLock(const ShardLock&) = delete;
  ShardLock& operator=(const ShardLock&) = delete;

 private:
  int fd_ = -1;
};

struct EntryFile {
  std::string path;
  std::int64_t mtime_ns = 0;
  std::uint64_t size = 0;
};

bool is_temp_name(std::string_view name) { return name.starts_with(kTempPrefix); }

// Removes ".tmp.*" files in dir older than the stale limit (callers hold the shard lock).
void remove_stale_temp(int dirfd, const char* name, const struct stat& st, std::int64_t now) {
  if (now - mtime_ns(st) > kStaleTempNs) ::unlinkat(dirfd, name, 0);
}

// Removes stale ".tmp.*" files in the cache dir itself: the stats files are replaced through temp files
// there, and a kache killed between writing one and renaming it leaves it behind.
void remove_stale_root_temps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::int64_t now = util::now_ns();
  while (dirent* de = ::readdir(d)) {
    if (!is_temp_name(de->d_name)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      remove_stale_temp(::dirfd(d), de->d_name, st, now);
  }
  ::closedir(d);
}

// Lists the entry files of one shard: regular files in <shard>/<xx>/ whose names do not start with
// '.' (temp files do). Optionally removes stale temp files along the way.
std::vector<EntryFile> scan_shard(const std::string& shard_dir, bool clean_temps) {
  std::vector<EntryFile> entries;
  const std::int64_t now = util::now_ns();
  DIR* top = ::opendir(shard_dir.c_str());
  if (top == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return entries;
    throw_errno(errno, "opendir " + shard_dir);
  }
  std::vector<std::string> subdirs;
  while (dirent* de = ::readdir(top)) {
    std::string_view name = de->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(top), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (!name.starts_with('.')) subdirs.emplace_back(name);
    } else if (clean_temps && is_temp_name(name)) {
      remove_stale_temp(::dirfd(top), de->d_name, st, now);  // e.g. of the size counter
    }
  }
  ::closedir(top);

  for (const auto& sub : subdirs) {
    std::string sub_path = util::join_path(shard_dir, sub);
    DIR* d = ::opendir(sub_path.c_str());
    if (d == nullptr) continue;
    while (dirent* de = ::readdir(d)) {
      std::string_view name = de->d_name;
      if (name.starts_with('.')) {
        if (clean_temps && is_temp_name(name)) {
          struct stat st {};
          if (::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            remove_stale_temp(::dirfd(d), de->d_name, st, now);
        }
        continue;
      }
      struct stat st {};
      if (::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // raced away
      if (!S_ISREG(st.st_mode)) continue;
      entries.push_back({util::join_path(sub_path, name), mtime_ns(st), static_cast<std::uint64_t>(st.st_size)});
    }
    ::closedir(d);
  }
  return entries;
}

std::uint64_t sum_sizes(const std::vector<EntryFile>& entries) {
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.size;
  return total;
}

// A missing counter is an answer, not an error: total_size() asks all 16 shards after every put, and in
// a new cache most have none yet. Thrown and caught per shard (util::read_file), that cost a remote hit
// written back into a fresh cache dir ~1 M instructions (the first throws of a process walk the unwind
// tables). A counter is at most 20 digits; a longer file is damaged, and is rebuilt from the files.
std::optional<std::uint64_t> read_counter(const std::string& shard_dir) {
  const std::string path = util::join_path(shard_dir, "size");
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw_errno(errno, "open " + path);
  }
  char buf[64];
  std::size_t have = 0;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf + have, sizeof buf - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "read " + path);
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
    if (have == sizeof buf) return std::nullopt;
  }
  std::string_view text(buf, have);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

void write_counter(const std::string& shard_dir, std::uint64_t value) {
  util::write_file_atomic(util::join_path(shard_dir, "size"), std::to_string(value) + "\n");
}

// Removes the shard's counter before a batch of unlinks that rewrites it at the end: a kache killed
// halfway through then leaves no counter (the next reader counts the files) instead of one that still
// counts the files already gone. Caller holds the lock.
void forget_counter_locked(const std::string& shard_dir) { ::unlink(util::join_path(shard_dir, "size").c_str()); }

// The shard's counter; a missing or damaged one is rebuilt from the files. Caller holds the lock.
std::uint64_t load_counter_locked(const std::string& shard_dir) {
  if (auto v = read_counter(shard_dir)) return *v;
  return sum_sizes(scan_shard(shard_dir, false));
}

// Evicts least recently used entries until the shard is within 90% of `share` (when limit is set), then
// stores the real size of what remains. Caller holds the lock.
void trim_locked(const std::string& shard_dir, bool limited, std::uint64_t share) {
  std::vector<EntryFile> entries = scan_shard(shard_dir, true);
  std::uint64_t total = sum_sizes(entries);
  const std::uint64_t target = share / 10 * 9 + share % 10 * 9 / 10;
  if (limited && total > share) {
    std::sort(entries.begin(), entries.end(), [](const EntryFile& a, const EntryFile& b) {
      return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.path < b.path;
    });
    for (const auto& e : entries) {
      if (total <= target) break;
      if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) total = sub_sat(total, e.size);
    }
  }
  write_counter(shard_dir, total);
}

// A read-only mapping of a whole file, populated at once (one call instead of a fault per page).
class Mapping {
 public:
  Mapping(int fd, std::size_t size) : size_(size) {
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    data_ = static_cast<const char*>(p);
  }
  ~Mapping() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::string_view view() const { return {data_ ? data_ : "", size_}; }

 private:
  const char* data_ = nullptr;
  std::size_t size_;
};

// Reads the whole file into out, sized once from `size_hint` (its fstat size) so that a large entry is
// not copied through a chain of growing buffers.
bool read_fd(int fd, std::string& out, std::size_t size_hint) {
  out.resize(size_hint + 1);  // one spare byte detects a file that grew since fstat
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) out.resize(out.size() * 2);
    ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  out.resize(have);
  return true;
}

}  // namespace

LocalStorage::LocalStorage(LocalStorageOptions options) : opt_(std::move(options)) {}

std::string LocalStorage::entry_path(std::string_view key) const {
  std::string p = util::join_path(opt_.dir, key.substr(0, 1));
  p = util::join_path(p, key.substr(1, 2));
  return util::join_path(p, key);
}

namespace {

std::string shard_of(const std::string& dir, std::string_view key) { return util::join_path(dir, key.substr(0, 1)); }

std::string shard_at(const std::string& dir, int i) { return util::join_path(dir, std::string(1, kHexDigits[i])); }

// Unlinks path under the shard lock and takes its size off the counter. With `expect` set, only if the
// file is still that inode (a concurrent put may have replaced a corrupt entry by a good one).
void unlink_entry(const std::string& shard_dir, const std::string& path,
                  std::optional<std::pair<dev_t, ino_t>> expect) {
  util::CacheUmaskScope cache_umask;
  ShardLock lock(shard_dir);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (expect && (st.st_dev != expect->first || st.st_ino != expect->second)) return;
  const std::uint64_t counter = load_counter_locked(shard_dir);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return;
    throw_errno(errno, "unlink " + path);
  }
  write_counter(shard_dir, sub_sat(counter, static_cast<std::uint64_t>(st.st_size)));
}

}  // namespace

// The entry file of a key, open for reading, with its stat; nullopt when there is none.
struct OpenEntry {
  std::string path;
  util::UniqueFd fd;
  struct stat st {};
};

void LocalStorage::drop_corrupt(std::string_view key, const OpenEntry& e) {
  ++corrupt_found_;
  try {
    unlink_entry(shard_of(opt_.dir, key), e.path, std::pair{e.st.st_dev, e.st.st_ino});
  } catch (...) {
    // Corruption is reported as a miss, never thrown; a read-only cache just keeps the bad file.
  }
}

std::optional<OpenEntry> LocalStorage::open_entry(std::string_view key) const {
  check_key(key);
  std::optional<OpenEntry> e(std::in_place);
  e->path = entry_path(key);
  e->fd.reset(::open(e->path.c_str(), O_RDONLY | O_CLOEXEC));
  if (e->fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw_errno(errno, "open " + e->path);
  }
  if (::fstat(e->fd.get(), &e->st) != 0) throw_errno(errno, "stat " + e->path);
  return e;
}

namespace {

// A backend reports failures as values (storage.hpp): whatever the file system throws becomes "error".
template <typename F>
auto guarded(F&& f) -> StorageResult<decltype(f())> {
  try {
    return f();
  } catch (const util::LockTimeout& e) {
    return StorageFailure{StorageFailure::Kind::timeout, e.what()};  // a lock held too long (cache.lock_timeout)
  } catch (const std::exception& e) {
    return StorageFailure{StorageFailure::Kind::error, e.what()};
  }
}

// Decompresses a zstd frame of `size` bytes: the first head_size bytes into `head`, the rest written to
// out_fd. One buffer of the value's size, uninitialized: zstd then decodes the frame in a single pass
// straight into it (its streaming mode would decode into its own window, about as large, and copy out of
// it: 14 % of a thrust+cub hit's instructions), and only the pages written are touched (zeroing a fixed
// 256 KiB buffer was a sixth of a tiny hit's instructions). Huge values still stream through 64 MiB.
// False when the frame is damaged.
bool stream_frame(std::string_view frame, std::uint64_t size, std::uint64_t head_size, std::string& head, int out_fd,
                  const std::string& out_path) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) throw std::bad_alloc();
  head.reserve(static_cast<std::size_t>(head_size));
  constexpr std::uint64_t kMaxBuffer = 64ull << 20;
  const auto buf_size = static_cast<std::size_t>(std::clamp<std::uint64_t>(size, 1, kMaxBuffer));
  const std::unique_ptr<char[]> buf(new char[buf_size]);
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  std::uint64_t produced = 0;
  while (true) {
    ZSTD_outBuffer ob{buf.get(), buf_size, 0};
    const std::size_t ret = ZSTD_decompressStream(dctx.get(), &ob, &in);
    if (ZSTD_isError(ret) || produced + ob.pos > size) return false;
    std::string_view chunk(buf.get(), ob.pos);
    if (head.size() < head_size) {
      const std::size_t take = std::min<std::size_t>(chunk.size(), static_cast<std::size_t>(head_size) - head.size());
      head.append(chunk.substr(0, take));
      chunk.remove_prefix(take);
    }
    if (!chunk.empty()) util::write_fully(out_fd, chunk, out_path);
    produced += ob.pos;
    if (ret == 0) break;                                      // the frame is complete
    if (in.pos == in.size && ob.pos < ob.size) return false;  // input exhausted before the frame ended
  }
  return produced == size;
}

}  // namespace

StorageLookup LocalStorage::get(std::string_view key) {
  return guarded([&]() -> std::optional<std::string> {
    auto e = open_entry(key);
    if (!e) return std::nullopt;
    std::string bytes;
    if (!read_fd(e->fd.get(), bytes, static_cast<std::size_t>(e->st.st_size))) throw_errno(errno, "read " + e->path);
    ::futimens(e->fd.get(), nullptr);  // LRU, as in read_and_decode
    return bytes;
  });
}

StorageStatus LocalStorage::put(std::string_view key, std::string_view bytes) {
  return guarded([&] {
    put_blob(key, bytes);
    return util::Done{};
  });
}

StorageStatus LocalStorage::remove(std::string_view key) {
  return guarded([&] {
    remove_entry(key);
    return util::Done{};
  });
}

StorageLookup LocalStorage::read_value(std::string_view key) {
  return guarded([&] { return find_value(key); });
}

StorageResult<std::optional<Parts>> LocalStorage::read_parts(std::string_view key, const std::string& body_dir) {
  return guarded([&] { return find_parts(key, body_dir); });
}

std::optional<std::string> LocalStorage::find_value(std::string_view key) {
  auto e = open_entry(key);
  if (!e) return std::nullopt;
  char header[container::kRawHeaderLen];
  const ssize_t got = ::pread(e->fd.get(), header, sizeof header, 0);
  if (auto h = container::parse_raw_header(std::string_view(header, got > 0 ? static_cast<std::size_t>(got) : 0)))
    return read_raw_payload(key, *e, *h);
  return read_and_decode(key, *e);
}

// A raw record (the manifest a hit reads first): the payload is read straight into the string that is
// returned, instead of the file whole and then the payload moved down over the header (one copy of
// the manifest, 3 % of a hit's instructions).
std::optional<std::string> LocalStorage::read_raw_payload(std::string_view key, const OpenEntry& e,
                                                          const container::RawHeader& h) {
  const auto file_size = static_cast<std::uint64_t>(e.st.st_size);
  std::string payload;
  bool intact = h.size == file_size - container::kRawHeaderLen;
  if (intact) {
    payload.resize(static_cast<std::size_t>(h.size));
    const ssize_t n = ::pread(e.fd.get(), payload.data(), payload.size(), static_cast<off_t>(container::kRawHeaderLen));
    if (n < 0) throw_errno(errno, "read " + e.path);
    intact = static_cast<std::uint64_t>(n) == h.size && container::payload_matches(payload, h.checksum);
  }
  if (!intact) {
    drop_corrupt(key, e);
    return std::nullopt;
  }
  ::futimens(e.fd.get(), nullptr);  // LRU, as in read_and_decode
  return payload;
}

std::optional<std::string> LocalStorage::read_and_decode(std::string_view key, const OpenEntry& e) {
  std::string data;
  if (!read_fd(e.fd.get(), data, static_cast<std::size_t>(e.st.st_size))) throw_errno(errno, "read " + e.path);
  core::Decoded<std::string> value = core::decode_value(std::move(data));
  if (!value) {
    drop_corrupt(key, e);
    return std::nullopt;
  }
  // LRU: a hit makes the entry the most recently used. Failure (read-only cache) is harmless.
  ::futimens(e.fd.get(), nullptr);
  return std::move(*value);
}

std::optional<Parts> LocalStorage::find_parts(std::string_view key, const std::string& body_dir) {
  auto e = open_entry(key);
  if (!e) return std::nullopt;
  char fixed[container::kSplitHeaderLen];
  const ssize_t got = ::pread(e->fd.get(), fixed, sizeof fixed, 0);
  if (got < 0) throw_errno(errno, "read " + e->path);
  const std::string_view prefix(fixed, static_cast<std::size_t>(got));
  if (auto h = container::parse_split_header(prefix, static_cast<std::uint64_t>(e->st.st_size)))
    return restore_split(key, *e, *h, body_dir);
  if (container::is_split_zstd(prefix)) return stream_split_zstd(key, *e, body_dir);
  if (container::is_split(prefix)) {
    drop_corrupt(key, *e);  // a split entry with a broken header
    return std::nullopt;
  }
  // Stored whole (compressed, or by an older kache): the caller gets the value and writes the body.
  auto value = read_and_decode(key, *e);
  if (!value) return std::nullopt;
  return Parts{std::move(*value), "", 0, nullptr};
}

// The head is read into memory; the body is checked through a mapping of the page cache (no copy), then
// cloned or copied by the kernel into a new file beside its destination.
std::optional<Parts> LocalStorage::restore_split(std::string_view key, const OpenEntry& e,
                                                 const container::SplitHeader& h, const std::string& body_dir) {
  const int fd = e.fd.get();
  std::string head(static_cast<std::size_t>(h.head_size), '\0');
  if (::pread(fd, head.data(), head.size(), container::kSplitHeaderLen) != static_cast<ssize_t>(head.size()) ||
      !container::payload_matches(head, h.head_checksum)) {
    drop_corrupt(key, e);
    return std::nullopt;
  }
  if (h.body_size > 0) {
    void* map =
        ::mmap(nullptr, h.body_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, static_cast<off_t>(h.body_offset));
    if (map == MAP_FAILED) throw_errno(errno, "mmap " + e.path);
    const bool intact =
        container::payload_matches(std::string_view(static_cast<const char*>(map), h.body_size), h.body_checksum);
    ::munmap(map, h.body_size);
    if (!intact) {
      drop_corrupt(key, e);
      return std::nullopt;
    }
  }
  util::CopyMethod method = util::CopyMethod::read_write;
  std::string body_file = util::copy_range_to_temp(fd, h.body_offset, h.body_size, body_dir, "restore", &method);
  ::futimens(fd, nullptr);
  return Parts{std::move(head), std::move(body_file), h.body_size, util::copy_method_name(method)};
}

// Decompresses a split-zstd entry: the head into memory, the body into a new file in body_dir. The
// compressed bytes are mapped and streamed (stream_frame), never copied whole.
std::optional<Parts> LocalStorage::stream_split_zstd(std::string_view key, const OpenEntry& e,
                                                     const std::string& body_dir) {
  const Mapping map(e.fd.get(), static_cast<std::size_t>(e.st.st_size));
  const auto parsed = container::parse_split_zstd(map.view());
  if (!parsed) {
    drop_corrupt(key, e);
    return std::nullopt;
  }
  std::string head;
  std::string body_file;
  util::UniqueFd out(util::create_temp_file(body_dir, "restore", &body_file));
  util::UnlinkOnExit cleanup(body_file);
  if (!stream_frame(parsed->frame, parsed->value_size, parsed->head_size, head, out.get(), body_file)) {
    drop_corrupt(key, e);
    return std::nullopt;
  }
  const int done = out.release();
  if (::close(done) != 0) throw std::system_error(errno, std::generic_category(), "close " + body_file);
  cleanup.release();
  ::futimens(e.fd.get(), nullptr);
  return Parts{std::move(head), std::move(body_file), parsed->value_size - parsed->head_size, "zstd stream"};
}

void LocalStorage::put_blob(std::string_view key, std::string_view blob) {
  check_key(key);
  const std::string path = entry_path(key);
  const std::string dir = util::dirname(path);
  const std::string shard = shard_of(opt_.dir, key);
  util::CacheUmaskScope cache_umask;
  util::create_directories(dir);
  // The slow part (writing) happens outside the lock; only publish + accounting are serialized.
  std::string tmp = util::write_temp_file(dir, key, blob);
  try {
    ShardLock lock(shard);
    std::uint64_t counter = load_counter_locked(shard);
    struct stat old {};
    std::uint64_t old_size = 0;
    if (::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode)) old_size = static_cast<std::uint64_t>(old.st_size);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(errno, "rename " + tmp + " -> " + path);
    tmp.clear();
    counter = sub_sat(counter, old_size) + blob.size();
    write_counter(shard, counter);
  } catch (...) {
    if (!tmp.empty()) ::unlink(tmp.c_str());
    throw;
  }
  if (opt_.max_size > 0 && total_size() > opt_.max_size) evict(path);
}

// Least-recently-used eviction over the whole store, down to 90% of max_size. One process at a
// time (flock on <dir>/cleanup.lock); the others go on storing and reading meanwhile. Each shard's
// files are removed and its counter recomputed under that shard's lock; a file whose mtime moved
// since the scan (a hit refreshed it) is spared. `keep` (the entry just stored) is never evicted, so
// an entry larger than the share a smaller bound would leave it still gets used once.
void LocalStorage::evict(const std::string& keep) {
  util::CacheUmaskScope cache_umask;
  std::optional<ShardLock> cleanup;
  try {
    cleanup.emplace(opt_.dir, "cleanup.lock");
  } catch (const util::LockTimeout&) {
    return;  // another process is evicting, or is stopped holding the lock: the next put tries again
  }
  remove_stale_root_temps(opt_.dir);
  {
    std::uint64_t total = total_size();
    if (total > opt_.max_size) {
      struct Victim {
        EntryFile file;
        int shard;
      };
      std::vector<Victim> all;
      for (int i = 0; i < kShards; ++i) {
        for (auto& e : scan_shard(shard_at(opt_.dir, i), true)) all.push_back({std::move(e), i});
      }
      std::sort(all.begin(), all.end(), [](const Victim& a, const Victim& b) {
        return a.file.mtime_ns != b.file.mtime_ns ? a.file.mtime_ns < b.file.mtime_ns : a.file.path < b.file.path;
      });
      const std::uint64_t target = opt_.max_size / 10 * 9;
      std::vector<std::vector<EntryFile>> by_shard(kShards);
      for (auto& v : all) {
        if (total <= target) break;
        if (v.file.path == keep) continue;
        total = sub_sat(total, v.file.size);
        by_shard[v.shard].push_back(std::move(v.file));
      }
      for (int i = 0; i < kShards; ++i) {
        if (by_shard[i].empty()) continue;
        const std::string shard = shard_at(opt_.dir, i);
        std::optional<ShardLock> lock;
        try {
          lock.emplace(shard);
        } catch (const util::LockTimeout&) {
          continue;  // a stopped holder: this shard keeps its files until a later eviction
        }
        forget_counter_locked(shard);
        for (const auto& e : by_shard[i]) {
          struct stat st {};
          if (::lstat(e.path.c_str(), &st) != 0 || mtime_ns(st) != e.mtime_ns) continue;
          ::unlink(e.path.c_str());
        }
        trim_locked(shard, false, 0);  // recount from the files that remain
      }
    }
  }
}

void LocalStorage::remove_entry(std::string_view key) {
  check_key(key);
  const std::string shard = shard_of(opt_.dir, key);
  if (!util::exists(shard)) return;
  unlink_entry(shard, entry_path(key), std::nullopt);
}

std::uint64_t LocalStorage::total_size() const {
  std::uint64_t total = 0;
  for (int i = 0; i < kShards; ++i) {
    const std::string shard = shard_at(opt_.dir, i);
    if (auto v = read_counter(shard)) {
      total += *v;
    } else {
      total += sum_sizes(scan_shard(shard, false));  // no counter yet: count the files
    }
  }
  return total;
}

std::uint64_t LocalStorage::entry_count() const {
  std::uint64_t n = 0;
  for (int i = 0; i < kShards; ++i) n += scan_shard(shard_at(opt_.dir, i), false).size();
  return n;
}

void LocalStorage::clear() {
  util::CacheUmaskScope cache_umask;
  remove_stale_root_temps(opt_.dir);
  for (int i = 0; i < kShards; ++i) {
    const std::string shard = shard_at(opt_.dir, i);
    if (!util::exists(shard)) continue;
    ShardLock lock(shard);
    forget_counter_locked(shard);
    std::uint64_t left = 0;
    for (const auto& e : scan_shard(shard, true)) {
      if (::unlink(e.path.c_str()) != 0 && errno != ENOENT) left += e.size;
    }
    write_counter(shard, left);
  }
}

void LocalStorage::trim_all() {
  util::CacheUmaskScope cache_umask;
  for (int i = 0; i < kShards; ++i) {
    const std::string shard = shard_at(opt_.dir, i);
    if (!util::exists(shard)) continue;
    ShardLock lock(shard);
    trim_locked(shard, false, 0);  // true sizes first
  }
  if (opt_.max_size > 0 && total_size() > opt_.max_size) evict("");
}

}  // namespace kache::storage
