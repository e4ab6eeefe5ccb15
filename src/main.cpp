// kache: a compiler cache for nvcc. `kache nvcc ARGS...`, `kache /path/to/nvcc ARGS...`, a symlink named
// nvcc pointing at kache, or kache's own options (`kache --show-stats`).
#include <fcntl.h>
#include <malloc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/cli.hpp"
#include "core/config.hpp"
#include "core/invocation.hpp"
#include "core/log.hpp"
#include "core/pipeline.hpp"
#include "storage/remote/curl_loader.hpp"
#include "storage/remote/remote_url.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"

namespace {

bool named_kache(const std::string& argv0) {
  const std::string base = kache::util::basename(argv0);
  return base == "kache" || base.starts_with("kache-") || base.starts_with("kache.");
}

// Two builds of this file (CMakeLists.txt): the release `kache` is linked statically, libc included, so
// a hit pays no dynamic loader (mapping libc and libm, symbol lookup: 190 k of a tiny hit's 1.38 M
// instructions and 27 of its syscalls, bench/results/hit-floor.md). Remote stores need a dynamically
// linked process: an http(s) remote loads libcurl with dlopen, and a Redis host name is resolved by
// glibc's NSS modules, which a static glibc would load the same unsafe way (a second, uninitialized
// libc). So the static kache hands an invocation whose configuration names a remote over to
// `kache-http` (this same program, glibc linked dynamically) installed beside it, and only remote users
// pay the loader. A kache-http that cannot load (an older glibc on this host, a missing library) dies
// with 127 before main, its loader's complaint on stderr: an execv would have made that every compile's
// result. So kache-http starts with its stderr on a pipe to the front and `--kache-front=FD:PATH` first:
// PATH is the front's own path, which kache-http removes and then never runs as the compiler; FD is the
// real stderr (`x` when closed), which kache-http puts back as the first thing in main, after writing
// kReady to the pipe: the front's sign that the loader succeeded.
constexpr std::string_view kFrontFlag = "--kache-front=";
constexpr char kReady = '\0';  // never in a loader's message

// kache-http: tells the front that it runs, restores the real stderr and returns the front's path.
std::string confirm_hand_over(std::string_view value) {
  const std::size_t colon = value.find(':');
  const std::string_view fd_text = colon == std::string_view::npos ? "" : value.substr(0, colon);
  if (fd_text.empty() || (fd_text != "x" && fd_text.find_first_not_of("0123456789") != std::string_view::npos))
    return std::string(value);  // PATH alone
  while (::write(STDERR_FILENO, &kReady, 1) < 0 && errno == EINTR) {
  }
  if (fd_text == "x") {
    ::close(STDERR_FILENO);
  } else {
    int fd = 0;
    for (const char c : fd_text) fd = fd * 10 + (c - '0');
    ::dup2(fd, STDERR_FILENO);  // and the pipe's last write end goes: the front stops reading
    ::close(fd);
  }
  return std::string(value.substr(colon + 1));
}

#ifdef KACHE_STATIC_FRONT
// What this static kache cannot do itself: https (libcurl, loaded at run time) and host names (getaddrinfo
// loads NSS modules). Redis and http remotes given by numeric address, and Redis sockets, stay here.
bool needs_dynamic_sibling(const std::string& remote_storage) {
  if (remote_storage.empty()) return false;  // the usual case: nothing more to look at
  try {
    for (const auto& url : kache::storage::remote::parse_remote_urls(remote_storage, {})) {
      if (url.scheme == kache::storage::remote::Scheme::https || url.needs_name_resolution()) return true;
    }
    return false;
  } catch (const std::exception&) {
    return false;  // a list that does not parse turns every remote off where the stores open
  }
}

// The signals a build tool or terminal sends to stop a compile: while kache-http runs, the front passes
// them on (a signal meant for the compile may name only the front's pid) and then ends the way it ends.
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
volatile sig_atomic_t g_helper_pid = 0;
volatile sig_atomic_t g_signal_seen = 0;

extern "C" void forward_to_helper(int sig) {
  g_signal_seen = sig;
  if (g_helper_pid > 0) ::kill(static_cast<pid_t>(g_helper_pid), sig);
}

// Runs kache-http with this invocation and ends as it ends (exit code or signal; stdin, stdout and stderr
// are inherited, so the output is its own). Returns only when it could not be run, or died before its
// main (its loader failed): remotes that need dynamic loading are then off, with the reason, and the
// invocation runs here (remotes given by numeric address or socket, https aside, still work).
void hand_over(int argc, char** argv) {
  std::string self;
  try {
    self = kache::util::self_executable();
  } catch (const std::exception&) {
    return;
  }
  const std::string helper = kache::util::dirname(self) + "/kache-http";
  const auto refuse = [&](const std::string& what) {
    kache::storage::remote::refuse_curl_loading("this kache is linked statically and cannot load libcurl, and " +
                                                helper + " (its dynamically linked sibling, which can) " + what +
                                                ", so http and https remotes are disabled");
  };
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    refuse(std::string("could not be run (pipe: ") + std::strerror(errno) + ")");
    return;
  }
  // The real stderr reaches kache-http as a spare descriptor (no close-on-exec), the pipe as its fd 2.
  const int real_stderr = ::fcntl(STDERR_FILENO, F_DUPFD, 3);
  std::string front_flag =
      std::string(kFrontFlag) + (real_stderr < 0 ? std::string("x") : std::to_string(real_stderr)) + ":" + self;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ready[1], STDERR_FILENO);
  std::vector<char*> args;
  args.push_back(argv[0]);
  args.push_back(front_flag.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);

  // Ignored SIGCHLD (inherited) would reap the child unseen and lose its exit status.
  struct sigaction child_action {};
  if (::sigaction(SIGCHLD, nullptr, &child_action) == 0 && child_action.sa_handler == SIG_IGN)
    std::signal(SIGCHLD, SIG_DFL);
  // The stop signals stay blocked here until the handlers know the child's pid; the child starts with
  // this process's own mask and dispositions (posix_spawn resets caught signals to the default).
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  for (const int sig : kForwardedSignals) sigaddset(&stop_signals, sig);
  ::sigprocmask(SIG_BLOCK, &stop_signals, &old_mask);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &old_mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, helper.c_str(), &actions, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(ready[1]);
  if (real_stderr >= 0) ::close(real_stderr);
  struct sigaction forward {}, old_actions[std::size(kForwardedSignals)];
  if (spawned == 0) {
    g_helper_pid = pid;
    forward.sa_handler = forward_to_helper;
    sigemptyset(&forward.sa_mask);
    for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i)
      ::sigaction(kForwardedSignals[i], &forward, &old_actions[i]);
  }
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (spawned != 0) {
    ::close(ready[0]);
    refuse(std::string("could not be run (") + std::strerror(spawned) + ")");
    return;
  }
  // Bounded by the child: kReady comes first thing in its main, EOF when it dies before. What comes
  // before it is the loader's (a complaint about LD_PRELOAD, say): the user's when the child runs, the
  // reason when it does not.
  std::string before_ready;
  bool ready_seen = false;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(ready[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const char* begin = buf;
    const char* end = buf + n;
    const char* mark = std::find(begin, end, kReady);
    if (before_ready.size() < 4096) before_ready.append(begin, mark);
    if (mark != end) {
      ready_seen = true;
      break;
    }
  }
  ::close(ready[0]);
  if (ready_seen && !before_ready.empty()) (void)!::write(STDERR_FILENO, before_ready.data(), before_ready.size());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  kache::util::ProcessResult result;
  if (WIFSIGNALED(status))
    result.term_signal = WTERMSIG(status);
  else
    result.exit_code = WEXITSTATUS(status);
  if (ready_seen) kache::util::exit_like(result);
  g_helper_pid = 0;
  for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i)
    ::sigaction(kForwardedSignals[i], &old_actions[i], nullptr);
  if (g_signal_seen != 0) {  // stopped while kache-http was loading: stop, do not compile
    result.term_signal = g_signal_seen;
    kache::util::exit_like(result);
  }
  while (!before_ready.empty() && (before_ready.back() == '\n' || before_ready.back() == ' ')) before_ready.pop_back();
  refuse(WIFSIGNALED(status) ? "died by signal " + std::to_string(WTERMSIG(status)) + " before it started"
                             : "could not start (exit code " + std::to_string(WEXITSTATUS(status)) + ": " +
                                   before_ready + ")");
}
#endif

}  // namespace

int main(int argc, char** argv) {
  using namespace kache;
  // kache lives for milliseconds: large buffers (a manifest, a restored object) come from the heap and
  // are reused there, not mapped and unmapped one by one (glibc maps blocks from 128 KiB up, and an
  // munmap of a restored thrust+cub object cost more than its decompression's page faults); the process
  // exit returns everything at once.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
#ifdef KACHE_STATIC_FRONT
  // Never dlopen from a static executable, whatever path reaches libcurl.
  kache::storage::remote::refuse_curl_loading(
      "this kache is linked statically and cannot load libcurl, so http and https remotes are disabled");
#endif
  std::string front;  // kache-http: the static kache that handed this invocation over
  if (argc >= 2 && std::string_view(argv[1]).starts_with(kFrontFlag)) {
    front = confirm_hand_over(argv[1] + kFrontFlag.size());
    argv[1] = argv[0];
    ++argv;
    --argc;
  }
  const std::string argv0 = argc > 0 ? argv[0] : "kache";
  core::Invocation inv;
  int first_arg;
  if (named_kache(argv0)) {
    if (core::is_kache_invocation(argc, argv)) {
#ifdef KACHE_STATIC_FRONT
      // doctor too: it asks libcuda.so.1 for the driver's version through dlopen.
      // Handed over already (a kache-http that is itself a static front): never again, no exec loop.
      if (front.empty() &&
          (std::string_view(argv[argc < 2 ? 0 : 1]) == "doctor" || needs_dynamic_sibling(core::load_config().remote_storage)))
        hand_over(argc, argv);
#endif
      return core::run_cli(argc, argv);
    }
    if (argv[1][0] == '-') {
      // CUDACXX="kache nvcc": CMake 3.25 runs some of its compiler checks without the "nvcc" part,
      // i.e. `kache -forward-unknown-to-host-compiler ...`. A compiler flag where the compiler name
      // belongs means nvcc, the compiler kache fronts.
      inv.compiler_arg = "nvcc";
      first_arg = 1;
    } else {
      inv.compiler_arg = argv[1];
      first_arg = 2;
    }
  } else {
    // Invoked through a link named like the compiler (e.g. nvcc -> kache).
    inv.compiler_arg = util::basename(argv0);
    first_arg = 1;
  }
  for (int i = first_arg; i < argc; ++i) inv.args.emplace_back(argv[i]);
  inv.env = util::current_environment();

  const core::Config cfg = core::load_config();
#ifdef KACHE_STATIC_FRONT
  if (front.empty() && needs_dynamic_sibling(cfg.remote_storage)) hand_over(argc, argv);
#endif
  core::apply_process_settings(cfg);
  core::init_logging(cfg.log_filter, cfg.log_file, cfg.cache_dir);
  for (const auto& problem : cfg.problems) core::log().warn("{}", problem);

  const std::string self = util::self_executable();
  auto resolved = util::find_executable(inv.compiler_arg, util::env_get(inv.env, "PATH").value_or(""), self, front);
  if (!resolved) {
    std::fprintf(stderr, "kache: cannot find the compiler '%s' on PATH.\n", inv.compiler_arg.c_str());
    return 127;
  }
  inv.compiler_path = *resolved;
  if (!named_kache(argv0)) {
    // nvcc finds its toolkit from argv[0]; the bare name would lead it back to the link's directory.
    inv.compiler_arg = inv.compiler_path;
  }
  try {
    inv.cwd = util::current_dir();
  } catch (const std::exception&) {
    inv.cwd.clear();
  }
  if (inv.cwd.empty()) {
    core::log().info("no current directory: running the compiler uncached");
    util::exec_replace(inv.compiler_path, inv.argv(), inv.env);
    return 127;
  }
  return core::run_compiler(inv, cfg);
}
