#include "core/stats.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string_view>
#include <system_error>

#include "util/fs.hpp"

namespace kache::core {

namespace {

std::map<std::string, std::uint64_t> parse(std::string_view text) {
  std::map<std::string, std::uint64_t> out;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    std::size_t sp = line.rfind(' ');
    if (sp == std::string_view::npos || sp == 0) continue;  // not "name value": ignore
    std::string_view value = line.substr(sp + 1);
    std::uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || ptr != value.data() + value.size()) continue;
    out[std::string(line.substr(0, sp))] += v;
  }
  return out;
}

std::string serialize(const std::map<std::string, std::uint64_t>& counters) {
  std::string out;
  for (const auto& [name, value] : counters) {
    out += name;
    out += ' ';
    out += std::to_string(value);
    out += '\n';
  }
  return out;
}

// A name must survive the "name value" line format.
bool valid_name(const std::string& name) {
  return !name.empty() && name.find_first_of(" \t\r\n") == std::string::npos;
}

std::map<std::string, std::uint64_t> read_counters(const std::string& path) {
  try {
    return parse(util::read_file(path));
  } catch (const std::system_error& e) {
    if (e.code().value() == ENOENT) return {};
    throw;
  }
}

// flock(LOCK_EX) on <dir>/stats.lock; closing the descriptor releases it.
class StatsLock {
 public:
  explicit StatsLock(const std::string& dir) {
    std::string path = util::join_path(dir, "stats.lock");
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd_);
      throw std::system_error(err, std::generic_category(), "flock " + path);
    }
  }
  ~StatsLock() { ::close(fd_); }
  StatsLock(const StatsLock&) = delete;
  StatsLock& operator=(const StatsLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::uint64_t StatsSnapshot::get(const std::string& name) const {
  auto it = counters.find(name);
  return it == counters.end() ? 0 : it->second;
}

StatsFile::StatsFile(std::string cache_dir) : dir_(std::move(cache_dir)) {}

void StatsFile::add(const std::map<std::string, std::uint64_t>& increments) noexcept {
  try {
    bool any = false;
    for (const auto& [name, value] : increments) any = any || (value != 0 && valid_name(name));
    if (!any) return;
    util::create_directories(dir_);
    StatsLock lock(dir_);
    const std::string path = util::join_path(dir_, "stats");
    auto counters = read_counters(path);
    for (const auto& [name, value] : increments) {
      if (value == 0 || !valid_name(name)) continue;
      std::uint64_t& c = counters[name];
      c = c > UINT64_MAX - value ? UINT64_MAX : c + value;  // saturate rather than wrap
    }
    util::write_file_atomic(path, serialize(counters));
  } catch (...) {
    // Counting must never fail a build: the increment is dropped.
  }
}

StatsSnapshot StatsFile::read() const {
  // Writers replace the file by rename, so an unlocked read sees one complete version.
  StatsSnapshot snap;
  snap.counters = read_counters(util::join_path(dir_, "stats"));
  return snap;
}

void StatsFile::zero() {
  util::create_directories(dir_);
  StatsLock lock(dir_);
  util::write_file_atomic(util::join_path(dir_, "stats"), "");
}

}  // namespace kache::core
