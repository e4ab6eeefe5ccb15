#pragma once
#include <string>
#include <vector>

namespace kache::util {

// Replaces every occurrence of `from` in `text` (left to right, never rescanning what was inserted).
inline void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
  }
}

// Splits a command line as nvcc's dry run prints it into words, honouring double quotes
// ("/usr/bin"/g++-12 is one word); a quoted empty string is a word.
inline std::vector<std::string> split_quoted_words(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && (c == ' ' || c == '\t')) {
      if (any) words.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (any) words.push_back(cur);
  return words;
}

}  // namespace kache::util
