#pragma once
// The one shell lexer for the command lines kache reads: a wrapper script's lines
// (compiler/tool_files), the commands nvcc's dry run prints and runs through /bin/sh
// (compiler/nvcc/stages), GCC's COLLECT_GCC_OPTIONS (compiler/gcc/wrapper). One grammar, /bin/sh's for
// words: blanks (space, tab) separate them; single quotes quote everything up to the next; double quotes
// quote, a backslash in them escaping $ ` " \ and staying before any other character; a backslash
// outside quotes escapes the next character. What callers need beyond that is an option of the grammar:
// the variables $NAME and ${NAME} expand, and the characters a caller wants reported.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::util {

struct ShellGrammar {
  // Characters that make a line more than one simple command with literal words (";|&()<>{}", globs,
  // '`'): the first one found outside quotes is reported, and '`' inside double quotes too (command
  // substitution happens there); '#' and '~' only where they start a word. Nothing stops at them.
  std::string_view specials;
  // The value of a variable, for $NAME and ${NAME}; unset: '$' is an ordinary character.
  std::function<std::string(std::string_view name)> expand;
};

struct ShellWord {
  std::string text;  // the word as the command receives it: quotes and escapes removed, variables expanded
  std::string raw;   // as the line spells it
};

struct ShellWords {
  enum class End {
    complete,
    open,          // a quote not closed, or a backslash that ends the line: the last word runs to the end
    unexpandable,  // a '$' that names no variable, or an unquoted value the shell would split or glob
  };
  std::vector<ShellWord> words;
  End end = End::complete;
  char special = 0;  // the first of ShellGrammar::specials found, or 0
  // The words as the command receives them.
  std::vector<std::string> texts() const;
};

ShellWords split_shell_words(std::string_view line, const ShellGrammar& grammar = {});

}  // namespace kache::util
