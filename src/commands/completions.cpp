// The shell completions of completions/, written from the option table (commands/options.hpp): every
// command's options, the subcommands, the compilers kache runs as, which values are paths, and after a
// compiler's name (or explain's --) whatever completes for that compiler.
#include <fmt/format.h>

#include "commands/options.hpp"

namespace kache::commands {
namespace {

constexpr std::string_view kGeneratedNote =
    "generated from kache's option table (src/commands/options.cpp)\n"
    "# by `kache --print-completion {}`: change the table, then regenerate this file (tests/integration/\n"
    "# test_house.py fails while the two differ).\n";

template <typename Range>
std::string joined(const Range& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : " ") + std::string(word);
  return text;
}

// Every spelling of command's rows, space-separated.
std::string words_of(std::string_view command) {
  std::vector<std::string_view> words;
  for (const OptionRow* row : rows_of(command)) {
    for (const std::string_view name : spellings_of(*row)) words.push_back(name);
  }
  return joined(words);
}

// "doctor --nvcc" | ... for bash's case on "$1 $prev": the rows whose value completes (files) or not.
// kache's own rows follow any first word that is an option: -*" -M".
std::string bash_value_patterns(bool files) {
  std::vector<std::string> patterns;
  for (const OptionRow& row : option_rows()) {
    if (row.value.empty() || row.completes == Completes::command || (row.completes == Completes::files) != files)
      continue;
    for (const std::string_view name : spellings_of(row)) {
      patterns.push_back(row.command.empty() ? fmt::format("-*\" {}\"", name)
                                             : fmt::format("\"{} {}\"", row.command, name));
    }
  }
  std::string text;
  for (const auto& pattern : patterns) text += (text.empty() ? "" : " |\\\n    ") + pattern;
  return text;
}

// The bash lines that complete a compile command after a subcommand's -- (explain's).
std::string bash_rest_commands() {
  std::string text;
  for (const OptionRow& row : option_rows()) {
    if (row.completes != Completes::command) continue;
    text += fmt::format(
        "  if [[ $command == {} ]]; then\n"
        "    local i\n"
        "    for ((i = 2; i < COMP_CWORD; i++)); do\n"
        "      if [[ ${{COMP_WORDS[i]}} == {} ]]; then\n"
        "        _kache_command_at $((i + 1))\n"
        "        return\n"
        "      fi\n"
        "    done\n"
        "  fi\n",
        row.command, row.spellings);
  }
  return text;
}

std::string bash_script() {
  std::string cases;
  for (const std::string_view command : kSubcommands)
    cases += fmt::format("    {}) words=\"{}\" ;;\n", command, words_of(command));
  return fmt::format(
      "# bash completion for kache, {}"
      "_kache_command_at() {{\n"
      "  if declare -F _command_offset >/dev/null; then\n"
      "    _command_offset \"$1\"\n"
      "  else\n"
      "    mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
      "  fi\n"
      "}}\n"
      "_kache() {{\n"
      "  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD - 1]}} command=${{COMP_WORDS[1]}}\n"
      "  local options=\"{}\"\n"
      "  local subcommands=\"{}\"\n"
      "  local compilers=\"{}\"\n"
      "  local words\n"
      "  case $command in\n"
      "{}"
      "    *) words=$options ;;\n"
      "  esac\n"
      "  if ((COMP_CWORD == 1)); then\n"
      "    mapfile -t COMPREPLY < <(compgen -W \"$options $subcommands $compilers\" -- \"$cur\")\n"
      "    return\n"
      "  fi\n"
      "  if [[ $command != -* && \" $subcommands \" != *\" $command \"* ]]; then\n"
      "    _kache_command_at 1\n"
      "    return\n"
      "  fi\n"
      "{}"
      "  case \"$command $prev\" in\n"
      "    {}) mapfile -t COMPREPLY < <(compgen -f -- \"$cur\") ;;\n"
      "    {}) ;;\n"
      "    *) mapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\") ;;\n"
      "  esac\n"
      "}}\n"
      "complete -F _kache kache\n",
      fmt::format(kGeneratedNote, "bash"), words_of(""), joined(kSubcommands), joined(kCompilerNames), cases,
      bash_rest_commands(), bash_value_patterns(true), bash_value_patterns(false));
}

// A help sentence inside a single-quoted _arguments spec: brackets escaped, quotes closed and reopened.
std::string zsh_description(std::string_view help) {
  std::string text;
  for (const char c : help) {
    if (c == '[' || c == ']') text += '\\';
    text += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return text;
}

// command's rows as _arguments specs, one per spelling: '-M[Set ...]:SIZE:', '--html[...]:FILE:_files'.
std::string zsh_specs(std::string_view command) {
  std::string text;
  for (const OptionRow* row : rows_of(command)) {
    std::string value;
    if (!row->value.empty() && row->completes != Completes::command)
      value = fmt::format(":{}:{}", row->value, row->completes == Completes::files ? "_files" : "");
    for (const std::string_view name : spellings_of(*row)) {
      text += fmt::format(" \\\n        '{}{}[{}]{}'", row->repeats ? "*" : "", name, zsh_description(row->help),
                          value);
    }
  }
  return text;
}

std::string zsh_script() {
  std::string cases;
  for (const std::string_view command : kSubcommands)
    // The subcommand becomes the command word _arguments skips, as a compiler's name does for _normal.
    cases += fmt::format("    {}) shift words; (( CURRENT-- )); _arguments{} ;;\n", command, zsh_specs(command));
  return fmt::format(
      "#compdef kache\n"
      "# zsh completion for kache, {}"
      "_kache() {{\n"
      "  if (( CURRENT == 2 )); then\n"
      "    _alternative \\\n"
      "      'options:kache option:({})' \\\n"
      "      'subcommands:subcommand:({})' \\\n"
      "      'compilers:compiler:({})'\n"
      "    return\n"
      "  fi\n"
      "  case $words[2] in\n"
      "{}"
      "    -*) _arguments{} ;;\n"
      "    *) shift words; (( CURRENT-- )); _normal ;;\n"
      "  esac\n"
      "}}\n"
      "_kache \"$@\"\n",
      fmt::format(kGeneratedNote, "zsh"), words_of(""), joined(kSubcommands), joined(kCompilerNames), cases,
      zsh_specs(""));
}

}  // namespace

std::string completion_script(std::string_view shell) {
  if (shell == "bash") return bash_script();
  if (shell == "zsh") return zsh_script();
  return {};
}

}  // namespace kache::commands
