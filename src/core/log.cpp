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
    if (e.code().value() == EEXIST) return false;
    return std::nullopt;
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

// Whether this is the first warning of its cause in this build; records it if so, below the cache dir,
// else in the user's private stamp dir. A stamp that cannot be made anywhere counts as first: the
// person sees the warning rather than nobody.
bool first_in_build(const std::optional<util::Beneath>& cache_dir, const std::string& build,
                    const std::string& message) {
  const std::string stamp =
      fmt::format("warned/b{:016x}-{:016x}", util::xxh64(build), util::xxh64(warning_cause(message)));
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
    if (show) show = first_in_build(cache_dir, event_build_id(std::getenv("KACHE_BUILD_ID")), text);
    if (!show) return;
    // A warning may name a file or a remote: control characters never reach the terminal (or the
    // terminal Ninja copies its output to).
    const std::string line =
        fmt::format("kache: warning: {}{}\n", util::terminal_safe(text),
                    logged ? fmt::format(" (logged in {}/kache.log)", util::terminal_safe(cache_dir_)) : std::string());
    (void)!::write(STDERR_FILENO, line.data(), line.size());
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
  if (in_scratch(cwd)) return true;
  for (const auto& arg : args) {
    if (util::basename(arg).starts_with("conftest.") || in_scratch(arg)) return true;
  }
  return false;
}

std::string warning_cause(std::string_view message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    const std::size_t end = std::min(message.find(' ', i), message.size());
    const std::string_view word = message.substr(i, end - i);
    if (word.find('/') != std::string_view::npos && word.find("://") == std::string_view::npos) {
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
