#include "storage/remote/breaker.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>

#include "util/cache_umask.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

namespace kache::storage::remote {

Breaker::Breaker(BreakerOptions options, const std::string& remote_identity) : opt_(std::move(options)) {
  const std::string stem = util::sha256(remote_identity).hex().substr(0, 16);
  state_name_ = util::join_path(util::basename(opt_.dir), stem + ".state");
  probe_name_ = util::join_path(util::basename(opt_.dir), stem + ".probe");
}

const util::Beneath* Breaker::root(bool create) const {
  const std::lock_guard<std::mutex> lock(root_mutex_);
  if (root_) return &*root_;
  const std::string above = util::dirname(opt_.dir);
  try {
    if (create) util::create_directories(above);
    root_.emplace(above);
  } catch (const std::exception&) {
    return nullptr;
  }
  return &*root_;
}

const util::Beneath* Breaker::state_directory() const {
  const util::Beneath* dir = root(true);
  try {
    if (dir && dir->create_directories(util::basename(opt_.dir))) return dir;
  } catch (const std::exception&) {
  }
  return nullptr;
}

Breaker::~Breaker() { release_probe(); }

std::int64_t Breaker::now() const { return opt_.clock ? opt_.clock() : util::now_ns(); }

Breaker::State Breaker::read_state() const {
  State state;
  const util::Beneath* dir = root(false);
  if (!dir) return state;
  util::UniqueFd fd;
  try {
    fd = dir->open_regular(state_name_, O_RDONLY);
  } catch (const std::exception&) {
    return state;
  }
  if (fd.get() < 0) return state;
  char buf[64];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return state;
  buf[n] = '\0';
  long long failures = 0, open_until = 0;
  if (std::sscanf(buf, "%lld %lld", &failures, &open_until) != 2 || failures < 0) return State{};
  state.failures = failures > 1'000'000 ? 1'000'000 : static_cast<int>(failures);
  state.open_until_ns = open_until;
  return state;
}

void Breaker::write_state(const State& state) const {
  const util::CacheUmaskScope umask;  // a group-shared cache dir stays writable by the group
  try {
    if (const util::Beneath* dir = state_directory()) {
      (void)dir->write_atomic(state_name_, std::to_string(state.failures) + " " + std::to_string(state.open_until_ns) + "\n");
    }
  } catch (const std::exception&) {
    // Best effort: without the state each process finds out about the remote on its own.
  }
}

void Breaker::release_probe() {
  if (probe_fd_ >= 0) {
    ::close(probe_fd_);  // drops the flock
    probe_fd_ = -1;
  }
}

Breaker::Decision Breaker::decide() {
  if (probe_fd_ >= 0) return Decision::probe;
  State state = read_state();
  if (state.failures < opt_.threshold) return Decision::use;
  if (now() < state.open_until_ns) return Decision::skip;
  const util::CacheUmaskScope umask;  // the probe file and its directory, as for the state file
  const util::Beneath* dir = state_directory();
  if (!dir) return Decision::use;
  int fd = -1;
  try {
    fd = dir->open_regular(probe_name_, O_RDWR | O_CREAT, 0666).release();
  } catch (const std::exception&) {
    return Decision::use;
  }
  if (fd < 0) return Decision::use;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Decision::skip;  // another process is probing
  }
  // The prober before us may have finished between our read and our lock: decide on its outcome.
  state = read_state();
  if (state.failures < opt_.threshold) {
    ::close(fd);
    return Decision::use;
  }
  if (now() < state.open_until_ns) {
    ::close(fd);
    return Decision::skip;
  }
  probe_fd_ = fd;
  return Decision::probe;
}

void Breaker::record_success() {
  if (read_state().failures != 0) write_state(State{});
  release_probe();
}

void Breaker::record_failure() {
  State state = read_state();
  state.failures = state.failures < 1'000'000 ? state.failures + 1 : state.failures;
  if (state.failures >= opt_.threshold) state.open_until_ns = now() + opt_.cool_down_ns;
  write_state(state);
  release_probe();
}

}  // namespace kache::storage::remote
