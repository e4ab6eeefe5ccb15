#include "storage/local/local_storage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/entry_format.hpp"
#include "util/beneath.hpp"
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

// Creates the directories of `relative` below the cache dir; a link or file standing in the way is an
// error (ELOOP, ENOTDIR), never followed.
void make_directories(const util::Beneath& root, const std::string& relative) {
  std::string refused;
  if (root.create_directories(relative, 0777, &refused)) return;
  throw_errno(refused == "a symbolic link" ? ELOOP : ENOTDIR, "create directory " + util::join_path(root.path(), relative));
}

// Exclusive flock on <dir>/<name> for the lifetime of the object. flock locks belong to the open file
// description, so this excludes other processes and other LocalStorage objects alike.
class ShardLock {
 public:
  enum class Wait { bounded, no };
  ShardLock(const util::Beneath& root, const std::string& shard_dir, const char* name = "lock",
            Wait wait = Wait::bounded) {
    make_directories(root, shard_dir);
    std::string refused;
    const std::string path = util::join_path(root.path(), util::join_path(shard_dir, name));
    fd_ = root.open_replacing_plant(util::join_path(shard_dir, name), O_RDWR, 0666, &refused).release();
    if (fd_ < 0) throw_errno(ELOOP, path + " is " + refused);
    try {
      if (wait == Wait::no) {
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
          if (errno == EWOULDBLOCK || errno == EINTR) throw util::LockTimeout(path);
          throw_errno(errno, "flock " + path);
        }
      } else {
        util::lock_bounded(fd_, LOCK_EX, path);  // util::LockTimeout when a stopped process holds it
      }
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
  std::string path;  // relative to the cache dir
  std::int64_t mtime_ns = 0;
  std::uint64_t size = 0;
  bool companion = false;  // an explain record: counted in bytes, not in entries
};

// What a shard's counters file holds.
struct Counters {
  std::uint64_t bytes = 0;
  std::uint64_t entries = 0;
};

// An entry's explain record: <dir>/explain/<k0>/<k1k2>/<key>.json, counted in the shard <k0>.
constexpr std::string_view kCompanionTree = "explain";
constexpr std::string_view kCompanionSuffix = ".json";

bool is_temp_name(std::string_view name) { return name.starts_with(kTempPrefix); }

// A shard that is no directory (a file in its place: a cache dir nobody can store in) holds nothing.
bool is_directory(const util::Beneath& root, const std::string& relative) {
  const std::optional<struct stat> st = root.lstat(relative);
  return st && S_ISDIR(st->st_mode);
}

using util::Listing;

// Removes ".tmp.*" files in dir older than the stale limit (callers hold the shard lock).
void remove_stale_temp(int dirfd, const char* name, const struct stat& st, std::int64_t now) {
  if (now - mtime_ns(st) > kStaleTempNs) ::unlinkat(dirfd, name, 0);
}

// Removes stale ".tmp.*" files in the cache dir itself: the stats files are replaced through temp files
// there, and a kache killed between writing one and renaming it leaves it behind.
void remove_stale_root_temps(const util::Beneath& root) {
  Listing d(root.open_directory("."));
  const std::int64_t now = util::now_ns();
  while (dirent* de = d.next()) {
    if (!is_temp_name(de->d_name)) continue;
    struct stat st {};
    if (::fstatat(d.fd(), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      remove_stale_temp(d.fd(), de->d_name, st, now);
  }
}

// The <k1k2> directories of a shard, sorted; stale temp files at the shard's top (of the counters file)
// are removed along the way when clean_temps is set.
std::vector<std::string> list_leaves(const util::Beneath& root, const std::string& shard_dir, bool clean_temps) {
  std::vector<std::string> leaves;
  Listing top(root.open_directory(shard_dir));  // a link in a shard's place is never entered
  const std::int64_t now = util::now_ns();
  while (dirent* de = top.next()) {
    std::string_view name = de->d_name;
    if (name.starts_with('.') && !(clean_temps && is_temp_name(name))) continue;
    struct stat st {};
    if (::fstatat(top.fd(), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      leaves.emplace_back(name);
    } else if (clean_temps && is_temp_name(name) && S_ISREG(st.st_mode)) {
      remove_stale_temp(top.fd(), de->d_name, st, now);
    }
  }
  std::sort(leaves.begin(), leaves.end());
  return leaves;
}

// Appends the entry files of one <k1k2> directory: regular files whose names do not start with '.'
// (temp files do). Optionally removes stale temp files along the way.
void scan_leaf(const util::Beneath& root, const std::string& leaf_dir, bool clean_temps, bool companions,
               std::vector<EntryFile>& out) {
  Listing listing(root.open_directory(leaf_dir));
  if (!listing.open()) return;
  const int d = listing.fd();
  const std::int64_t now = util::now_ns();
  while (dirent* de = listing.next()) {
    std::string_view name = de->d_name;
    struct stat st {};
    if (name.starts_with('.')) {
      if (clean_temps && is_temp_name(name) && ::fstatat(d, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISREG(st.st_mode))
        remove_stale_temp(d, de->d_name, st, now);
      continue;
    }
    if (::fstatat(d, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // raced away
    if (!S_ISREG(st.st_mode)) continue;
    if (companions && !name.ends_with(kCompanionSuffix)) continue;
    out.push_back({util::join_path(leaf_dir, name), mtime_ns(st), static_cast<std::uint64_t>(st.st_size), companions});
  }
}

// Shard i's directory and its explain records' directory, relative to the cache dir.
std::string shard_at(int i) { return std::string(1, kHexDigits[i]); }

std::string companions_at(int i) { return util::join_path(kCompanionTree, std::string(1, kHexDigits[i])); }

// The entry files of shard i and their explain records.
std::vector<EntryFile> scan_shard(const util::Beneath& root, int i, bool clean_temps) {
  std::vector<EntryFile> files;
  for (bool companions : {false, true}) {
    const std::string top = companions ? companions_at(i) : shard_at(i);
    for (const auto& leaf : list_leaves(root, top, clean_temps)) {
      scan_leaf(root, util::join_path(top, leaf), clean_temps, companions, files);
    }
  }
  return files;
}

std::string_view file_name(std::string_view path) { return path.substr(path.rfind('/') + 1); }

// The key a file of the store belongs to (an entry's name; a record's name less ".json").
std::string_view key_of_file(const EntryFile& f) {
  std::string_view name = file_name(f.path);
  if (f.companion) name.remove_suffix(kCompanionSuffix.size());
  return name;
}

Counters count(const std::vector<EntryFile>& files) {
  Counters c;
  for (const auto& f : files) {
    c.bytes += f.size;
    if (!f.companion) ++c.entries;
  }
  return c;
}

// An entry and its companion: evicted together, as old as the entry (a companion whose entry is gone
// is its own victim).
struct Victim {
  std::int64_t mtime_ns = 0;
  Counters size;
  std::vector<std::string> paths;
};

// Oldest first.
std::vector<Victim> victims_of(const std::vector<EntryFile>& files) {
  std::vector<Victim> out;
  std::unordered_map<std::string_view, std::size_t> entry_at;
  for (const auto& f : files) {
    if (f.companion) continue;
    entry_at.emplace(key_of_file(f), out.size());
    out.push_back({f.mtime_ns, {f.size, 1}, {f.path}});
  }
  for (const auto& f : files) {
    if (!f.companion) continue;
    if (auto it = entry_at.find(key_of_file(f)); it != entry_at.end()) {
      out[it->second].size.bytes += f.size;
      out[it->second].paths.push_back(f.path);
    } else {
      out.push_back({f.mtime_ns, {f.size, 0}, {f.path}});
    }
  }
  std::sort(out.begin(), out.end(), [](const Victim& a, const Victim& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.paths[0] < b.paths[0];
  });
  return out;
}

// Unlinks a victim's files; returns what left the disk (a file already gone counts as gone).
Counters unlink_victim(const util::Beneath& root, const Victim& v) {
  const bool gone = root.unlink_file(v.paths[0]) || !root.lstat(v.paths[0]);
  if (!gone) return {};
  for (std::size_t i = 1; i < v.paths.size(); ++i) root.unlink_file(v.paths[i]);
  return v.size;
}

Counters minus(Counters a, Counters b) { return {sub_sat(a.bytes, b.bytes), sub_sat(a.entries, b.entries)}; }

// A missing counters file is an answer, not an error: a new cache has none in most shards, and
// thrown and caught per shard (util::read_file) that cost a remote hit written back into a fresh cache
// dir ~1 M instructions (the first throws of a process walk the unwind tables). "<bytes> <entries>";
// anything else (a longer file, or the bytes alone as an older kache wrote them) is rebuilt from the files.
std::optional<Counters> read_counters(const util::Beneath& root, const std::string& shard_dir) {
  const std::string path = util::join_path(shard_dir, "size");
  util::UniqueFd fd = root.open_regular(path, O_RDONLY);  // anything planted there: recounted
  if (fd.get() < 0) return std::nullopt;
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
  const char* p = buf;
  const char* end = buf + have;
  Counters c;
  auto [after_bytes, e1] = std::from_chars(p, end, c.bytes);
  if (e1 != std::errc() || after_bytes == end || *after_bytes != ' ') return std::nullopt;
  auto [after_entries, e2] = std::from_chars(after_bytes + 1, end, c.entries);
  if (e2 != std::errc() || after_entries == end || *after_entries != '\n' || after_entries + 1 != end)
    return std::nullopt;
  return c;
}

void write_counters(const util::Beneath& root, const std::string& shard_dir, Counters c) {
  std::string refused;
  if (!root.write_atomic(util::join_path(shard_dir, "size"), fmt::format("{} {}\n", c.bytes, c.entries), 0666,
                         &refused))
    throw std::system_error(ELOOP, std::generic_category(), "shard " + shard_dir + " is " + refused);
}

// Removes the shard's counters before files are published or removed, and the counters rewritten after
// (a put, an eviction, kache -C): a kache killed in between then leaves none (the next reader counts the
// shard's files once) instead of counters that miss a file or still count one gone. Caller holds the lock.
void forget_counters_locked(const util::Beneath& root, const std::string& shard_dir) {
  root.unlink_file(util::join_path(shard_dir, "size"));
}

// The shard's counters; missing or damaged ones are rebuilt from the files and written. Caller holds
// the lock.
Counters load_counters_locked(const util::Beneath& root, int i) {
  const std::string shard_dir = shard_at(i);
  if (auto c = read_counters(root, shard_dir)) return *c;
  const Counters c = count(scan_shard(root, i, false));
  if (is_directory(root, shard_dir)) write_counters(root, shard_dir, c);
  return c;
}

// 90 % of a bound: what an eviction leaves, so that the next puts do not evict again at once.
std::uint64_t ninety_percent(std::uint64_t bound) { return bound / 10 * 9 + bound % 10 * 9 / 10; }

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

std::string LocalStorage::entry_path(std::string_view key) {
  std::string p(key.substr(0, 1));
  p = util::join_path(p, key.substr(1, 2));
  return util::join_path(p, key);
}

const util::Beneath* LocalStorage::root(bool create) {
  const std::lock_guard<std::mutex> lock(*root_mutex_);
  if (root_) return &*root_;
  if (create) {
    util::CacheUmaskScope cache_umask;
    util::create_directories(opt_.dir);  // the cache dir itself is the user's choice, a link included
  }
  try {
    root_.emplace(opt_.dir);
  } catch (const std::system_error& e) {
    if (!create && (e.code().value() == ENOENT || e.code().value() == ENOTDIR)) return nullptr;
    throw;
  }
  return &*root_;
}

const util::Beneath& LocalStorage::writable_root() { return *root(true); }

namespace {

int shard_number(std::string_view key) { return key[0] <= '9' ? key[0] - '0' : key[0] - 'a' + 10; }

std::string companion_path(std::string_view key) {
  std::string p = util::join_path(companions_at(shard_number(key)), key.substr(1, 2));
  return util::join_path(p, std::string(key) + std::string(kCompanionSuffix));
}

// Unlinks an entry's explain record, if any; returns its size (0 when there was none).
std::uint64_t unlink_companion(const util::Beneath& root, std::string_view key) {
  const std::string path = companion_path(key);
  const std::optional<struct stat> st = root.lstat(path);
  if (!st || !S_ISREG(st->st_mode) || !root.unlink_file(path)) return 0;
  return static_cast<std::uint64_t>(st->st_size);
}

// Unlinks the entry file of key (and its explain record) under the shard lock and takes them off the
// counters. With `expect` set, only if the file is still that inode (a concurrent put may have replaced
// a corrupt entry by a good one).
void unlink_entry(const util::Beneath& root, std::string_view key, const std::string& path,
                  std::optional<std::pair<dev_t, ino_t>> expect) {
  util::CacheUmaskScope cache_umask;
  const int shard = shard_number(key);
  ShardLock lock(root, shard_at(shard));
  const std::optional<struct stat> st = root.lstat(path);
  if (!st || !S_ISREG(st->st_mode)) return;  // gone, or planted: a miss the next put replaces
  if (expect && (st->st_dev != expect->first || st->st_ino != expect->second)) return;
  Counters counters = load_counters_locked(root, shard);
  forget_counters_locked(root, shard_at(shard));
  if (!root.unlink_file(path)) {
    const int err = errno;
    write_counters(root, shard_at(shard), counters);
    if (err == ENOENT) return;
    throw_errno(err, "unlink " + util::join_path(root.path(), path));
  }
  counters = minus(counters, {static_cast<std::uint64_t>(st->st_size) + unlink_companion(root, key), 1});
  write_counters(root, shard_at(shard), counters);
}

}  // namespace

// The entry file of a key, open for reading, with its stat; nullopt when there is none.
struct OpenEntry {
  std::string path;  // relative to the cache dir
  util::UniqueFd fd;
  struct stat st {};
};

void LocalStorage::drop_corrupt(std::string_view key, const OpenEntry& e) {
  ++corrupt_found_;
  try {
    unlink_entry(writable_root(), key, e.path, std::pair{e.st.st_dev, e.st.st_ino});
  } catch (...) {
    // Corruption is reported as a miss, never thrown; a read-only cache just keeps the bad file.
  }
}

std::optional<OpenEntry> LocalStorage::open_entry(std::string_view key) {
  check_key(key);
  const util::Beneath* dir = root(false);
  if (!dir) return std::nullopt;
  std::optional<OpenEntry> e(std::in_place);
  e->path = entry_path(key);
  e->fd = dir->open_regular(e->path, O_RDONLY);  // a link, FIFO or directory there: a miss
  if (e->fd.get() < 0) return std::nullopt;
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
    put_blob(key, bytes, "");
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


std::string LocalStorage::put_explain_record(std::string_view key, std::string_view text) {
  return put_blob(key, text, kCompanionSuffix);
}

// Publishes blob as the entry file of key, or (suffix set) as its explain record, and counts it in its
// shard; then makes room if the shard or the cache passed its bound. Returns the file's path.
std::string LocalStorage::put_blob(std::string_view key, std::string_view blob, std::string_view suffix) {
  check_key(key);
  const bool companion = !suffix.empty();
  const std::string path = companion ? companion_path(key) : entry_path(key);
  const std::string dir = util::dirname(path);
  const int shard = shard_number(key);
  const std::string shard_dir = shard_at(shard);
  util::CacheUmaskScope cache_umask;
  const util::Beneath& root = writable_root();
  make_directories(root, dir);
  // The slow part (writing) happens outside the lock; only publish + accounting are serialized.
  std::string tmp = root.write_temp(dir, key, blob);
  Counters counters;
  try {
    ShardLock lock(root, shard_dir);
    counters = load_counters_locked(root, shard);
    const std::optional<struct stat> old = root.lstat(path);
    const bool replaced = old && S_ISREG(old->st_mode);
    forget_counters_locked(root, shard_dir);  // killed from here to the write below: the next reader recounts
    if (old && S_ISDIR(old->st_mode)) root.remove_tree(path);  // planted: removed, nothing in it followed
    root.rename(tmp, path);  // a link or FIFO planted there is replaced, never written through
    tmp.clear();
    const std::uint64_t entry = companion ? 0 : 1;
    if (replaced) counters = minus(counters, {static_cast<std::uint64_t>(old->st_size), entry});
    counters.bytes += blob.size();
    counters.entries += entry;
    write_counters(root, shard_dir, counters);
  } catch (...) {
    if (!tmp.empty()) root.unlink_file(tmp);
    throw;
  }
  // An explain record (a few KiB) follows its entry's put, which made room already.
  if (opt_.max_size > 0 && !companion) make_room(shard, key, counters.entries, path);
  return util::join_path(opt_.dir, path);
}

namespace {

// Every shard's counters, summed; a shard without them (an older kache's, or one killed in a cleanup)
// is counted once under its lock and gets them.
Counters all_counters(const util::Beneath* root) {
  Counters total;
  if (!root) return total;  // no cache dir yet
  for (int i = 0; i < kShards; ++i) {
    const std::string shard_dir = shard_at(i);
    std::optional<Counters> c = read_counters(*root, shard_dir);
    if (!c && is_directory(*root, shard_dir)) {
      try {
        ShardLock lock(*root, shard_dir);
        c = load_counters_locked(*root, i);
      } catch (const std::exception&) {
        c = count(scan_shard(*root, i, false));  // a cache we may only read: counted, not written
      }
    }
    if (c) {
      total.bytes += c->bytes;
      total.entries += c->entries;
    }
  }
  return total;
}

}  // namespace

// A small cache keeps the exact bound (all of it least recently used first); a larger one has each put
// that leaves its shard over its share evict a bounded sample (see Size bound in the header). `keep`
// (the entry just stored) is never evicted, so an entry larger than what a bound leaves is used once.
void LocalStorage::make_room(int shard, std::string_view key, std::uint64_t shard_entries, const std::string& keep) {
  // The other shards' counters are read only when this one says the cache may be small.
  if (shard_entries * kShards <= 2 * kSampleFiles) {
    const Counters all = all_counters(root(false));
    if (all.entries <= kSampleFiles) {
      if (all.bytes > opt_.max_size) evict_across_shards(keep);
      return;
    }
  }
  evict_from_sample(shard, key, keep);
}

// Least recently used eviction over the whole (small) cache, down to 90 % of max_size. One process at a
// time (non-blocking flock on <dir>/cleanup.lock: the others go on, the next put tries again). Each
// shard's files are removed under its lock; a file whose mtime moved since the scan (a hit refreshed
// it) is spared.
void LocalStorage::evict_across_shards(const std::string& keep) {
  util::CacheUmaskScope cache_umask;
  const util::Beneath& root = writable_root();
  std::optional<ShardLock> cleanup;
  try {
    cleanup.emplace(root, ".", "cleanup.lock", ShardLock::Wait::no);
  } catch (const util::LockTimeout&) {
    return;
  }
  remove_stale_root_temps(root);
  std::uint64_t total = total_size();
  if (total <= opt_.max_size) return;
  std::vector<EntryFile> all;
  for (int i = 0; i < kShards; ++i) {
    for (auto& f : scan_shard(root, i, true)) all.push_back(std::move(f));
  }
  const std::uint64_t target = ninety_percent(opt_.max_size);
  std::vector<std::vector<Victim>> by_shard(kShards);
  std::size_t chosen = 0;
  for (auto& v : victims_of(all)) {
    if (total <= target || chosen == kMaxEvictionsPerPut) break;
    ++chosen;
    if (v.paths[0] == keep) continue;
    total = sub_sat(total, v.size.bytes);
    by_shard[shard_number(file_name(v.paths[0]))].push_back(std::move(v));
  }
  for (int i = 0; i < kShards; ++i) {
    if (by_shard[i].empty()) continue;
    const std::string shard_dir = shard_at(i);
    std::optional<ShardLock> lock;
    try {
      lock.emplace(root, shard_dir);
    } catch (const util::LockTimeout&) {
      continue;  // a stopped holder: this shard keeps its files until a later eviction
    }
    Counters counters = load_counters_locked(root, i);
    forget_counters_locked(root, shard_dir);
    for (const auto& v : by_shard[i]) {
      const std::optional<struct stat> st = root.lstat(v.paths[0]);
      if (!st || mtime_ns(*st) != v.mtime_ns) continue;
      counters = minus(counters, unlink_victim(root, v));
    }
    write_counters(root, shard_dir, counters);
  }
}

// The bounded eviction of a large cache: under the shard's lock, about kSampleFiles entries of
// consecutive <k1k2> directories from the one key was written to; their oldest go, as large a part of
// the sample as the shard must lose to reach 90 % of its share, at most kMaxEvictionsPerPut of them.
void LocalStorage::evict_from_sample(int shard, std::string_view key, const std::string& keep) {
  util::CacheUmaskScope cache_umask;
  const std::uint64_t share = opt_.max_size / kShards;
  const std::string shard_dir = shard_at(shard);
  const util::Beneath& root = writable_root();
  std::optional<ShardLock> lock;
  try {
    lock.emplace(root, shard_dir);
  } catch (const util::LockTimeout&) {
    return;  // the entry is stored; a later put evicts
  }
  Counters counters = load_counters_locked(root, shard);
  if (counters.bytes <= share) return;
  const std::vector<std::string> leaves = list_leaves(root, shard_dir, true);
  if (leaves.empty()) return;
  const std::size_t start = static_cast<std::size_t>(
      std::lower_bound(leaves.begin(), leaves.end(), key.substr(1, 2)) - leaves.begin());
  std::vector<EntryFile> sample;
  std::size_t scanned = 0;
  for (; scanned < leaves.size() && sample.size() < kSampleFiles; ++scanned) {
    scan_leaf(root, util::join_path(shard_dir, leaves[(start + scanned) % leaves.size()]), true, false, sample);
  }
  const std::uint64_t sample_bytes = count(sample).bytes;
  // The whole shard seen (its entries; records are not sampled): its own bytes decide.
  const double keep_part = static_cast<double>(ninety_percent(share)) / static_cast<double>(counters.bytes);
  const auto target = static_cast<std::uint64_t>(static_cast<double>(sample_bytes) * keep_part);
  if (sample_bytes <= target) return;
  const std::uint64_t excess = sample_bytes - target;
  forget_counters_locked(root, shard_dir);
  std::uint64_t removed = 0;
  std::size_t evicted = 0;
  for (auto& v : victims_of(sample)) {
    if (removed >= excess || evicted >= kMaxEvictionsPerPut) break;
    if (v.paths[0] == keep) continue;
    Counters gone = unlink_victim(root, v);
    if (gone.entries > 0) gone.bytes += unlink_companion(root, file_name(v.paths[0]));
    counters = minus(counters, gone);
    removed += gone.bytes;
    ++evicted;
  }
  write_counters(root, shard_dir, counters);
}

void LocalStorage::remove_entry(std::string_view key) {
  check_key(key);
  const util::Beneath* dir = root(false);
  if (!dir || !is_directory(*dir, shard_at(shard_number(key)))) return;
  unlink_entry(*dir, key, entry_path(key), std::nullopt);
}

namespace {

// Unlinks every file of one <k1k2> directory but live writers' temp files; returns the entries gone (companions not
// counted) and whether any file stayed.
std::pair<std::uint64_t, bool> unlink_leaf(const util::Beneath& root, const std::string& leaf_dir, bool companions) {
  std::uint64_t removed = 0;
  bool left = false;
  Listing d(root.open_directory(leaf_dir));  // never a link's target
  if (!d.open()) return {0, false};
  const std::int64_t now = util::now_ns();
  while (dirent* de = d.next()) {
    struct stat st {};
    if (::fstatat(d.fd(), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // raced away
    if (de->d_name[0] == '.') {
      if (is_temp_name(de->d_name) && S_ISREG(st.st_mode)) remove_stale_temp(d.fd(), de->d_name, st, now);
      continue;
    }
    // A name, never what a link names (unlinkat does not follow); only regular files count as entries.
    if (::unlinkat(d.fd(), de->d_name, 0) == 0) {
      if (!companions && S_ISREG(st.st_mode)) ++removed;
    } else if (errno != ENOENT) {
      left = true;
    }
  }
  return {removed, left};
}

}  // namespace

std::uint64_t LocalStorage::total_size() { return all_counters(root(false)).bytes; }

std::uint64_t LocalStorage::entry_count() { return all_counters(root(false)).entries; }

std::uint64_t LocalStorage::clear(const Progress& progress) {
  util::CacheUmaskScope cache_umask;
  const util::Beneath* root_dir = root(false);
  if (!root_dir) return 0;
  const util::Beneath& root = *root_dir;
  remove_stale_root_temps(root);
  std::uint64_t removed = 0;
  for (int i = 0; i < kShards; ++i) {
    const std::string shard_dir = shard_at(i);
    if (is_directory(root, shard_dir)) {
      ShardLock lock(root, shard_dir);
      forget_counters_locked(root, shard_dir);
      bool left = false;
      for (bool companions : {false, true}) {
        const std::string top = companions ? companions_at(i) : shard_dir;
        const std::vector<std::string> leaves = list_leaves(root, top, true);
        for (std::size_t j = 0; j < leaves.size(); ++j) {
          const auto [gone, stayed] = unlink_leaf(root, util::join_path(top, leaves[j]), companions);
          removed += gone;
          left = left || stayed;
          if (progress && !companions) progress(static_cast<std::uint64_t>(i) * 256 + (j + 1) * 256 / leaves.size(),
                                                kProgressSteps);
        }
      }
      write_counters(root, shard_dir, left ? count(scan_shard(root, i, false)) : Counters{});
    }
    if (progress) progress(static_cast<std::uint64_t>(i + 1) * 256, kProgressSteps);
  }
  return removed;
}

namespace {

// Each shard in turn, under its lock and recounted from its files: its oldest entries are evicted while
// evict(counters found, counters now, victim) holds, then its counters are rewritten. Returns the entries
// removed.
std::uint64_t evict_shard_by_shard(const util::Beneath* root_dir, const LocalStorage::Progress& progress,
                                   const std::function<bool(const Counters&, const Counters&, const Victim&)>& evict) {
  if (!root_dir) return 0;  // no cache dir yet
  const util::Beneath& root = *root_dir;
  std::uint64_t removed = 0;
  for (int i = 0; i < kShards; ++i) {
    const std::string shard_dir = shard_at(i);
    if (is_directory(root, shard_dir)) {
      ShardLock lock(root, shard_dir);
      forget_counters_locked(root, shard_dir);
      const std::vector<EntryFile> files = scan_shard(root, i, true);
      const Counters found = count(files);
      Counters counters = found;
      for (const auto& v : victims_of(files)) {
        if (!evict(found, counters, v)) break;  // oldest first: the rest are kept too
        const Counters gone = unlink_victim(root, v);
        removed += gone.entries;
        counters = minus(counters, gone);
      }
      write_counters(root, shard_dir, counters);
    }
    if (progress) progress(static_cast<std::uint64_t>(i + 1) * 256, LocalStorage::kProgressSteps);
  }
  return removed;
}

}  // namespace

void LocalStorage::cleanup(const Progress& progress) {
  util::CacheUmaskScope cache_umask;
  const util::Beneath* root_dir = root(false);
  if (root_dir) remove_stale_root_temps(*root_dir);
  const std::uint64_t share = opt_.max_size / kShards;
  // A shard over its share goes down to 90 % of it.
  const bool limited = opt_.max_size > 0;
  evict_shard_by_shard(root_dir, progress, [&](const Counters& found, const Counters& now, const Victim&) {
    return limited && found.bytes > share && now.bytes > ninety_percent(share);
  });
}

std::uint64_t LocalStorage::evict_older_than(std::int64_t max_age_ns, const Progress& progress) {
  util::CacheUmaskScope cache_umask;
  const std::int64_t cutoff = util::now_ns() - max_age_ns;
  return evict_shard_by_shard(root(false), progress, [&](const Counters&, const Counters&, const Victim& v) {
    return v.mtime_ns < cutoff;
  });
}

namespace {

// The container bytes of `bytes` re-encoded at level (0: uncompressed), with the encoders a put uses;
// nullopt when the entry is to stay as it is (a raw record, or a split one asked to stay uncompressed);
// throws std::invalid_argument when the entry does not decode.
std::optional<std::string> reencoded(std::string bytes, int level) {
  const std::string_view prefix(bytes.data(), std::min(bytes.size(), container::kMagicLen));
  if (container::is_raw(prefix) || (level == 0 && container::is_split(prefix))) return std::nullopt;
  std::uint64_t head_size = 0;
  bool parts = true;
  if (container::is_split(prefix)) {
    const auto h = container::parse_split_header(bytes, bytes.size());
    if (!h) throw std::invalid_argument("split header");
    head_size = h->head_size;
  } else if (container::is_split_zstd(prefix)) {
    const auto parsed = container::parse_split_zstd(bytes);
    if (!parsed) throw std::invalid_argument("split-zstd container");
    head_size = parsed->head_size;
  } else {
    parts = false;  // a whole-value zstd container (an older kache's)
  }
  auto value = core::decode_value(std::move(bytes));
  if (!value || value->size() < head_size) throw std::invalid_argument("container");
  if (!parts) return level == 0 ? core::encode_raw(*value) : core::encode_zstd(*value, level);
  const std::string_view v = *value;
  return core::encode_parts(v.substr(0, head_size), v.substr(head_size), core::PartsEncoding{level > 0, level});
}

}  // namespace

void LocalStorage::recompress_file(const util::Beneath& root, const std::string& path, int level,
                                   RecompressCounts& counts) {
  util::UniqueFd fd = root.open_regular(path, O_RDONLY);
  struct stat st {};
  std::string bytes;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return;  // raced away (evicted, cleared)
  if (!read_fd(fd.get(), bytes, static_cast<std::size_t>(st.st_size))) {
    ++counts.unreadable;
    return;
  }
  std::optional<std::string> blob;
  try {
    blob = reencoded(std::move(bytes), level);
  } catch (const std::invalid_argument&) {
    ++counts.unreadable;
    return;
  }
  const auto before = static_cast<std::uint64_t>(st.st_size);
  counts.bytes_before += before;
  if (!blob) {
    ++counts.kept;
    counts.bytes_after += before;
    return;
  }
  const std::string key(file_name(path));
  const std::string shard_dir = shard_at(shard_number(key));
  std::string tmp = root.write_temp(util::dirname(path), key, *blob);
  struct TempGuard {
    const util::Beneath& root;
    std::string* tmp;
    ~TempGuard() {
      if (!tmp->empty()) root.unlink_file(*tmp);
    }
  } tmp_guard{root, &tmp};
  const struct timespec times[2] = {st.st_atim, st.st_mtim};  // recompressing is no use: LRU order kept
  if (util::UniqueFd written = root.open_regular(tmp, O_WRONLY); written.get() >= 0) ::futimens(written.get(), times);
  ShardLock lock(root, shard_dir);
  const std::optional<struct stat> now = root.lstat(path);
  if (!now || now->st_ino != st.st_ino || now->st_dev != st.st_dev) {
    counts.bytes_after += before;  // a put replaced it or an eviction removed it meanwhile: theirs stands
    ++counts.kept;
    return;
  }
  Counters counters = load_counters_locked(root, shard_number(key));
  forget_counters_locked(root, shard_dir);  // killed from here to the write below: the next reader recounts
  root.rename(tmp, path);
  tmp.clear();
  counters = minus(counters, {before, 0});
  counters.bytes += blob->size();
  write_counters(root, shard_dir, counters);
  ++counts.recompressed;
  counts.bytes_after += blob->size();
}

LocalStorage::RecompressCounts LocalStorage::recompress(int level, const Progress& progress) {
  util::CacheUmaskScope cache_umask;
  RecompressCounts counts;
  const util::Beneath* root_dir = root(false);
  for (int i = 0; i < kShards && root_dir; ++i) {
    const std::string shard_dir = shard_at(i);
    for (const auto& leaf : list_leaves(*root_dir, shard_dir, false)) {
      std::vector<EntryFile> files;
      scan_leaf(*root_dir, util::join_path(shard_dir, leaf), false, false, files);
      for (const auto& f : files) recompress_file(*root_dir, f.path, level, counts);
    }
    if (progress) progress(static_cast<std::uint64_t>(i + 1) * 256, kProgressSteps);
  }
  return counts;
}

}  // namespace kache::storage
