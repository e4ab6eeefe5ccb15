#include "core/preprocessed.hpp"

#include <cctype>
#include <cstddef>
#include <unordered_set>

namespace kache::core {

namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// A line marker's name within line: where its text starts and ends (between the quotes), the flags
// after it. nullopt when the line is no marker: `# <digits> "name"...` (GCC, clang) or
// `#line <digits> "name"...` (clang's MSVC-compatible output).
struct Marker {
  std::size_t name_begin = 0, name_end = 0;
  bool escaped = false;  // the name holds a '\\'
};

std::optional<Marker> parse_marker(std::string_view line) {
  if (line.empty() || line[0] != '#') return std::nullopt;
  std::size_t i = 1;
  if (line.substr(i).starts_with("line")) i += 4;
  const std::size_t blanks = i;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i == blanks || i >= line.size() || !is_digit(line[i])) return std::nullopt;
  while (i < line.size() && is_digit(line[i])) ++i;
  if (i + 1 >= line.size() || line[i] != ' ' || line[i + 1] != '"') return std::nullopt;
  Marker m;
  m.name_begin = i + 2;
  for (std::size_t j = m.name_begin; j < line.size(); ++j) {
    if (line[j] == '\\') {
      m.escaped = true;
      ++j;  // the escaped character, a quote included
    } else if (line[j] == '"') {
      m.name_end = j;
      return m;
    }
  }
  return std::nullopt;  // no closing quote: not a marker GCC or clang writes
}

// Calls each(line, offset) for every line of text (without its '\n').
template <class Each>
void for_each_line(std::string_view text, Each&& each) {
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    each(text.substr(pos, end - pos), pos);
    pos = end + 1;
  }
}

// Whether a marker's flags (the text after its closing quote) hold flag 1: a file entered.
bool enters_file(std::string_view flags) {
  for (std::size_t f = 0; f < flags.size(); ++f) {
    if (flags[f] == '1' && (f == 0 || flags[f - 1] == ' ') && (f + 1 == flags.size() || flags[f + 1] == ' ')) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string keyed_line_markers(std::string_view text, const PathRoots& roots) {
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;
  for_each_line(text, [&](std::string_view line, std::size_t offset) {
    const std::optional<Marker> m = parse_marker(line);
    if (!m || m->escaped || m->name_end == m->name_begin || line[m->name_begin] != '/') return;
    const std::string name(line.substr(m->name_begin, m->name_end - m->name_begin));
    out.append(text, copied, offset + m->name_begin - copied);
    out += roots.key_form(name);
    copied = offset + m->name_end;
  });
  out.append(text, copied);
  return out;
}

std::optional<std::vector<std::string>> line_marker_files(std::string_view text) {
  std::vector<std::string> files;
  std::unordered_set<std::string> seen;
  bool first = true, unreadable = false;
  for_each_line(text, [&](std::string_view line, std::size_t) {
    const std::optional<Marker> m = parse_marker(line);
    if (!m) return;
    const bool main_file = first;
    first = false;
    if (!main_file && !enters_file(line.substr(m->name_end + 1))) return;
    const std::string_view name = line.substr(m->name_begin, m->name_end - m->name_begin);
    if (name.starts_with('<')) return;
    if (m->escaped) unreadable = true;
    if (seen.insert(std::string(name)).second) files.emplace_back(name);
  });
  if (unreadable) return std::nullopt;
  return files;
}

}  // namespace kache::core
