#include "core/log.hpp"

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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
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
// is being written now. The stamp is a file per message under <cache>/warned/, its mtime the time. Like
// every file of a cache dir others may write, it is reached below the cache dir's descriptor
// (util::Beneath): a link planted there is never followed, a FIFO never waited on; a stamp that cannot
// be kept means the warning is logged again.
bool warned_recently(const util::Beneath& cache_dir, const std::string& message) {
  const std::string stamp = fmt::format("warned/{:016x}", util::xxh64(message));
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  const std::optional<struct stat> st = cache_dir.lstat(stamp);
  if (st && S_ISREG(st->st_mode) && now - static_cast<std::int64_t>(st->st_mtime) < kWarnEverySeconds) return true;
  if (!cache_dir.create_directories("warned")) return false;
  util::UniqueFd fd = cache_dir.open_regular(stamp, O_WRONLY | O_CREAT | O_TRUNC);
  if (fd.get() >= 0) ::futimens(fd.get(), nullptr);  // now, also when the file was there from an hour ago
  return false;
}

// Appends one formatted line to <cache>/kache.log, opened below the cache dir (no link followed, no
// FIFO waited on: what stands there instead means the line is not logged).
void append_to_cache_log(const util::Beneath& cache_dir, const spdlog::details::log_msg& msg) {
  util::UniqueFd fd = cache_dir.open_regular("kache.log", O_WRONLY | O_APPEND | O_CREAT);
  if (fd.get() < 0) return;
  spdlog::pattern_formatter formatter(kPattern);
  spdlog::memory_buf_t line;
  formatter.format(msg, line);
  util::write_fully(fd.get(), std::string_view(line.data(), line.size()), "kache.log");
}

// The default destination of a compile's warnings: never the compile's stderr (build tools read it: an
// autoconf -Werror check, CMake's FAIL_REGEX), but <cache>/kache.log, each distinct warning at most
// once an hour, and a person at a terminal also sees that once-an-hour line on stderr.
class CacheDirWarnings : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CacheDirWarnings(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text(msg.payload.data(), msg.payload.size());
    try {
      // A directory others may write is not trusted with a file kache appends to (a planted link).
      struct stat dir {};
      if (::stat(cache_dir_.c_str(), &dir) == 0 && (dir.st_mode & S_IWOTH) != 0) return;
      ::mkdir(cache_dir_.c_str(), 0777);
      const util::Beneath cache_dir(cache_dir_);
      if (warned_recently(cache_dir, text)) return;
      append_to_cache_log(cache_dir, msg);
    } catch (const std::exception&) {
      // A log that cannot be written must not fail the compile; `kache doctor` reports the directory.
    }
    if (::isatty(STDERR_FILENO)) {
      // A warning may name a file or a remote: control characters never reach the terminal.
      const std::string line =
          fmt::format("kache: {} (logged in {}/kache.log)\n", util::terminal_safe(text), util::terminal_safe(cache_dir_));
      (void)!::write(STDERR_FILENO, line.data(), line.size());
    }
  }
  void flush_() override {}

 private:
  std::string cache_dir_;
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

void init_logging(const std::string& filter, const std::string& file, const std::string& cache_dir) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const auto parsed = parse_log_filter(filter);
  const auto level = parsed.value_or(kDefaultLevel);
  std::string file_error;
  try {
    if (file.empty() && filter.empty() && !cache_dir.empty()) {
      install(s, make_logger(std::make_shared<CacheDirWarnings>(cache_dir), level));
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
