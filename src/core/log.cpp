#include "core/log.hpp"

#include "core/events.hpp"

#include "util/beneath.hpp"
#include "util/text.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace kache::core {
namespace {

constexpr const char* kLoggerName = "kache";
// The time first inside the brackets' tail: "[kache 1234 2026-12-02T01:50:00.123+0000] warning: ...".
constexpr const char* kPattern = "[kache %P %Y-%m-%dT%H:%M:%S.%e%z] %l: %v";
// A warning repeats in the cache dir's log at most this often (seconds), per distinct message.
constexpr std::int64_t kWarnEverySeconds = 3600;
constexpr auto kDefaultLevel = spdlog::level::warn;

std::string trim_lower(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<spdlog::level::level_enum> level_from_name(const std::string& name) {
  using spdlog::level::level_enum;
  if (name == "trace") return level_enum::trace;
  if (name == "debug") return level_enum::debug;
  if (name == "info") return level_enum::info;
  if (name == "warn" || name == "warning") return level_enum::warn;
  if (name == "error" || name == "err") return level_enum::err;
  if (name == "critical") return level_enum::critical;
  if (name == "off") return level_enum::off;
  return std::nullopt;
}

// "kache" and its sub-targets ("kache::storage") belong to us; any other target is someone else's.
bool is_our_target(const std::string& target) { return target == "kache" || target.starts_with("kache::"); }

// Whether this message was written to this cache dir's log within the last hour; if not, records that it
// is being written now. The stamp is a file per message under <cache>/warned/, its mtime the time; a new
// one is created exclusively (O_EXCL), so of parallel compiles that meet it first only one logs it. Like
// every file of a cache dir others may write, it is reached below the cache dir's descriptor
// (util::Beneath): a link planted there is never followed, a FIFO never waited on; a stamp that cannot
// be kept means the warning is logged again.
bool warned_recently(const util::Beneath& cache_dir, const std::string& message) {
  const std::string stamp = fmt::format("warned/{:016x}", util::xxh64(message));
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  const std::optional<struct stat> st = cache_dir.lstat(stamp);
  if (st && S_ISREG(st->st_mode) && now - static_cast<std::int64_t>(st->st_mtime) < kWarnEverySeconds) return true;
  if (!cache_dir.create_directories("warned")) return false;
  try {
    util::UniqueFd fd = cache_dir.open_regular(stamp, st ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY | O_CREAT | O_EXCL);
    if (fd.get() >= 0) ::futimens(fd.get(), nullptr);  // now, also when the file was there from an hour ago
  } catch (const std::system_error& e) {
    if (e.code().value() == EEXIST) return true;  // a parallel compile made it just now, and logs it
  }
  return false;
}

// Appends one formatted line to <cache>/kache.log, opened below the cache dir (no link followed, no
// FIFO waited on: what stands there instead means the line is not logged). Whether it was written.
bool append_to_cache_log(const util::Beneath& cache_dir, const spdlog::details::log_msg& msg) {
  util::UniqueFd fd = cache_dir.open_regular("kache.log", O_WRONLY | O_APPEND | O_CREAT);
  if (fd.get() < 0) return false;
  spdlog::pattern_formatter formatter(kPattern);
  spdlog::memory_buf_t line;
  formatter.format(msg, line);
  util::write_fully(fd.get(), std::string_view(line.data(), line.size()), "kache.log");
  return true;
}

// The per-build stamps of first_in_build: a day is longer than any build, and a directory of stamps
// stays small when those older than that go whenever a new one is made.
constexpr std::int64_t kBuildStampSeconds = 24 * 3600;
// A build's stamp older than this belongs to an earlier build that had the same id.
constexpr std::int64_t kStaleStampSeconds = 12 * 3600;

// Removes the stamps of warned/ older than a day (the hourly ones included): called only when a build
// warns of a cause for the first time, so the listing is rare and warned/ stays bounded.
void remove_old_stamps(const util::Beneath& cache_dir, std::int64_t now) {
  util::Listing listing(cache_dir.open_directory("warned"));
  std::vector<std::string> old;
  while (dirent* e = listing.next()) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::optional<struct stat> st = cache_dir.lstat("warned/" + name);
    if (st && S_ISREG(st->st_mode) && now - static_cast<std::int64_t>(st->st_mtime) > kBuildStampSeconds)
      old.push_back(name);
  }
  for (const auto& name : old) cache_dir.unlink_file("warned/" + name);
}

// Claims the stamp of a (build, cause) below dir: true when this compile made it (the first), false when
// it was there; nullopt when dir cannot hold it. Created exclusively (O_EXCL), so of parallel compiles
// of one build exactly one claims it.
std::optional<bool> claim_stamp(const util::Beneath& dir, const std::string& stamp) {
  try {
    if (!dir.create_directories("warned")) return std::nullopt;
    util::UniqueFd fd = dir.open_regular(stamp, O_WRONLY | O_CREAT | O_EXCL);
    if (fd.get() < 0) return std::nullopt;
  } catch (const std::system_error& e) {
    if (e.code().value() != EEXIST) return std::nullopt;
    // A stamp older than any build is another build's (a process group's number comes back, and
    // containers sharing a cache volume all have small ones): taken over, the warning shown.
    const std::optional<struct stat> st = dir.lstat(stamp);
    if (!st || !S_ISREG(st->st_mode) ||
        static_cast<std::int64_t>(std::time(nullptr)) - static_cast<std::int64_t>(st->st_mtime) < kStaleStampSeconds)
      return false;
    dir.unlink_file(stamp);
    try {
      util::UniqueFd again = dir.open_regular(stamp, O_WRONLY | O_CREAT | O_EXCL);
      if (again.get() < 0) return std::nullopt;
    } catch (const std::system_error&) {
      return false;  // a parallel compile took it over just now, and shows it
    }
  }
  try {
    remove_old_stamps(dir, static_cast<std::int64_t>(std::time(nullptr)));
  } catch (const std::exception&) {
    // Old stamps that stay do no harm until the next first warning removes them.
  }
  return true;
}

// Where a build's stamps go when the cache dir cannot hold them (a read-only cache, a full disk: without
// a stamp every compile of the build would print the warning): this user's own directory in /tmp,
// taken only when it is a real directory of the user's that no one else may write.
std::optional<util::Beneath> private_stamp_dir() {
  const std::string path = fmt::format("/tmp/kache-warned-{}", ::getuid());
  ::mkdir(path.c_str(), 0700);
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::getuid() || (st.st_mode & 077) != 0)
    return std::nullopt;
  return util::Beneath(fd.get(), path);
}

// The field-th field (1-based, as proc(5) counts) of /proc/<pid>/stat, "" when unreadable.
std::string proc_stat_field(long pid, int field) {
  util::UniqueFd fd(::open(fmt::format("/proc/{}/stat", pid).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return "";
  char buf[1024];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n <= 0) return "";
  const std::string_view text(buf, static_cast<std::size_t>(n));
  const std::size_t close = text.rfind(')');  // comm may hold spaces and parentheses
  if (close == std::string_view::npos) return "";
  std::string_view rest = text.substr(close + 1);
  for (int i = 3; !rest.empty(); ++i) {  // fields 1 and 2 (pid, comm) end at the ')'
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::size_t end = std::min(rest.find(' '), rest.size());
    if (i == field) return std::string(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  return "";
}

}  // namespace

std::string stamp_build_key(const std::string& build, bool from_process_group,
                            const std::function<std::string(long)>& start_time_of) {
  if (!from_process_group || !build.starts_with("pg")) return build;
  long pgid = 0;
  const auto [p, ec] = std::from_chars(build.data() + 2, build.data() + build.size(), pgid);
  if (ec != std::errc() || p != build.data() + build.size() || pgid <= 0) return build;
  const std::string started = start_time_of(pgid);
  return started.empty() ? build : build + "@" + started;
}

bool own_build_for_warnings(long pid, long pgrp, bool stderr_is_terminal) {
  return stderr_is_terminal && pid == pgrp;
}

namespace {

// The build a stamp names: the group's number and when its leader started (a reused number is another build).
std::string stamp_build_of(const std::string& build) {
  const char* env = std::getenv("KACHE_BUILD_ID");
  return stamp_build_key(build, env == nullptr || *env == '\0', [](long pid) { return proc_stat_field(pid, 22); });
}

// Whether this is the first warning of its cause in this build; records it if so, below the cache dir,
// else in the user's private stamp dir. A stamp that cannot be made anywhere counts as first: the
// person sees the warning rather than nobody.
bool first_in_build(const std::optional<util::Beneath>& cache_dir, const std::string& build,
                    const std::string& message) {
  const std::string stamp =
      fmt::format("warned/b{:016x}-{:016x}", util::xxh64(stamp_build_of(build)), util::xxh64(warning_cause(message)));
  if (cache_dir) {
    if (const auto first = claim_stamp(*cache_dir, stamp)) return *first;
  }
  try {
    if (const auto dir = private_stamp_dir()) {
      if (const auto first = claim_stamp(*dir, stamp)) return *first;
    }
  } catch (const std::exception&) {
  }
  return true;
}

// Callers may have written their own "kache: " (config problems are sentences kache's commands print
// as they are); the line on stderr has exactly one.
std::string_view without_kache_prefix(std::string_view text) {
  while (text.starts_with("kache: ")) text.remove_prefix(7);
  return text;
}

// The warnings a compile may yet show on its stderr (CacheDirWarnings), shown once it is served.
struct PendingLine {
  std::string text;
  bool logged = false;
  std::string cache_dir;
  bool cache_dir_usable = false;
};
struct Pending {
  std::mutex mutex;
  std::vector<PendingLine> lines;
};
Pending& pending() {
  static Pending p;
  return p;
}

// The default destination of a compile's warnings: <cache>/kache.log, each distinct warning at most
// once an hour, and the compile's stderr for the first warning of each cause in each build (the build:
// KACHE_BUILD_ID or the build tool's process group, as the events name it), unless told otherwise.
class CacheDirWarnings : public spdlog::sinks::base_sink<std::mutex> {
 public:
  CacheDirWarnings(std::string cache_dir, bool to_stderr) : cache_dir_(std::move(cache_dir)), to_stderr_(to_stderr) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text(without_kache_prefix(std::string_view(msg.payload.data(), msg.payload.size())));
    bool logged = false;  // whether kache.log holds this warning: only then does the line name it
    bool show = to_stderr_;
    std::optional<util::Beneath> cache_dir;
    try {
      // A directory others may write is not trusted with a file kache appends to (a planted link).
      struct stat dir {};
      const bool shared_with_all = ::stat(cache_dir_.c_str(), &dir) == 0 && (dir.st_mode & S_IWOTH) != 0;
      if (!shared_with_all) {
        ::mkdir(cache_dir_.c_str(), 0777);
        cache_dir.emplace(cache_dir_);
        if (warned_recently(*cache_dir, text)) {
          // Logged within the hour (by this build's other compile, perhaps): named if the log is there.
          const std::optional<struct stat> log_file = cache_dir->lstat("kache.log");
          logged = log_file && S_ISREG(log_file->st_mode);
        } else {
          spdlog::details::log_msg line = msg;
          line.payload = text;
          logged = append_to_cache_log(*cache_dir, line);
        }
      }
    } catch (const std::exception&) {
      // A log that cannot be written must not fail the compile; `kache doctor` reports the directory.
    }
    // Held until the compile is known to be one kache serves (show_pending_warnings): a passthrough, an
    // info query (-dumpversion), a compile of stdin keep their stderr the compiler's alone, and claim
    // no stamp of the build.
    if (show) {
      Pending& p = pending();
      std::lock_guard lock(p.mutex);
      p.lines.push_back(PendingLine{text, logged, cache_dir_, cache_dir.has_value()});
    }
  }
  void flush_() override {}

 private:
  std::string cache_dir_;
  bool to_stderr_;
};

struct State {
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> current;
  // Loggers replaced by a later init_logging stay alive: log() hands out plain references.
  std::vector<std::shared_ptr<spdlog::logger>> retired;
};

State& state() {
  static State s;
  return s;
}

std::shared_ptr<spdlog::logger> make_logger(spdlog::sink_ptr sink, spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>(kLoggerName, std::move(sink));
  logger->set_pattern(kPattern);
  logger->set_level(level);
  // Flush every message: several kache processes append to one file, and a message written in one
  // write() (O_APPEND) never interleaves with another process's message.
  logger->flush_on(spdlog::level::trace);
  return logger;
}

void install(State& s, std::shared_ptr<spdlog::logger> logger) {
  if (s.current) s.retired.push_back(s.current);
  s.current = std::move(logger);
  // Also make it reachable as spdlog::get("kache"); the registry is optional for us.
  try {
    spdlog::drop(kLoggerName);
    spdlog::register_logger(s.current);
  } catch (const std::exception&) {
  }
}

}  // namespace

std::optional<spdlog::level::level_enum> parse_log_filter(const std::string& filter) {
  spdlog::level::level_enum level = kDefaultLevel;
  std::string_view rest(filter);
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string item = trim_lower(rest.substr(0, comma));
    if (!item.empty()) {
      const std::size_t eq = item.find('=');
      if (eq == std::string::npos) {
        if (auto l = level_from_name(item)) {
          level = *l;  // a bare level applies to every target, kache included
        } else if (is_our_target(item)) {
          level = spdlog::level::trace;  // a bare target means "everything from it"
        } else {
          return std::nullopt;  // most likely a misspelt level: better to say so than to ignore it
        }
      } else {
        const std::string target = trim_lower(item.substr(0, eq));
        const auto l = level_from_name(trim_lower(item.substr(eq + 1)));
        if (target.empty() || !l) return std::nullopt;
        if (is_our_target(target)) level = *l;
      }
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return level;
}

void init_logging(const std::string& filter, const std::string& file, const std::string& cache_dir,
                  bool first_per_build_to_stderr) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const auto parsed = parse_log_filter(filter);
  const auto level = parsed.value_or(kDefaultLevel);
  std::string file_error;
  try {
    if (file.empty() && filter.empty() && !cache_dir.empty()) {
      install(s, make_logger(std::make_shared<CacheDirWarnings>(cache_dir, first_per_build_to_stderr), level));
    } else if (!file.empty()) {
      // truncate=false: append, so concurrent compiles (and earlier runs) keep their lines.
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, false);
      install(s, make_logger(std::move(sink), level));
    } else {
      install(s, make_logger(std::make_shared<spdlog::sinks::stderr_sink_mt>(), level));
    }
  } catch (const std::exception& e) {
    file_error = e.what();
  }
  if (!file_error.empty()) {
    // Fall back to stderr rather than fail the compile because of a log file.
    try {
      install(s, make_logger(std::make_shared<spdlog::sinks::stderr_sink_mt>(), level));
      s.current->warn("cannot open log file {} ({}); logging to stderr", file, file_error);
    } catch (const std::exception&) {
    }
  }
  if (!parsed && s.current) {
    try {
      s.current->warn("log filter '{}' is not valid; using warn", filter);
    } catch (const std::exception&) {
    }
  }
}

std::string latest_logged_warning(const std::string& cache_dir) {
  // The log's tail is enough: a warning repeats at most once an hour, and only its newest is wanted.
  constexpr off_t kTail = 64 * 1024;
  util::UniqueFd fd;
  try {
    fd = util::Beneath(cache_dir).open_regular("kache.log", O_RDONLY);  // a FIFO there: no log
  } catch (const std::exception&) {
  }
  if (fd.get() < 0) return "";
  struct stat st {};
  std::string text;
  if (::fstat(fd.get(), &st) == 0) {
    const off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
    text.resize(static_cast<std::size_t>(st.st_size - from));
    const ssize_t got = ::pread(fd.get(), text.data(), text.size(), from);
    text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  }
  std::string_view rest(text);
  std::string_view latest;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    if (line.starts_with("[kache ") && line.find("] warning: ") != std::string_view::npos) latest = line;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return std::string(latest);
}

bool is_configure_check(const std::vector<std::string>& args, const std::string& cwd) {
  static constexpr std::string_view kScratch[] = {"/CMakeFiles/CMakeScratch/", "/CMakeFiles/CMakeTmp/"};
  auto in_scratch = [](std::string_view path) {
    const std::string with_slash = std::string(path) + "/";
    for (std::string_view dir : kScratch) {
      if (with_slash.find(dir) != std::string::npos || with_slash.starts_with(dir.substr(1))) return true;
    }
    return false;
  };
  // Meson's checks compile below meson-private/ (sanitycheckc.c, tmpXXXX/testfile.c); CMake identifies
  // a compiler in CMakeFiles/<version>/CompilerIdC/ and the like.
  auto in_probe_dir = [](std::string_view path) {
    const std::string p = "/" + std::string(path) + "/";
    if (p.find("/meson-private/") != std::string::npos) return true;
    const std::size_t files = p.find("/CMakeFiles/");
    return files != std::string::npos && p.find("/CompilerId", files) != std::string::npos;
  };
  if (in_scratch(cwd) || in_probe_dir(cwd)) return true;
  for (const auto& arg : args) {
    const std::string base = util::basename(arg);
    // flag_check.c: the Rust cc crate's flag_if_supported, which wants an empty stderr.
    if (base.starts_with("conftest.") || base == "flag_check.c" || in_scratch(arg) || in_probe_dir(arg)) return true;
  }
  return false;
}

std::string warning_cause(std::string_view message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    const std::size_t end = std::min(message.find(' ', i), message.size());
    const std::string_view word = message.substr(i, end - i);
    if (word.find("://") != std::string_view::npos) {
      out += word;  // a remote's URL: two remotes (127.0.0.1:1, 127.0.0.2:2) are two causes
    } else if (word.find('/') != std::string_view::npos) {
      out += "<path>";
    } else {
      for (std::size_t j = 0; j < word.size(); ++j) {
        const bool digit = std::isdigit(static_cast<unsigned char>(word[j])) != 0;
        if (!digit) {
          out += word[j];
        } else if (j == 0 || !std::isdigit(static_cast<unsigned char>(word[j - 1]))) {
          out += '#';
        }
      }
    }
    if (end < message.size()) out += ' ';
    i = end + 1;
  }
  return out;
}

void show_pending_warnings() {
  Pending& p = pending();
  std::vector<PendingLine> lines;
  {
    std::lock_guard lock(p.mutex);
    lines.swap(p.lines);
  }
  if (lines.empty()) return;
  // A compile typed at a terminal leads its own process group: each is a build of its own, and shows
  // its warnings (the shell's group would make every hand-typed compile one build).
  const bool own_build = own_build_for_warnings(static_cast<long>(::getpid()), static_cast<long>(::getpgrp()),
                                                ::isatty(STDERR_FILENO) == 1);
  const std::string build = event_build_id(std::getenv("KACHE_BUILD_ID"));
  for (const auto& l : lines) {
    try {
      std::optional<util::Beneath> cache_dir;
      if (l.cache_dir_usable) {
        try {
          cache_dir.emplace(l.cache_dir);
        } catch (const std::exception&) {
        }
      }
      if (!own_build && !first_in_build(cache_dir, build, l.text)) continue;
      // A warning may name a file or a remote: control characters never reach the terminal (or the
      // terminal Ninja copies its output to).
      const std::string line = fmt::format(
          "kache: warning: {}{}\n", util::terminal_safe(l.text),
          l.logged ? fmt::format(" (logged in {}/kache.log)", util::terminal_safe(l.cache_dir)) : std::string());
      (void)!::write(STDERR_FILENO, line.data(), line.size());
    } catch (const std::exception&) {
    }
  }
}

spdlog::logger& log() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.current) {
    // Used before init_logging (or without it, e.g. in tests): warnings to stderr.
    s.current = make_logger(std::make_shared<spdlog::sinks::stderr_sink_mt>(), kDefaultLevel);
  }
  return *s.current;
}

}  // namespace kache::core
