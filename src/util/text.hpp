#pragma once
#include <string>

namespace kache::util {

// Replaces every occurrence of `from` in `text` (left to right, never rescanning what was inserted).
inline void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
  }
}

}  // namespace kache::util
