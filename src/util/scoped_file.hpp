#pragma once
// Scope guards for files: a descriptor closed, a temporary path unlinked, when they go out of scope.
#include <unistd.h>

#include <string>
#include <utility>

namespace kache::util {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  int get() const { return fd_; }
  // Gives up ownership (the caller closes it).
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Unlinks a (temporary) file on scope exit unless release() was called; an empty path guards nothing.
class UnlinkOnExit {
 public:
  explicit UnlinkOnExit(std::string path) : path_(std::move(path)) {}
  ~UnlinkOnExit() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  UnlinkOnExit(const UnlinkOnExit&) = delete;
  UnlinkOnExit& operator=(const UnlinkOnExit&) = delete;
  bool empty() const { return path_.empty(); }
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace kache::util
