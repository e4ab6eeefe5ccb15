#include "core/cli.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "core/build_features.hpp"
#include "core/config.hpp"
#include "core/doctor.hpp"
#include "core/explain.hpp"
#include "core/path_roots.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "storage/layered.hpp"
#include "util/fs.hpp"

namespace kache::core {
namespace {

constexpr std::string_view kOptionTokens[] = {
    "-s",         "--show-stats",  "--json", "-z",        "--zero-stats", "-C",     "--clear",   "-M",
    "--max-size", "--show-config", "-V",     "--version", "-h",           "--help", "--reasons",
};

constexpr const char* kFooter = R"(Compiling through kache:
  kache nvcc ARGS...                          cache one nvcc compile
  CUDACXX="kache nvcc" cmake ...              CMake, kache as the CUDA compiler
  cmake -DCMAKE_CUDA_COMPILER_LAUNCHER=kache  CMake, kache as a launcher
  NVCC="kache nvcc" make                      Make and scripts that honour NVCC
  [binaries] nvcc = ['kache', 'nvcc']         Meson native file, with find_program('nvcc')
Compiles kache cannot prove safe to cache run the real nvcc unchanged.

Diagnostics:
  kache doctor [--json]                       toolchain, driver, cache and config facts (ok/warn/fail)
  kache explain -- nvcc ARGS...               which key field makes this compile miss
  kache explain --last                        the same for the last stored miss

Environment (overrides the config file; see --show-config for every setting):
  KACHE_DIR                       cache directory (default ~/.cache/kache)
  KACHE_MAX_SIZE                  size limit, e.g. 10G or 500M
  KACHE_DISABLE=1                 run every compile uncached
  KACHE_LOG=kache=debug           log why a compile was not cached
  KACHE_LOG_FILE=PATH             append the log to a file instead of stderr
  KACHE_CC_EXTRA_ALLOWLIST_FLAGS  extra nvcc flags known to be safe to cache
  KACHE_CONFIG=PATH               config file (default ~/.config/kache/config.toml))";

// Reason counters "<prefix><reason>" sorted by count (largest first), then by name.
std::vector<std::pair<std::string, std::uint64_t>> reasons(const StatsSnapshot& stats, std::string_view prefix) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (const auto& [name, value] : stats.counters) {
    if (name.size() > prefix.size() && name.starts_with(prefix) && value > 0) out.emplace_back(name, value);
  }
  // Not std::stable_sort (libstdc++ 12's get_temporary_buffer is deprecated under clang 19): the names
  // are unique, so the name as tie-break gives the same order.
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return out;
}

// Hits and misses per output kind other than objects (counter::kKindHitsPrefix): kind -> (hits, misses).
std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_output_kind(const StatsSnapshot& stats) {
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> out;
  const std::string_view hits = counter::kKindHitsPrefix, misses = counter::kKindMissesPrefix;
  for (const auto& [name, value] : stats.counters) {
    if (value == 0) continue;
    if (name.size() > hits.size() && name.starts_with(hits)) out[name.substr(hits.size())].first += value;
    if (name.size() > misses.size() && name.starts_with(misses)) out[name.substr(misses.size())].second += value;
  }
  return out;
}

std::uint64_t sum(const std::vector<std::pair<std::string, std::uint64_t>>& items) {
  std::uint64_t total = 0;
  for (const auto& item : items) total += item.second;
  return total;
}

// What the remote stores count (storage/remote/remote_store.cpp); `hits` already includes remote hits.
constexpr std::string_view kRemoteCounters[] = {"remote_hits",       "remote_misses",        "remote_errors",
                                                "remote_timeouts",   "remote_skipped",       "remote_writes",
                                                "remote_bytes_read", "remote_bytes_written", "remote_oversized",
                                                "remote_unsigned",   "remote_bad_signature"};

// The progress of a walk over the whole store (-C, -M), on a terminal only: a line on stderr rewritten
// at each whole percent. Not a terminal (a script, a CI log): nothing.
storage::LocalStorage::Progress terminal_progress(const char* label) {
  if (::isatty(STDERR_FILENO) != 1) return {};
  return [label, shown = std::uint64_t{101}](std::uint64_t done, std::uint64_t total) mutable {
    const std::uint64_t percent = total > 0 ? std::min<std::uint64_t>(done * 100 / total, 100) : 100;
    if (percent == shown) return;
    shown = percent;
    fmt::print(stderr, "\rkache: {} {:3d} %{}", label, percent, percent == 100 ? "\n" : "");
    std::fflush(stderr);
  };
}

void show_stats(const Config& config, bool json) {
  StatsFile file(config.cache_dir);
  try {
    file.compact();  // fold the per-process records into the totals, so the journal stays short
  } catch (const std::exception&) {
    // A cache dir we may not write (shared, read-only): read() sums the journal all the same.
  }
  const StatsSnapshot stats = file.read();
  auto store = storage::open_storage(config);
  const std::uint64_t size = store.local().total_size();
  const std::uint64_t entries = store.local().entry_count();
  const auto passthrough = reasons(stats, "passthrough.");
  const auto errors = reasons(stats, "error.");
  const auto not_stored = reasons(stats, "not_stored.");
  const auto per_checkout = reasons(stats, counter::kStoredPerCheckoutPrefix);
  const std::uint64_t hits = stats.get(counter::kHits);
  const std::uint64_t misses = stats.get(counter::kMisses);
  const auto kinds = by_output_kind(stats);

  if (json) {
    auto reason_map = [](const std::vector<std::pair<std::string, std::uint64_t>>& items, std::size_t prefix) {
      nlohmann::ordered_json object = nlohmann::ordered_json::object();
      for (const auto& [name, value] : items) object[name.substr(prefix)] = value;
      return object;
    };
    nlohmann::ordered_json out;
    out["hits"] = hits;
    out["misses"] = misses;
    out["direct_hits"] = stats.get(counter::kDirectHits);
    // Outputs other than objects (nvcc -fatbin/-cubin/-ptx), also counted in hits and misses.
    out["output_kinds"] = nlohmann::ordered_json::object();
    for (const auto& [kind, counts] : kinds)
      out["output_kinds"][kind] = {{"hits", counts.first}, {"misses", counts.second}};
    out["passthrough"] = stats.get(counter::kPassthrough);
    out["errors"] = stats.get(counter::kErrors);
    out["compile_failed"] = stats.get(counter::kCompileFailed);
    out["stored"] = stats.get(counter::kStored);
    out["not_stored"] = sum(not_stored);
    // Of "stored": entries for one checkout only, by why (issue 27: the object names a root).
    out["stored_per_checkout"] =
        reason_map(per_checkout, std::string_view(counter::kStoredPerCheckoutPrefix).size());
    out["corrupt_entries"] = stats.get(counter::kCorrupt);
    for (std::string_view name : kRemoteCounters) out[std::string(name)] = stats.get(std::string(name));
    out["cache_size"] = size;
    out["max_size"] = config.max_size;
    out["entries"] = entries;
    out["cache_dir"] = config.cache_dir;
    out["passthrough_reasons"] = reason_map(passthrough, std::string_view("passthrough.").size());
    out["error_reasons"] = reason_map(errors, std::string_view("error.").size());
    out["not_stored_reasons"] = reason_map(not_stored, std::string_view("not_stored.").size());
    fmt::print("{}\n", out.dump(2));
    return;
  }

  std::size_t width = 20;
  for (const auto* list : {&passthrough, &errors, &not_stored}) {
    for (const auto& item : *list) width = std::max(width, item.first.size() + 4);
  }
  std::string text;
  auto line = [&](std::string_view label, const std::string& value) {
    text += fmt::format("{:<{}}{}\n", label, width, value);
  };
  auto details = [&](const std::vector<std::pair<std::string, std::uint64_t>>& items) {
    for (const auto& [name, value] : items) line("  " + name, std::to_string(value));
  };
  const std::uint64_t lookups = hits + misses;
  line("cache directory", config.cache_dir);
  line("hits", std::to_string(hits));
  if (const auto direct = stats.get(counter::kDirectHits); direct > 0) line("  direct hits", std::to_string(direct));
  line("misses", std::to_string(misses));
  for (const auto& [kind, counts] : kinds) {
    line("  " + kind, fmt::format("{} hits, {} misses", counts.first, counts.second));
  }
  line("hit rate", lookups ? fmt::format("{:.1f} %", 100.0 * static_cast<double>(hits) / lookups) : "n/a");
  line("passthrough", std::to_string(stats.get(counter::kPassthrough)));
  details(passthrough);
  line("errors", std::to_string(stats.get(counter::kErrors)));
  details(errors);
  line("compile failed", std::to_string(stats.get(counter::kCompileFailed)));
  line("stored", std::to_string(stats.get(counter::kStored)));
  for (const auto& [name, value] : per_checkout) line("  " + name, std::to_string(value));
  line("not stored", std::to_string(sum(not_stored)));
  details(not_stored);
  line("corrupt entries", std::to_string(stats.get(counter::kCorrupt)));
  if (!config.remote_storage.empty() || stats.get("remote_hits") + stats.get("remote_misses") > 0) {
    // Counted by each compile from what it did; `kache -s` itself never contacts a server.
    line("remote storage", "");
    for (std::string_view name : kRemoteCounters) {
      line("  " + std::string(name.substr(std::string_view("remote_").size())),
           std::to_string(stats.get(std::string(name))));
    }
  }
  line("cache size", fmt::format("{} / {} ({:.1f} %)", format_size(size), format_size(config.max_size),
                                 config.max_size ? 100.0 * static_cast<double>(size) / config.max_size : 0.0));
  line("entries", std::to_string(entries));
  fmt::print("{}", text);
}

// The reason table (core/reasons.cpp): every name `kache -s` can count, and what it means.
void show_reasons() {
  std::size_t width = 0;
  for (const Reason& r : all_reasons()) width = std::max(width, r.name.size());
  std::string text;
  for (const Reason& r : all_reasons()) {
    text += fmt::format("{:<15}{:<{}}  {}\n", category_name(r.category), r.name, width, r.sentence);
  }
  fmt::print("{}", text);
}

void set_max_size(const Config& config, const std::string& text) {
  std::uint64_t bytes = 0;
  if (!parse_size(text, bytes) || bytes == 0) {
    throw std::runtime_error(fmt::format("'{}' is not a size above 0 (examples: 10G, 500M, 1.5GiB)", text));
  }
  try {
    set_config_value(config.config_file, "cache", "max_size", text);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("cannot set cache.max_size: {}", e.what()));
  }
  fmt::print("Set cache.max_size to {} in {}.\n", format_size(bytes), config.config_file);
  // Reload so the trim uses the limit that is really in force (KACHE_MAX_SIZE still wins).
  const Config effective = load_config();
  if (effective.origins.count("cache.max_size") && effective.origins.at("cache.max_size") == "env") {
    fmt::print("Note: KACHE_MAX_SIZE is set in this environment and overrides it ({}).\n",
               format_size(effective.max_size));
  }
  auto store = storage::open_storage(effective);
  store.local().cleanup(terminal_progress("trimming the cache"));
  fmt::print("Cache size is now {} of {}.\n", format_size(store.local().total_size()), format_size(effective.max_size));
}

}  // namespace

bool is_kache_option(const std::string& arg) {
  if (std::find(std::begin(kOptionTokens), std::end(kOptionTokens), arg) != std::end(kOptionTokens)) return true;
  // "--max-size=10G" cannot be a compiler name either; nor can kache's subcommands.
  return arg.starts_with("--max-size=") || arg == "doctor" || arg == "explain";
}

int run_cli(int argc, char** argv) {
  if (argc >= 2 && (std::string_view(argv[1]) == "doctor" || std::string_view(argv[1]) == "explain")) {
    const std::vector<std::string> rest(argv + 2, argv + argc);
    return std::string_view(argv[1]) == "doctor" ? run_doctor(rest) : explain::run(rest);
  }
  CLI::App app{"kache: a compiler cache for nvcc.", "kache"};
  app.set_help_flag("-h,--help", "Print this help and exit");
  app.footer(kFooter);

  bool show = false, json = false, zero = false, clear = false, show_config = false, version = false;
  std::string max_size;
  app.add_flag("-s,--show-stats", show, "Print statistics and the cache size");
  app.add_flag("--json", json, "With --show-stats: print the statistics as JSON");
  app.add_flag("-z,--zero-stats", zero, "Reset the statistics to zero");
  app.add_flag("-C,--clear", clear, "Remove every cache entry (statistics and configuration are kept)");
  auto* max_size_option =
      app.add_option("-M,--max-size", max_size, "Set cache.max_size in the config file (e.g. 10G) and trim the cache")
          ->type_name("SIZE");
  app.add_flag("--show-config", show_config, "Print every setting, its value and where it came from");
  bool list_reasons = false;
  app.add_flag("--reasons", list_reasons, "Print every reason kache counts for not caching, with what it means");
  app.add_flag("-V,--version", version, "Print the version and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "kache: {}; run 'kache --help' for usage.\n", e.what());
    return 1;
  }

  if (argc < 2) {
    // Neither a compiler nor an option: say how kache is meant to be used, like a usage error.
    fmt::print(stderr, "{}", app.help());
    return 1;
  }
  if (version) {
    fmt::print("kache {}\n{}", KACHE_VERSION, build_features());
    return 0;
  }
  if (json && !show) {
    fmt::print(stderr, "kache: --json only works together with --show-stats.\n");
    return 1;
  }

  const Config config = load_config();
  for (const auto& problem : config.problems) fmt::print(stderr, "{}\n", problem);
  apply_process_settings(config);

  try {
    if (show_config) {
      fmt::print("{}", describe_config(config));
      fmt::print("{}", describe_path_keys(config.base_dirs, config.nvcc_path_normalize, util::current_dir()));
    }
    if (zero) {
      StatsFile(config.cache_dir).zero();
      fmt::print("Statistics zeroed in {}.\n", config.cache_dir);
    }
    if (clear) {
      auto store = storage::open_storage(config);
      const std::uint64_t entries = store.local().clear(terminal_progress("removing entries"));
      util::remove_all(util::join_path(config.cache_dir, "explain"));  // kache explain's records of the entries
      // What was verified under which identity: starting over means trusting nothing from before.
      util::remove_all(util::join_path(config.cache_dir, "identities"));
      fmt::print("Removed {} cache entries from {}; statistics and configuration were kept.\n", entries,
                 config.cache_dir);
    }
    if (max_size_option->count() > 0) set_max_size(config, max_size);
    if (show) show_stats(config, json);
    if (list_reasons) show_reasons();
  } catch (const std::exception& e) {
    std::string message = e.what();
    while (!message.empty() && (message.back() == '.' || message.back() == '\n')) message.pop_back();
    fmt::print(stderr, "kache: {}.\n", message);
    std::fflush(stdout);
    return 1;
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace kache::core
