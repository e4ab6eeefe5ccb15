#include "core/watch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/expansion_scan.hpp"
#include "util/clock.hpp"
#include "util/fs.hpp"

namespace kache::core {

namespace {
bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The macro name a `#define` on pos's line defines (nullopt when that line is no #define).
std::optional<std::string_view> defined_name(std::string_view text, std::size_t pos) {
  std::size_t start = text.rfind('\n', pos);
  start = start == std::string_view::npos ? 0 : start + 1;
  std::string_view line = text.substr(start, pos - start);
  std::size_t i = line.find_first_not_of(" \t");
  if (i == std::string_view::npos || line[i] != '#') return std::nullopt;
  i = line.find_first_not_of(" \t", i + 1);
  if (i == std::string_view::npos || !line.substr(i).starts_with("define")) return std::nullopt;
  // The name may run past pos (the occurrence itself can be the name being defined).
  std::size_t b = text.find_first_not_of(" \t", start + i + 6);
  std::size_t e = b;
  while (e < text.size() && is_ident(text[e])) ++e;
  return text.substr(b == std::string_view::npos ? text.size() : b, e - b);
}

// The identifiers this scan matches as a use (see scan_has_include). __has_embed (C23, clang 19) tests
// for a file on the include path (and --embed-dir) as __has_include does.
constexpr std::string_view kHasIncludeWords[] = {"has_include", "HAS_INCLUDE", "has_embed", "HAS_EMBED"};

bool matched_by_scan(std::string_view name) {
  for (std::string_view suffix : {"_next", "_NEXT", ""}) {
    if (!name.ends_with(suffix)) continue;
    std::string_view stem = name.substr(0, name.size() - suffix.size());
    for (std::string_view w : kHasIncludeWords) {
      if (stem.ends_with(w)) return true;
    }
  }
  return false;
}

struct HiddenInputMarker {
  std::string_view text;
  std::string_view reason;  // counted as not_stored.<reason>
};

// Spellings of inputs that a tool of the compile reads but no -MD list names. Matched as whole
// tokens (no identifier character on either side), anywhere, comments included: a false match only
// costs a store, a missed one would serve a stale object.
constexpr HiddenInputMarker kHiddenInputMarkers[] = {
    // asm(".incbin \"blob\"") in host code: the assembler copies the file into the object, resolving
    // it against its cwd and its own -I; the preprocessor never sees it as a file.
    {".incbin", "incbin"},
    // asm(".include \"x.s\"") in host code: the assembler reads x.s as source, same resolution.
    {".include", "asm-include"},
    // The preprocessed file's mtime, formatted in local time (TZ): neither is in the closure's content,
    // and SOURCE_DATE_EPOCH does not pin it (measured with GCC 12 and cudafe++ 13).
    {"__TIMESTAMP__", "timestamp"},
};
}  // namespace

namespace {
void scan_has_include_in(std::string_view text, std::vector<std::string>& names, bool& opaque) {
  for (std::string_view word : kHasIncludeWords) {
    std::size_t pos = 0;
    while (true) {
      // memmem (glibc's vectorized search): this runs over every byte of every header a miss read.
      const void* hit = ::memmem(text.data() + pos, text.size() - pos, word.data(), word.size());
      if (hit == nullptr) break;
      pos = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
      const std::size_t at = pos;
      pos += word.size();
      if (text.substr(pos).starts_with("_next") || text.substr(pos).starts_with("_NEXT")) pos += 5;
      if (pos < text.size() && is_ident(text[pos])) continue;  // part of a longer identifier
      std::size_t i = pos;
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\f' || text[i] == '\v')) ++i;
      // `__has_include/**/("x.h")` or a name continued on the next line: a use this scan cannot read.
      if (i < text.size() && (text[i] == '\\' || text.substr(i).starts_with("/*"))) {
        opaque = true;
        continue;
      }
      const bool call = i < text.size() && text[i] == '(';
      if (!call) {
        // `#ifdef __has_include`, `defined(__has_include)` test for it; `#define HAVE __has_include`
        // renames it, and HAVE(<x>) is then a use this scan cannot see.
        auto def = defined_name(text, at);
        if (def && !matched_by_scan(*def)) opaque = true;
        continue;
      }
      ++i;
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i < text.size() && (text[i] == '<' || text[i] == '"')) {
        const char close = text[i] == '<' ? '>' : '"';
        const std::size_t end = text.find(close, i + 1);
        if (end != std::string_view::npos && text.substr(i + 1, end - i - 1).find('\n') == std::string_view::npos) {
          names.emplace_back(text.substr(i + 1, end - i - 1));
        }
        continue;
      }
      // A computed argument: only a #define of a name this scan matches (the wrapper's own uses then
      // carry the literal names, or are themselves opaque) keeps the list complete.
      auto def = defined_name(text, at);
      if (!def || !matched_by_scan(*def)) opaque = true;
    }
  }
}
}  // namespace

void scan_has_include(std::string_view text, std::vector<std::string>& names, bool& opaque) {
  scan_has_include_in(text, names, opaque);
  // A name split by a line splice (`__has_\<newline>include("x.h")`) is whole to the compiler: the text
  // is read spliced too (and with trigraph splices where "??/" could be one). Names found either way are
  // recorded; an extra one only costs a watch.
  if (has_line_splice(text, false)) scan_has_include_in(splice_lines(text, false), names, opaque);
  if (text.find("?\?/") != std::string_view::npos && has_line_splice(text, true)) {
    scan_has_include_in(splice_lines(text, true), names, opaque);
  }
}

namespace {

enum class DirectiveForm { none, plain, unsure };

bool is_line_end(char c) { return c == '\n' || c == '\r'; }

// Characters that may stand between a line's start and a directive's name in some spelling a
// preprocessor accepts: blanks (\f and \v too), '#', the digraph %: and the trigraph ??=, a spliced
// line's backslash, and a UTF-8 byte order mark at the file's start.
bool directive_punctuation(char c) {
  return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '#' || c == '%' || c == ':' || c == '?' ||
         c == '=' || c == '\\' || c == '\xEF' || c == '\xBB' || c == '\xBF';
}

// What the text from a line's start to an "include"/"import" word makes of it: `#include` spelled the
// usual way (plain), no directive at all (none), or some spelling this scan does not read (unsure: a
// comment before or after the '#', %:, ??=, \f, a byte order mark, a line spliced by a backslash).
DirectiveForm directive_form(std::string_view text, std::size_t line_start, std::size_t at) {
  std::string prefix(text.substr(line_start, at - line_start));
  // A comment closing here may have opened on an earlier line (`/* ...` then ` ... */ #include "x.h"`):
  // to the compiler it is blank, and what follows it may be a directive. Read so, a line inside no
  // comment (`// */ #include "x.h"`) only records one more name.
  if (const std::size_t close = prefix.find("*/"); close != std::string::npos && close < prefix.find("/*")) {
    prefix.erase(0, close + 2);
  }
  std::size_t blanks = prefix.find_first_not_of(" \t");
  if (blanks != std::string::npos && prefix[blanks] == '#' &&
      prefix.find_first_not_of(" \t", blanks + 1) == std::string::npos) {
    return DirectiveForm::plain;
  }
  // Closed comments are blanks to the preprocessor; what is left must be punctuation only.
  for (std::size_t c = prefix.find("/*"); c != std::string::npos; c = prefix.find("/*")) {
    const std::size_t e = prefix.find("*/", c + 2);
    if (e == std::string::npos) return DirectiveForm::none;  // the word is inside a comment
    prefix.replace(c, e + 2 - c, " ");
  }
  if (!std::all_of(prefix.begin(), prefix.end(), directive_punctuation)) return DirectiveForm::none;
  if (prefix.find_first_of("#%?\\") != std::string::npos || (line_start == 0 && !prefix.empty())) {
    return DirectiveForm::unsure;
  }
  // Blanks only: a directive if the line before ends in a backslash (`#\` then `include` below it).
  std::size_t before = line_start;
  if (before > 0 && text[before - 1] == '\n') --before;
  if (before > 0 && text[before - 1] == '\r') --before;
  return before > 0 && text[before - 1] == '\\' ? DirectiveForm::unsure : DirectiveForm::none;
}

// A directive's name split by a backslash-newline (`#inc\` then `lude`): a line that is a '#' (or %:,
// ??=) and the start of a name, ending in a backslash.
bool has_spliced_directive_name(std::string_view text) {
  for (std::size_t p = text.find('\\'); p != std::string_view::npos; p = text.find('\\', p + 1)) {
    const std::size_t next = p + 1;
    if (next >= text.size() || !is_line_end(text[next])) continue;
    std::size_t start = p;
    while (start > 0 && !is_line_end(text[start - 1])) --start;
    std::string_view line = text.substr(start, p - start);
    std::size_t i = line.find_first_not_of(" \t\f\v");
    if (i == std::string_view::npos) continue;
    if (line.substr(i).starts_with("%:")) {
      i += 2;
    } else if (line.substr(i).starts_with("?\?=")) {
      i += 3;
    } else if (line[i] == '#') {
      i += 1;
    } else {
      continue;
    }
    i = std::min(line.find_first_not_of(" \t\f\v", i), line.size());
    while (i < line.size() && is_ident(line[i])) ++i;
    if (i == line.size()) return true;
  }
  return false;
}

}  // namespace

void scan_include_names(std::string_view text, std::vector<std::string>& names, bool& opaque) {
  // #import (GCC accepts it in C and C++ too) names a file as #include does.
  for (const std::string_view word : {std::string_view("include"), std::string_view("import")}) {
    std::size_t pos = 0;
    while (true) {
      const void* hit = ::memmem(text.data() + pos, text.size() - pos, word.data(), word.size());
      if (hit == nullptr) break;
      const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
      pos = at + word.size();
      if (at > 0 && is_ident(text[at - 1])) continue;  // part of a longer identifier
      if (word == "include" && text.substr(pos).starts_with("_next")) pos += 5;
      if (pos < text.size() && is_ident(text[pos])) continue;  // #includes, #include_foo: no directive
      std::size_t line_start = at;
      while (line_start > 0 && !is_line_end(text[line_start - 1])) --line_start;
      const DirectiveForm form = directive_form(text, line_start, at);
      if (form == DirectiveForm::none) continue;
      if (form == DirectiveForm::unsure) {
        opaque = true;
        continue;
      }
      std::size_t i = pos;
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i < text.size() && (text[i] == '<' || text[i] == '"')) {
        const char close = text[i] == '<' ? '>' : '"';
        const std::size_t end = text.find_first_of(std::string_view(&close, 1), i + 1);
        if (end != std::string_view::npos && text.substr(i + 1, end - i - 1).find_first_of("\n\r") == std::string_view::npos) {
          names.emplace_back(text.substr(i + 1, end - i - 1));
          continue;
        }
      }
      // #include MACRO (or `/* c */ MACRO`, a line continued with '\\', a '$' or UTF-8 name): the
      // target cannot be listed. Only `#include ...` (stb_image.h's usage comment) and an empty
      // #include are passed over: no compiler accepts either, so where one is live the compile fails
      // and nothing is stored.
      const bool no_directive = i < text.size() && (text[i] == '.' || is_line_end(text[i]));
      if (!no_directive) opaque = true;
    }
  }
  if (!opaque && has_spliced_directive_name(text)) opaque = true;
}

std::string_view scan_hidden_inputs(std::string_view text, bool assembler_markers) {
  for (const auto& m : kHiddenInputMarkers) {
    if (!assembler_markers && m.reason != "timestamp") continue;
    std::size_t pos = 0;
    while (true) {
      const void* hit = ::memmem(text.data() + pos, text.size() - pos, m.text.data(), m.text.size());
      if (hit == nullptr) break;
      const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
      pos = at + m.text.size();
      if (at > 0 && is_ident(text[at - 1]) && is_ident(m.text.front())) continue;
      if (pos < text.size() && is_ident(text[pos])) continue;
      return m.reason;
    }
  }
  return {};
}

std::vector<std::string_view> hidden_input_reasons() {
  std::vector<std::string_view> out;
  for (const auto& m : kHiddenInputMarkers) out.push_back(m.reason);
  out.push_back(kPragmaDependency);
  return out;
}

bool names_pragma_dependency(std::string_view text) {
  constexpr std::string_view kWord = "dependency";
  for (std::size_t pos = 0;;) {
    const void* hit = ::memmem(text.data() + pos, text.size() - pos, kWord.data(), kWord.size());
    if (hit == nullptr) return false;
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    pos = at + kWord.size();
    if (pos < text.size() && is_ident(text[pos])) continue;
    // The word before it, across blanks: `#pragma GCC dependency`, `_Pragma("GCC dependency ...")`.
    std::size_t e = at;
    while (e > 0 && (text[e - 1] == ' ' || text[e - 1] == '\t')) --e;
    if (e == at) continue;
    std::size_t b = e;
    while (b > 0 && is_ident(text[b - 1])) --b;
    const std::string_view before = text.substr(b, e - b);
    if (before == "GCC" || before == "clang") return true;
  }
}

bool may_read_assembler_inputs(std::string_view preprocessed) {
  // Adjacent string literals joined (".inc" "bin" is ".incbin" to the assembler), folded to lower case
  // (directives are case-insensitive: .INCBIN in a .S file).
  std::string joined;
  joined.reserve(preprocessed.size());
  for (std::size_t i = 0; i < preprocessed.size(); ++i) {
    const char c = preprocessed[i];
    if (c == '"') {
      std::size_t j = i + 1;
      while (j < preprocessed.size() && std::isspace(static_cast<unsigned char>(preprocessed[j]))) ++j;
      if (j < preprocessed.size() && preprocessed[j] == '"' && !joined.empty()) {
        i = j;  // the closing quote, the blanks and the next opening quote go
        continue;
      }
    }
    joined.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  // The directives, and the assembler's own ways of building names (macro argument concatenation
  // `\()`, .altmacro's `&`), which could spell one no literal shows.
  for (std::string_view needle : {std::string_view(".incbin"), std::string_view(".include"),
                                  std::string_view("\\()"), std::string_view(".altmacro")}) {
    if (::memmem(joined.data(), joined.size(), needle.data(), needle.size()) != nullptr) return true;
  }
  return false;
}

namespace {

// Directories consulted: the search path plus the directories of project files (quoted includes
// look in the including file's directory first).
std::vector<std::string> consulted_dirs(const std::vector<std::string>& closure,
                                        const std::vector<std::string>& search_dirs,
                                        const std::vector<std::string>& system_dirs) {
  auto is_system = [&](const std::string& p) {
    return std::any_of(system_dirs.begin(), system_dirs.end(),
                       [&](const std::string& s) { return util::path_starts_with(p, s); });
  };
  std::vector<std::string> consulted = search_dirs;
  std::unordered_set<std::string> consulted_set(search_dirs.begin(), search_dirs.end());
  for (const auto& f : closure) {
    if (is_system(f)) continue;
    std::string d = util::dirname(f);
    if (consulted_set.insert(d).second) consulted.push_back(d);
  }
  return consulted;
}

// The walk behind watch_set: what it stat'ed (memoized, numbered in the order taken), the paths it
// found missing (out, in order, once each) and the tested names it found present.
class WatchWalk {
 public:
  WatchWalk(const std::vector<std::string>& closure, Observations& memo, std::vector<std::string>* present)
      : closure_set_(closure.begin(), closure.end()), memo_(memo), next_order_(memo.size()), present_(present) {}

  // Records what guarantees dir/rel keeps not existing, walking down from dir.
  void candidate(const std::string& dir, std::string_view rel, bool tested) {
    if (!exists(dir)) {
      record(dir);
      return;
    }
    std::string cur = dir;
    std::size_t start = 0;
    while (true) {
      std::size_t slash = rel.find('/', start);
      std::string_view comp =
          rel.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
      cur += '/';
      cur += comp;
      if (slash == std::string_view::npos) {
        if (closure_set_.count(cur)) return;
        if (!exists(cur)) {
          record(cur);
        } else if (tested && present_ && present_seen_.insert(cur).second) {
          present_->push_back(cur);
        }
        return;
      }
      if (!exists(cur)) {
        record(cur);
        return;
      }
      start = slash + 1;
    }
  }

  std::vector<std::string> take_missing() { return std::move(out_); }

 private:
  bool exists(const std::string& p) {
    auto it = memo_.find(p);
    if (it == memo_.end()) {
      auto id = util::stat_identity(p);
      it = memo_.emplace(p, Observed{id, next_order_++, util::file_clock_now_ns()}).first;
    }
    return it->second.id.has_value();
  }
  void record(const std::string& path) {
    if (seen_.insert(path).second) out_.push_back(path);
  }

  std::unordered_set<std::string> closure_set_;
  Observations& memo_;
  std::uint64_t next_order_;
  std::vector<std::string>* present_;
  std::unordered_set<std::string> present_seen_;
  std::unordered_set<std::string> seen_;
  std::vector<std::string> out_;
};

}  // namespace

std::vector<std::string> watch_set(const std::vector<std::string>& closure, const std::vector<std::string>& search_dirs,
                                   const std::vector<std::string>& system_dirs,
                                   const std::vector<std::string>& has_include_names, Observations* observed,
                                   std::vector<std::string>* present, bool precompiled_headers) {
  // stat results, memoized, numbered in the order they were taken.
  Observations local;
  WatchWalk walk(closure, observed ? *observed : local, present);
  const std::vector<std::string> consulted = consulted_dirs(closure, search_dirs, system_dirs);
  for (const auto& f : closure) {
    if (precompiled_headers) walk.candidate(util::dirname(f), util::basename(f) + ".gch", false);
    for (const auto& s : search_dirs) {
      if (f.size() <= s.size() + 1 || !util::path_starts_with(f, s)) continue;
      std::string_view rel = std::string_view(f).substr(s == "/" ? 1 : s.size() + 1);
      const std::string rel_pch = std::string(rel) + ".gch";
      for (const auto& t : consulted) {
        if (t != s) walk.candidate(t, rel, false);
        if (precompiled_headers) walk.candidate(t, rel_pch, false);
      }
    }
  }
  for (const auto& name : has_include_names) {
    if (name.empty() || name.front() == '/') continue;
    for (const auto& t : consulted) walk.candidate(t, util::lexically_normal(name), true);
  }
  return walk.take_missing();
}

std::pair<std::string, std::string> split_last(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

namespace {
// The listing of `dir` as it was under `guard` (a trusted identity taken before `names` were confirmed
// missing): read now, then the directory stat'ed again. An unchanged identity means no entry was
// created, removed or renamed since the guard, so these are the names of that moment. nullopt when the
// identity moved, the directory cannot be read, or a watched name is an entry after all (exists() said
// missing: a dangling link, whose target may appear without this directory changing).
std::optional<util::Digest> guarded_listing(const std::string& dir, const util::FileIdentity& guard,
                                            const std::vector<std::string>& names) {
  auto listed = directory_names(dir);
  if (!listed) return std::nullopt;
  auto after = util::stat_identity(dir);
  if (!after || !(*after == guard)) return std::nullopt;
  for (const auto& n : names) {
    if (std::binary_search(listed->begin(), listed->end(), n)) return std::nullopt;
  }
  return names_digest(*listed);
}
}  // namespace

std::optional<std::vector<AbsentGroup>> group_absent(
    const std::vector<std::string>& absent, const std::vector<std::string>& system_dirs,
    const std::function<bool(const std::string&, const util::FileIdentity&, std::int64_t)>& trusted,
    const Observations* observed) {
  std::vector<AbsentGroup> groups;
  std::unordered_map<std::string, std::size_t> index;
  for (const auto& path : absent) {
    auto [dir, name] = split_last(path);
    auto it = index.find(dir);
    if (it == index.end()) {
      it = index.emplace(dir, groups.size()).first;
      groups.push_back({dir, std::nullopt, {}, std::nullopt});
    }
    groups[it->second].names.push_back(std::move(name));
  }
  auto seen = [&](const std::string& p) -> const Observed* {
    if (!observed) return nullptr;
    auto it = observed->find(p);
    return it == observed->end() ? nullptr : &it->second;
  };
  auto join = [](const std::string& dir, const std::string& name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
  };
  for (auto& g : groups) {
    // The directory first, its names after: an entry created in between moves the recorded identity
    // past what a lookup will see, never the other way round.
    const Observed* d = seen(g.dir);
    const bool seen_first = d && d->id && std::all_of(g.names.begin(), g.names.end(), [&](const std::string& name) {
                              const Observed* n = seen(join(g.dir, name));
                              return n && !n->id && n->order > d->order;
                            });
    if (seen_first) {
      if (d->id->is_dir && trusted(g.dir, *d->id, d->clock_ns)) g.guard = d->id;
    } else {
      auto id = util::stat_identity(g.dir);
      const std::int64_t clock = util::file_clock_now_ns();
      if (id && id->is_dir && trusted(g.dir, *id, clock)) g.guard = id;
      for (const auto& name : g.names) {
        if (util::exists(join(g.dir, name))) return std::nullopt;
      }
    }
    const bool in_toolchain = std::any_of(system_dirs.begin(), system_dirs.end(),
                                          [&](const std::string& s) { return util::path_starts_with(g.dir, s); });
    if (g.guard && in_toolchain) {
      g.listing = guarded_listing(g.dir, *g.guard, g.names);
      g.names.clear();
    }
  }
  return groups;
}

std::optional<std::string> first_precompiled_header(const std::vector<std::string>& dirs) {
  std::unordered_set<std::string> seen;
  for (const auto& dir : dirs) {
    if (dir.empty() || !seen.insert(dir).second) continue;
    if (!util::exists(dir)) continue;  // nothing to read there (the watch covers its appearing)
    auto names = directory_names(dir);
    if (!names) return dir;
    for (const auto& n : *names) {
      if (n.size() > 4 && n.ends_with(".gch")) return dir + "/" + n;
    }
  }
  return std::nullopt;
}

namespace {
// The sorted names of an open directory stream (closed here), nullopt on a read error.
std::optional<std::vector<std::string>> read_names(DIR* d) {
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
    errno = 0;
  }
  const bool failed = errno != 0;
  ::closedir(d);
  if (failed) return std::nullopt;
  std::sort(names.begin(), names.end());
  return names;
}
}  // namespace

std::optional<std::vector<std::string>> directory_names(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return std::nullopt;
  return read_names(d);
}

util::Digest names_digest(const std::vector<std::string>& sorted_names) {
  util::Hasher h;
  h.add_field("kache-listing", "v1");
  for (const auto& n : sorted_names) h.add_field("name", n);
  return h.finish();
}

std::optional<util::Digest> listing_digest(const std::string& dir) {
  auto names = directory_names(dir);
  if (!names) return std::nullopt;
  return names_digest(*names);
}

std::optional<util::Digest> listing_digest_as(const std::string& dir, const util::FileIdentity& expected) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  if (auto before = util::fd_identity(fd); !before || !(*before == expected)) {
    ::close(fd);
    return std::nullopt;
  }
  const int check = ::dup(fd);  // the stream owns fd; its identity is asked again after the listing
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    if (check >= 0) ::close(check);
    return std::nullopt;
  }
  auto names = read_names(d);
  const auto after = check >= 0 ? util::fd_identity(check) : std::nullopt;
  if (check >= 0) ::close(check);
  if (!names || !after || !(*after == expected)) return std::nullopt;
  return names_digest(*names);
}

}  // namespace kache::core
