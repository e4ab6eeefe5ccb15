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

// `text` fit for a terminal: every control character (C0, DEL, and C1 as UTF-8 encodes it) becomes '?'.
// A file name or a log field can hold an escape sequence that would move the cursor, retitle the
// window or hide what follows; every text a report or explain prints from the log or a file name
// passes through here.
// keep_newlines: a multi-line text keeps its line breaks.
inline std::string terminal_safe(std::string_view text, bool keep_newlines = false) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == '\n' && keep_newlines) {
      out += '\n';
    } else if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F, CSI among them
      out += '?';
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Whether JSON text nests arrays and objects at most max_depth deep (brackets inside strings do not
// count). A recursive parser given "[[[[..." 600 KB deep runs out of stack; a reader of a file others
// can write checks this first and treats a deeper text as damaged.
inline bool json_nesting_within(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

}  // namespace kache::util
