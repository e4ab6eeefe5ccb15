#include "core/events.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <nlohmann/json.hpp>
#include <system_error>

#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/scoped_file.hpp"

namespace kache::core {

namespace {

using json = nlohmann::json;

constexpr const char* kCurrent = "events.jsonl";
constexpr const char* kRotated = "events.1.jsonl";
constexpr const char* kMark = "mark";

// The prefix of a counter name that names a reason, most telling first: a miss's not-stored reason
// says more than its stage counters.
constexpr std::string_view kReasonPrefixes[] = {"passthrough.", "error.", "not_stored."};

std::string_view suffix_after(std::string_view s, char c) {
  const std::size_t at = s.rfind(c);
  return at == std::string_view::npos ? s : s.substr(at + 1);
}

template <typename T>
T value_or(const json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

// The current file, after a write took it to `size` bytes, moves aside when it is past the limit and
// still the file this writer appended to (two writers past the limit rename once).
void rotate_if_long(int fd, const std::string& dir, std::uint64_t max_bytes) {
  struct stat mine {}, named {};
  if (::fstat(fd, &mine) != 0 || static_cast<std::uint64_t>(mine.st_size) <= max_bytes) return;
  const std::string current = util::join_path(dir, kCurrent);
  if (::stat(current.c_str(), &named) != 0 || named.st_ino != mine.st_ino || named.st_dev != mine.st_dev) return;
  (void)::rename(current.c_str(), util::join_path(dir, kRotated).c_str());
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

std::string event_build_id(const char* build_id_env) {
  if (build_id_env != nullptr && *build_id_env != '\0') return build_id_env;
  return "pg" + std::to_string(::getpgrp());
}

std::string serialize_event(const CompileEvent& e) {
  json j;
  j["v"] = kEventVersion;
  j["t"] = e.time_ms;
  j["build"] = e.build;
  j["pid"] = e.pid;
  j["tool"] = e.tool;
  j["lang"] = e.language;
  j["src"] = e.source;
  j["outcome"] = e.outcome;
  if (!e.reason.empty()) j["reason"] = e.reason;
  if (!e.cause.empty()) j["cause"] = e.cause;
  if (!e.cause_detail.empty()) j["cause_detail"] = e.cause_detail;
  j["wall_us"] = e.wall_us;
  j["cpu_us"] = e.cpu_us;
  if (e.miss_cost_ms > 0) j["miss_cost_ms"] = e.miss_cost_ms;
  if (!e.direct) j["direct"] = false;
  if (!e.stages.empty()) j["stages"] = e.stages;
  j["counts"] = e.counts;
  if (!e.command.empty()) j["command"] = e.command;
  // Invalid UTF-8 in a path is replaced, not thrown on: the record is a diagnostic.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::optional<CompileEvent> parse_event(std::string_view line) {
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

std::string EventLog::dir() const { return util::join_path(cache_dir_, "events"); }

void EventLog::append(const CompileEvent& e, std::uint64_t max_file_bytes) const noexcept {
  try {
    const std::string line = serialize_event(e);
    const std::string d = dir();
    const std::string path = util::join_path(d, kCurrent);
    util::CacheUmaskScope cache_umask;
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0 && errno == ENOENT) {
      util::create_directories(d);
      fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    }
    if (fd < 0) return;
    util::UniqueFd file(fd);
    // One write: O_APPEND places the whole line at the end, after every other writer's.
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return;
    rotate_if_long(fd, d, max_file_bytes);
  } catch (...) {
    // The record is dropped; the build goes on.
  }
}

std::vector<CompileEvent> EventLog::read() const {
  std::vector<CompileEvent> out;
  for (const char* name : {kRotated, kCurrent}) {
    std::string text;
    try {
      text = util::read_file(util::join_path(dir(), name));
    } catch (const std::system_error&) {
      continue;  // absent
    }
    std::string_view rest = text;
    for (std::size_t nl; (nl = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(nl + 1)) {
      if (auto e = parse_event(rest.substr(0, nl))) out.push_back(std::move(*e));
    }
  }
  return out;
}

void EventLog::mark(std::int64_t time_ms, const std::string& label) const {
  util::CacheUmaskScope cache_umask;
  util::create_directories(dir());
  util::write_file_atomic(util::join_path(dir(), kMark), std::to_string(time_ms) + " " + label + "\n");
}

std::optional<std::pair<std::int64_t, std::string>> EventLog::last_mark() const {
  std::string text;
  try {
    text = util::read_file(util::join_path(dir(), kMark));
  } catch (const std::system_error&) {
    return std::nullopt;
  }
  std::int64_t t = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), t);
  if (ec != std::errc()) return std::nullopt;
  std::string label = text.substr(static_cast<std::size_t>(end - text.data()));
  while (!label.empty() && (label.back() == '\n' || label.back() == ' ')) label.pop_back();
  if (!label.empty() && label.front() == ' ') label.erase(0, 1);
  return std::pair{t, label};
}

std::uint64_t EventLog::size() const {
  std::uint64_t total = 0;
  for (const char* name : {kRotated, kCurrent, kMark}) {
    struct stat st {};
    if (::stat(util::join_path(dir(), name).c_str(), &st) == 0) total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

void EventLog::drop_rotated() const { util::remove_file(util::join_path(dir(), kRotated)); }

void EventLog::clear() const { util::remove_all(dir()); }

}  // namespace kache::core
