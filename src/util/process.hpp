#pragma once
// Spawning the compiler with posix_spawn: never a shell.
#include <optional>
#include <string>
#include <vector>

namespace kache::util {

struct ProcessResult {
  int exit_code = -1;   // valid when term_signal == 0
  int term_signal = 0;  // non-zero when the child died by a signal
  std::string out;      // captured stdout (run_capture only)
  std::string err;      // captured stderr (run_capture only)
  bool ok() const { return term_signal == 0 && exit_code == 0; }
};

// Environment as a list of "NAME=value" strings.
using Environment = std::vector<std::string>;
Environment current_environment();
std::optional<std::string> env_get(const Environment& env, std::string_view name);
void env_set(Environment& env, std::string_view name, std::string_view value);

// Runs exe with argv (argv[0] included) and env, stdin inherited, stdout/stderr captured.
// Throws std::system_error if the process cannot be started.
ProcessResult run_capture(const std::string& exe, const std::vector<std::string>& argv, const Environment& env);

// Replaces this process by exe (execve): stdin/stdout/stderr, exit status and death by signal are
// then the compiler's own. Returns only on failure (errno set).
void exec_replace(const std::string& exe, const std::vector<std::string>& argv, const Environment& env);

// Makes this process end the way a child ended: same exit code, or death by the same signal.
[[noreturn]] void exit_like(const ProcessResult& result);

// Resolves a command name the way execvp would, over the directories of `path_var`.
// Candidates that are the same file as `skip` (e.g. kache itself, through a symlink named nvcc)
// are skipped so kache can never run itself.
std::optional<std::string> find_executable(const std::string& name, const std::string& path_var,
                                           const std::string& skip = "");

// Absolute path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace kache::util
