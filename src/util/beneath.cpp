#include "util/beneath.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>

#include <atomic>
#include <cerrno>
#include <random>
#include <system_error>
#include <vector>

#include "util/fs.hpp"

namespace kache::util {

namespace {

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

// Whether openat2 works here; a seccomp filter (older container runtimes) answers ENOSYS or EPERM.
std::atomic<bool> openat2_usable{true};

std::vector<std::string_view> components(std::string_view relative) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < relative.size()) {
    const std::size_t slash = relative.find('/', i);
    const std::size_t end = slash == std::string_view::npos ? relative.size() : slash;
    const std::string_view part = relative.substr(i, end - i);
    if (!part.empty() && part != ".") out.push_back(part);
    i = end + 1;
  }
  return out;
}

bool climbs_or_absolute(std::string_view relative) {
  if (!relative.empty() && relative.front() == '/') return true;
  for (std::string_view part : components(relative))
    if (part == "..") return true;
  return false;
}

// openat of one path below dir, no link followed at any component: each directory opened with
// O_NOFOLLOW | O_DIRECTORY, the last component with O_NOFOLLOW. Returns -1 with errno set.
int walk_open(int dir, std::string_view relative, int flags, mode_t mode) {
  const std::vector<std::string_view> parts = components(relative);
  if (parts.empty()) return ::openat(dir, ".", flags, mode);
  UniqueFd current;
  int at = dir;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string part(parts[i]);
    const int next = ::openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) return -1;
    current.reset(next);
    at = next;
  }
  const std::string last(parts.back());
  return ::openat(at, last.c_str(), flags, mode);
}

}  // namespace

void beneath_allow_openat2(bool allowed) { openat2_usable.store(allowed); }

const char* file_kind_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  return "a device";
}

Beneath::Beneath(const std::string& root) : path_(root) {
  const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "open directory " + root);
  root_.reset(fd);
}

Beneath::Beneath(int dir_fd, std::string root_path) : path_(std::move(root_path)) {
  const int fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw_errno(errno, "dup directory " + path_);
  root_.reset(fd);
}

std::optional<std::string> Beneath::relative(std::string_view path) const {
  if (path.empty() || path.front() != '/') {
    if (climbs_or_absolute(path)) return std::nullopt;
    return std::string(path);
  }
  const std::string normal = lexically_normal(path);
  const std::string root = lexically_normal(path_);
  if (normal == root) return std::string(".");
  if (!path_has_prefix(normal, root)) return std::nullopt;
  const std::size_t skip = root == "/" ? 1 : root.size() + 1;
  return normal.substr(skip);
}

int Beneath::open_raw(std::string_view relative, int flags, mode_t mode) const {
  if (climbs_or_absolute(relative)) {
    errno = EXDEV;
    return -1;
  }
  if (openat2_usable.load(std::memory_order_relaxed)) {
    struct open_how how {};
    how.flags = static_cast<std::uint64_t>(flags);
    how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const std::string rel = relative.empty() ? std::string(".") : std::string(relative);
    const long fd = ::syscall(SYS_openat2, root_.get(), rel.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != ENOSYS && errno != EPERM) return -1;
    if (errno == EPERM) {
      // EPERM is also what a plain open answers for some files (a sealed or immutable one): tell the
      // two apart by trying the root itself once.
      struct open_how probe {};
      probe.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
      probe.resolve = RESOLVE_BENEATH;
      const long t = ::syscall(SYS_openat2, root_.get(), ".", &probe, sizeof probe);
      if (t >= 0) {
        ::close(static_cast<int>(t));
        errno = EPERM;
        return -1;
      }
    }
    openat2_usable.store(false, std::memory_order_relaxed);
  }
  return walk_open(root_.get(), relative, flags | O_NOFOLLOW, mode);
}

UniqueFd Beneath::open_regular(std::string_view relative, int flags, mode_t mode, std::string* refused) const {
  const bool truncate = (flags & O_TRUNC) != 0;
  const int open_flags = (flags & ~O_TRUNC) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  const int fd = open_raw(relative, open_flags, mode);
  if (fd < 0) {
    const int err = errno;
    auto refuse = [&](const char* what) {
      if (refused) *refused = what;
      return UniqueFd();
    };
    if (err == ENOENT) return UniqueFd();
    if (err == ELOOP) return refuse("a symbolic link");
    if (err == EXDEV) return refuse("a path leaving its directory");
    if (err == ENOTDIR) return refuse("a path through something that is no directory");
    if (err == EISDIR) return refuse("a directory");
    if (err == ENXIO) return refuse("a FIFO");  // opened for writing without a reader
    if (err == EWOULDBLOCK) return refuse("a locked file");
    throw_errno(err, "open " + path_ + "/" + std::string(relative));
  }
  UniqueFd guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno(errno, "stat " + path_ + "/" + std::string(relative));
  if (!S_ISREG(st.st_mode)) {
    if (refused) *refused = file_kind_name(st.st_mode);
    return UniqueFd();
  }
  // Reads of a regular file never wait; clearing O_NONBLOCK keeps later code (and locks) as usual.
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (truncate && ::ftruncate(fd, 0) != 0) throw_errno(errno, "truncate " + path_ + "/" + std::string(relative));
  return guard;
}

std::optional<std::string> Beneath::read_regular(std::string_view relative, std::string* refused,
                                                 std::size_t max_bytes) const {
  UniqueFd fd = open_regular(relative, O_RDONLY, 0, refused);
  if (fd.get() < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && static_cast<std::size_t>(st.st_size) > max_bytes) {
    if (refused) *refused = "too large";
    return std::nullopt;
  }
  std::string out;
  if (st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
  char chunk[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "read " + path_ + "/" + std::string(relative));
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      if (refused) *refused = "too large";
      return std::nullopt;
    }
    out.append(chunk, static_cast<std::size_t>(n));
  }
  return out;
}

UniqueFd Beneath::open_directory(std::string_view relative, std::string* refused) const {
  const int fd = open_raw(relative, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd >= 0) return UniqueFd(fd);
  const int err = errno;
  if (err == ENOENT) return UniqueFd();
  if (refused) *refused = err == ELOOP ? "a symbolic link" : err == ENOTDIR ? "no directory" : "unreachable";
  if (err == ELOOP || err == ENOTDIR || err == EXDEV) return UniqueFd();
  throw_errno(err, "open directory " + path_ + "/" + std::string(relative));
}

bool Beneath::create_directories(std::string_view relative, mode_t mode, std::string* refused) const {
  if (climbs_or_absolute(relative)) {
    if (refused) *refused = "a path leaving its directory";
    return false;
  }
  UniqueFd current;
  int at = root_.get();
  for (std::string_view part_view : components(relative)) {
    const std::string part(part_view);
    int next = ::openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT) {
      if (::mkdirat(at, part.c_str(), mode) != 0 && errno != EEXIST)
        throw_errno(errno, "create directory " + path_ + "/" + std::string(relative));
      next = ::openat(at, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0) {
      const int err = errno;
      if (err == ELOOP || err == ENOTDIR) {
        if (refused) *refused = err == ELOOP ? "a symbolic link" : "no directory";
        return false;
      }
      throw_errno(err, "open directory " + path_ + "/" + std::string(relative));
    }
    current.reset(next);
    at = next;
  }
  return true;
}

UniqueFd Beneath::open_parent(std::string_view relative, std::string* name, std::string* refused) const {
  std::vector<std::string_view> parts = components(relative);
  if (parts.empty() || climbs_or_absolute(relative)) {
    if (refused) *refused = "a path leaving its directory";
    return UniqueFd();
  }
  *name = std::string(parts.back());
  const std::size_t cut = relative.rfind('/');
  const std::string_view dir = cut == std::string_view::npos ? std::string_view(".") : relative.substr(0, cut);
  return open_directory(dir, refused);
}

std::optional<struct stat> Beneath::lstat(std::string_view relative) const {
  std::string name;
  UniqueFd parent = open_parent(relative, &name, nullptr);
  if (parent.get() < 0) return std::nullopt;
  struct stat st {};
  if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return st;
}

bool Beneath::unlink_file(std::string_view relative) const {
  std::string name;
  UniqueFd parent = open_parent(relative, &name, nullptr);
  if (parent.get() < 0) return false;
  struct stat st {};
  if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) return false;
  return ::unlinkat(parent.get(), name.c_str(), 0) == 0;
}

void Beneath::rename(std::string_view from, std::string_view to) const {
  std::string from_name, to_name, refused;
  UniqueFd from_dir = open_parent(from, &from_name, &refused);
  UniqueFd to_dir = open_parent(to, &to_name, &refused);
  if (from_dir.get() < 0 || to_dir.get() < 0)
    throw std::system_error(ELOOP, std::generic_category(),
                            "rename below " + path_ + ": " + (refused.empty() ? "missing directory" : refused));
  if (::renameat(from_dir.get(), from_name.c_str(), to_dir.get(), to_name.c_str()) != 0)
    throw_errno(errno, "rename " + std::string(from) + " to " + std::string(to) + " below " + path_);
}

namespace {

std::string random_temp_suffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::uint64_t bits = rng(), i = 0; i < 12; ++i, bits >>= 4) out += kHex[bits & 15];
  return out;
}

// Removes what stands at name in dir; a directory is entered by descriptor (O_NOFOLLOW) and emptied first.
bool remove_tree_at(int dir, const char* name, int depth) {
  if (::unlinkat(dir, name, 0) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR && errno != EPERM) return false;
  if (depth <= 0) return false;
  const int fd = ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return false;
  }
  bool all = true;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view entry = e->d_name;
    if (entry == "." || entry == "..") continue;
    all = remove_tree_at(::dirfd(d), e->d_name, depth - 1) && all;
  }
  ::closedir(d);
  return ::unlinkat(dir, name, AT_REMOVEDIR) == 0 && all;
}

}  // namespace

std::string Beneath::write_temp(std::string_view dir, std::string_view stem, std::string_view data,
                                mode_t mode) const {
  const std::string prefix = (dir.empty() || dir == "." ? std::string() : std::string(dir) + "/") + ".tmp." +
                             std::string(stem) + "." + std::to_string(::getpid()) + ".";
  for (int attempt = 0;; ++attempt) {
    const std::string name = prefix + random_temp_suffix();
    const int fd = open_raw(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
    if (fd < 0) {
      if (errno == EEXIST && attempt < 10) continue;
      throw_errno(errno, "create " + path_ + "/" + name);
    }
    try {
      write_fully(fd, data, path_ + "/" + name);
    } catch (...) {
      ::close(fd);
      unlink_file(name);
      throw;
    }
    // close() may report a deferred write error (NFS, quota); it is not retried on EINTR (fd is gone).
    if (::close(fd) != 0 && errno != EINTR) {
      const int err = errno;
      unlink_file(name);
      throw_errno(err, "close " + path_ + "/" + name);
    }
    return name;
  }
}

bool Beneath::write_atomic(std::string_view relative, std::string_view data, mode_t mode,
                           std::string* refused) const {
  std::string name;
  if (open_parent(relative, &name, refused).get() < 0) return false;
  const std::size_t cut = relative.rfind('/');
  const std::string_view dir = cut == std::string_view::npos ? std::string_view() : relative.substr(0, cut);
  const std::string tmp = write_temp(dir, name, data, mode);
  try {
    try {
      rename(tmp, relative);
    } catch (const std::system_error& e) {
      // A directory planted where the file belongs: removed (never entered through a link), then again.
      if (e.code().value() != EISDIR && e.code().value() != ENOTEMPTY && e.code().value() != EEXIST) throw;
      if (!remove_tree(relative)) throw;
      rename(tmp, relative);
    }
  } catch (...) {
    unlink_file(tmp);
    throw;
  }
  return true;
}

UniqueFd Beneath::open_replacing_plant(std::string_view relative, int flags, mode_t mode,
                                       std::string* refused) const {
  std::string why;
  UniqueFd fd = open_regular(relative, flags | O_CREAT, mode, &why);
  if (fd.get() < 0 && !why.empty() && remove_plant(relative)) {
    why.clear();
    fd = open_regular(relative, flags | O_CREAT, mode, &why);
  }
  if (fd.get() < 0 && refused) *refused = why;
  return fd;
}

bool Beneath::remove_plant(std::string_view relative) const {
  const std::optional<struct stat> st = lstat(relative);
  if (!st || S_ISREG(st->st_mode)) return false;
  if (S_ISDIR(st->st_mode)) return remove_tree(relative);
  std::string name;
  UniqueFd parent = open_parent(relative, &name, nullptr);
  return parent.get() >= 0 && ::unlinkat(parent.get(), name.c_str(), 0) == 0;
}

bool Beneath::remove_tree(std::string_view relative) const {
  std::string name;
  UniqueFd parent = open_parent(relative, &name, nullptr);
  if (parent.get() < 0) return false;
  return remove_tree_at(parent.get(), name.c_str(), 64);
}

}  // namespace kache::util
