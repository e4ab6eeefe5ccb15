#pragma once
// run_capture with a time limit, for probes that must not hang a command (kache doctor). Its own header
// so that the widely included process.hpp stays as it is.
#include <string>
#include <vector>

#include "util/process.hpp"

namespace kache::util {

struct BoundedProcessResult : ProcessResult {
  bool timed_out = false;  // killed at the time limit (term_signal is then SIGKILL, or the child had exited)
  bool ok() const { return ProcessResult::ok() && !timed_out; }
};

// The child runs in a process group of its own; when it and every process holding its output pipes have
// not finished within timeout_ms, the whole group is killed (SIGKILL) and the child reaped: timed_out is
// then set and out/err hold what came before. Throws std::system_error if the process cannot be started.
BoundedProcessResult run_capture_bounded(const std::string& exe, const std::vector<std::string>& argv,
                                         const Environment& env, int timeout_ms);

// The same, the child started in the directory cwd (a remote worker runs an action in its input root).
BoundedProcessResult run_capture_bounded_in(const std::string& exe, const std::vector<std::string>& argv,
                                            const Environment& env, const std::string& cwd, int timeout_ms);

}  // namespace kache::util
