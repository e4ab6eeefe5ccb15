#include "commands/cli.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "commands/doctor.hpp"
#include "commands/worker.hpp"
#include "commands/explain.hpp"
#include "commands/options.hpp"
#include "commands/report.hpp"
#include "core/build_features.hpp"
#include "core/config.hpp"
#include "core/entry_format.hpp"
#include "core/events.hpp"
#include "core/log.hpp"
#include "core/path_roots.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "storage/open.hpp"
#include "util/beneath.hpp"
#include "util/fs.hpp"

namespace kache::commands {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;
namespace {

// ccache options kache has no counterpart for, with what to use instead.
constexpr std::pair<std::string_view, std::string_view> kCcacheOnly[] = {
    {"-F", "kache has no file-count limit (only a size limit: -M SIZE)"},
    {"--max-files", "kache has no file-count limit (only a size limit: -M SIZE)"},
    {"--evict-namespace", "kache has no namespaces"},
    {"-d", "kache has no --dir option; set KACHE_DIR"},
    {"--dir", "kache has no --dir option; set KACHE_DIR"},
};

// The Levenshtein distance between two option names, for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Whether arg spells one of kache's own options (with taking_a_value, one that takes a value: -M, --max-size).
bool is_option_of_kache(std::string_view arg, bool taking_a_value) {
  for (const OptionRow* row : rows_of("")) {
    if (taking_a_value && row->value.empty()) continue;
    for (const std::string_view name : spellings_of(*row)) {
      if (arg == name) return true;
    }
  }
  return false;
}

// Whether arg is short flags given together, as ccache takes them: -sz, -vs.
bool is_short_flag_group(std::string_view arg) {
  if (arg.size() <= 2 || arg[0] != '-' || arg[1] == '-') return false;
  for (const char letter : arg.substr(1)) {
    const char flag[] = {'-', letter, '\0'};
    if (!is_option_of_kache(flag, false) || is_option_of_kache(flag, true)) return false;
  }
  return true;
}

// The first argument kache does not know, or "" when every one is an option it takes (values skipped).
std::string first_unknown_option(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const std::string_view name = arg.substr(0, arg.find('='));
    if (is_option_of_kache(name, true)) {
      if (name == arg) ++i;
      continue;
    }
    if (is_option_of_kache(arg, false) || is_short_flag_group(arg)) continue;
    return std::string(arg);
  }
  return {};
}

// The option of kache's nearest to name (at most two edits away), or "" when none is near.
std::string_view nearest_option(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = 3;  // further than two edits is no suggestion
  for (const OptionRow* row : rows_of("")) {
    for (const std::string_view option : spellings_of(*row)) {
      // An abbreviation ("--evict-older") counts as one edit away from the option it starts.
      const std::size_t d = name.size() >= 4 && option.starts_with(name) ? 1 : edit_distance(name, option);
      if (d < best_distance && !(option.size() == 2 && name.size() > 4)) {
        best_distance = d;
        best = option;
      }
    }
  }
  return best;
}

// One sentence for an option kache does not take: what ccache's option is here, or the nearest of kache's.
std::string unknown_option_message(const std::string& arg) {
  const std::string_view name = std::string_view(arg).substr(0, arg.find('='));
  for (const auto& [option, sentence] : kCcacheOnly) {
    if (name == option) return fmt::format("kache: {} is not an option of kache: {}.", option, sentence);
  }
  const std::string_view best = nearest_option(name);
  if (!arg.starts_with('-'))
    return fmt::format("kache: '{}' is neither a compiler kache knows how to run nor one of its commands.", arg);
  return best.empty()
             ? fmt::format("kache: unknown option {}; run 'kache --help' for the options.", arg)
             : fmt::format("kache: unknown option {}; did you mean {}? (kache --help lists the options)", arg, best);
}

constexpr const char* kFooter = R"(Compiling through kache: name the compiler after it, or put the links first on PATH.
  PATH=/usr/lib/kache:$PATH make              every compiler: links named nvcc, gcc, g++, cc, c++, clang,
                                              clang++ and hipcc that run the real one through kache
CUDA (nvcc):
  kache nvcc ARGS...                          cache one nvcc compile
  CUDACXX="kache nvcc" cmake ...              CMake, kache as the CUDA compiler
  cmake -DCMAKE_CUDA_COMPILER_LAUNCHER=kache  CMake, kache as a launcher
  NVCC="kache nvcc" make                      Make and scripts that honour NVCC
  [binaries] nvcc = ['kache', 'nvcc']         Meson native file, with find_program('nvcc')
C and C++ (gcc, g++, cc, c++, clang, clang++):
  kache g++ ARGS...                           cache one gcc or clang compile
  cmake -DCMAKE_CXX_COMPILER_LAUNCHER=kache   CMake, kache as a launcher (and CMAKE_C_COMPILER_LAUNCHER)
  make CC="kache gcc" CXX="kache g++"         Make
  [binaries] cpp = ['kache', 'g++']           Meson native file (and c = ['kache', 'gcc'])
HIP (hipcc, clang -x hip):
  kache hipcc ARGS...                         cache one hipcc (or clang++ -x hip) compile
  make HIPCC="kache hipcc"                    Makefiles that call $(HIPCC)
  [binaries] hipcc = ['kache', 'hipcc']       Meson native file, with find_program('hipcc')
Compiles kache cannot prove safe to cache run the real compiler unchanged.

Diagnostics:
  kache doctor [--json]                       toolchain, driver, cache and config facts (ok/warn/fail)
  kache worker --server URL --nvcc NVCC --work-dir DIR   a remote execution worker (docs/remote-execution.md)
  kache explain -- nvcc ARGS...               which key field makes this compile miss
  kache explain --last                        the same for the last stored miss
  kache report [--json|--markdown]            what the last build got from the cache, and why it missed
  kache report --html FILE --trace FILE       the same with charts, and a trace for Perfetto

Environment (overrides the config file; see --show-config for every setting):
  KACHE_DIR                       cache directory (default ~/.cache/kache)
  KACHE_MAX_SIZE                  size limit, e.g. 10G or 500M
  KACHE_DISABLE=1                 run every compile uncached
  KACHE_LOG=kache=debug           log why a compile was not cached (to stderr, or KACHE_LOG_FILE)
  KACHE_LOG_FILE=PATH             append the log to a file (default: warnings only, to DIR/kache.log)
  KACHE_LOG_WARNINGS=log          keep warnings off the compile's stderr (default: stderr, see below)
  KACHE_REMOTE_STORAGE=URLS       shared stores, tried in order: redis://HOST[:PORT], http://HOST/PATH,
                                  https://HOST/PATH, s3://BUCKET[/PREFIX], file:///SHARED/DIR
  KACHE_CC_EXTRA_ALLOWLIST_FLAGS  extra compiler flags known to be safe to cache
  KACHE_CONFIG=PATH               config file (default ~/.config/kache/config.toml)
  KACHE_SYSTEM_CONFIG=PATH        system config file, read first (default /etc/kache.toml)
Config files in ccache's order: system, per-user, then the cache dir's kache.toml; the environment last.
kache's warnings go to DIR/kache.log; the first of each cause in a build is also one "kache: warning:"
line on the compile's stderr, except for configure checks (conftest.*, CMake's scratch dirs).)";

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

// nvcc's stages (nvcc.stages) per kind ("ptx": cicc, "cubin": ptxas): reused, run, milliseconds saved.
struct StageFigures {
  std::uint64_t hits = 0, misses = 0, ms_saved = 0;
};
std::map<std::string, StageFigures> by_stage_kind(const StatsSnapshot& stats) {
  std::map<std::string, StageFigures> out;
  auto take = [&](std::string_view prefix, std::uint64_t StageFigures::*field) {
    for (const auto& [name, value] : stats.counters) {
      if (value > 0 && name.size() > prefix.size() && name.starts_with(prefix)) {
        out[name.substr(prefix.size())].*field += value;
      }
    }
  };
  take(counter::kStageHitsPrefix, &StageFigures::hits);
  take(counter::kStageMissesPrefix, &StageFigures::misses);
  take(counter::kStageMsSavedPrefix, &StageFigures::ms_saved);
  return out;
}

std::uint64_t sum(const std::vector<std::pair<std::string, std::uint64_t>>& items) {
  std::uint64_t total = 0;
  for (const auto& item : items) total += item.second;
  return total;
}

// What the remote stores count (storage/remote/remote_store.cpp); `hits` already includes remote hits.
// remote_hits: compiles served from a remote (one per hit); remote_reads: values read (manifests and objects).
constexpr std::string_view kRemoteCounters[] = {"remote_hits",      "remote_reads",      "remote_misses",
                                                "remote_errors",    "remote_timeouts",   "remote_skipped",
                                                "remote_writes",    "remote_bytes_read", "remote_bytes_written",
                                                "remote_oversized", "remote_unsigned",   "remote_bad_signature"};

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

// What `kache -s` prints, gathered once for either form.
struct StatsFigures {
  StatsSnapshot stats;
  std::uint64_t size = 0, entries = 0;
  std::vector<std::pair<std::string, std::uint64_t>> passthrough, errors, not_stored, per_checkout;
  std::uint64_t hits = 0, misses = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> kinds;
  std::map<std::string, StageFigures> stages;
  std::vector<std::pair<std::string, std::uint64_t>> stages_whole;  // misses nvcc ran whole, by why
  std::string last_warning;  // the newest line of kache.log: what a build behind a pipe never showed
};

StatsFigures gather_stats(const Config& config) {
  StatsFigures f;
  StatsFile file(config.cache_dir);
  try {
    file.compact();  // fold the per-process records into the totals, so the journal stays short
  } catch (const std::exception&) {
    // A cache dir we may not write (shared, read-only): read() sums the journal all the same.
  }
  f.stats = file.read();
  auto store = storage::open_storage(config);
  f.size = store.local().total_size();
  f.entries = store.local().entry_count();
  f.passthrough = reasons(f.stats, "passthrough.");
  f.errors = reasons(f.stats, "error.");
  f.not_stored = reasons(f.stats, "not_stored.");
  f.per_checkout = reasons(f.stats, counter::kStoredPerCheckoutPrefix);
  f.hits = f.stats.get(counter::kHits);
  f.misses = f.stats.get(counter::kMisses);
  f.kinds = by_output_kind(f.stats);
  f.stages = by_stage_kind(f.stats);
  f.stages_whole = reasons(f.stats, counter::kStagesWholePrefix);
  f.last_warning = latest_logged_warning(config.cache_dir);
  return f;
}

void print_stats_json(const Config& config, const StatsFigures& f) {
  const auto& [stats, size, entries, passthrough, errors, not_stored, per_checkout, hits, misses, kinds, stages,
               stages_whole, last_warning] = f;
  auto reason_map = [](const std::vector<std::pair<std::string, std::uint64_t>>& items, std::size_t prefix) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (const auto& [name, value] : items) object[name.substr(prefix)] = value;
    return object;
  };
  nlohmann::ordered_json out;
  out["schema"] = "kache-stats-1";
  out["time"] = static_cast<std::int64_t>(std::time(nullptr));  // when this was printed (Unix seconds)
  out["hits"] = hits;
  out["misses"] = misses;
  out["direct_hits"] = stats.get(counter::kDirectHits);
  // Hits of compiles without a direct-mode record (a computed #include), by their preprocessed output.
  out["preprocessed_hits"] = stats.get(counter::kPreprocessedHits);
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
  // nvcc.stages: cicc ("ptx") and ptxas ("cubin") runs a miss reused or ran, and misses run whole.
  out["stages"] = nlohmann::ordered_json::object();
  for (const auto& [kind, figures] : stages) {
    out["stages"][kind] = {{"hits", figures.hits}, {"misses", figures.misses}, {"ms_saved", figures.ms_saved}};
  }
  out["stages_whole"] = reason_map(stages_whole, std::string_view(counter::kStagesWholePrefix).size());
  // Remote execution: stages run on workers, per kind, and those run here instead, by why.
  out["remote_execution"] = {
      {"ran", reason_map(reasons(stats, counter::kRemoteRanPrefix), std::string_view(counter::kRemoteRanPrefix).size())},
      {"fallback", reason_map(reasons(stats, counter::kRemoteFallbackPrefix),
                              std::string_view(counter::kRemoteFallbackPrefix).size())}};
  for (std::string_view name : kRemoteCounters) out[std::string(name)] = stats.get(std::string(name));
  out["cache_size"] = size;
  out["max_size"] = config.max_size;
  out["entries"] = entries;
  out["cache_dir"] = config.cache_dir;
  out["passthrough_reasons"] = reason_map(passthrough, std::string_view("passthrough.").size());
  out["error_reasons"] = reason_map(errors, std::string_view("error.").size());
  out["not_stored_reasons"] = reason_map(not_stored, std::string_view("not_stored.").size());
  out["last_warning"] = last_warning;  // the newest warning line of <cache_dir>/kache.log, "" if none
  fmt::print("{}\n", out.dump(2));
}

// Remote execution (docs/remote-execution.md): the stages workers ran, per kind, and those run here, by why.
template <class Stats, class Line>
void print_remote_execution(const Stats& stats, Line& line) {
  const auto ran = reasons(stats, counter::kRemoteRanPrefix);
  const auto fallback = reasons(stats, counter::kRemoteFallbackPrefix);
  if (ran.empty() && fallback.empty()) return;
  line("remote execution", fmt::format("{} stages ran on workers, {} ran here instead", sum(ran), sum(fallback)));
  for (const auto& [name, value] : ran) {
    line("  " + name.substr(std::string_view(counter::kRemoteRanPrefix).size()), std::to_string(value));
  }
  for (const auto& [name, value] : fallback) {
    line("  here: " + name.substr(std::string_view(counter::kRemoteFallbackPrefix).size()), std::to_string(value));
  }
}

// nvcc.stages: what misses reused of nvcc's device stages, per kind, and the misses nvcc ran whole.
template <class Stages, class Whole, class Line>
void print_stages(const Stages& stages, const Whole& stages_whole, Line& line) {
  if (stages.empty() && stages_whole.empty()) return;
  line("nvcc stages", "(of misses: device code reused per architecture)");
  for (const auto& [kind, figures] : stages) {
    line("  " + kind, fmt::format("{} reused, {} run, {:.1f} s saved", figures.hits, figures.misses,
                                  static_cast<double>(figures.ms_saved) / 1000.0));
  }
  if (stages_whole.empty()) return;
  line("  run whole", std::to_string(sum(stages_whole)));
  for (const auto& [name, value] : stages_whole) {
    line("    " + name.substr(std::string_view(counter::kStagesWholePrefix).size()), std::to_string(value));
  }
}

void print_stats_text(const Config& config, const StatsFigures& f, std::size_t verbose) {
  const auto& [stats, size, entries, passthrough, errors, not_stored, per_checkout, hits, misses, kinds, stages,
               stages_whole, last_warning] = f;
  std::size_t width = 20;
  for (const auto* list : {&passthrough, &errors, &not_stored, &per_checkout}) {
    for (const auto& item : *list) width = std::max(width, item.first.size() + 4);
  }
  std::string text;
  auto line = [&](std::string_view label, const std::string& value) {
    text += fmt::format("{:<{}}{}\n", label, width, value);
  };
  auto details = [&](const std::vector<std::pair<std::string, std::uint64_t>>& items) {
    for (const auto& [name, value] : items) line("  " + name, std::to_string(value));
  };
  line("cache directory", config.cache_dir);
  line("hits", std::to_string(hits));
  if (const auto direct = stats.get(counter::kDirectHits); direct > 0) line("  direct hits", std::to_string(direct));
  if (const auto pre = stats.get(counter::kPreprocessedHits); pre > 0) line("  preprocessed hits", std::to_string(pre));
  line("misses", std::to_string(misses));
  for (const auto& [kind, counts] : kinds) {
    line("  " + kind, fmt::format("{} hits, {} misses", counts.first, counts.second));
  }
  const std::optional<double> rate = outcome_totals(stats.counters).hit_rate();  // as kache report's
  line("hit rate", rate ? fmt::format("{:.1f} %", *rate) : "n/a");
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
  print_stages(stages, stages_whole, line);
  print_remote_execution(stats, line);
  if (verbose > 0) {
    // What each figure counts, for a reader who has not read the README.
    text +=
        "  (hits: compiles served from the cache, local or remote; misses: compiles run and looked up;\n"
        "   passthrough: compiles kache did not try to cache; errors: kache's own failures, the compile\n"
        "   ran all the same; compile failed: the compiler failed on the code)\n";
  }
  if (!config.remote_storage.empty() || stats.get("remote_hits") + stats.get("remote_misses") > 0) {
    // Counted by each compile from what it did; `kache -s` itself never contacts a server.
    line("remote storage", "(hits: compiles served from a remote)");
    for (std::string_view name : kRemoteCounters) {
      line("  " + std::string(name.substr(std::string_view("remote_").size())),
           std::to_string(stats.get(std::string(name))));
    }
  }
  line("cache size", config.max_size == 0
                         ? fmt::format("{} (no limit)", format_size(size))
                         : fmt::format("{} / {} ({:.1f} %)", format_size(size), format_size(config.max_size),
                                       100.0 * static_cast<double>(size) / static_cast<double>(config.max_size)));
  line("entries", fmt::format("{} (entry files: objects, manifests and nvcc stages)", entries));
  if (!last_warning.empty()) line("last warning", fmt::format("{} (in {}/kache.log)", last_warning, config.cache_dir));
  // Beside the entries and bounded on its own (rotated), so never evicted with them: kache report reads it.
  if (const std::uint64_t log = EventLog(config.cache_dir).size(); log > 0) {
    line("event log", fmt::format("{} (kache report; at most 2 x {})", format_size(log),
                                  format_size(EventLog::kMaxFileBytes)));
  }
  if (verbose > 1) {
    text += "every counter:\n";
    for (const auto& [name, value] : stats.counters) line("  " + name, std::to_string(value));
  }
  fmt::print("{}", text);
}

void show_stats(const Config& config, bool json, std::size_t verbose) {
  const StatsFigures figures = gather_stats(config);
  if (json) {
    print_stats_json(config, figures);
  } else {
    print_stats_text(config, figures, verbose);
  }
}

// Every entry file of the local store (<dir>/<k0>/<k1k2>/<key>; temporary files carry a '.'), with its key.
template <typename Visit>
void for_each_entry(const std::string& cache_dir, Visit&& visit) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const char shard : std::string_view("0123456789abcdef")) {
    const fs::path shard_dir = fs::path(cache_dir) / std::string(1, shard);
    // symlink_status: a link planted in a group-shared cache dir is never followed out of it.
    if (fs::symlink_status(shard_dir, ec).type() != fs::file_type::directory) continue;
    for (const auto& sub : fs::directory_iterator(shard_dir, ec)) {
      if (sub.symlink_status(ec).type() != fs::file_type::directory) continue;
      const std::string prefix = std::string(1, shard) + sub.path().filename().string();
      for (const auto& file : fs::directory_iterator(sub.path(), ec)) {
        const std::string name = file.path().filename().string();
        if (file.symlink_status(ec).type() != fs::file_type::regular || !name.starts_with(prefix) || name.find('.') != std::string::npos) continue;
        visit(file.path().string(), name);
      }
    }
  }
}

// A shared directory (file:///PATH) is evicted by age alone, by whichever machine runs this (the
// backend's maintain(): no lock spans machines).
void evict_shared_directories(const Config& config, std::int64_t age, const std::string& age_text) {
  const storage::Maintenance evict{storage::Maintenance::Kind::evict_older_than, age};
  for (const auto& outcome : storage::maintain_remote_stores(config, evict)) {
    if (!outcome.error.empty()) {
      fmt::print(stderr, "kache: {}\n", outcome.error);
      continue;
    }
    fmt::print("Removed {} entries not used in the last {} from {}.\n", outcome.removed, age_text, outcome.store);
  }
}

void evict_older_than(const Config& config, const std::string& age_text) {
  std::int64_t age = 0;
  if (!parse_age(age_text, age))
    throw std::runtime_error(fmt::format("'{}' is not an age (examples: 3d, 12h, 30m, 600s)", age_text));
  const auto now = std::filesystem::file_time_type::clock::now();
  std::vector<std::string> old_keys;
  for_each_entry(config.cache_dir, [&](const std::string& path, const std::string& key) {
    std::error_code ec;
    const auto written = std::filesystem::last_write_time(path, ec);  // a hit refreshes it (LRU)
    if (!ec && now - written > std::chrono::seconds(age)) old_keys.push_back(key);
  });
  auto store = storage::open_storage(config);
  auto progress = terminal_progress("removing old entries");  // as -C and -c show theirs
  for (std::size_t i = 0; i < old_keys.size(); ++i) {
    (void)store.local().remove(old_keys[i]);
    if (progress) progress(i + 1, old_keys.size());
  }
  fmt::print("Removed {} cache entries not used in the last {} from {}.\n", old_keys.size(), age_text,
             config.cache_dir);
  evict_shared_directories(config, age, age_text);
}

// ccache -x: how much the stored entries take against what they hold.
void show_compression(const Config& config) {
  std::uint64_t entries = 0, stored = 0, held = 0, unreadable = 0;
  std::optional<util::Beneath> cache;
  try {
    cache.emplace(config.cache_dir);
  } catch (const std::system_error&) {
    // No cache dir yet: no entries.
  }
  for_each_entry(config.cache_dir, [&](const std::string& path, const std::string&) {
    try {
      // Read below the cache dir: a FIFO or link swapped in after the listing is unreadable, not waited on.
      const std::optional<std::string> relative = cache ? cache->relative(path) : std::nullopt;
      std::optional<std::string> read = relative ? cache->read_regular(*relative) : std::nullopt;
      if (!read) {
        ++unreadable;
        return;
      }
      std::string bytes = std::move(*read);
      const std::uint64_t on_disk = bytes.size();
      auto value = decode_value(std::move(bytes));
      if (!value) {
        ++unreadable;
        return;
      }
      ++entries;
      stored += on_disk;
      held += value->size();
    } catch (const std::exception&) {
      ++unreadable;
    }
  });
  const double ratio = stored ? static_cast<double>(held) / static_cast<double>(stored) : 0.0;
  fmt::print("entries (objects, manifests, stages) {}\n", entries);
  fmt::print("stored size                         {}\n", format_size(stored));
  fmt::print("data size (uncompressed)            {}\n", format_size(held));
  fmt::print("compression ratio                   {:.2f} x\n", ratio);
  fmt::print("space savings                       {:.1f} %\n", held ? 100.0 * (1.0 - 1.0 / ratio) : 0.0);
  fmt::print("new entries compressed              {}\n",
             config.compression ? fmt::format("yes (zstd level {})", config.compression_level) : std::string("no"));
  if (unreadable) fmt::print("unreadable entries                  {}\n", unreadable);
}

// ccache -X: every entry rewritten with zstd at LEVEL (0: uncompressed), as cache.compression_level
// takes it (1..19) or cache.compression = false (0).
void recompress(const Config& config, const std::string& level_text) {
  int level = -1;
  const auto [end, ec] = std::from_chars(level_text.data(), level_text.data() + level_text.size(), level);
  if (ec != std::errc{} || end != level_text.data() + level_text.size() || level < 0 || level > 19)
    throw std::runtime_error(
        fmt::format("'{}' is not a compression level from 1 to 19 (or 0: uncompressed); nothing was changed",
                    level_text));
  auto store = storage::open_storage(config);
  const auto counts = store.local().recompress(level, terminal_progress("recompressing"));
  fmt::print("Recompressed {} cache entries with {} in {}; {} left as they are (manifests stay uncompressed).\n",
             counts.recompressed, level ? fmt::format("zstd level {}", level) : std::string("no compression"),
             config.cache_dir, counts.kept);
  fmt::print("Size before {}, after {}.\n", format_size(counts.bytes_before), format_size(counts.bytes_after));
  if (counts.unreadable) fmt::print("Unreadable entries skipped: {}.\n", counts.unreadable);
}

void get_config(const Config& config, const std::string& name) {
  const auto key = canonical_config_key(name);
  if (!key) throw std::runtime_error(fmt::format("'{}' is not a setting (kache -p lists them)", name));
  fmt::print("{}\n", *config_value_text(config, *key));
}

void set_max_size(const Config& config, const std::string& text);

void set_config(const Config& config, const std::string& assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos) throw std::runtime_error(fmt::format("-o takes KEY=VALUE, not '{}'", assignment));
  const auto key = canonical_config_key(assignment.substr(0, eq));
  if (!key)
    throw std::runtime_error(fmt::format("'{}' is not a setting (kache -p lists them)", assignment.substr(0, eq)));
  const std::string value = assignment.substr(eq + 1);
  if (*key == "cache.max_size") return set_max_size(config, value);  // the same checks and trim as -M
  if (const std::string error = config_value_error(*key, value); !error.empty())
    throw std::runtime_error(fmt::format("{} = '{}' {}; nothing was changed", *key, value, error));
  const std::string file = config_file_to_edit(config, *key);
  const std::size_t dot = key->find('.');
  set_config_value(file, key->substr(0, dot), key->substr(dot + 1), value, file == config.cache_config_file);
  fmt::print("Set {} = {} in {}.\n", *key, value, file);
}

// ccache --print-stats: one "name value" per line, every counter, for scripts.
void print_stats(const Config& config) {
  StatsFile file(config.cache_dir);
  const StatsSnapshot stats = file.read();
  auto store = storage::open_storage(config);
  std::string text = fmt::format("stats_schema kache-stats-1\nstats_time {}\n", std::time(nullptr));
  for (const auto& [name, value] : stats.counters) text += fmt::format("{} {}\n", name, value);
  text += fmt::format("cache_size {}\nmax_size {}\nentries {}\n", store.local().total_size(), config.max_size,
                      store.local().entry_count());
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
  if (!parse_size(text, bytes)) {
    throw std::runtime_error(fmt::format("'{}' is not a size (examples: 10G, 500M, 1.5GiB; 0 for no limit)", text));
  }
  if (bytes != 0 && text.find_first_not_of("0123456789") == std::string::npos) {
    // ccache reads a bare number as gigabytes: say the unit rather than guess.
    throw std::runtime_error(
        fmt::format("'{}' has no unit: write {}G, {}M or {}B (bytes); nothing was changed", text, text, text, text));
  }
  const std::string file = config_file_to_edit(config, "cache.max_size");
  try {
    set_config_value(file, "cache", "max_size", text, file == config.cache_config_file);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("cannot set cache.max_size: {}", e.what()));
  }
  fmt::print("Set cache.max_size to {} in {}.\n", bytes == 0 ? std::string("no limit") : format_size(bytes), file);
  // Reload so the trim uses the limit that is really in force (KACHE_MAX_SIZE still wins).
  const Config effective = load_config(storage::remote_url_schemes());
  if (effective.origins.count("cache.max_size") && effective.origins.at("cache.max_size") == "env") {
    fmt::print("Note: KACHE_MAX_SIZE is set in this environment and overrides it ({}).\n",
               format_size(effective.max_size));
  }
  auto store = storage::open_storage(effective);
  store.local().cleanup(terminal_progress("trimming the cache"));
  fmt::print("Cache size is now {} of {}.\n", format_size(store.local().total_size()),
             effective.max_size ? format_size(effective.max_size) : std::string("no limit"));
}

}  // namespace

bool looks_like_compile(int argc, char** argv) {
  static constexpr std::string_view kCompileExtensions[] = {
      "cu", "c",   "cc", "cp", "cxx", "cpp",   "CPP",    "c++", "C", "i",   "ii",    "cup",
      "o",  "obj", "a",  "so", "ptx", "cubin", "fatbin", "s",   "S", "lib", "ltoir", "optixir"};
  const std::string_view first = argv[1];
  if (first == "-forward-unknown-to-host-compiler" || first == "--forward-unknown-to-host-compiler") return true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-") return true;  // a source on stdin
    if (arg.starts_with('-') || arg.find('=') != std::string_view::npos) continue;
    const std::size_t dot = arg.rfind('.');
    if (dot == std::string_view::npos || arg.find('/', dot) != std::string_view::npos) continue;
    const std::string_view extension = arg.substr(dot + 1);
    if (std::find(std::begin(kCompileExtensions), std::end(kCompileExtensions), extension) !=
        std::end(kCompileExtensions))
      return true;
  }
  return false;
}

namespace {

bool is_subcommand(std::string_view word) {
  return std::find(std::begin(kSubcommands), std::end(kSubcommands), word) != std::end(kSubcommands);
}

// Runs the subcommand `name` (one of kSubcommands) with the arguments after it.
int run_subcommand(std::string_view name, const std::vector<std::string>& args) {
  if (name == "worker") return run_worker_command(args);
  if (name == "report") return report::run(args);
  if (name == "doctor") return run_doctor(args);
  return explain::run(args);
}

}  // namespace

bool is_kache_invocation(int argc, char** argv) {
  if (argc < 2) return true;
  const std::string_view first = argv[1];
  if (is_subcommand(first)) return true;
  if (!first.starts_with('-')) return false;  // a compiler's name or path
  return !looks_like_compile(argc, argv);
}

// What kache's own command line asks for, in the order run_cli carries it out.
struct CliRequest {
  bool show = false, json = false, zero = false, clear = false, show_config = false, version = false;
  bool cleanup = false, compression = false, machine_stats = false, list_reasons = false;
  std::size_t verbose = 0;
  std::string max_size, get_key, evict_age, recompress_level;
  CLI::Option* max_size_option = nullptr;  // counted once given: -M sets cache.max_size
  std::vector<std::string> assignments;
};

// kache's own rows of the option table (commands/options.cpp), each bound to its field of r.
void add_options(CLI::App& app, CliRequest& r) {
  add_row(app, "", "--show-stats", r.show);
  add_row(app, "", "--json", r.json);
  add_row(app, "", "--zero-stats", r.zero);
  add_row(app, "", "--clear", r.clear);
  r.max_size_option = add_row(app, "", "--max-size", r.max_size);
  add_row(app, "", "--show-config", r.show_config);
  add_row(app, "", "--get-config", r.get_key);
  add_row(app, "", "--set-config", r.assignments);
  add_row(app, "", "--cleanup", r.cleanup);
  add_row(app, "", "--evict-older-than", r.evict_age);
  add_row(app, "", "--recompress", r.recompress_level);
  add_row(app, "", "--show-compression", r.compression);
  add_row(app, "", "--verbose", r.verbose);
  add_row(app, "", "--print-stats", r.machine_stats);
  add_row(app, "", "--reasons", r.list_reasons);
  add_row(app, "", "--version", r.version);
  require_every_row(app, "");
}

// Hidden: the completion script of a shell, from the option table (completions/ holds their output).
constexpr std::string_view kPrintCompletion = "--print-completion";
// Hidden: the option table, a row a line (command, spellings, value, help; tab-separated), which
// cmake/man.cmake makes the manual page's COMMANDS section of.
constexpr std::string_view kListOptions = "--list-options";

int list_options() {
  std::string text;
  for (const OptionRow& row : option_rows())
    text += fmt::format("{}\t{}\t{}\t{}\n", row.command, row.spellings, row.value, row.help);
  fmt::print("{}", text);
  return 0;
}

int print_completion(std::string_view shell) {
  const std::string script = completion_script(shell);
  if (script.empty()) {
    fmt::print(stderr, "kache: {} writes bash or zsh completion, not '{}'.\n", kPrintCompletion, shell);
    return 1;
  }
  fmt::print("{}", script);
  return 0;
}

// kache -C: every entry, and what was recorded about them, goes.
void clear_cache(const Config& config) {
  auto store = storage::open_storage(config);
  const std::uint64_t entries = store.local().clear(terminal_progress("removing entries"));
  if (util::exists(config.cache_dir)) {
    // Below the cache dir by descriptor: a planted link is removed, never followed or entered.
    const util::Beneath cache(config.cache_dir);
    cache.remove_tree("explain");  // kache explain's records of the entries
    // What was verified under which identity: starting over means trusting nothing from before.
    cache.remove_tree("identities");
  }
  EventLog(config.cache_dir).clear();  // the compiles it records were of entries that are gone
  fmt::print("Removed {} cache entries from {}; statistics and configuration were kept.\n", entries,
             config.cache_dir);
}

// kache -c: the local store down to its size limit now, and each writable shared directory with a
// max-size= down to it (by whichever machine runs this).
void cleanup_cache(const Config& config) {
  auto store = storage::open_storage(config);
  store.local().cleanup(terminal_progress("cleaning up"));
  EventLog(config.cache_dir).drop_rotated();  // the event log down to its current file
  fmt::print("Cache size is now {} of {}.\n", format_size(store.local().total_size()),
             config.max_size ? format_size(config.max_size) : std::string("no limit"));
  const storage::Maintenance trim{storage::Maintenance::Kind::trim_to_max_size, 0};
  for (const auto& outcome : storage::maintain_remote_stores(config, trim)) {
    if (!outcome.error.empty()) {
      fmt::print(stderr, "kache: {}\n", outcome.error);
      continue;
    }
    fmt::print("Removed {} entries from {} (max-size {}).\n", outcome.removed, outcome.store,
               format_size(outcome.max_size));
  }
}

// Whether r reads or changes the cache itself (not only the configuration or the reason table).
bool uses_the_cache(const CliRequest& r) {
  return r.show || r.zero || r.clear || r.max_size_option->count() > 0 || r.cleanup || !r.evict_age.empty() ||
         !r.recompress_level.empty() || r.compression || r.machine_stats;
}

// Carries out every action of r on the cache of config; throws what fails.
void carry_out(const Config& config, const CliRequest& r) {
  if (config.cache_dir_refused && uses_the_cache(r)) {
    // The default directory is another cache: showing or changing it would answer another question.
    throw std::runtime_error("the cache directory is refused (see above), so there is no cache to work on; every "
                             "compile passes through uncached (passthrough.cache-dir-refused) until cache.dir "
                             "(or KACHE_DIR) is an absolute path");
  }
  struct stat dir {};
  if (uses_the_cache(r) && ::stat(config.cache_dir.c_str(), &dir) == 0 && !S_ISDIR(dir.st_mode)) {
    // -C would report "removed 0 entries" from a file: nothing there is a cache.
    throw std::runtime_error(fmt::format("the cache directory {} is not a directory, so there is no cache there; "
                                         "compiles run uncached until cache.dir (or KACHE_DIR) names a directory",
                                         config.cache_dir));
  }
  for (const auto& assignment : r.assignments) set_config(config, assignment);
  if (!r.get_key.empty()) get_config(config, r.get_key);
  if (r.show_config) {
    fmt::print("{}", describe_config(config));
    fmt::print("{}", describe_path_keys(config.base_dirs, config.nvcc_path_normalize, util::current_dir()));
  }
  // -sz: the figures, then the reset (ccache's order).
  if (r.show && r.zero) show_stats(config, r.json, r.verbose);
  if (r.zero) {
    StatsFile(config.cache_dir).zero();
    fmt::print("Statistics zeroed in {}.\n", config.cache_dir);
  }
  if (r.clear) clear_cache(config);
  if (r.max_size_option->count() > 0) set_max_size(config, r.max_size);
  if (r.cleanup) cleanup_cache(config);
  if (!r.evict_age.empty()) evict_older_than(config, r.evict_age);
  if (!r.recompress_level.empty()) recompress(config, r.recompress_level);
  if (r.compression) show_compression(config);
  if (r.machine_stats) print_stats(config);
  if (r.show && !r.zero) show_stats(config, r.json, r.verbose);
  if (r.list_reasons) show_reasons();
}

int run_cli(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == kPrintCompletion) return print_completion(argv[2]);
  if (argc == 2 && std::string_view(argv[1]) == kListOptions) return list_options();
  if (argc >= 2 && is_subcommand(argv[1])) return run_subcommand(argv[1], {argv + 2, argv + argc});
  CLI::App app{"kache: a compiler cache for nvcc, gcc/clang and hipcc.", "kache"};
  set_help_row(app, "");
  app.footer(kFooter);

  if (const std::string unknown = first_unknown_option(argc, argv); !unknown.empty()) {
    // Never handed to a compiler, never counted: a typo in kache's own options is kache's to answer.
    fmt::print(stderr, "{}\n", unknown_option_message(unknown));
    return 1;
  }
  CliRequest r;
  add_options(app, r);
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
  if (r.version) {
    fmt::print("kache {} (commit {})\n{}{}", KACHE_VERSION, KACHE_COMMIT, build_features(), remote_execution_feature());
    return 0;
  }
  if (r.json && !r.show) {
    fmt::print(stderr, "kache: --json only works together with --show-stats.\n");
    return 1;
  }

  const Config config = load_config(storage::remote_url_schemes());
  for (const auto& problem : config.problems) fmt::print(stderr, "{}\n", problem);
  apply_process_settings(config);

  try {
    carry_out(config, r);
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

}  // namespace kache::commands
