#include "core/path_roots.hpp"

#include <algorithm>

#include "util/fs.hpp"
#include "util/text.hpp"

namespace kache::core {

namespace {
// Placeholders cannot occur in a dependency file: make syntax has no control characters.
std::string placeholder(std::size_t index) { return "\x01" + std::to_string(index) + "\x01"; }

std::string escape_make(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ') out += '\\';
    out += c;
  }
  return out;
}

bool make_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Replaces `from` where it starts a make token and ends at a path component's end ('/', the token's
// end, or the rule's colon): "/w/src/old" must not turn the literal "/w/src/older/h.h" into another
// checkout's "/z/src/older/h.h", nor touch a relative path that happens to contain it.
std::string replace_leading_path(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = text.find(from, pos)) != std::string::npos;) {
    const std::size_t end = hit + from.size();
    const bool starts = hit == 0 || make_space(text[hit - 1]);
    const bool ends = end == text.size() || text[end] == '/' || text[end] == ':' || make_space(text[end]);
    out.append(text, pos, hit - pos);
    if (starts && ends) {
      out += to;
      pos = end;
    } else {
      out += text[hit];
      pos = hit + 1;
    }
  }
  out.append(text, pos);
  return out;
}

}  // namespace

PathRoots::PathRoots(std::vector<Root> roots) {
  for (auto& r : roots) {
    if (r.path.empty() || r.path == "/") continue;  // "/" would remap the whole system
    bool dup = std::any_of(roots_.begin(), roots_.end(), [&](const Root& x) { return x.path == r.path; });
    if (!dup) roots_.push_back(std::move(r));
  }
  by_length_.resize(roots_.size());
  for (std::size_t i = 0; i < roots_.size(); ++i) by_length_[i] = i;
  std::stable_sort(by_length_.begin(), by_length_.end(),
                   [&](std::size_t a, std::size_t b) { return roots_[a].path.size() > roots_[b].path.size(); });
}

RootedPath PathRoots::split(const std::string& abs) const {
  for (std::size_t i : by_length_) {
    if (util::path_starts_with(abs, roots_[i].path)) {
      return RootedPath{static_cast<int>(i), abs.substr(roots_[i].path.size())};
    }
  }
  return RootedPath{-1, abs};
}

std::string PathRoots::join(const RootedPath& p) const {
  if (p.root < 0 || static_cast<std::size_t>(p.root) >= roots_.size()) return p.rest;
  return roots_[p.root].path + p.rest;
}

std::string PathRoots::key_form(const RootedPath& p) const {
  if (p.root < 0 || static_cast<std::size_t>(p.root) >= roots_.size()) return p.rest;
  return roots_[p.root].name + p.rest;
}

std::vector<std::string> PathRoots::prefix_map_flags() const {
  std::vector<std::string> flags;
  for (auto it = by_length_.rbegin(); it != by_length_.rend(); ++it) {
    for (const char* kind : {"-fmacro-prefix-map=", "-fdebug-prefix-map="}) {
      flags.push_back(kind + roots_[*it].path + "=" + roots_[*it].name);
    }
  }
  return flags;
}

std::string PathRoots::templatize(const std::string& text) const {
  std::string out = text;
  for (std::size_t i : by_length_) out = replace_leading_path(out, escape_make(roots_[i].path), placeholder(i));
  return out;
}

std::string PathRoots::instantiate(const std::string& text) const {
  std::string out = text;
  for (std::size_t i = 0; i < roots_.size(); ++i) util::replace_all(out, placeholder(i), escape_make(roots_[i].path));
  return out;
}

std::string PathRoots::templatize_text(const std::string& text) const {
  std::string out = text;
  for (std::size_t i : by_length_) util::replace_all(out, roots_[i].path, placeholder(i));
  return out;
}

std::string PathRoots::instantiate_text(const std::string& text) const {
  std::string out = text;
  for (std::size_t i = 0; i < roots_.size(); ++i) util::replace_all(out, placeholder(i), roots_[i].path);
  return out;
}

}  // namespace kache::core
