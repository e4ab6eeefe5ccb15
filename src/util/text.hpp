#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "util/shell_words.hpp"

namespace kache::util {

// Replaces every occurrence of `from` in `text` (left to right, never rescanning what was inserted).
inline void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
  }
}

// Splits a command line as nvcc's dry run prints it into words ("/usr/bin"/g++-12 is one word; a quoted
// empty string is a word), as /bin/sh, which runs them, splits them (util/shell_words.hpp).
inline std::vector<std::string> split_quoted_words(const std::string& line) { return split_shell_words(line).texts(); }

// `text` with every byte but ALPHA, DIGIT, '-', '_', '.' and those of `also_plain` percent-encoded
// (%XX, upper-case hex: the form SigV4 signs and servers compare).
inline std::string percent_encode(std::string_view text, std::string_view also_plain = "") {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.' || also_plain.find(c) != std::string_view::npos;
    if (plain) {
      out += c;
    } else {
      out += '%';
      out += kHex[static_cast<unsigned char>(c) >> 4];
      out += kHex[static_cast<unsigned char>(c) & 15];
    }
  }
  return out;
}

}  // namespace kache::util
