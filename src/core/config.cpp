#include "core/config.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "core/log.hpp"
#include "util/beneath.hpp"
#include "util/cache_umask.hpp"
#include "util/fs.hpp"
#include "util/lock.hpp"

namespace kache::core {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string trim(std::string_view text) {
  const auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

// "~/x" in a path value means $HOME/x, as users expect from shell habits; TOML has no expansion.
std::string expand_home(const std::string& path) {
  if (path == "~" || path.starts_with("~/")) {
    const std::string home = env_or_empty("HOME");
    if (!home.empty()) return home + path.substr(1);
  }
  return path;
}

std::string util_join(const std::string& dir, const std::string& name) {
  return dir.ends_with('/') ? dir + name : dir + "/" + name;
}

std::string default_cache_dir() {
  if (std::string xdg = env_or_empty("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/kache";
  if (std::string home = env_or_empty("HOME"); !home.empty()) return home + "/.cache/kache";
  // No home at all (some CI sandboxes): a per-user directory still keeps users apart.
  return fmt::format("/tmp/kache-{}", ::getuid());
}

std::string default_config_file() {
  if (std::string explicit_file = env_or_empty("KACHE_CONFIG"); !explicit_file.empty()) {
    return expand_home(explicit_file);
  }
  if (std::string xdg = env_or_empty("XDG_CONFIG_HOME"); !xdg.empty()) return xdg + "/kache/config.toml";
  if (std::string home = env_or_empty("HOME"); !home.empty()) return home + "/.config/kache/config.toml";
  return {};
}

// Splits on any of the separator characters and drops empty pieces, so "a,,b" and "a  b" both work.
std::vector<std::string> split_any(std::string_view text, std::string_view separators) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find_first_of(separators, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool parse_int(const std::string& text, long long& value) {
  const std::string t = trim(text);
  if (t.empty()) return false;
  const char* first = t.data();
  if (*first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, t.data() + t.size(), value);
  return ec == std::errc() && ptr == t.data() + t.size();
}

// ----- The key table ------------------------------------------------------------------------------
// Each key knows how to take a value from a string (environment, or a TOML string) and from any other
// TOML node. A setter returns "" on success, or the tail of a sentence saying what was wrong
// ("is not a size"); on failure it must leave the config unchanged, so the lower layer's value stays.

using StringSetter = std::string (*)(Config&, const std::string&);
using NodeSetter = std::string (*)(Config&, const toml::node&);
using Shower = std::string (*)(const Config&);

struct KeySpec {
  const char* section;
  const char* name;
  const char* env;
  StringSetter from_string;
  NodeSetter from_node;  // for non-string TOML values; nullptr: only strings are accepted
  Shower show;
  const char* not_a;    // used when a TOML value has the wrong type: "is not <not_a>"
  const char* example;  // a value it takes, as TOML writes it: the fix a refusal suggests
};

std::string set_dir(Config& c, const std::string& v) {
  if (trim(v).empty()) return "is empty";
  const std::string dir = expand_home(v);
  // A relative cache dir would put a cache under every compile's working directory.
  if (!dir.starts_with('/')) return "is a relative path (the cache directory must be absolute)";
  c.cache_dir = dir;
  return {};
}

std::string set_max_size(Config& c, const std::string& v) {
  std::uint64_t bytes = 0;
  if (!parse_size(v, bytes)) return "is not a size (a number with a unit K, M, G or T, e.g. 500M; 0: no limit)";
  c.max_size = bytes;  // 0: no limit, as in ccache
  return {};
}

std::string set_max_size_node(Config& c, const toml::node& n) {
  if (auto i = n.value_exact<std::int64_t>()) {
    if (*i < 0) return "is not a size (a number with a unit K, M, G or T, e.g. 500M; 0: no limit)";
    c.max_size = static_cast<std::uint64_t>(*i);
    return {};
  }
  return "is not a size (a number with a unit K, M, G or T, e.g. 500M; 0: no limit)";
}

std::string set_level_value(Config& c, long long level) {
  // zstd accepts more, but 1..19 is the range that makes sense for a cache (22 is very slow).
  if (level < 1 || level > 19) return "is not a compression level from 1 to 19";
  c.compression_level = static_cast<int>(level);
  return {};
}

std::string set_level(Config& c, const std::string& v) {
  long long level = 0;
  if (!parse_int(v, level)) return "is not a compression level from 1 to 19";
  return set_level_value(c, level);
}

std::string set_level_node(Config& c, const toml::node& n) {
  if (auto i = n.value_exact<std::int64_t>()) return set_level_value(c, *i);
  return "is not a compression level from 1 to 19";
}

template <bool Config::*Field>
std::string set_bool(Config& c, const std::string& v) {
  bool b = false;
  if (!parse_bool(v, b)) return "is not a boolean (use 1/0, true/false, yes/no or on/off)";
  c.*Field = b;
  return {};
}

template <bool Config::*Field>
std::string set_bool_node(Config& c, const toml::node& n) {
  if (auto b = n.value_exact<bool>()) {
    c.*Field = *b;
    return {};
  }
  if (auto i = n.value_exact<std::int64_t>(); i && (*i == 0 || *i == 1)) {
    c.*Field = *i == 1;
    return {};
  }
  return "is not a boolean (use true or false)";
}

template <bool Config::*Field>
std::string show_bool(const Config& c) {
  return c.*Field ? "true" : "false";
}

// Allow-list entries are flags; the environment form separates them by commas or whitespace.
std::string set_allowlist(Config& c, const std::string& v) {
  c.extra_allowlist_flags = split_any(v, ", \t\n");
  return {};
}

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string set_base_dirs_list(Config& c, const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    const std::string expanded = expand_home(d);
    // A relative root would depend on the directory kache happens to run in.
    if (!expanded.starts_with('/')) return fmt::format("has the relative path '{}' (base dirs must be absolute)", d);
    out.push_back(strip_trailing_slashes(expanded));
  }
  c.base_dirs = std::move(out);
  return {};
}

std::string set_base_dirs(Config& c, const std::string& v) { return set_base_dirs_list(c, split_any(v, ":")); }

// Both lists take a TOML array of strings.
bool string_array(const toml::node& n, std::vector<std::string>& out) {
  const toml::array* arr = n.as_array();
  if (!arr) return false;
  for (const auto& item : *arr) {
    auto s = item.value_exact<std::string>();
    if (!s) return false;
    out.push_back(*s);
  }
  return true;
}

std::string set_allowlist_node(Config& c, const toml::node& n) {
  std::vector<std::string> items;
  if (!string_array(n, items)) return "is not a list of strings";
  c.extra_allowlist_flags.clear();
  for (auto& item : items) {
    if (std::string t = trim(item); !t.empty()) c.extra_allowlist_flags.push_back(t);
  }
  return {};
}

std::string set_base_dirs_node(Config& c, const toml::node& n) {
  std::vector<std::string> items;
  if (!string_array(n, items)) return "is not a list of strings";
  std::erase_if(items, [](const std::string& s) { return trim(s).empty(); });
  return set_base_dirs_list(c, items);
}

std::string show_list(const std::vector<std::string>& items) { return items.empty() ? "(none)" : join(items, ", "); }

std::string set_epoch(Config& c, const std::string& v) {
  const std::string t = trim(v);
  long long seconds = 0;
  if (lower(t) == "passthrough") {
    c.nvcc_source_date_epoch = "passthrough";
  } else if (parse_int(t, seconds) && seconds >= 0) {
    c.nvcc_source_date_epoch = std::to_string(seconds);
  } else {
    return "is neither a number of seconds nor 'passthrough'";
  }
  return {};
}

std::string set_epoch_node(Config& c, const toml::node& n) {
  if (auto i = n.value_exact<std::int64_t>(); i && *i >= 0) {
    c.nvcc_source_date_epoch = std::to_string(*i);
    return {};
  }
  return "is neither a number of seconds nor 'passthrough'";
}

// The remote URLs are checked when read, so a typo is one sentence here rather than an error per
// compile; what is shown of them never carries a password.
std::string set_remote_storage(Config& c, const std::string& v) {
  try {
    c.remote_urls = parse_remote_urls(v, RemoteSecrets{}, c.remote_schemes);
  } catch (const std::exception& e) {
    return e.what();
  }
  c.remote_storage = trim(v);
  return {};
}

std::string show_remote_storage(const Config& c) {
  if (c.remote_storage.empty()) return "(none)";
  std::vector<std::string> shown;
  for (const auto& url : c.remote_urls) shown.push_back(url.redacted());
  return join(shown, " ");
}

std::string set_remote_ca_file(Config& c, const std::string& v) {
  c.remote_ca_file = expand_home(trim(v));
  return {};
}

std::string set_remote_signing_key_file(Config& c, const std::string& v) {
  c.remote_signing_key_file = expand_home(trim(v));
  return {};
}

// grpc://host:port (plain) or grpcs://host:port (TLS); checked when read so that a typo is one sentence.
std::string set_remote_execution_server(Config& c, const std::string& v) {
  const std::string url = trim(v);
  if (url.empty()) {
    c.remote_execution_server.clear();
    return {};
  }
  const bool known = url.starts_with("grpc://") || url.starts_with("grpcs://");
  const std::string rest = url.substr(url.find("://") + 3);
  if (!known || rest.empty() || rest.find(':') == std::string::npos || rest.find('@') != std::string::npos) {
    return "is not grpc://host:port or grpcs://host:port (the token goes in KACHE_REMOTE_EXECUTION_BEARER_TOKEN)";
  }
  c.remote_execution_server = url;
  return {};
}

std::string set_remote_execution_instance(Config& c, const std::string& v) {
  c.remote_execution_instance = trim(v);
  return {};
}

std::string set_remote_execution_ca_file(Config& c, const std::string& v) {
  c.remote_execution_ca_file = expand_home(trim(v));
  return {};
}

std::string set_remote_execution_timeout_value(Config& c, double seconds) {
  if (!(seconds > 0) || seconds > 86400) return "is not a number of seconds between 0 and 86400";
  c.remote_execution_timeout_s = seconds;
  return {};
}

std::string set_remote_execution_timeout(Config& c, const std::string& v) {
  try {
    std::size_t used = 0;
    const double seconds = std::stod(trim(v), &used);
    if (used != trim(v).size()) return "is not a number of seconds";
    return set_remote_execution_timeout_value(c, seconds);
  } catch (const std::exception&) {
    return "is not a number of seconds";
  }
}

std::string set_remote_execution_timeout_node(Config& c, const toml::node& n) {
  if (auto i = n.value_exact<long long>()) return set_remote_execution_timeout_value(c, static_cast<double>(*i));
  if (auto d = n.value_exact<double>()) return set_remote_execution_timeout_value(c, *d);
  return "is not a number of seconds";
}

std::string set_log_filter(Config& c, const std::string& v) {
  if (!parse_log_filter(v)) return "is not a log filter (try 'debug' or 'kache=debug')";
  c.log_filter = trim(v);
  return {};
}

std::string set_log_file(Config& c, const std::string& v) {
  c.log_file = expand_home(trim(v));
  return {};
}

std::string set_log_warnings(Config& c, const std::string& v) {
  const std::string t = lower(trim(v));
  if (t != "stderr" && t != "log") return "is neither \"stderr\" nor \"log\"";
  c.warnings_to_stderr = t == "stderr";
  return {};
}

std::string set_umask(Config& c, const std::string& v) {
  const std::string t = trim(v);
  unsigned mask = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), mask, 8);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || mask > 0777)
    return "is not an octal umask such as 002 or 022";
  c.cache_umask = static_cast<int>(mask);
  return {};
}

std::string set_umask_node(Config& c, const toml::node& n) {
  // TOML 0o002 is an integer; a bare 002 is not valid TOML, "002" arrives as a string.
  if (auto i = n.value_exact<std::int64_t>(); i && *i >= 0 && *i <= 0777) {
    c.cache_umask = static_cast<int>(*i);
    return {};
  }
  return "is not an octal umask such as \"002\" or 0o002";
}

std::string set_lock_timeout(Config& c, const std::string& v) {
  const std::string t = trim(v);
  char* end = nullptr;
  const double s = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !(s >= 0) || s > 86400) return "is not a number of seconds";
  c.lock_timeout_s = s;
  return {};
}

std::string set_lock_timeout_node(Config& c, const toml::node& n) {
  std::optional<double> s;
  if (auto i = n.value_exact<std::int64_t>()) s = static_cast<double>(*i);
  if (auto d = n.value_exact<double>()) s = *d;
  if (!s || !(*s >= 0) || *s > 86400) return "is not a number of seconds";
  c.lock_timeout_s = *s;
  return {};
}

const KeySpec kKeys[] = {
    {"cache", "dir", "KACHE_DIR", set_dir, nullptr, [](const Config& c) { return c.cache_dir; }, "a path",
     "\"~/.cache/kache\""},
    {"cache", "max_size", "KACHE_MAX_SIZE", set_max_size, set_max_size_node,
     [](const Config& c) { return c.max_size == 0 ? std::string("0 (no limit)") : format_size(c.max_size); }, "a size",
     "\"10G\""},
    {"cache", "compression", "KACHE_COMPRESSION", set_bool<&Config::compression>, set_bool_node<&Config::compression>,
     show_bool<&Config::compression>, "a boolean", "true"},
    {"cache", "compression_level", "KACHE_COMPRESSION_LEVEL", set_level, set_level_node,
     [](const Config& c) { return std::to_string(c.compression_level); }, "a compression level", "3"},
    {"cache", "direct_mode", "KACHE_DIRECT_MODE", set_bool<&Config::direct_mode>, set_bool_node<&Config::direct_mode>,
     show_bool<&Config::direct_mode>, "a boolean", "true"},
    {"cache", "preprocessed_fallback", "KACHE_PREPROCESSED_FALLBACK", set_bool<&Config::preprocessed_fallback>,
     set_bool_node<&Config::preprocessed_fallback>, show_bool<&Config::preprocessed_fallback>, "a boolean", "true"},
    {"cache", "disable", "KACHE_DISABLE", set_bool<&Config::disable>, set_bool_node<&Config::disable>,
     show_bool<&Config::disable>, "a boolean", "false"},
    {"cc", "extra_allowlist_flags", "KACHE_CC_EXTRA_ALLOWLIST_FLAGS", set_allowlist, set_allowlist_node,
     [](const Config& c) { return show_list(c.extra_allowlist_flags); }, "a list of strings", "[\"-fno-plt\"]"},
    {"paths", "base_dirs", "KACHE_PATHS_BASE_DIRS", set_base_dirs, set_base_dirs_node,
     [](const Config& c) { return show_list(c.base_dirs); }, "a list of strings", "[\"/home/me/src\"]"},
    {"nvcc", "path_normalize", "KACHE_NVCC_PATH_NORMALIZE", set_bool<&Config::nvcc_path_normalize>,
     set_bool_node<&Config::nvcc_path_normalize>, show_bool<&Config::nvcc_path_normalize>, "a boolean", "true"},
    {"nvcc", "source_date_epoch", "KACHE_NVCC_SOURCE_DATE_EPOCH", set_epoch, set_epoch_node,
     [](const Config& c) { return c.nvcc_source_date_epoch; }, "a number of seconds or 'passthrough'",
     "\"passthrough\""},
    {"log", "filter", "KACHE_LOG", set_log_filter, nullptr,
     [](const Config& c) { return c.log_filter.empty() ? std::string("warn (default)") : c.log_filter; },
     "a log filter string", "\"kache=debug\""},
    {"log", "file", "KACHE_LOG_FILE", set_log_file, nullptr,
     [](const Config& c) { return c.log_file.empty() ? std::string("(stderr)") : c.log_file; }, "a path",
     "\"/tmp/kache-debug.log\""},
    {"cache", "umask", "KACHE_UMASK", set_umask, set_umask_node,
     [](const Config& c) {
       return c.cache_umask < 0 ? std::string("(the process umask)") : fmt::format("{:03o}", c.cache_umask);
     },
     "an octal umask", "\"002\""},
    {"cache", "allow_world_writable", "KACHE_ALLOW_WORLD_WRITABLE", set_bool<&Config::allow_world_writable>,
     set_bool_node<&Config::allow_world_writable>, show_bool<&Config::allow_world_writable>, "a boolean", "false"},
    {"cache", "lock_timeout", "KACHE_LOCK_TIMEOUT", set_lock_timeout, set_lock_timeout_node,
     [](const Config& c) { return fmt::format("{}s", c.lock_timeout_s); }, "a number of seconds", "10"},
    {"remote", "storage", "KACHE_REMOTE_STORAGE", set_remote_storage, nullptr, show_remote_storage,
     "a space-separated list of redis://, redis+unix://, http://, https://, s3:// or file:// URLs",
     "\"redis://cache.internal:6379\""},
    {"remote", "read_only", "KACHE_REMOTE_READ_ONLY", set_bool<&Config::remote_read_only>,
     set_bool_node<&Config::remote_read_only>, show_bool<&Config::remote_read_only>, "a boolean", "true"},
    {"remote", "only", "KACHE_REMOTE_ONLY", set_bool<&Config::remote_only>, set_bool_node<&Config::remote_only>,
     show_bool<&Config::remote_only>, "a boolean", "false"},
    {"remote", "ca_file", "KACHE_REMOTE_CA_FILE", set_remote_ca_file, nullptr,
     [](const Config& c) { return c.remote_ca_file.empty() ? std::string("(system CAs)") : c.remote_ca_file; },
     "a path", "\"/etc/ssl/team-ca.pem\""},
    {"remote", "signing_key_file", "KACHE_REMOTE_SIGNING_KEY_FILE", set_remote_signing_key_file, nullptr,
     [](const Config& c) {
       return c.remote_signing_key_file.empty() ? std::string("(none: remote entries are not signed)")
                                                : c.remote_signing_key_file;
     },
     "a path", "\"~/.config/kache/remote.key\""},
    // Last, so the fuzzer's corpus (variables in this order) keeps its meaning.
    {"nvcc", "cache_device_outputs", "KACHE_NVCC_CACHE_DEVICE_OUTPUTS", set_bool<&Config::nvcc_cache_device_outputs>,
     set_bool_node<&Config::nvcc_cache_device_outputs>, show_bool<&Config::nvcc_cache_device_outputs>, "a boolean",
     "true"},
    {"nvcc", "stages", "KACHE_NVCC_STAGES", set_bool<&Config::nvcc_stages>, set_bool_node<&Config::nvcc_stages>,
     show_bool<&Config::nvcc_stages>, "a boolean", "true"},
    {"events", "enabled", "KACHE_EVENTS", set_bool<&Config::events>, set_bool_node<&Config::events>,
     show_bool<&Config::events>, "a boolean", "true"},
    {"events", "command_line", "KACHE_EVENTS_COMMAND_LINE", set_bool<&Config::events_command_line>,
     set_bool_node<&Config::events_command_line>, show_bool<&Config::events_command_line>, "a boolean", "false"},
    // After the rows above, for the same reason.
    {"remote_execution", "server", "KACHE_REMOTE_EXECUTION", set_remote_execution_server, nullptr,
     [](const Config& c) {
       return c.remote_execution_server.empty() ? std::string("(none: misses run here)") : c.remote_execution_server;
     },
     "a grpc:// or grpcs:// URL", "\"grpcs://reapi.internal:8980\""},
    {"remote_execution", "instance", "KACHE_REMOTE_EXECUTION_INSTANCE", set_remote_execution_instance, nullptr,
     [](const Config& c) {
       return c.remote_execution_instance.empty() ? std::string("(the default instance)") : c.remote_execution_instance;
     },
     "a string", "\"main\""},
    {"remote_execution", "ca_file", "KACHE_REMOTE_EXECUTION_CA_FILE", set_remote_execution_ca_file, nullptr,
     [](const Config& c) {
       return c.remote_execution_ca_file.empty() ? std::string("(system CAs)") : c.remote_execution_ca_file;
     },
     "a path", "\"/etc/ssl/reapi-ca.pem\""},
    {"remote_execution", "timeout", "KACHE_REMOTE_EXECUTION_TIMEOUT", set_remote_execution_timeout,
     set_remote_execution_timeout_node,
     [](const Config& c) { return fmt::format("{}s", c.remote_execution_timeout_s); }, "a number of seconds", "600"},
    {"remote_execution", "trusted", "KACHE_REMOTE_EXECUTION_TRUSTED", set_bool<&Config::remote_execution_trusted>,
     set_bool_node<&Config::remote_execution_trusted>, show_bool<&Config::remote_execution_trusted>, "a boolean",
     "false"},
    {"log", "warnings", "KACHE_LOG_WARNINGS", set_log_warnings, nullptr,
     [](const Config& c) { return std::string(c.warnings_to_stderr ? "stderr" : "log"); }, "\"stderr\" or \"log\"",
     "\"log\""},
};

}  // namespace

std::vector<std::string> config_environment_variables() {
  std::vector<std::string> names;
  for (const auto& k : kKeys) names.emplace_back(k.env);
  return names;
}

namespace {

std::string full_name(const KeySpec& k) { return fmt::format("{}.{}", k.section, k.name); }

// What a refused value leaves in force. A refused cache.dir leaves no cache: compiles pass through
// (passthrough.cache-dir-refused) and kache's commands refuse; the default directory is not a fallback.
std::string what_applies_instead(const KeySpec& k, const Config& c) {
  if (k.from_string == set_dir) return "no cache is used: every compile passes through until it is fixed";
  return "using " + k.show(c);
}

}  // namespace

std::vector<SettingRow> setting_rows() {
  const Config defaults;
  std::vector<SettingRow> rows;
  for (const auto& k : kKeys) rows.push_back({full_name(k), k.env, k.not_a, k.show(defaults)});
  return rows;
}

namespace {

const KeySpec* find_key(std::string_view section, std::string_view name) {
  for (const auto& k : kKeys) {
    if (section == k.section && name == k.name) return &k;
  }
  return nullptr;
}

bool known_section(std::string_view section) {
  return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const KeySpec& k) { return section == k.section; });
}

// How a TOML value reads back to the user in a message: strings quoted, the rest as TOML.
std::string render_node(const toml::node& n) {
  if (auto s = n.value_exact<std::string>()) return fmt::format("'{}'", *s);
  std::ostringstream out;
  n.visit([&out](const auto& v) { out << v; });
  return out.str();
}

std::string location(const std::string& file, const toml::node& n) {
  const auto line = n.source().begin.line;
  return line > 0 ? fmt::format("{} (line {})", file, line) : file;
}

// A size without a unit is bytes here, where ccache reads gigabytes: the value stands, with a warning.
void note_bare_size(Config& c, const KeySpec& k, const std::string& value, const std::string& where) {
  if (std::string_view(k.name) != "max_size" || c.max_size == 0) return;
  const std::string t = trim(value);
  if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos) return;
  c.problems.push_back(
      fmt::format("kache: {}.{} = {} in {} has no unit, so it means {} bytes ({}); write the unit, "
                  "e.g. \"{}G\" or \"{}M\" (B for bytes).",
                  k.section, k.name, t, where, t, format_size(c.max_size), t, t));
}

// The row's example as a variable carries it: no TOML quotes, a list's items separated by commas.
std::string example_for_environment(const KeySpec& k) {
  std::string out;
  for (const char ch : std::string_view(k.example)) {
    if (ch != '"' && ch != '[' && ch != ']') out += ch;
  }
  return out;
}

// A value as a message may quote it: remote.storage may carry a password, so it is redacted; a
// remote_execution.server given with a user or token in it (refused) is shown without them.
// Whether a setting's value may carry a credential (a password, a token in a URL): every setting of
// [remote] and [remote_execution]. Such a value is quoted only redacted, and never when it is no string.
bool may_carry_credential(const KeySpec& k) {
  const std::string_view section(k.section);
  return section == "remote" || section == "remote_execution";
}

// Each URL-looking word's query string and fragment (?token=..., #...) as "?***".
std::string without_queries(const std::string& value) {
  std::string out;
  std::size_t i = 0;
  while (i < value.size()) {
    const std::size_t blank = value.find_first_of(" \t\n\r,", i);
    const std::size_t end = blank == std::string::npos ? value.size() : blank;
    std::string word = value.substr(i, end - i);
    const std::size_t query = word.find_first_of("?#");
    if (query != std::string::npos) word = word.substr(0, query) + word[query] + "***";
    out += word;
    if (end < value.size()) out += value[end];
    i = end + 1;
  }
  return out;
}

std::string quotable(const Config& c, const KeySpec& k, const std::string& value) {
  if (!may_carry_credential(k)) return value;
  std::string out = value;
  if (k.from_string == set_remote_storage) {
    out = redact_remote_list(value, c.remote_schemes);
  } else if (out.find('@') != std::string::npos) {
    const std::size_t scheme = out.find("://");
    const std::size_t at = out.rfind('@');
    out = (scheme == std::string::npos ? std::string() : out.substr(0, scheme + 3)) + "***@" + out.substr(at + 1);
  }
  return without_queries(out);
}

// A value that is no string, as a message may show it: as TOML, unless it may carry a credential.
std::string quotable_node(const KeySpec& k, const toml::node& n) {
  return may_carry_credential(k) ? std::string("(a value that is not a string, not shown)") : render_node(n);
}

void apply_node(Config& c, const KeySpec& k, const toml::node& n, const std::string& file) {
  std::string error;
  const auto text = n.value_exact<std::string>();
  if (auto s = text) {
    error = k.from_string(c, *s);
  } else if (k.from_node) {
    error = k.from_node(c, n);
  } else {
    error = fmt::format("is not {}", k.not_a);
  }
  if (error.empty()) {
    c.origins[full_name(k)] = file;
    note_bare_size(c, k, text ? *text : render_node(n), location(file, n));
  } else {
    if (k.from_string == set_dir) c.cache_dir_refused = true;
    c.problems.push_back(fmt::format("kache: {} = {} in {} {}; write it as, for example, {} = {} under [{}]; {}.",
                                     full_name(k), text ? fmt::format("'{}'", quotable(c, k, *text)) : quotable_node(k, n),
                                     location(file, n), error, k.name, k.example, k.section,
                                     what_applies_instead(k, c)));
  }
}

// Settings that widen what kache records about everyone's compiles (command lines in the event log,
// where the log goes, how much it says, whether warnings reach stderr) or whom it trusts (the server that receives every source
// for remote execution and whether its answers may be published, the keys and CAs that vouch for
// remote answers, a cache dir anyone can write): honoured from the user's own configuration and
// environment only, never from the cache dir's kache.toml, which anyone sharing the cache can write.
// (remote.storage stays: reading a team's store from there gives no more than planting an entry.)
bool widens_trust(const KeySpec& k) {
  static constexpr std::string_view kOnlyFromOwnConfig[] = {
      "events.command_line",    "log.file",          "log.filter",
      "remote_execution.server", "remote_execution.trusted", "remote_execution.ca_file",
      "remote.signing_key_file", "remote.ca_file",   "cache.allow_world_writable",
      "log.warnings"};
  const std::string name = full_name(k);
  for (std::string_view n : kOnlyFromOwnConfig)
    if (name == n) return true;
  return false;
}

// The cache dir's own kache.toml, read below the cache dir (util::Beneath): a link there is refused,
// not followed, and a FIFO never waited on. nullopt with *kind "" when there is none.
std::optional<std::string> cache_dir_file(const std::string& file, std::string* kind) {
  constexpr std::size_t kMaxConfigBytes = 1u << 20;
  std::optional<util::Beneath> cache;
  try {
    cache.emplace(util::dirname(file));
  } catch (const std::system_error& e) {
    if (e.code().value() == ENOENT || e.code().value() == ENOTDIR) return std::nullopt;  // no cache dir yet
    throw;
  }
  return cache->read_regular(util::basename(file), kind, kMaxConfigBytes);
}

// One file's settings over c. In the cache dir's own file cache.dir cannot move the cache (it is
// where the file was found). Returns whether the file was read.
bool read_file_layer(Config& c, const std::string& file, bool in_cache_dir) {
  if (file.empty()) return false;
  std::error_code ec;
  if (!in_cache_dir && !fs::exists(file, ec)) return false;  // no file is the normal case
  std::string kind;
  std::optional<std::string> text;
  try {
    text = in_cache_dir ? cache_dir_file(file, &kind) : util::read_regular_file(file, &kind);
    if (in_cache_dir && !text && kind.empty()) return false;  // none
  } catch (const std::exception&) {
    c.problems.push_back(fmt::format("kache: cannot read {}; using the built-in defaults for its settings.", file));
    return false;
  }
  if (!text) {
    // A FIFO would block every compile (in a group-shared cache dir, anyone's), so it is never opened
    // for reading: refused like any file that is not a regular one.
    c.problems.push_back(
        fmt::format("kache: the config file {} is {}, not a regular file; its settings are not "
                    "read (set KACHE_CONFIG to a file).",
                    file, kind));
    return false;
  }

  toml::table root;
  try {
    root = toml::parse(*text, file);
  } catch (const toml::parse_error& e) {
    c.problems.push_back(fmt::format("kache: {} is not valid TOML ({} at line {}); ignoring the whole file.", file,
                                     e.description(), e.source().begin.line));
    return false;
  }

  for (const auto& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    const toml::table* table = section_node.as_table();
    if (!table) {
      c.problems.push_back(known_section(section)
                               ? fmt::format("kache: '{}' in {} must be a [{}] table; ignoring it.", section,
                                             location(file, section_node), section)
                               : fmt::format("kache: ignoring unknown key '{}' in {}.", section, file));
      continue;
    }
    if (!known_section(section)) {
      c.problems.push_back(fmt::format("kache: ignoring unknown section '[{}]' in {}.", section, file));
      continue;
    }
    for (const auto& [key, node] : *table) {
      const KeySpec* spec = find_key(section, key.str());
      if (!spec) {
        c.problems.push_back(fmt::format("kache: ignoring unknown key '{}.{}' in {}.", section, key.str(), file));
        continue;
      }
      if (in_cache_dir && spec->from_string == set_dir) {
        c.problems.push_back(
            fmt::format("kache: ignoring cache.dir in {}: the cache dir's own config cannot move it.", file));
        continue;
      }
      if (in_cache_dir && widens_trust(*spec)) {
        c.problems.push_back(fmt::format(
            "kache: ignoring {} in {}: whoever shares the cache dir can write that file, and this setting "
            "widens what kache records or trusts; set it in your own config file ({}) or as {}.",
            full_name(*spec), file, c.config_file, spec->env));
        continue;
      }
      apply_node(c, *spec, node, file);
    }
  }
  c.files_read.push_back(file);
  return true;
}

std::string system_config_file() {
  const std::string path = env_or_empty("KACHE_SYSTEM_CONFIG");
  return path.empty() ? std::string("/etc/kache.toml") : path;
}

// The cache dir the environment will name, so its config file is read before the environment.
std::string cache_dir_before_env(const Config& c) {
  Config probe;
  if (const char* dir = std::getenv("KACHE_DIR"); dir && *dir && set_dir(probe, dir).empty()) return probe.cache_dir;
  return c.cache_dir;
}

void read_env_layer(Config& c) {
  for (const auto& k : kKeys) {
    const char* raw = std::getenv(k.env);
    // An empty variable counts as unset: "KACHE_LOG= make" must not be an error.
    if (!raw || !*raw) continue;
    const std::string value(raw);
    if (std::string error = k.from_string(c, value); error.empty()) {
      c.origins[full_name(k)] = "env";
      note_bare_size(c, k, value, k.env);
    } else {
      if (k.from_string == set_dir) c.cache_dir_refused = true;
      c.problems.push_back(fmt::format("kache: {}='{}' {}; write it as, for example, {}={}; {}.", k.env,
                                       quotable(c, k, value), error, k.env, example_for_environment(k),
                                       what_applies_instead(k, c)));
    }
  }
}

}  // namespace

bool parse_bool(const std::string& text, bool& value) {
  const std::string t = lower(trim(text));
  if (t == "1" || t == "true" || t == "yes" || t == "on") {
    value = true;
    return true;
  }
  if (t == "0" || t == "false" || t == "no" || t == "off") {
    value = false;
    return true;
  }
  return false;
}

Config load_config(RemoteSchemes remote_schemes) {
  Config c;
  c.remote_schemes = remote_schemes;
  // Nothing below is expected to throw, but a config problem must never break a build.
  try {
    c.cache_dir = default_cache_dir();
    c.config_file = default_config_file();
    // ccache's order: the system file, then the per-user one, then the cache dir's own, then the environment.
    read_file_layer(c, system_config_file(), false);
    read_file_layer(c, c.config_file, false);
    c.cache_config_file = util_join(cache_dir_before_env(c), "kache.toml");
    read_file_layer(c, c.cache_config_file, true);
    read_env_layer(c);
  } catch (const std::exception& e) {
    c.problems.push_back(fmt::format("kache: unexpected error while reading the configuration ({}).", e.what()));
  }
  // The secrets come from the environment alone, read once and only when remotes are configured.
  if (!c.remote_urls.empty()) {
    const RemoteSecrets secrets = RemoteSecrets::from_environment();
    for (auto& url : c.remote_urls) apply_secrets(url, secrets, c.remote_schemes);
  }
  return c;
}

bool parse_age(const std::string& text, std::int64_t& seconds) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  if (value < 0) return false;
  const std::string unit = text.substr(used);
  const std::int64_t scale = unit.empty() || unit == "s" ? 1
                             : unit == "m"               ? 60
                             : unit == "h"               ? 3600
                             : unit == "d"               ? 86400
                                                         : 0;
  if (scale == 0) return false;
  seconds = value * scale;
  return true;
}

bool parse_size(const std::string& text, std::uint64_t& bytes) {
  const std::string t = trim(text);
  std::size_t i = 0;
  std::uint64_t whole = 0;
  std::size_t whole_digits = 0;
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i, ++whole_digits) {
    const unsigned digit = static_cast<unsigned>(t[i] - '0');
    if (whole > (kMax - digit) / 10) return false;
    whole = whole * 10 + digit;
  }
  // The fraction is kept as digits so that "1.5G" is exact instead of going through a double.
  std::uint64_t frac = 0;
  std::uint64_t frac_scale = 1;
  bool has_point = false;
  if (i < t.size() && t[i] == '.') {
    has_point = true;
    ++i;
    for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i) {
      if (frac_scale < 1'000'000'000'000ull) {  // more precision than this cannot matter for a size
        frac = frac * 10 + static_cast<unsigned>(t[i] - '0');
        frac_scale *= 10;
      }
    }
    if (frac_scale == 1 && whole_digits == 0) return false;
  }
  if (whole_digits == 0 && !has_point) return false;
  while (i < t.size() && t[i] == ' ') ++i;

  std::string suffix = lower(t.substr(i));
  std::uint64_t multiplier = 1;
  if (!suffix.empty() && suffix != "b") {
    // K, M, G and T are binary multiples whether or not they carry the "i" (like ccache's sizes).
    switch (suffix[0]) {
      case 'k':
        multiplier = 1ull << 10;
        break;
      case 'm':
        multiplier = 1ull << 20;
        break;
      case 'g':
        multiplier = 1ull << 30;
        break;
      case 't':
        multiplier = 1ull << 40;
        break;
      default:
        return false;
    }
    std::string_view rest = std::string_view(suffix).substr(1);
    if (rest.starts_with('i')) rest.remove_prefix(1);
    if (rest.starts_with('b')) rest.remove_prefix(1);
    if (!rest.empty()) return false;
  }
  if (has_point && multiplier == 1 && frac != 0) return false;  // fractions of a byte make no sense

  if (whole > kMax / multiplier) return false;
  std::uint64_t result = whole * multiplier;
  // frac < frac_scale <= 10^12 and multiplier <= 2^40: the product fits in 128 bits only, so divide first.
  const unsigned __int128 fraction_bytes =
      static_cast<unsigned __int128>(frac) * multiplier / static_cast<unsigned __int128>(frac_scale);
  if (fraction_bytes > kMax - result) return false;
  result += static_cast<std::uint64_t>(fraction_bytes);
  bytes = result;
  return true;
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

namespace {

// The value as TOML writes it: integers and booleans bare, everything else a basic string. A size is
// always a string ("10G"): a bare number in max_size reads as bytes, which is rarely what was meant.
std::string toml_value(const std::string& key, const std::string& value) {
  long long number = 0;
  if (key != "max_size" && parse_int(value, number) && trim(value) == value) return std::to_string(number);
  if (value == "true" || value == "false") return value;
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The comment after a value on its line ("max_size = 1 # why"), kept when the value is replaced.
std::string trailing_comment(std::string_view line) {
  bool in_string = false;
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\' && quote == '"')
        ++i;
      else if (c == quote)
        in_string = false;
    } else if (c == '"' || c == '\'') {
      in_string = true;
      quote = c;
    } else if (c == '#') {
      std::size_t begin = i;
      while (begin > 0 && (line[begin - 1] == ' ' || line[begin - 1] == '\t')) --begin;
      return std::string(line.substr(begin));
    }
  }
  return {};
}

// "[name]" (with blanks and a comment allowed around it): the table's name; nullopt for other lines.
std::optional<std::string> table_header(std::string_view line) {
  const std::string t = trim(line);
  if (!t.starts_with('[') || t.starts_with("[[")) return std::nullopt;
  const std::size_t close = t.find(']');
  if (close == std::string::npos) return std::nullopt;
  return trim(std::string_view(t).substr(1, close - 1));
}

// Whether a line assigns `key` ("key = ...", "key=...").
bool assigns(std::string_view line, const std::string& key) {
  const std::string t = trim(line);
  if (!t.starts_with(key)) return false;
  const std::string rest = trim(std::string_view(t).substr(key.size()));
  return rest.starts_with('=');
}

// The file's text with key = value set in [section]: that one line replaced (its indentation and comment
// kept), else one line added after the section's last assignment, else the section appended.
std::string edit_toml_text(const std::string& text, const std::string& section, const std::string& key,
                           const std::string& value) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::string assignment = key + " = " + toml_value(key, value);
  std::optional<std::size_t> insert_after;
  bool in_section = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (auto name = table_header(lines[i])) {
      in_section = *name == section;
      if (in_section) insert_after = i;
      continue;
    }
    if (!in_section) continue;
    if (assigns(lines[i], key)) {
      const std::size_t indent = lines[i].find_first_not_of(" \t");
      lines[i] = lines[i].substr(0, indent) + assignment + trailing_comment(lines[i]);
      insert_after.reset();
      return join(lines, "\n") + "\n";
    }
    if (!trim(lines[i]).empty() && !trim(lines[i]).starts_with('#')) insert_after = i;
  }
  if (insert_after) {
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(*insert_after + 1), assignment);
  } else {
    if (!lines.empty() && !trim(lines.back()).empty()) lines.emplace_back();
    lines.push_back("[" + section + "]");
    lines.push_back(assignment);
  }
  return join(lines, "\n") + "\n";
}

void write_replacing(const std::string& file, const std::string& text) {
  std::error_code ec;
  const fs::path target(file);
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", target.parent_path().string(), ec.message()));
  }
  // A sibling temp file renamed over the file, so a concurrent reader never sees half a file.
  const std::string tmp = fmt::format("{}.tmp.{}", file, ::getpid());
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o << text;
    o.close();
    if (!o) {
      fs::remove(tmp, ec);
      throw std::runtime_error(fmt::format("cannot write {}", tmp));
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error(fmt::format("cannot replace {}: {}", file, ec.message()));
  }
}

}  // namespace

void set_config_value(const std::string& file, const std::string& section, const std::string& key,
                      const std::string& value, bool below_cache_dir) {
  if (file.empty()) throw std::runtime_error("there is no config file path (set KACHE_CONFIG or HOME)");
  std::string text;
  std::error_code ec;
  std::string kind;
  std::optional<std::string> read;
  if (below_cache_dir) {
    read = cache_dir_file(file, &kind);
  } else if (fs::exists(file, ec)) {
    read = util::read_regular_file(file, &kind);
  }
  if (read || !kind.empty()) {
    if (!read)
      throw std::runtime_error(fmt::format("{} is {}, not a regular file, so it was left unchanged", file, kind));
    text = std::move(*read);
    try {
      (void)toml::parse(text, file);
    } catch (const toml::parse_error& e) {
      // Editing a file we could not parse could throw the user's settings away.
      throw std::runtime_error(fmt::format("{} is not valid TOML ({} at line {}), so it was left unchanged", file,
                                           e.description(), e.source().begin.line));
    }
  }
  // One line of the text changes: the user's comments, order and other keys stay as they were.
  const std::string edited = edit_toml_text(text, section, key, value);
  try {
    const toml::table check = toml::parse(edited, file);
    if (!check.at_path(section + "." + key)) throw std::runtime_error("the key is not where it was written");
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("{} could not be edited safely ({}), so it was left unchanged; edit it by hand", file, e.what()));
  }
  if (below_cache_dir) {
    std::string refused;
    if (!util::Beneath(util::dirname(file)).write_atomic(util::basename(file), edited, 0666, &refused))
      throw std::runtime_error(fmt::format("{} was left unchanged: it is {}", file, refused));
  } else {
    write_replacing(file, edited);
  }
}

std::string config_file_to_edit(const Config& config, const std::string& key) {
  const KeySpec* spec = find_key(key.substr(0, key.find('.')), key.substr(key.find('.') + 1));
  if (spec && widens_trust(*spec)) return config.config_file;  // never honoured from the cache dir
  // The file the value in force came from (the system file is the administrator's: not edited).
  if (const auto it = config.origins.find(key);
      it != config.origins.end() && it->second != "env" && it->second != system_config_file())
    return it->second;
  std::string kind;
  try {
    if (cache_dir_file(config.cache_config_file, &kind)) return config.cache_config_file;
  } catch (const std::exception&) {
    // unreadable: not the file to edit
  }
  return config.config_file;
}

std::optional<std::string> canonical_config_key(const std::string& name) {
  const KeySpec* found = nullptr;
  for (const auto& k : kKeys) {
    if (name == full_name(k)) return name;
    if (name == k.name) {
      if (found) return std::nullopt;  // the bare name is ambiguous
      found = &k;
    }
  }
  if (found) return full_name(*found);
  return std::nullopt;
}

std::optional<std::string> config_value_text(const Config& config, const std::string& key) {
  for (const auto& k : kKeys) {
    if (key == full_name(k)) return k.show(config);
  }
  return std::nullopt;
}

std::string config_value_error(const std::string& key, const std::string& value) {
  for (const auto& k : kKeys) {
    if (key != full_name(k)) continue;
    Config scratch;
    return k.from_string(scratch, value);
  }
  return "is not a setting";
}

std::vector<std::string> config_key_names() {
  std::vector<std::string> names;
  for (const auto& k : kKeys) names.push_back(full_name(k));
  return names;
}

std::string describe_config(const Config& config) {
  // Every file and whether it was read; a later one wins, the environment over all.
  std::string out;
  // The per-user file first (what users look for); the system file is read before it, the cache dir's after.
  const std::pair<const char*, std::string> files[] = {{"config file", config.config_file},
                                                       {"system config (read before it)", system_config_file()},
                                                       {"cache dir config (read after it)",
                                                        config.cache_dir_refused ? "" : config.cache_config_file}};
  for (const auto& [label, path] : files) {
    const bool read = std::find(config.files_read.begin(), config.files_read.end(), path) != config.files_read.end();
    std::error_code ec;
    // A file that is there and was not read is invalid (the problem is printed before this), not absent.
    const char* state = read ? "read" : !path.empty() && fs::exists(path, ec) ? "not read: see the problem above"
                                                                              : "not present";
    out += fmt::format("{}: {} ({})\n", label, path.empty() ? std::string("(none)") : path, state);
  }
  std::size_t key_width = 0;
  std::size_t value_width = 0;
  for (const auto& k : kKeys) {
    key_width = std::max(key_width, full_name(k).size());
    value_width = std::max(value_width, k.show(config).size());
  }
  for (const auto& k : kKeys) {
    const std::string name = full_name(k);
    const auto it = config.origins.find(name);
    std::string origin = "default";
    if (it != config.origins.end())
      origin = it->second == "env" ? fmt::format("env {}", k.env) : fmt::format("file {}", it->second);
    // A refused cache.dir leaves no cache: the default directory is not the one in use.
    const std::string value =
        k.from_string == set_dir && config.cache_dir_refused ? "refused (see above): no cache" : k.show(config);
    out += fmt::format("{:<{}}  {:<{}}  ({})\n", name, key_width, value, value_width, origin);
  }
  return out;
}

void apply_process_settings(const Config& config) {
  util::set_cache_umask(config.cache_umask);
  util::set_lock_timeout_ms(static_cast<std::int64_t>(config.lock_timeout_s * 1000));
}

}  // namespace kache::core
