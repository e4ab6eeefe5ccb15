// Fuzzes the one shell lexer (util/shell_words.hpp) that reads wrapper lines, nvcc's dry run, clang's
// -### jobs and COLLECT_GCC_OPTIONS.
// Input: a line; with a first byte of 1, its variables expand (every name to "v").
// Properties, when the line lexes completely:
//  - each word's raw spelling is a piece of the line, and the words, in order, do not overlap;
//  - each raw spelling lexed alone is one word with the same text (a word's extent decides its text);
//  - the texts written back single-quoted ('\'' for a quote, as GCC writes COLLECT_GCC_OPTIONS) lex back
//    as the same texts.
#include <string>

#include "fuzz_check.hpp"
#include "util/shell_words.hpp"

using namespace kache;

namespace {

std::string single_quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input = fuzz::as_view(data, size);
  util::ShellGrammar grammar{.specials = "|&;<>()`*?[~#{}", .expand = {}};
  if (!input.empty() && input[0] == '\1') {
    grammar.expand = [](std::string_view) { return std::string("v"); };
    input.remove_prefix(1);
  }
  const util::ShellWords words = util::split_shell_words(input, grammar);
  if (words.end != util::ShellWords::End::complete) return 0;
  std::size_t from = 0;
  std::string quoted;
  for (const auto& w : words.words) {
    const std::size_t at = input.find(w.raw, from);
    KACHE_FUZZ_CHECK(at != std::string_view::npos);
    from = at + w.raw.size();
    const util::ShellWords alone = util::split_shell_words(w.raw, grammar);
    KACHE_FUZZ_CHECK(alone.end == util::ShellWords::End::complete && alone.words.size() == 1);
    KACHE_FUZZ_CHECK(alone.words[0].text == w.text);
    quoted += single_quoted(w.text) + " ";
  }
  KACHE_FUZZ_CHECK(util::split_shell_words(quoted).texts() == words.texts());
  return 0;
}
