#include "core/path_roots.hpp"

#include <algorithm>

#include <fmt/format.h>

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

// Whether text[pos, pos + len) is a whole path or its leading directories in make syntax: it starts a
// token (at the start of the text or after unescaped whitespace) and ends where a path component
// ends ('/', whitespace, a line continuation, the end). A root's spelling inside another path
// ("/p/build" in "/home/p/build/x.h", "/p/buildx/y.h" or "/p/build:x") is not that root.
bool is_path_prefix_at(const std::string& text, std::size_t pos, std::size_t len) {
  if (pos > 0) {
    const char before = text[pos - 1];
    if (before != ' ' && before != '\t' && before != '\n' && before != '\r') return false;
    // "\ " is a space inside a path; "\\ " is a backslash, then the separator.
    std::size_t backslashes = 0;
    while (backslashes + 1 < pos && text[pos - 2 - backslashes] == '\\') ++backslashes;
    if (before == ' ' && backslashes % 2 == 1) return false;
  }
  const std::size_t end = pos + len;
  if (end == text.size()) return true;
  const char after = text[end];
  if (after == '/' || after == ' ' || after == '\t' || after == '\n' || after == '\r') return true;
  return after == '\\' && end + 1 < text.size() && (text[end + 1] == '\n' || text[end + 1] == '\r');
}

// Replaces each occurrence of `path` that names the path itself or a file below it (above).
void replace_path_prefixes(std::string& text, const std::string& path, const std::string& with) {
  if (path.empty()) return;
  std::string out;
  std::size_t copied = 0;
  for (std::size_t hit = text.find(path); hit != std::string::npos; hit = text.find(path, hit + 1)) {
    if (hit < copied || !is_path_prefix_at(text, hit, path.size())) continue;
    out.append(text, copied, hit - copied);
    out += with;
    copied = hit + path.size();
  }
  if (copied == 0) return;
  out.append(text, copied);
  text = std::move(out);
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
  // Equal lengths keep the given order. std::sort with the index as tie-break, not std::stable_sort:
  // libstdc++ 12's stable_sort uses std::get_temporary_buffer, which clang 19 warns is deprecated.
  std::sort(by_length_.begin(), by_length_.end(), [&](std::size_t a, std::size_t b) {
    const std::size_t la = roots_[a].path.size(), lb = roots_[b].path.size();
    return la != lb ? la > lb : a < b;
  });
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

PathRoots::KeyedValue PathRoots::key_value(const std::string& value) const {
  if (value.empty() || value[0] != '/') return {value, "relative: as spelled"};
  const RootedPath p = split(value);
  if (p.root < 0) return {value, roots_.empty() ? "literal: path normalization is off" : "literal: outside every root"};
  const Root& r = roots_[static_cast<std::size_t>(p.root)];
  return {key_form(p), "normalized: below " + r.name + " = " + r.path};
}

PathRoots::KeyedValue PathRoots::key_list(const std::string& value, char separator) const {
  KeyedValue out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = value.find(separator, start);
    KeyedValue one = key_value(value.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (start > 0) {
      out.form += separator;
      out.why += "; ";
    }
    out.form += one.form;
    out.why += one.why;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
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
  for (std::size_t i : by_length_) {
    replace_path_prefixes(out, escape_make(roots_[i].path), placeholder(i));
  }
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

std::string describe_path_keys(const std::vector<std::string>& base_dirs, bool normalize, const std::string& cwd) {
  if (!normalize) {
    return "path keys: literal (nvcc.path_normalize = false): every path and flag value keyed as written\n";
  }
  std::string out = "path keys (a compile run from this directory):\n";
  out += fmt::format("  {:<13} = {} (the working directory)\n", "/kache/build", util::lexically_normal(cwd));
  out += fmt::format("  {:<13} = the source's directory\n", "/kache/src");
  out += fmt::format("  {:<13} = the output's directory\n", "/kache/out");
  for (std::size_t i = 0; i < base_dirs.size(); ++i) {
    out += fmt::format("  {:<13} = {} (paths.base_dirs)\n", "/kache/base" + std::to_string(i),
                       util::absolute_path(base_dirs[i], cwd));
  }
  out +=
      "  absolute -I/-isystem/-include/-MT values and the source below a root: keyed as the root's name + the rest\n"
      "  absolute values outside every root: literal; relative values: as spelled\n"
      "  -o, -MF and a single -MT: not keyed (a miss writes them elsewhere; the depfile's target is a placeholder)\n"
      "  -lineinfo: the source's path as nvcc resolves it is keyed literally (device code names it)\n"
      "  KACHE_LOG=kache=trace shows each path of a compile as keyed, and why\n";
  return out;
}

}  // namespace kache::core
