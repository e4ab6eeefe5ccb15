#pragma once
// Remembers, across kache processes, that a remote store keeps failing, so a build of thousands of
// compilations pays the connect timeout a few times and not once per compilation.
//
// State: <dir>/<16 hex of SHA-256(remote identity)>.state, one line "failures open_until_ns", replaced
// atomically (temp file + rename); readers take no lock. Concurrent updates may lose a count (two
// processes both write 2 → 3), which only delays opening by one failure.
//
// Rule: after `threshold` consecutive failures the remote is skipped until open_until (now + cool_down).
// After that one process probes it: the one that gets flock(LOCK_EX | LOCK_NB) on <hash>.probe (never
// blocking; the kernel drops the lock if the prober dies, so no stale token). While the probe runs,
// everybody else keeps skipping. A success resets the count to 0; a failure opens it for another
// cool_down. Any I/O failure of the state itself counts as "closed" (use the remote): the breaker saves
// time, it never decides whether a result is correct.
//
// <dir> lies in the cache dir, which a group may share: the files are opened below the cache dir's own
// descriptor (util::Beneath), so a link planted at them is never followed and a FIFO never waited on.
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "util/beneath.hpp"

namespace kache::storage::remote {

struct BreakerOptions {
  std::string dir;  // created if missing
  int threshold = 3;
  std::int64_t cool_down_ns = 30'000'000'000;
  std::function<std::int64_t()> clock;  // nanoseconds; empty: util::now_ns
};

class Breaker {
 public:
  enum class Decision {
    use,    // closed: go ahead
    probe,  // open and cooled down; this process holds the probe and must report the outcome
    skip,   // open, or another process is probing
  };

  Breaker(BreakerOptions options, const std::string& remote_identity);
  ~Breaker();
  Breaker(const Breaker&) = delete;
  Breaker& operator=(const Breaker&) = delete;

  Decision decide();
  void record_success();
  void record_failure();

  // For tests and `kache -s`: the stored state.
  struct State {
    int failures = 0;
    std::int64_t open_until_ns = 0;
  };
  State read_state() const;

 private:
  std::int64_t now() const;
  void write_state(const State& state) const;
  void release_probe();

  // The directory above <dir> (the cache dir), opened once; nullptr when missing and not `create`d.
  const util::Beneath* root(bool create) const;
  // <dir> made a real directory below root(true); nullptr when that fails.
  const util::Beneath* state_directory() const;

  BreakerOptions opt_;
  std::string state_name_;  // relative to root()
  std::string probe_name_;
  mutable std::mutex root_mutex_;
  mutable std::optional<util::Beneath> root_;
  int probe_fd_ = -1;
};

}  // namespace kache::storage::remote
