#include "core/expansion_scan.hpp"

#include <string.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <span>
#include <vector>

namespace kache::core {

namespace {
constexpr std::size_t npos = std::string_view::npos;

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }
bool is_line_end(char c) { return c == '\n' || c == '\r'; }

// The index just past the line splice starting at i (a backslash, or "??/" with trigraphs, then blanks
// and a line end), or npos when none starts there.
std::size_t splice_end(std::string_view text, std::size_t i, bool trigraphs) {
  std::size_t j = 0;
  if (text[i] == '\\') {
    j = i + 1;
  } else if (trigraphs && text.substr(i).starts_with("?\?/")) {
    j = i + 3;
  } else {
    return npos;
  }
  while (j < text.size() && is_blank(text[j])) ++j;
  if (j >= text.size() || !is_line_end(text[j])) return npos;
  return text[j] == '\r' && j + 1 < text.size() && text[j + 1] == '\n' ? j + 2 : j + 1;
}
}  // namespace

std::string splice_lines(std::string_view text, bool trigraphs) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t end = splice_end(text, i, trigraphs);
    if (end != npos) {
      i = end;
      continue;
    }
    out.push_back(text[i++]);
  }
  return out;
}

bool has_line_splice(std::string_view text, bool trigraphs) {
  const char* starts = trigraphs ? "\\?" : "\\";
  for (std::size_t i = text.find_first_of(starts); i != npos; i = text.find_first_of(starts, i + 1)) {
    if (splice_end(text, i, trigraphs) != npos) return true;
  }
  return false;
}

namespace {

std::string_view ident_at(std::string_view line, std::size_t i) {
  std::size_t e = i;
  while (e < line.size() && is_ident(line[e])) ++e;
  return line.substr(i, e - i);
}

std::size_t skip_blanks(std::string_view line, std::size_t i) {
  while (i < line.size() && is_blank(line[i])) ++i;
  return i;
}

// One line of spliced text as the paste scan reads it.
struct LineShape {
  bool directive = false;  // starts (after blanks) with '#', %: or ??=
  std::string_view name;   // a #define's macro name
  bool counts = false;     // its identifiers may reach a macro's parameter: #if, #elif, #define, an odd one
  bool define = false;     // a #define whose parameters were read
  std::size_t body = 0;    // where the identifiers the scan weighs start
  std::vector<std::string_view> params;
};

// Directives whose identifiers are no macro arguments (nothing is expanded, or not into an #if).
bool inert_directive(std::string_view word) {
  for (std::string_view d : {"include", "include_next", "import", "ifdef", "ifndef", "undef", "pragma", "error",
                             "warning", "else", "endif"}) {
    if (word == d) return true;
  }
  return false;
}

// Reads "NAME(params)" from i on a #define line into s (s.define stays false when it cannot).
void read_define(std::string_view line, std::size_t i, LineShape& s) {
  const std::string_view name = ident_at(line, skip_blanks(line, i));
  if (name.empty()) return;
  i = skip_blanks(line, i) + name.size();
  s.name = name;
  s.body = i;
  if (i < line.size() && line[i] == '(') {
    const std::size_t close = line.find(')', i);
    if (close == npos) return;
    for (std::size_t p = i + 1; p < close; ++p) {
      if (!is_ident(line[p])) continue;
      s.params.push_back(ident_at(line, p));
      p += s.params.back().size();
    }
    s.params.push_back("__VA_ARGS__");
    s.params.push_back("__VA_OPT__");
    s.body = close + 1;
  }
  s.define = true;
}

LineShape shape_of(std::string_view line) {
  LineShape s;
  std::size_t i = skip_blanks(line, 0);
  const std::string_view rest = line.substr(i);
  const std::size_t mark = rest.starts_with("#") ? 1 : rest.starts_with("%:") ? 2 : rest.starts_with("?\?=") ? 3 : 0;
  if (mark == 0) return s;
  s.directive = true;
  i = skip_blanks(line, i + mark);
  const std::string_view word = ident_at(line, i);
  s.body = i + word.size();
  s.counts = !inert_directive(word);
  if (word == "define") read_define(line, s.body, s);
  return s;
}

// Calls f with each reading of text the compiler may make: its lines spliced, and spliced again with
// trigraphs where "??/" could splice (ISO modes). Either reading alone might hide a word the other shows.
template <typename F>
void each_reading(std::string_view text, F&& f) {
  if (has_line_splice(text, false)) {
    f(std::string_view(splice_lines(text, false)));
  } else {
    f(text);
  }
  if (text.find("?\?/") != npos && has_line_splice(text, true)) f(std::string_view(splice_lines(text, true)));
}

// Calls f with each line of text.
template <typename F>
void each_line(std::string_view text, F&& f) {
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = start;
    while (end < text.size() && !is_line_end(text[end])) ++end;
    f(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace

namespace {

enum class PathWord { file, base_file, anywhere, line };
struct PathWordSpec {
  std::string_view text;
  PathWord kind;
  bool whole;  // matched as a whole identifier (else inside any identifier)
  std::string_view spelling;
};
constexpr PathWordSpec kPathWords[] = {
    {"__FILE__", PathWord::file, true, "__FILE__"},
    {"__BASE_FILE__", PathWord::base_file, true, "__BASE_FILE__"},
    {"__builtin_FILE", PathWord::anywhere, true, "__builtin_FILE"},
    // std::source_location, std::experimental::source_location, boost::source_location, and GCC's
    // __builtin_source_location behind them.
    {"source_location", PathWord::anywhere, false, "source_location"},
    {"line", PathWord::line, true, "#line"},
};

// The text from the start of pos's line to pos.
std::string_view line_before(std::string_view text, std::size_t pos) {
  std::size_t start = pos;
  while (start > 0 && !is_line_end(text[start - 1])) --start;
  return text.substr(start, pos - start);
}

// Whether a word after `prefix` on its line may stand in a directive: '#' (or %:, ??=) before it, or a
// comment that began on an earlier line closing there (a directive goes on across a comment's newlines).
bool maybe_directive(std::string_view prefix) {
  return prefix.find('#') != npos || prefix.find("%:") != npos || prefix.find("?\?=") != npos ||
         prefix.find("*/") != npos;
}

// The macro a #define on the line around pos defines, when pos lies in its body; nullopt on any other line
// (or one this reading cannot parse: `#/**/define`, a comment closing before the '#').
std::optional<std::string_view> macro_defined_around(std::string_view text, std::size_t pos) {
  std::size_t start = pos, end = pos;
  while (start > 0 && !is_line_end(text[start - 1])) --start;
  while (end < text.size() && !is_line_end(text[end])) ++end;
  const LineShape s = shape_of(text.substr(start, end - start));
  if (!s.define || pos - start < s.body) return std::nullopt;
  return s.name;
}

void add_once(std::vector<std::string>& names, std::string_view name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.emplace_back(name);
}

// What one occurrence of a path word at `at` adds to out: false when nothing (a "line" that is no
// directive).
bool note_path_word(std::string_view text, std::size_t at, PathWord kind, PathExpansion& out) {
  const bool directive = maybe_directive(line_before(text, at));
  switch (kind) {
    case PathWord::file:
      if (!directive) {
        out.here = true;
      } else if (auto macro = macro_defined_around(text, at)) {
        add_once(out.macros, *macro);
      } else {
        out.anywhere = true;
      }
      return true;
    case PathWord::base_file:
      out.base = true;
      return true;
    case PathWord::anywhere:
      out.anywhere = true;
      return true;
    case PathWord::line:
      out.here = out.here || directive;
      return directive;
  }
  return false;
}

void scan_path_words(std::string_view text, PathExpansion& out) {
  for (const auto& w : kPathWords) {
    for (std::size_t pos = 0; pos < text.size();) {
      const void* hit = ::memmem(text.data() + pos, text.size() - pos, w.text.data(), w.text.size());
      if (hit == nullptr) break;
      const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
      pos = at + w.text.size();
      if (w.whole && ((at > 0 && is_ident(text[at - 1])) || (pos < text.size() && is_ident(text[pos])))) continue;
      if (!note_path_word(text, at, w.kind, out)) continue;
      if (out.spelling.empty()) out.spelling = w.spelling;
      if (w.kind != PathWord::file || out.anywhere) break;  // nothing more this word can add
    }
  }
}

}  // namespace

PathExpansion scan_path_expansions(std::string_view text) {
  PathExpansion out;
  each_reading(text, [&](std::string_view reading) { scan_path_words(reading, out); });
  return out;
}

namespace {

// The words a paste could build, and those of them a scan reads where written whole.
struct PieceWords {
  std::span<const std::string_view> words;  // every word a piece may be part of
  std::span<const std::string_view> whole;  // a word written whole: no piece (the word scans see it)
};
constexpr std::string_view kHasIncludePieceWords[] = {"__has_include_next", "__has_embed", "HAS_INCLUDE_NEXT",
                                                      "HAS_EMBED"};
constexpr std::string_view kHasIncludeWhole[] = {"__has_include", "__has_include_next", "__has_embed"};
constexpr std::string_view kPathPieceWords[] = {"__FILE__", "__BASE_FILE__", "__builtin_FILE", "source_location"};

bool is_piece(std::string_view id, const PieceWords& w) {
  if (id.size() < 3) return false;
  if (std::find(w.whole.begin(), w.whole.end(), id) != w.whole.end()) return false;
  return std::any_of(w.words.begin(), w.words.end(), [&](std::string_view word) { return word.find(id) != npos; });
}

bool is_param(const LineShape& s, std::string_view id) {
  return std::find(s.params.begin(), s.params.end(), id) != s.params.end();
}

// The identifier ending just before `end` (blanks skipped), or empty.
std::string_view ident_before(std::string_view line, std::size_t end) {
  while (end > 0 && is_blank(line[end - 1])) --end;
  std::size_t b = end;
  while (b > 0 && is_ident(line[b - 1])) --b;
  return line.substr(b, end - b);
}

// The ## (and %:%:) operands of a line. A line that is no #define whose parameters were read (an odd
// spelling, a comment before the '#') counts its operands as parameters: its arguments are unknown.
void scan_operands(std::string_view line, const LineShape& s, const PieceWords& w, PasteScan& out) {
  for (std::string_view op : {std::string_view("##"), std::string_view("%:%:")}) {
    for (std::size_t at = line.find(op, s.body); at != npos; at = line.find(op, at + op.size())) {
      if (!s.define) out.pastes_parameter = true;
      for (std::string_view id : {ident_before(line, at), ident_at(line, skip_blanks(line, at + op.size()))}) {
        if (id.empty()) continue;
        if (s.define && is_param(s, id)) out.pastes_parameter = true;
        if (!is_param(s, id) && is_piece(id, w)) out.operand_piece = true;
      }
    }
  }
}

// Whether the identifier at [b, e) of an ordinary line stands as a macro argument: after '(' or ',',
// before ',' or ')'.
bool argument_position(std::string_view line, std::size_t b, std::size_t e) {
  while (b > 0 && is_blank(line[b - 1])) --b;
  e = skip_blanks(line, e);
  return b > 0 && (line[b - 1] == '(' || line[b - 1] == ',') && e < line.size() && (line[e] == ',' || line[e] == ')');
}

// Whether the identifier at b is the operand of `defined` (`defined X`, `defined(X)`): not expanded, so
// no paste's piece.
bool after_defined(std::string_view line, std::size_t b) {
  while (b > 0 && (is_blank(line[b - 1]) || line[b - 1] == '(')) --b;
  return ident_before(line, b) == "defined";
}

// Whether the identifier at [b, e) of a #define line is its body's first or last token: a macro used as
// an argument hands those to a paste (`#define P1 __has_` then CAT2(P1, P2)).
bool body_end(std::string_view line, const LineShape& s, std::size_t b, std::size_t e) {
  if (!s.define) return false;
  const std::size_t first = skip_blanks(line, s.body);
  std::size_t last = line.size();
  while (last > first && is_blank(line[last - 1])) --last;
  return b == first || e == last;
}

// Weighs a line's identifiers that a paste may take: those in a macro argument's place, and the ends of
// a #define's body. Directive lines that expand nothing into a paste are passed over; ordinary code
// only with code_arguments.
void scan_line(std::string_view line, const PieceWords& w, bool code_arguments, PasteScan& out) {
  const LineShape s = shape_of(line);
  scan_operands(line, s, w, out);
  if (out.argument_piece || (s.directive && !s.counts) || (!s.directive && !code_arguments)) return;
  for (std::size_t i = s.body; i < line.size(); ++i) {
    if (!is_ident(line[i]) || (i > 0 && is_ident(line[i - 1]))) continue;
    const std::string_view id = ident_at(line, i);
    const std::size_t end = i + id.size();
    const bool weighed = !is_param(s, id) && !after_defined(line, i) &&
                         (argument_position(line, i, end) || body_end(line, s, i, end));
    if (weighed && is_piece(id, w)) {
      out.argument_piece = true;
      return;
    }
    i = end - 1;
  }
}

// Where a path macro's name stands on a line (MacroUses).
void note_macro_name(std::string_view line, const LineShape& s, std::size_t at, MacroUses& out) {
  if (s.define && at < s.body) return;  // the name being defined
  if (s.define) {
    add_once(out.defines, s.name);  // another path macro
  } else if (s.directive && !s.counts) {
    return;  // #ifdef, #undef: nothing expands
  } else if (s.directive || maybe_directive(line.substr(0, at))) {
    out.anywhere = true;  // a directive this scan cannot read (`#/**/define X WHERE`, after a comment)
  } else {
    out.uses = true;
  }
}

void scan_macro_line(std::string_view line, const std::vector<std::string>& macros, const PieceWords& pieces,
                     MacroUses& out) {
  const LineShape s = shape_of(line);
  scan_line(line, pieces, true, out.pastes);
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (!is_ident(line[i]) || (i > 0 && is_ident(line[i - 1]))) continue;
    const std::string_view id = ident_at(line, i);
    if (std::find(macros.begin(), macros.end(), id) != macros.end()) note_macro_name(line, s, i, out);
    i += id.size() - 1;
  }
}

}  // namespace

MacroUses scan_macro_uses(std::string_view text, const std::vector<std::string>& macros) {
  MacroUses out;
  const std::vector<std::string_view> names(macros.begin(), macros.end());
  const PieceWords pieces{names, names};
  each_reading(text, [&](std::string_view reading) {
    each_line(reading, [&](std::string_view line) { scan_macro_line(line, macros, pieces, out); });
  });
  return out;
}

namespace {
void scan_pastes_in(std::string_view text, PasteScans& out) {
  const PieceWords has_include{kHasIncludePieceWords, kHasIncludeWhole};
  const PieceWords path{kPathPieceWords, kPathPieceWords};
  each_line(text, [&](std::string_view line) {
    scan_line(line, has_include, false, out.has_include);
    scan_line(line, path, true, out.path);
  });
}
}  // namespace

PasteScans scan_pastes(std::string_view text) {
  PasteScans out;
  each_reading(text, [&](std::string_view reading) { scan_pastes_in(reading, out); });
  return out;
}

}  // namespace kache::core
