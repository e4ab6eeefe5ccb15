#include "core/depfile.hpp"

#include <stdexcept>
#include <unordered_set>

namespace kache::core {

namespace {
// Cannot occur in a dependency file (make syntax has no control characters), nor clash with the path
// roots' numbered placeholders.
constexpr std::string_view kTargetPlaceholder = "\x01t\x01";
}  // namespace

Depfile parse_depfile(const std::string& text) {
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
      // deps, later rules list no new dependencies of the object.
      if (in_deps) break;
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

}  // namespace kache::core
