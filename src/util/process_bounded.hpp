#pragma once
// run_capture with a time limit, for probes that must not hang a command (kache doctor). Its own header
// so that the widely included process.hpp stays as it is.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/process.hpp"

namespace kache::util {

struct BoundedProcessResult : ProcessResult {
  bool timed_out = false;  // killed at the time limit (term_signal is then SIGKILL, or the child had exited)
  bool output_exceeded = false;  // killed when stdout or stderr passed BoundedRunOptions::max_output
  bool ok() const { return ProcessResult::ok() && !timed_out && !output_exceeded; }
};

// The child runs in a process group of its own; when it and every process holding its output pipes have
// not finished within timeout_ms, the whole group is killed (SIGKILL) and the child reaped: timed_out is
// then set and out/err hold what came before. Throws std::system_error if the process cannot be started.
BoundedProcessResult run_capture_bounded(const std::string& exe, const std::vector<std::string>& argv,
                                         const Environment& env, int timeout_ms);

// The same, the child started in the directory cwd (a remote worker runs an action in its input root).
BoundedProcessResult run_capture_bounded_in(const std::string& exe, const std::vector<std::string>& argv,
                                            const Environment& env, const std::string& cwd, int timeout_ms);

// A bounded run with more bounds: the output read (a helper that writes forever must not fill memory)
// and stdin.
struct BoundedRunOptions {
  int timeout_ms = 0;
  // The most bytes kept of stdout, and of stderr; once either passes it, reading stops, the whole group
  // is killed (SIGKILL) and output_exceeded is set (out/err then hold at most max_output + 64 KiB).
  std::size_t max_output = SIZE_MAX;
  bool null_stdin = false;  // stdin from /dev/null, not the caller's (a compile's stdin is not the child's)
};
BoundedProcessResult run_capture_bounded(const std::string& exe, const std::vector<std::string>& argv,
                                         const Environment& env, const BoundedRunOptions& options);

}  // namespace kache::util
