#include "util/fs.hpp"

#include <fcntl.h>
#include <linux/fs.h>  // FICLONE
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <system_error>

#include "util/parallel.hpp"
#include "util/scoped_file.hpp"

namespace kache::util {

namespace {

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

std::int64_t to_ns(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// 64 random bits for temp names; several processes (and forks of one) must not collide.
std::string random_hex() {
  std::uint64_t v = 0;
  if (::getrandom(&v, sizeof v, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof v)) {
    static std::uint64_t counter = 0;
    struct timespec ts {};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (static_cast<std::uint64_t>(ts.tv_nsec) << 20) ^ static_cast<std::uint64_t>(ts.tv_sec) ^
        (++counter * 0x9e3779b97f4a7c15ull);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[i] = digits[(v >> (4 * i)) & 0xf];
  return s;
}

// Creates a fresh temp file in dir (O_EXCL, so never someone else's); returns the fd, sets *path.
int open_temp(const std::string& dir, std::string_view stem, mode_t mode, std::string* path) {
  for (int attempt = 0;; ++attempt) {
    std::string name = ".tmp.";
    name.append(stem);
    name += '.';
    name += std::to_string(::getpid());
    name += '.';
    name += random_hex();
    std::string p = join_path(dir.empty() ? "." : dir, name);
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0) {
      *path = std::move(p);
      return fd;
    }
    if (errno != EEXIST || attempt >= 10) throw_errno(errno, "create " + p);
  }
}

void close_checked(int fd, const std::string& what) {
  // close() may report a deferred write error (NFS, quota); do not retry on EINTR (fd is gone).
  if (::close(fd) != 0 && errno != EINTR) throw_errno(errno, "close " + what);
}

}  // namespace

namespace {
FileIdentity identity_of(const struct stat& st) {
  FileIdentity id;
  id.dev = static_cast<std::uint64_t>(st.st_dev);
  id.ino = static_cast<std::uint64_t>(st.st_ino);
  id.size = static_cast<std::int64_t>(st.st_size);
  id.mtime_ns = to_ns(st.st_mtim);
  id.ctime_ns = to_ns(st.st_ctim);
  id.is_dir = S_ISDIR(st.st_mode);
  return id;
}
}  // namespace

std::optional<FileIdentity> stat_identity(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) return std::nullopt;
  return identity_of(st);
}

std::optional<FileIdentity> fd_identity(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return identity_of(st);
}

std::string identity_text(const FileIdentity& id) {
  return std::to_string(id.dev) + ":" + std::to_string(id.ino) + ":" + std::to_string(id.size) + ":" +
         std::to_string(id.mtime_ns) + ":" + std::to_string(id.ctime_ns);
}

std::vector<std::optional<FileIdentity>> stat_identities(const std::vector<const char*>& paths, unsigned max_threads) {
  std::vector<std::optional<FileIdentity>> out(paths.size());
  constexpr std::size_t kPerThread = 256;  // below a few hundred paths a thread costs more than it saves
  for_each_slice(paths.size(), slice_count(paths.size(), max_threads, kPerThread),
                 [&](std::size_t, std::size_t begin, std::size_t end) {
                   for (std::size_t i = begin; i < end; ++i) out[i] = stat_identity(paths[i]);
                 });
  return out;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string_view ReadBuffer::read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "open " + path);
  UniqueFd guard(fd);
  struct stat st {};
  std::size_t want = 64 * 1024;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) want = static_cast<std::size_t>(st.st_size) + 1;
  reserve(want);
  std::size_t have = 0;
  for (;;) {
    if (have == capacity_) reserve(capacity_ * 2);
    ssize_t n = ::read(fd, data_.get() + have, capacity_ - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "read " + path);
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  return {data_.get(), have};
}

void ReadBuffer::reserve(std::size_t n) {
  if (n <= capacity_) return;
  // Not zero-filled (std::string would clear every byte it grows by): read() overwrites what is used.
  std::unique_ptr<char[]> bigger(new char[n]);
  if (capacity_ > 0) std::memcpy(bigger.get(), data_.get(), capacity_);
  data_ = std::move(bigger);
  capacity_ = n;
}

std::string read_file(const std::string& path) {
  ReadBuffer buffer;
  return std::string(buffer.read(path));
}

std::optional<std::string> read_regular_file(const std::string& path, std::string* kind) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw_errno(errno, "open " + path);
  UniqueFd guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) {
    *kind = S_ISDIR(st.st_mode)    ? "a directory"
            : S_ISFIFO(st.st_mode) ? "a FIFO"
            : S_ISSOCK(st.st_mode) ? "a socket"
                                   : "a device";
    return std::nullopt;
  }
  std::string out;
  char chunk[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "read " + path);
    }
    if (n == 0) break;
    out.append(chunk, static_cast<std::size_t>(n));
  }
  return out;
}

std::string write_temp_file(const std::string& dir, std::string_view stem, std::string_view data) {
  std::string tmp;
  int fd = open_temp(dir, stem, 0666, &tmp);
  try {
    write_fully(fd, data, tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  try {
    close_checked(fd, tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  return tmp;
}

void write_file_atomic(const std::string& path, std::string_view data) {
  std::string tmp = write_temp_file(dirname(path), basename(path), data);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(err, "rename " + tmp + " -> " + path);
  }
}

bool rename_replacing(const std::string& from, const std::string& to) {
  ::unlink(to.c_str());  // ENOENT is the common case; any other failure shows up in rename
  return ::rename(from.c_str(), to.c_str()) == 0;
}

void write_file_replacing(const std::string& path, std::string_view data) {
  std::string tmp = write_temp_file(dirname(path), basename(path), data);
  if (!rename_replacing(tmp, path)) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(err, "rename " + tmp + " -> " + path);
  }
}

void write_file(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw_errno(errno, "open " + path);
  try {
    write_fully(fd, data, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  close_checked(fd, path);
}

void copy_file(const std::string& src, const std::string& dst) {
  int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw_errno(errno, "open " + src);
  UniqueFd guard(in);
  struct stat st {};
  if (::fstat(in, &st) != 0) throw_errno(errno, "stat " + src);
  const std::string tmp =
      copy_range_to_temp(in, 0, static_cast<std::uint64_t>(st.st_size), dirname(dst), basename(dst), nullptr, 0644);
  if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(err, "rename " + tmp + " -> " + dst);
  }
}

void write_fully(int fd, std::string_view data, const std::string& what) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "write " + what);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

int create_temp_file(const std::string& dir, std::string_view stem, std::string* path, mode_t mode) {
  return open_temp(dir, stem, mode, path);
}

const char* copy_method_name(CopyMethod m) {
  switch (m) {
    case CopyMethod::reflink:
      return "reflink";
    case CopyMethod::kernel_copy:
      return "copy_file_range";
    case CopyMethod::read_write:
      return "read/write";
  }
  return "?";
}

std::string copy_range_to_temp(int in, std::uint64_t offset, std::uint64_t length, const std::string& dir,
                               std::string_view stem, CopyMethod* method, mode_t mode) {
  std::string tmp;
  int out = open_temp(dir, stem, mode, &tmp);
  try {
    struct file_clone_range range {};
    range.src_fd = in;
    range.src_offset = offset;
    range.src_length = length;
    range.dest_offset = 0;
    CopyMethod used = CopyMethod::reflink;
    if (length == 0 || ::ioctl(out, FICLONERANGE, &range) != 0) {
      used = CopyMethod::kernel_copy;
      loff_t in_off = static_cast<loff_t>(offset);
      std::uint64_t done = 0;
      while (done < length) {
        ssize_t n = ::copy_file_range(in, &in_off, out, nullptr, length - done, 0);
        if (n > 0) {
          done += static_cast<std::uint64_t>(n);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || errno == ENOSYS || errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == EPERM ||
            errno == EBADF) {
          used = CopyMethod::read_write;
          break;
        }
        throw_errno(errno, "copy to " + tmp);
      }
      if (used == CopyMethod::read_write) {
        std::string buf(256 * 1024, '\0');
        while (done < length) {
          const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), length - done));
          ssize_t n = ::pread(in, buf.data(), want, static_cast<off_t>(offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) throw_errno(n < 0 ? errno : EIO, "read for " + tmp);
          write_fully(out, std::string_view(buf.data(), static_cast<std::size_t>(n)), tmp);
          done += static_cast<std::uint64_t>(n);
        }
      }
    }
    int fd = out;
    out = -1;
    close_checked(fd, tmp);
    if (method) *method = used;
    return tmp;
  } catch (...) {
    if (out >= 0) ::close(out);
    ::unlink(tmp.c_str());
    throw;
  }
}

void create_directories(const std::string& path) {
  if (path.empty()) return;
  if (::mkdir(path.c_str(), 0777) == 0) return;
  int err = errno;
  if (err == ENOENT) {
    std::string parent = dirname(path);
    if (parent != path) {
      create_directories(parent);
      if (::mkdir(path.c_str(), 0777) == 0) return;
      err = errno;
    }
  }
  // EEXIST also covers a concurrent creator; it is fine as long as the result is a directory.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return;
    throw_errno(ENOTDIR, "mkdir " + path);
  }
  throw_errno(err, "mkdir " + path);
}

void remove_file(const std::string& path) noexcept { ::unlink(path.c_str()); }

void remove_all(const std::string& path) noexcept {
  try {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  } catch (...) {
  }
}

std::string lexically_normal(std::string_view path) {
  const bool absolute = !path.empty() && path.front() == '/';
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);  // a relative path may climb above its start; "/.." is "/"
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  if (absolute) out = "/";
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out += '/';
    out.append(parts[k]);
  }
  if (out.empty()) out = ".";
  return out;
}

std::string absolute_path(std::string_view path, std::string_view cwd) {
  if (!path.empty() && path.front() == '/') return lexically_normal(path);
  std::string base(cwd);
  if (base.empty() || base.front() != '/') base = join_path(current_dir(), base);
  return lexically_normal(join_path(base, path));
}

std::string dirname(std::string_view path) {
  std::size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;  // "a/b/" names b
  std::string_view p = path.substr(0, end);
  std::size_t slash = p.rfind('/');
  if (slash == std::string_view::npos) return ".";
  while (slash > 0 && p[slash - 1] == '/') --slash;
  if (slash == 0) return "/";
  return std::string(p.substr(0, slash));
}

std::string basename(std::string_view path) {
  std::size_t end = path.size();
  while (end > 0 && path[end - 1] == '/') --end;
  if (end == 0) return path.empty() ? std::string() : std::string("/");
  std::string_view p = path.substr(0, end);
  std::size_t slash = p.rfind('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

std::string join_path(std::string_view a, std::string_view b) {
  if (a.empty() || (!b.empty() && b.front() == '/')) return std::string(b);
  if (b.empty()) return std::string(a);
  std::string out(a);
  if (out.back() != '/') out += '/';
  out.append(b);
  return out;
}

bool path_starts_with(std::string_view path, std::string_view root) {
  while (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
  if (root == "/") return !path.empty() && path.front() == '/';
  if (!path.starts_with(root)) return false;
  return path.size() == root.size() || path[root.size()] == '/';
}

bool path_has_prefix(std::string_view path, std::string_view root) {
  const std::string p = lexically_normal(path);
  const std::string r = lexically_normal(root);
  if (r == "/") return p.front() == '/';
  if (r == ".") return p.front() != '/' && p != ".." && !p.starts_with("../");
  if (p == r) return true;
  return p.size() > r.size() && p.starts_with(r) && p[r.size()] == '/';
}

std::string current_dir() {
  std::string buf(4096, '\0');
  for (;;) {
    if (::getcwd(buf.data(), buf.size()) != nullptr) {
      buf.resize(std::char_traits<char>::length(buf.c_str()));
      return buf;
    }
    if (errno != ERANGE) throw_errno(errno, "getcwd");
    buf.resize(buf.size() * 2);
  }
}

TempDir::TempDir(const std::string& parent, std::string_view prefix, Parent mode) {
  if (mode == Parent::create) create_directories(parent);
  std::string tmpl = join_path(parent, std::string(prefix) + "XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) throw_errno(errno, "mkdtemp " + tmpl);
  path_ = std::move(tmpl);
}

TempDir::~TempDir() { remove_all(path_); }

}  // namespace kache::util
