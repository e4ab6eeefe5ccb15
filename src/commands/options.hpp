#pragma once
// The option table of kache's commands: one row per option (its spellings, what follows it, its help
// sentence, the command it belongs to). Each command's parser reads its rows (through CLI11, or
// match_option for the hand-read doctor and explain), its --help prints them, and the shell
// completions in completions/ are generated from them (`kache --print-completion bash|zsh`;
// tests/integration/test_house.py fails when the checked-in files differ).
#include <CLI/CLI.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kache::commands {

// What a shell offers for an option's value.
enum class Completes {
  nothing,   // a flag, or a value no list can suggest (a size, an age, a name)
  files,     // a path
  command,   // the rest of the line is a compile command (explain's --)
};

struct OptionRow {
  std::string_view command;    // "" for kache's own options, else the subcommand: "doctor", "report", ...
  std::string_view spellings;  // every spelling, comma-separated, the one messages name first: "-s,--show-stats"
  std::string_view value;      // what follows it, as --help names it ("SIZE"); "" for a flag
  Completes completes;
  bool repeats;                // may be given more than once (-o KEY=VALUE -o ..., -vv)
  std::string_view help;       // the sentence --help prints
};

// Every row, kache's own first, then each subcommand's in kSubcommands' order.
std::span<const OptionRow> option_rows();
// The rows of one command ("" for kache's own).
std::vector<const OptionRow*> rows_of(std::string_view command);
// The subcommands run_cli dispatches to, in the order completions offer them.
inline constexpr std::string_view kSubcommands[] = {"doctor", "explain", "report", "worker"};
// The compiler names kache runs as (cmake/install.cmake's masquerade links), offered after `kache`.
inline constexpr std::string_view kCompilerNames[] = {"nvcc", "gcc", "g++", "cc", "c++", "clang", "clang++", "hipcc"};

// A row's spellings, one by one.
std::vector<std::string_view> spellings_of(const OptionRow& row);
// The row of command that has the spelling `name`; throws std::logic_error when the table has none (a
// parser naming an option the table lacks is kache's own mistake).
const OptionRow& find_row(std::string_view command, std::string_view name);

// Adds command's row spelled `name` to app through CLI11, bound to target: a flag when the row takes no
// value, an option with the row's value name otherwise.
template <typename T>
CLI::Option* add_row(CLI::App& app, std::string_view command, std::string_view name, T& target) {
  const OptionRow& row = find_row(command, name);
  if (row.value.empty()) return app.add_flag(std::string(row.spellings), target, std::string(row.help));
  return app.add_option(std::string(row.spellings), target, std::string(row.help))->type_name(std::string(row.value));
}
// Sets app's help flag from command's -h,--help row.
void set_help_row(CLI::App& app, std::string_view command);
// Throws std::logic_error naming a row of command that app has no option for: every row is parsed.
void require_every_row(const CLI::App& app, std::string_view command);

// One option read from a hand-parsed command line (doctor's, explain's).
struct OptionMatch {
  const OptionRow* row = nullptr;
  std::string value;  // the value, given as the next argument or after '='; "" for a flag
  bool is(std::string_view spelling) const;
};
// The row args[i] spells, its value taken from "--name=value" or args[i + 1] (i then moves past it);
// nullopt when args[i] is none of command's rows, or a value is missing.
std::optional<OptionMatch> match_option(std::string_view command, const std::vector<std::string>& args,
                                        std::size_t& i);
// "usage: kache doctor [--json] [--nvcc PATH] ...", wrapped under its first option before width.
std::string usage_line(std::string_view command, std::size_t width = 80);
// "Options:" and a line per row, as CLI11 prints them, for the hand-parsed commands' --help.
std::string options_help(std::string_view command);

// The completion script for shell ("bash" or "zsh"), or "" for a shell kache writes none for.
std::string completion_script(std::string_view shell);

}  // namespace kache::commands
