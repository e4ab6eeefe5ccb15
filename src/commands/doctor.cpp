#include "commands/doctor.hpp"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <variant>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands/options.hpp"
#include "commands/report.hpp"
#include "compiler/adapter.hpp"
#include "compiler/registry.hpp"
#include "core/config.hpp"
#include "core/doctor_rows.hpp"
#include "core/log.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "storage/open.hpp"
#include "commands/worker.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"
#include "util/process.hpp"
#include "util/text.hpp"

namespace kache::commands {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;
namespace {

using json = nlohmann::ordered_json;

// The rows every room supplies (core/doctor_rows.hpp); this file adds the cache's and the configuration's.
using Status = core::DoctorStatus;
using Rows = core::DoctorRows;

const char* status_name(Status s) {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::warn:
      return "warn";
    case Status::fail:
      return "fail";
  }
  return "?";
}

std::string filesystem_name(std::uint64_t type) {
  switch (type) {
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0xCA451A4E:
      return "bcachefs";
    case 0x01021994:
      return "tmpfs";
    case 0x794C7630:
      return "overlayfs";
    case 0x6969:
      return "nfs";
    case 0x2FC12FC1:
      return "zfs";
    case 0x65735546:
      return "fuse";
    case 0x4D44:
      return "vfat";
    case 0x2011BAB0:
      return "exfat";
    case 0x482B:
      return "hfsplus";
    case 0xFF534D42:
      return "cifs";
    default:
      return fmt::format("0x{:x}", type);
  }
}

// How many stored entries are for one checkout only because their objects name a path root (__FILE__,
// assert()): every build directory of that checkout shares them, a checkout at another path misses them
// all. The compiler's own prefix map is the fix where checkouts sit at different paths.
void check_per_checkout(Rows& rows, const Config& cfg) {
  const StatsSnapshot stats = StatsFile(cfg.cache_dir).read();
  const std::uint64_t stored = stats.get(counter::kStored);
  const std::uint64_t named =
      stats.get(std::string(counter::kStoredPerCheckoutPrefix) + std::string(reason::kPathInObject));
  const std::string value = fmt::format("{} of {} stored entries name a checkout's path", named, stored);
  if (named == 0) {
    rows.add("cache", "stored-per-checkout", Status::ok, value);
    return;
  }
  rows.add("cache", "stored-per-checkout", Status::warn, value,
           "these objects name their checkout's paths (__FILE__, assert()): every build directory of the checkout and "
           "any machine with it at the same path share them, a checkout at another path misses them "
           "(stored_per_checkout.path-in-object).",
           "where checkouts sit at different paths, build with -ffile-prefix-map=<checkout>=. (nvcc: "
           "-Xcompiler=-ffile-prefix-map=<checkout>=.) and set [paths] base_dirs to the checkout: see docs/sharing.md, "
           "\"Portable paths\"");
}

// The newest warning of kache.log, while it is a day old or less: what a build behind a pipe did not show.
void check_logged_warnings(Rows& rows, const std::string& dir) {
  constexpr std::time_t kRecentSeconds = 24 * 3600;
  struct stat st {};
  if (::stat(util::join_path(dir, "kache.log").c_str(), &st) != 0 || std::time(nullptr) - st.st_mtime > kRecentSeconds)
    return;
  const std::string latest = latest_logged_warning(dir);
  if (latest.empty()) return;
  rows.add("cache", "last-warning", Status::warn, latest,
           fmt::format("the newest warning in {}/kache.log (within the last day).", dir),
           "the warning names its fix; compiles since may have gone well");
}

// The misconfigurations the recent compiles' misses name (the event log: kache report), worst first.
void check_recent_misses(Rows& rows, const Config& cfg) {
  constexpr std::size_t kRecent = 1000;
  std::vector<report::CauseRow> causes;
  try {
    causes = report::recent_misconfigurations(cfg.cache_dir, kRecent);
  } catch (const std::exception& e) {
    rows.add("cache", "recent-misses", Status::warn, "unreadable", fmt::format("the event log: {}.", e.what()));
    return;
  }
  if (!cfg.events) {
    rows.add("cache", "recent-misses", Status::ok, "not recorded (events.enabled = false)");
    return;
  }
  if (causes.empty()) {
    rows.add("cache", "recent-misses", Status::ok,
             fmt::format("no misconfiguration among the last {} compiles' misses", kRecent));
    return;
  }
  for (const auto& c : causes) {
    rows.add("cache", "misses." + c.name, Status::warn, fmt::format("{} of the last {} compiles", c.count, kRecent),
             c.sentence, c.fix);
  }
}

void check_cache(Rows& rows, const Config& cfg) {
  if (cfg.cache_dir_refused) return;  // config.cache-dir says why: there is no cache to look at
  const std::string& dir = cfg.cache_dir;
  const bool exists = util::exists(dir);
  // The directory kache will create its cache in: the nearest existing ancestor.
  std::string probe = dir;
  while (!util::exists(probe) && util::dirname(probe) != probe) probe = util::dirname(probe);
  rows.add("cache", "dir", Status::ok, exists ? dir : dir + " (created on the first compile)");

  struct statfs sfs {};
  struct statvfs svfs {};
  if (::statfs(probe.c_str(), &sfs) == 0) {
    const std::int64_t margin = util::file_time_margin_ns(probe);
    timespec res{};
    ::clock_getres(CLOCK_REALTIME_COARSE, &res);
    rows.add("cache", "filesystem", Status::ok,
             fmt::format("{}; racy-file margin {} ms (file clock tick {:.1f} ms)",
                         filesystem_name(static_cast<std::uint64_t>(sfs.f_type)), margin / 1000000,
                         (res.tv_sec * 1e9 + res.tv_nsec) / 1e6));
  }
  struct stat dir_stat {};
  if (exists && ::stat(dir.c_str(), &dir_stat) == 0 && (dir_stat.st_mode & S_IWOTH) != 0) {
    rows.add("cache", "world-writable", cfg.allow_world_writable ? Status::warn : Status::fail, dir,
             cfg.allow_world_writable
                 ? "every user may write the cache (cache.allow_world_writable = true): any of them can plant objects."
                 : "every user may write the cache, so kache does not use it: every compile passes through "
                   "(passthrough.cache-world-writable).",
             fmt::format("chmod o-w {}", dir));
  }
  const int writable = ::access(probe.c_str(), W_OK | X_OK);
  if (writable != 0) {
    // Lookups only read: what the cache holds is still served; a miss runs and stores nothing.
    rows.add("cache", "writable", Status::fail, "no",
             fmt::format("{} is not writable ({}): compiles still hit what the cache holds, but every miss "
                         "stores nothing and statistics are not counted.",
                         probe, std::strerror(errno)),
             "make it writable, or set KACHE_DIR (or cache.dir) to a directory you can write");
  } else {
    rows.add("cache", "writable", Status::ok, "yes");
  }
  std::uint64_t size = 0;
  if (exists) {
    try {
      size = storage::LocalStorage(storage::LocalStorageOptions{dir, cfg.max_size}).total_size();
    } catch (const std::exception&) {
    }
  }
  const double percent = cfg.max_size ? 100.0 * static_cast<double>(size) / static_cast<double>(cfg.max_size) : 0.0;
  rows.add("cache", "size", Status::ok,
           fmt::format("{} of {} ({:.1f} %)", format_size(size), format_size(cfg.max_size), percent));
  if (::statvfs(probe.c_str(), &svfs) == 0) {
    const std::uint64_t free = static_cast<std::uint64_t>(svfs.f_bavail) * svfs.f_frsize;
    const std::uint64_t room = cfg.max_size > size ? cfg.max_size - size : 0;
    if (free < room) {
      rows.add(
          "cache", "free-space", Status::warn, format_size(free),
          fmt::format("the filesystem has {} free, less than the {} the size limit still allows, so stores may fail "
                      "before eviction starts.",
                      format_size(free), format_size(room)),
          "lower cache.max_size (kache -M SIZE) or free space");
    } else {
      rows.add("cache", "free-space", Status::ok, format_size(free));
    }
  }
  check_per_checkout(rows, cfg);
  check_logged_warnings(rows, dir);
  check_recent_misses(rows, cfg);
}

bool loopback_host(const std::string& host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

// The host of an endpoint URL ("http://[::1]:9000/x" -> "::1").
std::string endpoint_host(std::string_view endpoint) {
  if (const std::size_t scheme = endpoint.find("://"); scheme != std::string_view::npos) endpoint.remove_prefix(scheme + 3);
  endpoint = endpoint.substr(0, endpoint.find_first_of("/?#"));
  if (const std::size_t at = endpoint.rfind('@'); at != std::string_view::npos) endpoint.remove_prefix(at + 1);
  if (endpoint.starts_with("[")) return std::string(endpoint.substr(1, endpoint.find(']') - 1));
  return std::string(endpoint.substr(0, endpoint.find(':')));
}

// Whether an unsigned remote is a risk worth a warning: one whose entries cross the network in clear
// and unauthenticated (http://, redis:// to another host, s3:// through an http:// endpoint on another
// host: SigV4 signs the requests, not the answers), where anyone on the path, not only those allowed to
// write the remote, can change what every reader links. A remote on this machine, a shared directory
// (guarded by its permissions, as a group-shared cache dir is) and one reached through TLS (https://,
// s3:// to an https endpoint) trust whoever can write them, as the cache dir trusts its own writers: a
// fact, not a warning, or every team remote would warn forever.
bool unsigned_is_a_risk(const RemoteUrl& url) {
  if (url.scheme == "s3") {
    const std::optional<std::string> endpoint = url.attribute("endpoint");
    return endpoint && endpoint->starts_with("http://") && !loopback_host(endpoint_host(*endpoint));
  }
  if (url.scheme != "http" && url.scheme != "redis") return false;
  return !loopback_host(url.host);
}

// Each remote: the rows its backend's probe gives (reachable and accepting the credentials, writable
// unless read-only; S3 adds the clock skew), and whether its entries are signed.
void check_remotes(Rows& rows, const Config& cfg) {
  if (cfg.remote_urls.empty()) return;
  const std::string probe_key = fmt::format("kache-doctor-probe-{}", ::getpid());
  for (auto& row : storage::probe_remote_stores(cfg, probe_key)) rows.rows.push_back(std::move(row));
  if (!cfg.remote_signing_key_file.empty()) {
    rows.add("remote", "signing", Status::ok, "signed (key in " + cfg.remote_signing_key_file + ")");
    return;
  }
  std::string exposed;
  for (const auto& url : cfg.remote_urls) {
    if (unsigned_is_a_risk(url)) exposed += (exposed.empty() ? "" : ", ") + url.redacted();
  }
  if (exposed.empty()) {
    rows.add("remote", "signing", Status::ok,
             "unsigned (on this machine, a shared directory or over TLS: whoever can write the remotes is trusted)");
    return;
  }
  rows.add("remote", "signing", Status::warn, "unsigned",
           fmt::format("entries from {} cross the network in clear and unsigned: whoever can write that remote, or "
                       "alter its traffic, can plant objects in every build that reads it.",
                       exposed),
           "set remote.signing_key_file to a file holding a shared secret key, or use https://");
}

// Remote execution (docs/remote-execution.md): the server, its capabilities, a worker of this toolchain.
void check_remote_execution_rows(Rows& rows, const Config& cfg, const std::string& nvcc_arg,
                                 const util::Environment& env) {
  const std::string nvcc_path =
      nvcc_arg.find('/') != std::string::npos
          ? nvcc_arg
          : util::find_executable(nvcc_arg, util::env_get(env, "PATH").value_or("")).value_or(nvcc_arg);
  for (auto& r : check_remote_execution(cfg, nvcc_path)) rows.rows.push_back(std::move(r));
}

// The remote stores, then the remote execution server.
void check_remote_services(Rows& rows, const Config& cfg, const std::string& nvcc_arg, const util::Environment& env) {
  check_remotes(rows, cfg);
  check_remote_execution_rows(rows, cfg, nvcc_arg, env);
}

void check_config(Rows& rows, const Config& cfg, const util::Environment& env) {
  std::string origins;
  for (const auto& [key, origin] : cfg.origins)
    origins += fmt::format("{}{} ({})", origins.empty() ? "" : ", ", key, origin);
  rows.add("config", "file", Status::ok,
           fmt::format("{}{}; {}", cfg.config_file, util::exists(cfg.config_file) ? "" : " (absent)",
                       origins.empty() ? "every setting at its default" : "set: " + origins));
  if (const auto named = util::env_get(env, "KACHE_CONFIG"); named && !named->empty()) {
    struct stat st {};
    const bool readable = ::stat(cfg.config_file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                          ::access(cfg.config_file.c_str(), R_OK) == 0;
    if (!readable && util::exists(cfg.config_file)) {
      rows.add("config", "KACHE_CONFIG", Status::fail, cfg.config_file,
               "KACHE_CONFIG names something that is not a readable file, so none of its settings apply.",
               "point KACHE_CONFIG at a readable TOML file, or unset it");
    }
  }
  rows.add("config", "direct-mode", cfg.direct_mode ? Status::ok : Status::warn, cfg.direct_mode ? "on" : "off",
           cfg.direct_mode ? "" : "each lookup runs the compiler's dependency listing (-M) first: hits are slower.",
           cfg.direct_mode ? "" : "set cache.direct_mode = true unless the listing is wanted");
  if (cfg.cache_dir_refused) {
    rows.add("config", "cache-dir", Status::fail, "refused",
             "cache.dir (or KACHE_DIR) is not usable, so every compile passes through (passthrough.cache-dir-refused).",
             "set cache.dir to an absolute path");
  }
  for (const auto& problem : cfg.problems) {
    rows.add("config", "problem", Status::warn, "", problem,
             "correct the value named (kache --show-config shows every setting)");
  }
  if (cfg.disable) {
    const std::string origin = cfg.origins.count("cache.disable") ? cfg.origins.at("cache.disable") : "file";
    rows.add("config", "disable", Status::warn, fmt::format("cache.disable = true ({})", origin),
             "every compile passes through uncached (passthrough.disabled).",
             origin == "env" ? "unset KACHE_DISABLE" : "set cache.disable = false in " + cfg.config_file);
  }
}

void print_text(const Rows& rows) {
  std::size_t width = 0;
  for (const auto& r : rows.rows) width = std::max(width, r.section.size() + r.name.size() + 1);
  // Rows quote paths and names (the log's, a compiler's): no escape sequence reaches the terminal.
  using util::terminal_safe;
  for (const auto& r : rows.rows) {
    fmt::print("{:<4}  {:<{}}  {}\n", status_name(r.status), terminal_safe(r.section + "." + r.name), width,
               terminal_safe(r.value));
    if (!r.message.empty()) fmt::print("{:<4}  {:<{}}  {}\n", "", "", width, terminal_safe(r.message));
    if (!r.fix.empty() && r.status != Status::ok)
      fmt::print("{:<4}  {:<{}}  fix: {}\n", "", "", width, terminal_safe(r.fix));
    else if (!r.fix.empty())
      fmt::print("{:<4}  {:<{}}  {}\n", "", "", width, terminal_safe(r.fix));
  }
}

void print_json(const Rows& rows, std::size_t fails, std::size_t warns) {
  json j;
  j["schema"] = "kache-doctor-1";
  j["status"] = fails ? "fail" : warns ? "warn" : "ok";
  j["fails"] = fails;
  j["warns"] = warns;
  j["rows"] = json::array();
  for (const auto& r : rows.rows) {
    j["rows"].push_back({{"section", r.section},
                         {"name", r.name},
                         {"status", status_name(r.status)},
                         {"value", r.value},
                         {"message", r.message},
                         {"fix", r.fix}});
  }
  fmt::print("{}\n", j.dump(2));
}

// What the command does, between its usage line and its options (both from the table).
constexpr const char* kAbout = R"(States the facts kache nvcc depends on (nvcc, its host compiler and the bound nvcc's
crt/host_config.h states, the C library, the driver, the cache directory, the configuration) and
those of kache hipcc (hipcc, the clang it runs, the device libraries, the layout CMake's HIP
language expects) as ok/warn/fail rows. Exit status 1 when any row fails.
)";

std::string usage() { return usage_line("doctor") + kAbout + options_help("doctor"); }

constexpr int kDefaultRocmProbeTimeoutMs = 20'000;

// "2.5" -> 2500; nullopt unless 0 < seconds <= 3600.
std::optional<int> probe_timeout_ms_of(const std::string& text) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(seconds > 0) || seconds > 3600) return std::nullopt;
  return static_cast<int>(seconds * 1000);
}

// What `kache doctor`'s arguments ask for.
struct DoctorOptions {
  bool as_json = false;
  std::string nvcc_arg = "nvcc";
  bool nvcc_named = false;
  std::optional<std::string> ccbin;
  std::optional<std::string> hipcc_arg;  // named by --hipcc: its rows may warn
  int probe_timeout_ms = kDefaultRocmProbeTimeoutMs;
};

// The options, or the exit status when the arguments are answered here (--help, a mistake).
std::variant<DoctorOptions, int> parse_doctor_args(const std::vector<std::string>& args) {
  DoctorOptions o;
  auto& [as_json, nvcc_arg, nvcc_named, ccbin, hipcc_arg, probe_timeout_ms] = o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (auto answer = compiler::doctor_child_answer(args[i])) {  // internal: a child an adapter's rows ask
      fmt::print("{}\n", *answer);
      return 0;
    }
    const auto option = match_option("doctor", args, i);
    if (!option) {
      fmt::print(stderr, "kache doctor: unknown argument '{}'.\n{}", args[i], usage());
      return 1;
    }
    if (option->is("--help")) {
      fmt::print("{}", usage());
      return 0;
    }
    if (option->is("--json")) as_json = true;
    if (option->is("--nvcc")) {
      nvcc_arg = option->value;
      nvcc_named = true;
    }
    if (option->is("-ccbin")) ccbin = option->value;
    if (option->is("--hipcc")) hipcc_arg = option->value;
    if (option->is("--probe-timeout")) {
      const auto ms = probe_timeout_ms_of(option->value);
      if (!ms) {
        fmt::print(stderr, "kache doctor: --probe-timeout takes seconds (0 < S <= 3600), not '{}'.\n", option->value);
        return 1;
      }
      probe_timeout_ms = *ms;
    }
  }
  return o;
}

}  // namespace

int run_doctor(const std::vector<std::string>& args) {
  const auto parsed = parse_doctor_args(args);
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  auto [as_json, nvcc_arg, nvcc_named, ccbin, hipcc_arg, probe_timeout_ms] = std::get<DoctorOptions>(parsed);
  const Config cfg = load_config(storage::remote_url_schemes());
  const util::Environment env = util::current_environment();
  // Each compiler family's rows (compiler/adapter.hpp), read with its own probes, in their sections.
  compiler::DoctorQuery query;
  if (nvcc_named) query.named_programs["nvcc"] = nvcc_arg;
  if (hipcc_arg) query.named_programs["hipcc"] = *hipcc_arg;
  query.host_compiler = ccbin;
  query.probe_timeout_ms = probe_timeout_ms;
  query.config = &cfg;
  query.env = env;
  const auto families = compiler::families();
  Rows rows;
  auto family_rows = [&](compiler::DoctorSection section) {
    for (const auto& family : families) family->doctor_rows(rows, section, query);
  };
  family_rows(compiler::DoctorSection::toolchain);
  family_rows(compiler::DoctorSection::machine);
  check_cache(rows, cfg);
  check_config(rows, cfg, env);
  family_rows(compiler::DoctorSection::config);
  check_remote_services(rows, cfg, nvcc_arg, env);

  std::size_t fails = 0, warns = 0;
  for (const auto& r : rows.rows) {
    fails += r.status == Status::fail;
    warns += r.status == Status::warn;
  }
  if (as_json) {
    print_json(rows, fails, warns);
  } else {
    print_text(rows);
    fmt::print("{} fail, {} warn\n", fails, warns);
  }
  return fails ? 1 : 0;
}

}  // namespace kache::commands
