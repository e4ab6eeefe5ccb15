#include "core/depfile.hpp"

#include <stdexcept>
#include <unordered_set>

namespace kache::core {

namespace {
// Cannot occur in a dependency file (make syntax has no control characters), nor clash with the path
// roots' numbered placeholders.
constexpr std::string_view kTargetPlaceholder = "\x01t\x01";
}  // namespace

Depfile parse_depfile(const std::string& text, bool all_rules) {
  Depfile out;
  std::unordered_set<std::string> seen;
  std::string token;
  bool in_deps = false;
  bool saw_colon = false;
  auto flush = [&] {
    if (token.empty()) return;
    if (!in_deps) {
      out.targets.push_back(token);
    } else if (seen.insert(token).second) {
      out.deps.push_back(token);
    }
    token.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      const char n = text[i + 1];
      if (n == '\n') {
        flush();
        ++i;
        continue;
      }  // line continuation
      if (n == '\r' && i + 2 < text.size() && text[i + 2] == '\n') {
        flush();
        i += 2;
        continue;
      }
      if (n == ' ' || n == '#' || n == '\\') {
        token += n;
        ++i;
        continue;
      }
      token += c;
      continue;
    }
    if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      token += '$';
      ++i;
      continue;
    }
    if (c == ':' && !in_deps &&
        (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\t' || text[i + 1] == '\n')) {
      flush();
      in_deps = true;
      saw_colon = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      flush();
      continue;
    }
    if (c == '\n') {
      flush();
      // A new rule starts on the next line (e.g. -MP phony targets); kache only reads the first rule's
      // deps, later rules list no new dependencies of the object (unless all_rules).
      if (in_deps && !all_rules) break;
      in_deps = false;
      continue;
    }
    token += c;
  }
  flush();
  if (!saw_colon) throw std::runtime_error("not a dependency file");
  return out;
}

std::string templatize_target(const std::string& text, const std::string& target) {
  if (target.empty() || !text.starts_with(target)) return text;
  const std::size_t end = target.size();
  // "o1/x.o : deps" or "o1/x.o: deps"; a longer target that merely starts alike is left alone.
  if (end < text.size() && text[end] != ' ' && text[end] != ':' && text[end] != '\t') return text;
  return std::string(kTargetPlaceholder) + text.substr(end);
}

std::string instantiate_target(const std::string& text, const std::string& target) {
  if (!text.starts_with(kTargetPlaceholder)) return text;
  return target + text.substr(kTargetPlaceholder.size());
}

namespace {

std::size_t unescaped_size(std::string_view word) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < word.size(); ++i, ++n) {
    const bool pair = i + 1 < word.size();
    if (pair && word[i] == '\\' && (word[i + 1] == ' ' || word[i + 1] == '#')) ++i;
    else if (pair && word[i] == '$' && word[i + 1] == '$') ++i;
  }
  return n;
}

// The empty rules after the first ("dep:" lines, blank lines between them as clang writes them).
bool add_phony_targets(std::string_view rest, DepfileRules& rules) {
  while (!rest.empty()) {
    const std::size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (line.empty()) continue;
    if (line.size() < 2 || line.back() != ':') return false;
    rules.phony_targets.emplace_back(line.substr(0, line.size() - 1));
  }
  return true;
}

}  // namespace

std::string_view layout_name(DepfileLayout layout) {
  switch (layout) {
    case DepfileLayout::gcc72: return "gcc72";
    case DepfileLayout::clang75: return "clang75";
    case DepfileLayout::clang75_packed: return "clang75-packed";
  }
  return "";
}

std::optional<DepfileLayout> parse_layout_name(std::string_view name) {
  for (const DepfileLayout l : {DepfileLayout::gcc72, DepfileLayout::clang75, DepfileLayout::clang75_packed}) {
    if (layout_name(l) == name) return l;
  }
  return std::nullopt;
}

std::optional<DepfileRules> tokenize_depfile(std::string_view text) {
  DepfileRules rules;
  bool in_deps = false;
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    (in_deps ? rules.deps : rules.targets).push_back({word, unescaped_size(word)});
    word.clear();
  };
  std::size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      if (text[i + 1] == '\n') flush();  // line continuation
      else word.append(text.substr(i, 2));  // an escaped character stays as written
      ++i;
    } else if (c == ':' && !in_deps && (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n')) {
      flush();
      in_deps = true;
    } else if (c == ' ' || c == '\t') {
      flush();
    } else if (c == '\n') {
      break;
    } else {
      word += c;
    }
  }
  flush();
  if (!in_deps || rules.targets.empty() || i == text.size()) return std::nullopt;
  if (!add_phony_targets(text.substr(i + 1), rules)) return std::nullopt;
  return rules;
}

std::string render_depfile(const DepfileRules& rules, DepfileLayout layout) {
  std::string out;
  std::size_t col = 0;
  if (layout == DepfileLayout::gcc72) {
    // libcpp make_write_name: a name that would pass column 72 starts a new line, counted escaped.
    auto write = [&](const DepfileWord& w) {
      if (col != 0) {
        if (col + w.text.size() > 72) {
          out += " \\\n";
          col = 0;
        }
        ++col;
        out += ' ';
      }
      col += w.text.size();
      out += w.text;
    };
    for (const auto& t : rules.targets) write(t);
    out += ':';
    ++col;
    for (const auto& d : rules.deps) write(d);
    out += '\n';
    for (const auto& p : rules.phony_targets) out += p + ":\n";
    return out;
  }
  // clang DependencyFileGenerator::outputDependencyFile: targets counted as written, dependencies
  // unescaped, lines kept within 75 columns with room for the " \\".
  for (std::size_t t = 0; t < rules.targets.size(); ++t) {
    const std::size_t n = rules.targets[t].text.size();
    if (t == 0) {
      col += n;
    } else if (col + n + 2 > 75) {
      out += " \\\n  ";
      col = n + 2;
    } else {
      out += ' ';
      col += n + 1;
    }
    out += rules.targets[t].text;
  }
  out += ':';
  ++col;
  for (const auto& d : rules.deps) {
    if (col + (d.unescaped_size + 1) + 2 > 75) {
      out += " \\\n ";
      col = 2;
    }
    out += ' ';
    out += d.text;
    col += d.unescaped_size + 1;
  }
  out += '\n';
  for (const auto& p : rules.phony_targets) out += (layout == DepfileLayout::clang75 ? "\n" : "") + p + ":\n";
  return out;
}

bool layout_reproduces(std::string_view text, DepfileLayout layout) {
  const std::optional<DepfileRules> rules = tokenize_depfile(text);
  return rules && render_depfile(*rules, layout) == text;
}

std::optional<DepfileLayout> depfile_layout_of(std::string_view text, const std::vector<DepfileLayout>& candidates) {
  for (const DepfileLayout l : candidates) {
    if (layout_reproduces(text, l)) return l;
  }
  return std::nullopt;
}

std::string rewrap_depfile(const std::string& text, DepfileLayout layout) {
  const std::optional<DepfileRules> rules = tokenize_depfile(text);
  return rules ? render_depfile(*rules, layout) : text;
}

}  // namespace kache::core
