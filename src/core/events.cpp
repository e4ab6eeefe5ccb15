#include "core/events.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <functional>
#include <optional>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>
#include <type_traits>

#include "util/beneath.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/scoped_file.hpp"
#include "util/text.hpp"

namespace kache::core {

namespace {

using json = nlohmann::json;

constexpr const char* kEventsDir = "events";
constexpr const char* kCurrentPath = "events/events.jsonl";
constexpr const char* kRotatedPath = "events/events.1.jsonl";
constexpr const char* kMarkPath = "events/mark";
// More than a log rotated at kMaxFileBytes can hold: anything larger is not this log.
constexpr std::size_t kMaxReadBytes = 64u << 20;

// The prefix of a counter name that names a reason, most telling first: a miss's not-stored reason
// says more than its stage counters.
constexpr std::string_view kReasonPrefixes[] = {"passthrough.", "error.", "not_stored."};

std::string_view suffix_after(std::string_view s, char c) {
  const std::size_t at = s.rfind(c);
  return at == std::string_view::npos ? s : s.substr(at + 1);
}

// Whether a value holds a floating-point number anywhere: nlohmann converts one to an integer with a
// plain cast, undefined past the integer's range (a damaged line's 4e45 where a count belongs).
bool holds_float(const json& v) {
  if (v.is_number_float()) return true;
  if (v.is_structured()) {
    for (const auto& child : v) {
      if (holds_float(child)) return true;
    }
  }
  return false;
}

template <typename T>
T value_or(const json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if constexpr (!std::is_floating_point_v<T>) {
    if (holds_float(*it)) return fallback;
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

// The current file, after a write took it to `size` bytes, moves aside when it is past the limit and
// still the file this writer appended to (two writers past the limit rename once).
void rotate_if_long(int fd, const util::Beneath& cache, std::uint64_t max_bytes) {
  struct stat mine {};
  if (::fstat(fd, &mine) != 0 || static_cast<std::uint64_t>(mine.st_size) <= max_bytes) return;
  const auto named = cache.lstat(kCurrentPath);
  if (!named || named->st_ino != mine.st_ino || named->st_dev != mine.st_dev) return;
  cache.rename(kCurrentPath, kRotatedPath);
}

// The cache dir, to open below; nullopt when it cannot be opened (absent: nothing logged yet).
std::optional<util::Beneath> open_cache(const std::string& cache_dir) {
  try {
    return util::Beneath(cache_dir);
  } catch (const std::system_error&) {
    return std::nullopt;
  }
}

}  // namespace

std::string event_outcome(const std::map<std::string, std::uint64_t>& counts) {
  auto has = [&](const char* name) {
    const auto it = counts.find(name);
    return it != counts.end() && it->second > 0;
  };
  if (has("hits")) return "hit";
  if (has("misses")) return "miss";
  if (has("compile_failed")) return "compile_failed";
  if (has("errors")) return "error";
  if (has("passthrough")) return "passthrough";
  return "error";  // counted nothing: kache stopped before it could say
}

std::string event_reason(const std::map<std::string, std::uint64_t>& counts) {
  for (const std::string_view prefix : kReasonPrefixes) {
    for (const auto& [name, value] : counts) {
      if (value > 0 && name.size() > prefix.size() && name.starts_with(prefix)) return name;
    }
  }
  return {};
}

std::string event_language(std::string_view keyed_language, std::string_view source, std::string_view tool) {
  if (keyed_language == "c" || keyed_language == "c++" || keyed_language == "cuda" || keyed_language == "hip") {
    return std::string(keyed_language);
  }
  const std::string_view ext = source.find('.') == std::string_view::npos ? "" : suffix_after(source, '.');
  if (ext == "cu") return "cuda";
  if (ext == "hip") return "hip";
  if (ext == "c" || ext == "i") return "c";
  if (ext == "cc" || ext == "cpp" || ext == "cxx" || ext == "c++" || ext == "C" || ext == "ii" || ext == "cp") {
    return "c++";
  }
  if (ext == "s" || ext == "S") return "asm";
  if (tool.starts_with("nvcc")) return "cuda";
  return {};
}

std::string event_source(std::string_view path, std::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  // The longest common prefix that ends at a component boundary of both.
  std::size_t common = 0;
  for (std::size_t i = 0; i <= std::min(path.size(), dir.size()); ++i) {
    const bool path_end = i == path.size() || path[i] == '/';
    const bool dir_end = i == dir.size() || dir[i] == '/';
    if (path_end && dir_end) common = i;
    if (i == path.size() || i == dir.size() || path[i] != dir[i]) break;
  }
  std::string out;
  for (std::size_t i = common; i < dir.size(); ++i) {  // one ".." per component of dir below the prefix
    if (dir[i] == '/' && i + 1 < dir.size()) out += out.empty() ? ".." : "/..";
  }
  std::string_view rest = path.substr(common);
  while (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
  if (!rest.empty()) out += out.empty() ? std::string(rest) : "/" + std::string(rest);
  return out.empty() ? "." : out;
}

std::optional<ProcStat> parse_proc_stat(std::string_view stat) {
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so it ends at the last ')'.
  const std::size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  ProcStat out;
  out.comm = std::string(stat.substr(open + 1, close - open - 1));
  std::string_view rest = stat.substr(close + 1);
  long fields[3] = {0, 0, 0};  // state is skipped: ppid, pgrp
  int n = 0;
  std::size_t i = 0;
  while (n < 3 && i < rest.size()) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < rest.size() && rest[i] != ' ') ++i;
    if (n > 0) {
      const auto [p, ec] = std::from_chars(rest.data() + start, rest.data() + i, fields[n]);
      if (ec != std::errc() || p != rest.data() + i) return std::nullopt;
    }
    ++n;
  }
  if (n < 3) return std::nullopt;
  out.ppid = fields[1];
  out.pgrp = fields[2];
  return out;
}

long build_group(long pid, long ppid, long pgrp, const std::function<std::optional<ProcStat>(long)>& stat_of,
                 const std::function<long(long)>& pgid_of) {
  // A build tool that gives every command a group of its own (ninja: /bin/sh -c CMD in a new group, or
  // the command itself when the shell execs it) would make each compile a build: the build is then the
  // group of the process that started that group's leader.
  if (pgrp == pid) return pgid_of(ppid) > 0 ? pgid_of(ppid) : pgrp;
  if (pgrp == ppid) {
    const auto parent = stat_of(ppid);
    static constexpr std::string_view kShells[] = {"sh", "dash", "bash", "zsh", "ksh", "busybox"};
    if (parent && std::find(std::begin(kShells), std::end(kShells), parent->comm) != std::end(kShells)) {
      const long above = pgid_of(parent->ppid);
      if (above > 0) return above;
    }
  }
  return pgrp;
}

std::string event_build_id(const char* build_id_env) {
  if (build_id_env != nullptr && *build_id_env != '\0') return build_id_env;
  auto stat_of = [](long pid) -> std::optional<ProcStat> {
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n <= 0) return std::nullopt;
    return parse_proc_stat(std::string_view(buf, static_cast<std::size_t>(n)));
  };
  auto pgid_of = [](long pid) { return static_cast<long>(::getpgid(static_cast<pid_t>(pid))); };
  return "pg" + std::to_string(build_group(::getpid(), ::getppid(), ::getpgrp(), stat_of, pgid_of));
}

namespace {

// The length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are none.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

// A JSON string: quotes, backslashes and control characters escaped, bytes that are no UTF-8 as U+FFFD
// (a path is bytes; the line must stay JSON).
void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
      ++i;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
      ++i;
    } else if (const std::size_t n = utf8_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
}

void append_key(std::string& out, std::string_view key) {
  out += out.size() == 1 ? "\"" : ",\"";
  out += key;
  out += "\":";
}

void append_strings(std::string& out, const std::vector<std::string>& values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    append_string(out, values[i]);
  }
  out += ']';
}

}  // namespace

// Written by hand rather than through a JSON library's object: this runs on every hit, whose whole cost
// is about a million instructions (bench/results/report-cost.md); parse_event reads it with nlohmann.
std::string serialize_event(const CompileEvent& e) {
  std::string out = "{";
  out.reserve(512);
  auto text = [&](std::string_view key, const std::string& value, bool always) {
    if (!always && value.empty()) return;
    append_key(out, key);
    append_string(out, value);
  };
  auto number = [&](std::string_view key, auto value) {
    append_key(out, key);
    out += std::to_string(value);
  };
  number("v", kEventVersion);
  number("t", e.time_ms);
  text("build", e.build, true);
  number("pid", e.pid);
  text("tool", e.tool, true);
  text("lang", e.language, true);
  text("src", e.source, true);
  text("outcome", e.outcome, true);
  text("reason", e.reason, false);
  text("cause", e.cause, false);
  text("cause_detail", e.cause_detail, false);
  number("wall_us", e.wall_us);
  number("cpu_us", e.cpu_us);
  if (e.miss_cost_ms > 0) number("miss_cost_ms", e.miss_cost_ms);
  if (!e.direct) {
    append_key(out, "direct");
    out += "false";
  }
  if (!e.stages.empty()) {
    append_key(out, "stages");
    append_strings(out, e.stages);
  }
  append_key(out, "counts");
  out += '{';
  for (const auto& [name, value] : e.counts) {
    if (out.back() != '{') out += ',';
    append_string(out, name);
    out += ':';
    out += std::to_string(value);
  }
  out += '}';
  if (!e.command.empty()) {
    append_key(out, "command");
    append_strings(out, e.command);
  }
  out += "}\n";
  return out;
}

std::optional<CompileEvent> parse_event(std::string_view line) {
  if (!util::json_nesting_within(line, kMaxEventNesting)) return std::nullopt;  // damage, or an attack on the stack
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object() || value_or<int>(j, "v", 0) != kEventVersion) return std::nullopt;
  CompileEvent e;
  e.time_ms = value_or<std::int64_t>(j, "t", 0);
  e.build = value_or<std::string>(j, "build", "");
  e.pid = value_or<std::uint32_t>(j, "pid", 0);
  e.tool = value_or<std::string>(j, "tool", "");
  e.language = value_or<std::string>(j, "lang", "");
  e.source = value_or<std::string>(j, "src", "");
  e.outcome = value_or<std::string>(j, "outcome", "");
  e.reason = value_or<std::string>(j, "reason", "");
  e.cause = value_or<std::string>(j, "cause", "");
  e.cause_detail = value_or<std::string>(j, "cause_detail", "");
  e.wall_us = value_or<std::uint64_t>(j, "wall_us", 0);
  e.cpu_us = value_or<std::uint64_t>(j, "cpu_us", 0);
  e.miss_cost_ms = value_or<std::uint64_t>(j, "miss_cost_ms", 0);
  e.direct = value_or<bool>(j, "direct", true);
  e.stages = value_or<std::vector<std::string>>(j, "stages", {});
  e.counts = value_or<std::map<std::string, std::uint64_t>>(j, "counts", {});
  e.command = value_or<std::vector<std::string>>(j, "command", {});
  if (e.outcome.empty()) return std::nullopt;
  return e;
}

EventLog::EventLog(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}

std::string EventLog::dir() const { return util::join_path(cache_dir_, kEventsDir); }

void EventLog::append(const CompileEvent& e, std::uint64_t max_file_bytes) const noexcept {
  try {
    const std::string line = serialize_event(e);
    util::CacheUmaskScope cache_umask;
    const auto cache = open_cache(cache_dir_);
    if (!cache) return;
    constexpr int kFlags = O_WRONLY | O_APPEND | O_CREAT;
    util::UniqueFd file = cache->open_regular(kCurrentPath, kFlags, 0666);
    if (file.get() < 0 && cache->create_directories(kEventsDir)) file = cache->open_regular(kCurrentPath, kFlags, 0666);
    if (file.get() < 0) return;  // a FIFO, a link or a directory stands there: no record
    // One write: O_APPEND places the whole line at the end, after every other writer's.
    if (::write(file.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) return;
    rotate_if_long(file.get(), *cache, max_file_bytes);
  } catch (...) {
    // The record is dropped; the build goes on.
  }
}

std::vector<CompileEvent> EventLog::read(Unread* unread) const {
  std::vector<CompileEvent> out;
  const auto cache = open_cache(cache_dir_);
  if (!cache) return out;
  for (const char* path : {kRotatedPath, kCurrentPath}) {
    std::string refused;
    std::optional<std::string> text;
    try {
      text = cache->read_regular(path, &refused, kMaxReadBytes);
    } catch (const std::system_error& error) {
      refused = error.code().message();
    }
    if (!text) {
      if (unread && !refused.empty()) unread->refused_files.push_back(std::string(path) + " is " + refused);
      continue;
    }
    std::string_view rest = *text;
    for (std::size_t nl; (nl = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(nl + 1)) {
      if (auto e = parse_event(rest.substr(0, nl))) {
        out.push_back(std::move(*e));
      } else if (unread) {
        ++unread->damaged_lines;
      }
    }
  }
  return out;
}

void EventLog::mark(std::int64_t time_ms, const std::string& label) const {
  util::CacheUmaskScope cache_umask;
  util::create_directories(cache_dir_);
  const util::Beneath cache(cache_dir_);
  std::string refused;
  if (!cache.create_directories(kEventsDir, 0777, &refused)) {
    throw std::runtime_error(util::join_path(cache_dir_, kEventsDir) + " is " + refused);
  }
  if (!cache.write_atomic(kMarkPath, std::to_string(time_ms) + " " + label + "\n", 0666, &refused))
    throw std::runtime_error(util::join_path(cache_dir_, kEventsDir) + " is " + refused);
}

std::optional<std::pair<std::int64_t, std::string>> EventLog::last_mark() const {
  const auto cache = open_cache(cache_dir_);
  std::optional<std::string> text;
  try {
    if (cache) text = cache->read_regular(kMarkPath, nullptr, 4096);
  } catch (const std::system_error&) {
  }
  if (!text) return std::nullopt;
  std::int64_t t = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), t);
  if (ec != std::errc()) return std::nullopt;
  std::string label = text->substr(static_cast<std::size_t>(end - text->data()));
  while (!label.empty() && (label.back() == '\n' || label.back() == ' ')) label.pop_back();
  if (!label.empty() && label.front() == ' ') label.erase(0, 1);
  return std::pair{t, label};
}

std::uint64_t EventLog::size() const {
  std::uint64_t total = 0;
  const auto cache = open_cache(cache_dir_);
  for (const char* path : {kRotatedPath, kCurrentPath, kMarkPath}) {
    const auto st = cache ? cache->lstat(path) : std::nullopt;
    if (st && S_ISREG(st->st_mode)) total += static_cast<std::uint64_t>(st->st_size);
  }
  return total;
}

void EventLog::drop_rotated() const {
  if (const auto cache = open_cache(cache_dir_)) cache->unlink_file(kRotatedPath);
}

void EventLog::clear() const {
  if (!util::exists(cache_dir_)) return;
  util::Beneath(cache_dir_).remove_tree(kEventsDir);  // a planted link is removed, never entered
}

}  // namespace kache::core
