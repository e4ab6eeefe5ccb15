#include "commands/options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace kache::commands {
namespace {

using C = Completes;

// The table. A new option is a row here and a line in its command's parser (which names it by a
// spelling); --help and the completions follow from the row (regenerate completions/ with
// `kache --print-completion bash > completions/kache.bash` and the same for zsh into _kache).
constexpr OptionRow kRows[] = {
    // kache's own options (commands/cli.cpp), in the order --help lists them.
    {"", "-s,--show-stats", "", C::nothing, false, "Print statistics and the cache size"},
    {"", "--json", "", C::nothing, false, "With --show-stats: print the statistics as JSON"},
    {"", "-z,--zero-stats", "", C::nothing, false, "Reset the statistics to zero"},
    {"", "-C,--clear", "", C::nothing, false, "Remove every cache entry (statistics and configuration are kept)"},
    {"", "-M,--max-size", "SIZE", C::nothing, false,
     "Set cache.max_size in the config file (e.g. 10G) and trim the cache"},
    {"", "-p,--show-config", "", C::nothing, false, "Print every setting, its value and where it came from"},
    {"", "-k,--get-config", "KEY", C::nothing, false, "Print the value of one setting (e.g. cache.max_size)"},
    {"", "-o,--set-config", "KEY=VALUE", C::nothing, true,
     "Set KEY=VALUE in the config file in effect (that one line; comments and order kept)"},
    {"", "-c,--cleanup", "", C::nothing, false, "Evict least recently used entries down to the size limit now"},
    {"", "--evict-older-than", "AGE", C::nothing, false, "Remove entries not used for AGE (e.g. 3d, 12h, 600s)"},
    {"", "-X,--recompress", "LEVEL", C::nothing, false,
     "Rewrite every entry with zstd at LEVEL (1..19; 0: uncompressed); new entries follow "
     "cache.compression_level"},
    {"", "-x,--show-compression", "", C::nothing, false, "Print compression statistics of the stored entries"},
    {"", "-v,--verbose", "", C::nothing, true, "With --show-stats: also explain each figure (-vv: every counter)"},
    {"", "--print-stats", "", C::nothing, false, "Print every counter as 'name value' lines, for scripts"},
    {"", "--reasons", "", C::nothing, false, "Print every reason kache counts for not caching, with what it means"},
    {"", "-V,--version", "", C::nothing, false, "Print the version and exit"},
    {"", "-h,--help", "", C::nothing, false, "Print this help and exit"},
    // kache doctor (commands/doctor.cpp, read by match_option).
    {"doctor", "--json", "", C::nothing, false, "Print the rows as JSON"},
    {"doctor", "--nvcc", "PATH", C::files, false, "The nvcc to check (default: nvcc on PATH)"},
    {"doctor", "-ccbin,--compiler-bindir,--ccbin", "COMPILER", C::files, false,
     "The host compiler nvcc runs (default: NVCC_CCBIN, else nvcc's own choice)"},
    {"doctor", "--hipcc", "PATH", C::files, false, "The hipcc to check (default: hipcc on PATH)"},
    {"doctor", "--probe-timeout", "SECONDS", C::nothing, false, "The bound of each ROCm probe (default 20 s)"},
    {"doctor", "-h,--help", "", C::nothing, false, "Print this help and exit"},
    // kache explain (commands/explain.cpp, read by match_option; -- ends kache's arguments).
    {"explain", "--json", "", C::nothing, false, "Print the verdict as JSON"},
    {"explain", "--last", "", C::nothing, false, "Explain the last stored miss in this cache"},
    {"explain", "--closure", "", C::nothing, false,
     "Also list the headers the compile would read now (runs nvcc -M): finds a header that now shadows a "
     "recorded one, or one the compile newly includes"},
    {"explain", "--", "COMPILER ARGS...", C::command, false, "The compile to explain, as the build runs it"},
    {"explain", "-h,--help", "", C::nothing, false, "Print this help and exit"},
    // kache report (commands/report.cpp, through CLI11).
    {"report", "-h,--help", "", C::nothing, false, "Print this help message and exit"},
    {"report", "--build", "ID", C::nothing, false, "Only the compiles of this build id (KACHE_BUILD_ID, or pgN)"},
    {"report", "--since", "AGE", C::nothing, false, "Only the compiles of the last AGE (e.g. 10m, 2h)"},
    {"report", "--all", "", C::nothing, false, "Every recorded compile"},
    {"report", "--since-mark", "", C::nothing, false,
     "The compiles since the last --mark (without a selection: the build KACHE_BUILD_ID names, else the newest)"},
    {"report", "--json", "", C::nothing, false, "Print the report as JSON (schema kache-report-1)"},
    {"report", "--markdown", "", C::nothing, false,
     "Print the report as Markdown tables (for $GITHUB_STEP_SUMMARY)"},
    {"report", "--html", "FILE", C::files, false, "Write the report with charts to FILE (one self-contained page)"},
    {"report", "--trace", "FILE", C::files, false,
     "Write a Chrome trace of the compiles to FILE (Perfetto, chrome://tracing)"},
    {"report", "--fail-under", "PERCENT", C::nothing, false,
     "Exit 1 when the hit rate (hits of the cacheable compiles: hits and misses) is below PERCENT or there "
     "is no cacheable compile"},
    {"report", "--mark", "", C::nothing, false, "Mark now: kache report --since-mark starts here"},
    {"report", "--label", "TEXT", C::nothing, false, "With --mark: a name for the mark"},
    // kache worker (commands/worker.cpp, through CLI11).
    {"worker", "-h,--help", "", C::nothing, false, "Print this help message and exit"},
    {"worker", "--server", "URL", C::nothing, false, "grpc://host:port or grpcs://host:port"},
    {"worker", "--instance", "NAME", C::nothing, false, "The REAPI instance name"},
    {"worker", "--ca-file", "FILE", C::files, false, "A CA certificate for grpcs://"},
    {"worker", "--toolchain-id", "ID", C::nothing, false, "The toolchain id this worker serves (kache-toolchain)"},
    {"worker", "--nvcc", "PATH", C::files, false, "Serve the toolchain id of this nvcc (and its host compiler)"},
    {"worker", "--compiler", "PATH", C::files, false,
     "Also serve the toolchain id of this gcc or clang (whole compiles)"},
    {"worker", "--property", "NAME=VALUE", C::nothing, true, "Another platform property NAME=VALUE this worker serves"},
    {"worker", "--work-dir", "DIR", C::files, false, "Where the private directories of actions go"},
    {"worker", "--bot-id", "NAME", C::nothing, false, "This worker's name (default: host name and pid)"},
    {"worker", "--max-actions", "N", C::nothing, false, "Stop after this many actions (default: never)"},
};

bool is_help(const OptionRow& row) { return row.spellings.ends_with("--help"); }

// A row as --help's left column shows it: "-M,--max-size SIZE".
std::string left_column(const OptionRow& row) {
  return row.value.empty() ? std::string(row.spellings) : fmt::format("{} {}", row.spellings, row.value);
}

}  // namespace

std::span<const OptionRow> option_rows() { return kRows; }

std::vector<const OptionRow*> rows_of(std::string_view command) {
  std::vector<const OptionRow*> out;
  for (const OptionRow& row : kRows) {
    if (row.command == command) out.push_back(&row);
  }
  return out;
}

std::vector<std::string_view> spellings_of(const OptionRow& row) {
  std::vector<std::string_view> out;
  std::string_view rest = row.spellings;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    out.push_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

const OptionRow& find_row(std::string_view command, std::string_view name) {
  for (const OptionRow* row : rows_of(command)) {
    const auto names = spellings_of(*row);
    if (std::find(names.begin(), names.end(), name) != names.end()) return *row;
  }
  throw std::logic_error(fmt::format("the option table has no row {} for 'kache {}'", name, command));
}

void set_help_row(CLI::App& app, std::string_view command) {
  const OptionRow& row = find_row(command, "--help");
  app.set_help_flag(std::string(row.spellings), std::string(row.help));
}

void require_every_row(const CLI::App& app, std::string_view command) {
  for (const OptionRow* row : rows_of(command)) {
    const std::string name(spellings_of(*row).back());
    if (app.get_option_no_throw(name) == nullptr)
      throw std::logic_error(fmt::format("'kache {}' does not parse its option {}", command, name));
  }
}

bool OptionMatch::is(std::string_view spelling) const {
  const auto names = spellings_of(*row);
  return std::find(names.begin(), names.end(), spelling) != names.end();
}

std::optional<OptionMatch> match_option(std::string_view command, const std::vector<std::string>& args,
                                        std::size_t& i) {
  const std::string_view arg = args[i];
  for (const OptionRow* row : rows_of(command)) {
    if (row->completes == Completes::command) continue;  // "--" is the caller's: what follows is not kache's
    for (const std::string_view name : spellings_of(*row)) {
      if (arg == name && row->value.empty()) return OptionMatch{row, ""};
      if (row->value.empty()) continue;
      if (arg == name && i + 1 < args.size()) return OptionMatch{row, args[++i]};
      if (arg.size() > name.size() && arg.starts_with(name) && arg[name.size()] == '=')
        return OptionMatch{row, std::string(arg.substr(name.size() + 1))};
    }
  }
  return std::nullopt;
}

std::string usage_line(std::string_view command, std::size_t width) {
  const std::string head = fmt::format("usage: kache {} ", command);
  std::string text = head, line = head;
  for (const OptionRow* row : rows_of(command)) {
    if (row->completes == Completes::command || is_help(*row)) continue;
    const std::string name(spellings_of(*row).front());
    const std::string word = row->value.empty() ? fmt::format("[{}]", name) : fmt::format("[{} {}]", name, row->value);
    if (line.size() > head.size() && line.size() + word.size() > width) {
      text.back() = '\n';
      line = std::string(head.size(), ' ');
      text += line;
    }
    text += word + " ";
    line += word + " ";
  }
  text.back() = '\n';
  return text;
}

std::string options_help(std::string_view command) {
  // CLI11's layout: the names from column 2, the sentence from column 30 (on a line of its own after a
  // name that reaches it).
  std::string text = "Options:\n";
  for (const OptionRow* row : rows_of(command)) {
    const std::string left = left_column(*row);
    text += left.size() < 28 ? fmt::format("  {:<28}{}\n", left, row->help)
                             : fmt::format("  {}\n{:30}{}\n", left, "", row->help);
  }
  return text;
}

}  // namespace kache::commands
