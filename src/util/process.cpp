#include "util/process.hpp"

#include "util/process_bounded.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <system_error>

#include "util/fs.hpp"
#include "util/scoped_file.hpp"

extern char** environ;

namespace kache::util {

namespace {

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

// NULL-terminated char* array pointing into the strings (which must outlive it).
std::vector<char*> c_array(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

using Fd = UniqueFd;

// A pipe whose ends are close-on-exec and above 2, so dup2 onto 1/2 in the child never meets the
// same descriptor (which would leave close-on-exec set and the stream closed).
void make_pipe(Fd& rd, Fd& wr) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw_errno(errno, "pipe2");
  for (int& fd : p) {
    if (fd <= 2) {
      int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
      int err = errno;
      ::close(fd);
      if (moved < 0) {
        ::close(p[0] == fd ? p[1] : p[0]);
        throw_errno(err, "fcntl(F_DUPFD_CLOEXEC)");
      }
      fd = moved;
    }
  }
  rd.reset(p[0]);
  wr.reset(p[1]);
}

ProcessResult wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw_errno(errno, "waitpid");
  }
  ProcessResult r;
  if (WIFSIGNALED(status)) {
    r.term_signal = WTERMSIG(status);
  } else {
    r.exit_code = WEXITSTATUS(status);
  }
  return r;
}

bool is_executable_file(const std::string& path, struct stat* st) {
  return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

Environment current_environment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::optional<std::string> env_get(const Environment& env, std::string_view name) {
  for (const auto& entry : env) {
    if (entry.size() > name.size() && entry[name.size()] == '=' && entry.starts_with(name))
      return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

void env_set(Environment& env, std::string_view name, std::string_view value) {
  if (name.empty() || name.find('=') != std::string_view::npos)
    throw std::invalid_argument("invalid environment variable name");
  std::string entry(name);
  entry += '=';
  entry.append(value);
  bool replaced = false;
  // Replace the first definition and drop duplicates so getenv() and env_get() agree.
  for (auto it = env.begin(); it != env.end();) {
    if (it->size() > name.size() && (*it)[name.size()] == '=' && it->starts_with(name)) {
      if (!replaced) {
        *it = entry;
        replaced = true;
        ++it;
      } else {
        it = env.erase(it);
      }
    } else {
      ++it;
    }
  }
  if (!replaced) env.push_back(std::move(entry));
}

namespace {

// Spawns exe with its stdout and stderr on out_wr and err_wr; own_group: the child leads a process group
// of its own (a bounded run kills the group at its limit: a driver script's compiler holds the pipes as
// long as the script does). Returns the child's pid.
pid_t spawn_piped(const std::string& exe, const std::vector<std::string>& argv, const Environment& env, int out_wr,
                  int err_wr, bool own_group, const std::string& cwd, bool null_stdin) {
  posix_spawn_file_actions_t actions;
  if (int rc = posix_spawn_file_actions_init(&actions); rc != 0) throw_errno(rc, "posix_spawn_file_actions_init");
  int rc = posix_spawn_file_actions_adddup2(&actions, out_wr, STDOUT_FILENO);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, err_wr, STDERR_FILENO);
  if (rc == 0 && !cwd.empty()) rc = posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  if (rc == 0 && null_stdin) {
    rc = posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&actions);
    throw_errno(rc, "posix_spawn_file_actions_adddup2");
  }
  posix_spawnattr_t attr;
  if (rc = posix_spawnattr_init(&attr); rc != 0) {
    posix_spawn_file_actions_destroy(&actions);
    throw_errno(rc, "posix_spawnattr_init");
  }
  if (own_group) {
    rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attr, 0);
  }
  std::vector<char*> cargv = c_array(argv);
  std::vector<char*> cenv = c_array(env);
  pid_t pid = -1;
  if (rc == 0) rc = ::posix_spawn(&pid, exe.c_str(), &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw_errno(rc, "posix_spawn " + exe);
  return pid;
}

// Reads both pipes until EOF on each, or until timeout_ms passed (< 0: no limit). Drains them together:
// a child blocked on a full stderr pipe while we wait on stdout would otherwise deadlock. Stops reading
// once either text passes max_output. Returns how it ended.
enum class Drained { all, time_limit, too_much };
Drained drain_pipes(Fd& out_rd, Fd& err_rd, std::string& out, std::string& err, int timeout_ms,
                    std::size_t max_output) {
  std::string buf(64 * 1024, '\0');
  struct pollfd fds[2] = {{out_rd.get(), POLLIN, 0}, {err_rd.get(), POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  Fd* owners[2] = {&out_rd, &err_rd};
  int open_count = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  while (open_count > 0) {
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<std::int64_t>(0, left.count()));
    }
    int n = ::poll(fds, 2, wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "poll");
    }
    if (n == 0) return Drained::time_limit;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf.data(), buf.size());
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw_errno(errno, "read from child");
      }
      if (got == 0) {  // EOF (POLLHUP with nothing left to read ends up here too)
        owners[i]->reset();
        fds[i].fd = -1;
        --open_count;
      } else {
        sinks[i]->append(buf.data(), static_cast<std::size_t>(got));
        if (sinks[i]->size() > max_output) return Drained::too_much;
      }
    }
  }
  return Drained::all;
}

// Whether the child exits (it is left to reap) within timeout_ms. A child that closed its output and
// keeps running would otherwise hold the caller past its limit. Waits on a pidfd; where the kernel has
// none, polls its state every 10 ms up to the limit.
bool exits_within(pid_t pid, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  const auto left_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()));
  };
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    struct pollfd fd = {pidfd, POLLIN, 0};
    int n;
    while ((n = ::poll(&fd, 1, left_ms())) < 0 && errno == EINTR) {
    }
    ::close(pidfd);
    return n > 0;
  }
  siginfo_t info{};
  while (true) {
    info.si_pid = 0;
    const int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if ((rc == 0 && info.si_pid == pid) || (rc < 0 && errno == ECHILD)) return true;  // ECHILD: reaped already
    if (left_ms() == 0) return false;
    struct timespec tick = {0, 10 * 1000 * 1000};
    ::nanosleep(&tick, nullptr);
  }
}

// run_capture's and run_capture_bounded's spawn, drain and reap; timeout_ms < 0: no limit.
BoundedProcessResult spawn_and_capture(const std::string& exe, const std::vector<std::string>& argv,
                                       const Environment& env, int timeout_ms, const std::string& cwd = {},
                                       std::size_t max_output = SIZE_MAX, bool null_stdin = false) {
  Fd out_rd, out_wr, err_rd, err_wr;
  make_pipe(out_rd, out_wr);
  make_pipe(err_rd, err_wr);
  const pid_t pid = spawn_piped(exe, argv, env, out_wr.get(), err_wr.get(), timeout_ms >= 0, cwd, null_stdin);
  // Our copies of the write ends must go, or we would never see EOF.
  out_wr.reset();
  err_wr.reset();

  BoundedProcessResult result;
  std::string out, err;
  const auto start = std::chrono::steady_clock::now();
  try {
    const Drained drained = drain_pipes(out_rd, err_rd, out, err, timeout_ms, max_output);
    if (drained == Drained::too_much) {  // reading stopped (only a bounded run has a max_output): end the group
      ::kill(-pid, SIGKILL);
      result.output_exceeded = true;
    } else {
      bool in_time = drained == Drained::all;
      if (in_time && timeout_ms >= 0) {  // its output closed: the exit is bounded by what is left
        const auto spent =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        in_time = exits_within(pid, timeout_ms - static_cast<int>(spent.count()));
      }
      if (!in_time) {  // the time limit: end the whole group
        ::kill(-pid, SIGKILL);
        result.timed_out = true;
      }
    }
  } catch (...) {
    // Never leave a zombie behind: close our ends (the child gets SIGPIPE/EOF) and reap it; a bounded
    // run ends the group first, or a child that ignores both would hold us.
    if (timeout_ms >= 0) ::kill(-pid, SIGKILL);
    out_rd.reset();
    err_rd.reset();
    try {
      wait_child(pid);
    } catch (...) {
    }
    throw;
  }
  out_rd.reset();
  err_rd.reset();
  static_cast<ProcessResult&>(result) = wait_child(pid);
  result.out = std::move(out);
  result.err = std::move(err);
  return result;
}

}  // namespace

ProcessResult run_capture(const std::string& exe, const std::vector<std::string>& argv, const Environment& env) {
  return spawn_and_capture(exe, argv, env, -1);
}

BoundedProcessResult run_capture_bounded(const std::string& exe, const std::vector<std::string>& argv,
                                         const Environment& env, int timeout_ms) {
  return spawn_and_capture(exe, argv, env, std::max(0, timeout_ms));
}

BoundedProcessResult run_capture_bounded_in(const std::string& exe, const std::vector<std::string>& argv,
                                            const Environment& env, const std::string& cwd, int timeout_ms) {
  return spawn_and_capture(exe, argv, env, std::max(0, timeout_ms), cwd);
}

BoundedProcessResult run_capture_bounded(const std::string& exe, const std::vector<std::string>& argv,
                                         const Environment& env, const BoundedRunOptions& options) {
  return spawn_and_capture(exe, argv, env, std::max(0, options.timeout_ms), {}, options.max_output,
                           options.null_stdin);
}

void exec_replace(const std::string& exe, const std::vector<std::string>& argv, const Environment& env) {
  std::vector<char*> cargv = c_array(argv);
  std::vector<char*> cenv = c_array(env);
  std::fflush(nullptr);
  ::execve(exe.c_str(), cargv.data(), cenv.data());
}

void exit_like(const ProcessResult& result) {
  // Buffered output would be lost by a death by signal (and is by _exit-like paths): flush it now.
  // (kache writes through stdio only: no iostream, whose static initialization a hit would pay for.)
  std::fflush(nullptr);
  if (result.term_signal != 0) {
    const int sig = result.term_signal;
    // Die by the same signal so make/ninja/the shell see what they would have seen without kache.
    std::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
    ::kill(::getpid(), sig);  // second try should raise() have returned for a fatal signal
    std::exit(128 + sig);     // the signal's default action does not terminate (e.g. SIGCHLD)
  }
  std::exit(result.exit_code);
}

std::optional<std::string> find_executable(const std::string& name, const std::string& path_var,
                                           const std::string& skip) {
  if (name.empty()) return std::nullopt;
  struct stat skip_st {};
  const bool have_skip = !skip.empty() && ::stat(skip.c_str(), &skip_st) == 0;
  auto is_skipped = [&](const struct stat& st) {
    return have_skip && st.st_dev == skip_st.st_dev && st.st_ino == skip_st.st_ino;
  };

  struct stat st {};
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name, &st) && !is_skipped(st)) return name;
    return std::nullopt;
  }
  std::size_t i = 0;
  for (;;) {
    std::size_t j = path_var.find(':', i);
    if (j == std::string::npos) j = path_var.size();
    std::string dir = path_var.substr(i, j - i);
    if (dir.empty()) dir = ".";  // POSIX: an empty PATH entry means the current directory
    std::string candidate = join_path(dir, name);
    if (is_executable_file(candidate, &st) && !is_skipped(st)) return candidate;
    if (j == path_var.size()) break;
    i = j + 1;
  }
  return std::nullopt;
}

std::string self_executable() {
  std::string buf(4096, '\0');
  for (;;) {
    ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
    if (n < 0) throw_errno(errno, "readlink /proc/self/exe");
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      return buf;
    }
    buf.resize(buf.size() * 2);
  }
}

}  // namespace kache::util
