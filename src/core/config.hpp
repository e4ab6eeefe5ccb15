#pragma once
// Configuration, in ccache's order: built-in defaults < system file < per-user file < the cache dir's
// kache.toml < KACHE_* environment variables.
//
// System file: $KACHE_SYSTEM_CONFIG, else /etc/kache.toml.
// Per-user file: $KACHE_CONFIG, else $XDG_CONFIG_HOME/kache/config.toml, else ~/.config/kache/config.toml.
// Cache dir file: <cache.dir>/kache.toml (cannot set cache.dir itself).
// Keys (section.key -> environment variable):
//   cache.dir                    KACHE_DIR
//   cache.max_size               KACHE_MAX_SIZE            ("10G", "500M", bytes)
//   cache.compression            KACHE_COMPRESSION         (bool: false stores objects so hits can clone them)
//   cache.compression_level      KACHE_COMPRESSION_LEVEL   (zstd level, 1..19)
//   cache.direct_mode            KACHE_DIRECT_MODE         (bool)
//   cache.preprocessed_fallback  KACHE_PREPROCESSED_FALLBACK (bool: compiles direct mode cannot record are
//                                                           looked up by their preprocessed output)
//   cache.disable                KACHE_DISABLE             (bool: run every compile uncached)
//   cc.extra_allowlist_flags     KACHE_CC_EXTRA_ALLOWLIST_FLAGS (list; env: comma or space separated)
//   paths.base_dirs              KACHE_PATHS_BASE_DIRS     (list; env: ':' separated)
//   nvcc.path_normalize          KACHE_NVCC_PATH_NORMALIZE (bool)
//   nvcc.cache_device_outputs    KACHE_NVCC_CACHE_DEVICE_OUTPUTS (bool: false passes -fatbin/-cubin/-ptx through)
//   nvcc.stages                  KACHE_NVCC_STAGES (bool: a miss runs nvcc's stages, cicc and ptxas cached)
//   nvcc.source_date_epoch       KACHE_NVCC_SOURCE_DATE_EPOCH ("0" default, or "passthrough")
//   remote.storage               KACHE_REMOTE_STORAGE      (URLs, space separated; see README "Remote storage")
//   remote.read_only             KACHE_REMOTE_READ_ONLY    (bool: never write to a remote)
//   remote.only                  KACHE_REMOTE_ONLY         (bool: no local store writes)
//   remote.ca_file               KACHE_REMOTE_CA_FILE      (extra CA certificate for https remotes)
//   remote.signing_key_file      KACHE_REMOTE_SIGNING_KEY_FILE (a file holding the HMAC key for remote entries)
//   remote_execution.server      KACHE_REMOTE_EXECUTION    (grpc://host:port or grpcs://host:port; see
//                                                           docs/remote-execution.md)
//   remote_execution.instance    KACHE_REMOTE_EXECUTION_INSTANCE (the REAPI instance name)
//   remote_execution.ca_file     KACHE_REMOTE_EXECUTION_CA_FILE (a CA certificate for grpcs://)
//   remote_execution.timeout     KACHE_REMOTE_EXECUTION_TIMEOUT (seconds: the longest wait for one action)
//   log.filter                   KACHE_LOG                 (e.g. "kache=debug")
//   log.file                     KACHE_LOG_FILE
//   log.warnings                 KACHE_LOG_WARNINGS        ("stderr": a build's first warning of each cause
//                                                           also on the compile's stderr; "log": log only)
//   cache.umask                  KACHE_UMASK               (octal, e.g. "002": for files and dirs kache
//                                                           creates in the cache; outputs keep the user's)
//   cache.allow_world_writable   KACHE_ALLOW_WORLD_WRITABLE (bool: use a cache dir others may write)
//   cache.lock_timeout           KACHE_LOCK_TIMEOUT        (seconds: the longest wait for a cache lock)
//   events.enabled               KACHE_EVENTS              (bool: the per-compile event log kache report reads)
//   events.command_line          KACHE_EVENTS_COMMAND_LINE (bool: events also hold the command line)
// A bad key or value produces one sentence naming the key and where it came from; kache then keeps
// going with the default for that key (the build must keep working).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/remote_url.hpp"

namespace kache::core {

struct Config {
  std::string cache_dir;
  std::uint64_t max_size = 10ull << 30;
  bool compression = true;
  int compression_level = 3;
  bool direct_mode = true;
  // Issue 39: a compile without a direct-mode record (a computed #include) is stored and looked up by
  // its compiler's preprocessed output (every device pass's too, for nvcc).
  bool preprocessed_fallback = true;
  bool disable = false;
  std::vector<std::string> extra_allowlist_flags;
  std::vector<std::string> base_dirs;
  bool nvcc_path_normalize = true;
  bool nvcc_cache_device_outputs = true;
  bool nvcc_stages = false;
  bool events = true;                // <cache_dir>/events: one record per compile (core/events.hpp)
  bool events_command_line = false;  // the command line in each record (it may hold tokens: asked for only)
  std::string nvcc_source_date_epoch = "0";
  std::string remote_storage;  // as configured, secrets included: never printed (--show-config redacts it)
  // remote_storage parsed once, when the layer that sets it is read, with the environment's secrets
  // (KACHE_REMOTE_PASSWORD, KACHE_REMOTE_BEARER_TOKEN) applied by load_config: what the stores open.
  std::vector<RemoteUrl> remote_urls;
  // The schemes remote_storage was parsed with (storage/remote's scheme table, given to load_config).
  RemoteSchemes remote_schemes;
  bool remote_read_only = false;
  bool remote_only = false;
  std::string remote_ca_file;
  std::string remote_signing_key_file;  // the key itself is read when the stores open, never printed
  // Remote execution (docs/remote-execution.md): misses run on an REAPI server's workers. The bearer token
  // comes from KACHE_REMOTE_EXECUTION_BEARER_TOKEN alone and is never printed.
  std::string remote_execution_server;  // "grpc://host:port" or "grpcs://host:port"; empty: off
  std::string remote_execution_instance;
  std::string remote_execution_ca_file;
  double remote_execution_timeout_s = 600.0;
  // Whether the execution service (the server, its ActionCache, its workers) is trusted as far as the signed
  // stores are: on, kache reads its ActionCache and publishes what it built remotely (docs/remote-execution.md).
  bool remote_execution_trusted = false;
  std::string log_filter;
  std::string log_file;
  bool warnings_to_stderr = true;  // log.warnings = "stderr"
  int cache_umask = -1;  // -1: the process umask
  bool allow_world_writable = false;
  bool cache_dir_refused = false;  // cache.dir was given but unusable (relative): compiles pass through
  double lock_timeout_s = 10.0;

  std::string config_file;              // the per-user file, or KACHE_CONFIG (may not exist)
  std::string cache_config_file;        // <cache dir>/kache.toml, read after config_file (may not exist)
  std::vector<std::string> files_read;  // in the order read: system, per-user, cache dir
  std::vector<std::string> problems;    // one sentence each; printed as warnings
  // "section.key" -> the file's path or "env" for every key not left at its built-in default.
  std::map<std::string, std::string> origins;
};

// Reads defaults, the file and the environment. Never throws. remote_schemes are the URL schemes
// remote.storage may name, each with its rules (storage::remote_url_schemes(): core knows none).
Config load_config(RemoteSchemes remote_schemes);
// Parses "10G", "512M", "1.5GiB", "123" into bytes; false if malformed.
bool parse_size(const std::string& text, std::uint64_t& bytes);
std::string format_size(std::uint64_t bytes);
// An age: "3d", "12h", "30m", "600s" or plain seconds (kache --evict-older-than, kache report --since);
// false if malformed.
bool parse_age(const std::string& text, std::int64_t& seconds);
// Writes key = value into the config file (used by --max-size); throws on failure. below_cache_dir:
// file is the cache dir's kache.toml, read and replaced below the cache dir (util::Beneath), so a link
// another user planted there is neither read nor written through.
void set_config_value(const std::string& file, const std::string& section, const std::string& key,
                      const std::string& value, bool below_cache_dir = false);
// Reads a boolean word: 1/0, true/false, yes/no, on/off (any case); false if it is none of them.
bool parse_bool(const std::string& text, bool& value);
// Makes the settings that live in process-wide state take effect (cache umask, lock timeout).
void apply_process_settings(const Config& config);
// Every KACHE_* variable a setting reads, in the table's order (tests and the config fuzzer set them all).
std::vector<std::string> config_environment_variables();
// One row of the settings table as the manual prints it (kache --list-settings, man/kache.h2m).
struct SettingRow {
  std::string name;           // "cache.dir"
  std::string env;            // "KACHE_DIR"
  std::string kind;           // "a path"
  std::string default_value;  // as --show-config shows it
};
std::vector<SettingRow> setting_rows();
// The file `kache -M` and `kache -o` edit for key ("cache.max_size"): the file its value in force came
// from (not the system file), else the cache dir's kache.toml when it is a regular file there, else the
// per-user file (KACHE_CONFIG); a setting that widens what is recorded always the per-user file (the
// cache dir's file cannot set it). The environment still wins over any file, and the CLI says so.
std::string config_file_to_edit(const Config& config, const std::string& key);
// "cache.max_size" for "cache.max_size" or "max_size" (a bare name that is unique); nullopt: no such key.
std::optional<std::string> canonical_config_key(const std::string& name);
// A setting's effective value as --show-config prints it; nullopt for an unknown key.
std::optional<std::string> config_value_text(const Config& config, const std::string& key);
// "" when value is acceptable for key, else the tail of a sentence saying what is wrong.
std::string config_value_error(const std::string& key, const std::string& value);
// Every "section.key", in the table's order.
std::vector<std::string> config_key_names();
// Human-readable listing of every effective setting and its origin.
std::string describe_config(const Config& config);

}  // namespace kache::core
