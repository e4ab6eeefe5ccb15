#pragma once
// Small filesystem helpers. All paths are std::string; errors are reported by exceptions
// (std::system_error) unless the function returns an optional/bool.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::util {

// What identifies one version of a file without reading it. ctime is part of it because user space
// cannot set ctime: an edit that restores size and mtime (touch -r, tar, rsync -t) still moves ctime,
// and a replaced file (rename over it) changes the inode.
struct FileIdentity {
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  bool is_dir = false;
  bool operator==(const FileIdentity&) const = default;
};

// stat() following symlinks; nullopt if the path does not exist or cannot be stat'ed.
std::optional<FileIdentity> stat_identity(const char* path);
inline std::optional<FileIdentity> stat_identity(const std::string& path) { return stat_identity(path.c_str()); }
// fstat() of an open file: the identity of what was opened, whatever its path names by now.
std::optional<FileIdentity> fd_identity(int fd);
// "dev:ino:size:mtime:ctime": an identity in memo and record keys.
std::string identity_text(const FileIdentity& id);
bool exists(const std::string& path);
// stat_identity of every path, spread over up to `max_threads` threads when there are many paths
// (a thrust+cub compile reads ~1600 headers: their stat calls are most of a cache hit's time, and
// they are independent, like git's preloaded index). Falls back to one thread if none can start.
// The paths are C strings so that a caller can pass strings it already holds without copying them.
std::vector<std::optional<FileIdentity>> stat_identities(const std::vector<const char*>& paths, unsigned max_threads);

std::string read_file(const std::string& path);

// The content of path when it is a regular file, read without ever waiting: the open does not wait for
// a FIFO's writer (O_NONBLOCK) and anything but a regular file is refused before a byte is read (a
// FIFO, a socket or a device could block the reader forever). nullopt with *kind set ("a directory",
// "a FIFO", "a socket", "a device") when path is no regular file; throws when it cannot be opened or read.
std::optional<std::string> read_regular_file(const std::string& path, std::string* kind);

// Reads files one after another into one buffer that only grows (hashing a compile's closure:
// no new pages and no zero-filling per file). A view stays valid until the next read.
class ReadBuffer {
 public:
  std::string_view read(const std::string& path);

 private:
  void reserve(std::size_t n);
  std::unique_ptr<char[]> data_;
  std::size_t capacity_ = 0;
};
// Writes data to a temporary file in the same directory and renames it over path, so a reader sees
// either the old or the new content, never a partial one (also after kill -9 of the writer).
void write_file_atomic(const std::string& path, std::string_view data);
void write_file(const std::string& path, std::string_view data);
// Writes data to a temporary file beside path, unlinks path, then renames the temporary file into
// place: a reader sees the old content, none, or the new one, never a partial file. For build outputs,
// where the "none" window is harmless: renaming over an existing file makes ext4 (auto_da_alloc)
// start writeback of the new data at once, measured 1.19 ms against 0.36 ms for a 738 KB object.
void write_file_replacing(const std::string& path, std::string_view data);
// Moves the finished file `from` to `to` the same way (unlink, then rename); false if rename fails.
bool rename_replacing(const std::string& from, const std::string& to);
// Writes data to a new file "<dir>/.tmp.<stem>.<pid>.<random>" (mode 0666 & ~umask) and returns its
// path; the caller renames it into place or removes it. The ".tmp." prefix keeps it from ever looking
// like a cache key. Throws std::system_error (and leaves no file behind) on failure.
std::string write_temp_file(const std::string& dir, std::string_view stem, std::string_view data);

// Copies src to dst (mode 0644 & ~umask, replacing dst atomically) through copy_range_to_temp: a
// reflink where the filesystem supports it, else an in-kernel copy. Never a hard link: a later build
// writing through dst would corrupt src.
void copy_file(const std::string& src, const std::string& dst);

// A new file "<dir>/.tmp.<stem>.<pid>.<random>" (O_EXCL, mode & ~umask) open for writing: returns its
// descriptor and sets *path. A private file passes 0600: created so, never readable by others in between.
// Throws std::system_error.
int create_temp_file(const std::string& dir, std::string_view stem, std::string* path, mode_t mode = 0666);
// Writes all of data to fd (retrying short writes); throws std::system_error naming `what`.
void write_fully(int fd, std::string_view data, const std::string& what);

// How copy_range_to_temp moved the bytes.
enum class CopyMethod { reflink, kernel_copy, read_write };
const char* copy_method_name(CopyMethod m);
// Writes bytes [offset, offset + length) of the open file `in` to a new file "<dir>/.tmp.<stem>.…"
// (mode & ~umask) and returns its path: a reflink of the range (FICLONERANGE; needs offset
// aligned to the filesystem block and the range to end at in's end or on a block), else an in-kernel
// copy (copy_file_range), else read/write. Throws std::system_error (leaving no file) on failure.
std::string copy_range_to_temp(int in, std::uint64_t offset, std::uint64_t length, const std::string& dir,
                               std::string_view stem, CopyMethod* method, mode_t mode = 0666);

void create_directories(const std::string& path);
void remove_file(const std::string& path) noexcept;
void remove_all(const std::string& path) noexcept;

// Absolute, lexically normalized path (no ".", "..", "//"); relative paths are taken from cwd.
// Symlinks are not resolved: nvcc and the host compiler see the spelling, not the target.
std::string absolute_path(std::string_view path, std::string_view cwd);
std::string lexically_normal(std::string_view path);
std::string dirname(std::string_view path);
std::string basename(std::string_view path);
std::string join_path(std::string_view a, std::string_view b);
// True if path equals root or lies below it (component-wise, after lexical normalization).
bool path_has_prefix(std::string_view path, std::string_view root);
// The same test on the paths as spelled, without normalizing: "/a/b/../c" starts with "/a/b". Cheap
// (no allocation); used where a path's spelling is kept because the compiler resolves it that way.
bool path_starts_with(std::string_view path, std::string_view root);

std::string current_dir();

// A unique temporary directory, removed with its content when the object is destroyed.
class TempDir {
 public:
  // Whether a missing parent is created (kache's own directories) or is an error (a directory of the
  // user's, such as the output's: nvcc creates none, so kache must not either).
  enum class Parent { create, must_exist };
  explicit TempDir(const std::string& parent, std::string_view prefix = "kache-", Parent mode = Parent::create);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kache::util
