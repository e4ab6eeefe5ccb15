#pragma once
// Files below a directory that others can write: a group-shared cache dir, a file:// share, a worker's
// work dir. Whoever can write there can plant a symbolic link (so that kache reads, appends to or
// deletes a file of the user's elsewhere), a FIFO (so that the next open waits forever) or a directory
// where a file belongs. Every open below such a root goes through a `Beneath`:
//  - resolution never leaves the root and never follows a link, at any component (openat2 with
//    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; a component-by-component O_NOFOLLOW walk where the kernel or
//    a seccomp filter refuses openat2);
//  - no open waits (O_NONBLOCK: a FIFO without a writer opens at once for reading, fails for writing);
//  - a file is used only when fstat of the opened descriptor says it is regular.
// The root itself is the user's own choice (their configuration names it) and may be a link.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "util/scoped_file.hpp"

namespace kache::util {

// "a directory", "a FIFO", "a symbolic link", "a socket", "a device": what stands where a regular file
// was expected, for messages and reasons.
const char* file_kind_name(mode_t mode);

// Tests only: resolve by the O_NOFOLLOW walk as if openat2 were refused (true restores openat2).
void beneath_allow_openat2(bool allowed);

class Beneath {
 public:
  // Opens root as a directory (following a link at root itself). Throws std::system_error.
  explicit Beneath(const std::string& root);
  // Uses an already open directory descriptor (duplicated; the caller keeps its own).
  Beneath(int dir_fd, std::string root_path);
  Beneath(Beneath&&) noexcept = default;
  Beneath& operator=(Beneath&&) noexcept = default;

  int fd() const { return root_.get(); }
  const std::string& path() const { return path_; }

  // The path below the root that `path` names: `path` relative already, or absolute and inside the
  // root (lexically). nullopt when it lies outside or climbs with "..".
  std::optional<std::string> relative(std::string_view path) const;

  // Opens a regular file below the root. flags: O_RDONLY, O_WRONLY, O_RDWR, with O_CREAT, O_EXCL,
  // O_APPEND, O_TRUNC as needed; O_NOFOLLOW, O_NONBLOCK, O_CLOEXEC and O_NOCTTY are always added.
  // Returns an invalid UniqueFd when the file does not exist (and O_CREAT was not given) or when what
  // stands there is no regular file: then *refused (if given) names it ("a FIFO", "a symbolic link",
  // "a directory", "a link above it"). A FIFO opened for writing is refused too. Throws
  // std::system_error for any other failure (EACCES, EIO, ENOSPC). O_TRUNC is applied only after the
  // regular-file check.
  UniqueFd open_regular(std::string_view relative, int flags, mode_t mode = 0666,
                        std::string* refused = nullptr) const;
  // open_regular with O_CREAT, after removing what a plant left there instead of a regular file (a FIFO,
  // a link, a directory: kache's own locks, journals and counters, which it may recreate). Only the last
  // component is replaced; a link or file above it still refuses (invalid fd, *refused set).
  UniqueFd open_replacing_plant(std::string_view relative, int flags, mode_t mode = 0666,
                                std::string* refused = nullptr) const;
  // Removes what stands at `relative` when it is no regular file: a FIFO, socket, device or link is
  // unlinked, a directory removed with remove_tree. False when nothing was removed.
  bool remove_plant(std::string_view relative) const;
  // The content of a regular file below the root, at most max_bytes (longer: refused as "too large");
  // nullopt when missing or refused.
  std::optional<std::string> read_regular(std::string_view relative, std::string* refused = nullptr,
                                          std::size_t max_bytes = std::size_t(1) << 34) const;
  // Opens a directory below the root ("" or "." is the root itself); invalid when missing or not a
  // directory (a link to one included).
  UniqueFd open_directory(std::string_view relative, std::string* refused = nullptr) const;
  // Creates the directories of `relative` that are missing (mode & ~umask, so the cache umask applies);
  // false (with *refused) when a component exists as anything but a real directory.
  bool create_directories(std::string_view relative, mode_t mode = 0777, std::string* refused = nullptr) const;
  // lstat of an entry below the root, links not followed at any component; nullopt when missing or
  // unreachable without following a link.
  std::optional<struct stat> lstat(std::string_view relative) const;
  // Removes `relative` when it is a regular file or a symbolic link (the link itself, never its
  // target); a directory or anything else is left alone and false returned.
  bool unlink_file(std::string_view relative) const;
  // Renames `from` to `to`, both below the root, resolved without links (a link at `to` is replaced,
  // never followed). Throws std::system_error (EISDIR when `to` is a directory).
  void rename(std::string_view from, std::string_view to) const;
  // Writes data to a new file "<dir>/.tmp.<stem>.<pid>.<random>" below the root (O_EXCL, mode & ~umask)
  // and returns its path relative to the root; the caller renames it into place or unlinks it.
  // Throws std::system_error (leaving no file) on failure, ELOOP when `dir` is reached only by a link.
  std::string write_temp(std::string_view dir, std::string_view stem, std::string_view data,
                         mode_t mode = 0666) const;
  // Replaces `relative` by a file holding `data`, whole or not at all: write_temp beside it, then a
  // rename over it (a link or FIFO there is replaced, never followed or opened). False (with *refused)
  // when a directory on the way is missing, a link or no directory; throws std::system_error for any
  // other failure (EISDIR: a directory at `relative`).
  [[nodiscard]] bool write_atomic(std::string_view relative, std::string_view data, mode_t mode = 0666,
                    std::string* refused = nullptr) const;
  // Removes `relative` and, when it is a real directory, everything below it; links are removed, never
  // followed, and no directory is entered through one. False when something stayed (depth past 64,
  // permissions).
  bool remove_tree(std::string_view relative) const;

 private:
  // The directory holding the last component of `relative` and that component's name.
  UniqueFd open_parent(std::string_view relative, std::string* name, std::string* refused) const;
  int open_raw(std::string_view relative, int flags, mode_t mode) const;

  UniqueFd root_;
  std::string path_;
};

// A directory opened by Beneath::open_directory, listed through its descriptor (never reached through
// a link); closed with its stream.
class Listing {
 public:
  explicit Listing(util::UniqueFd fd) {
    if (fd.get() < 0) return;
    dir_ = ::fdopendir(fd.get());
    if (dir_) (void)fd.release();
  }
  ~Listing() {
    if (dir_) ::closedir(dir_);
  }
  Listing(const Listing&) = delete;
  Listing& operator=(const Listing&) = delete;
  bool open() const { return dir_ != nullptr; }
  dirent* next() { return dir_ ? ::readdir(dir_) : nullptr; }
  int fd() const { return ::dirfd(dir_); }

 private:
  DIR* dir_ = nullptr;
};

}  // namespace kache::util
