#pragma once
// Path normalization for sharing entries between checkouts (spec: "Remote sharing").
// A set of roots (build dir, source dir, output dir, [paths] base_dirs) each get a fixed name; paths
// under a root are keyed by that name, and the compiler is told the same mapping through
// -ffile-prefix-map so the object names the fixed names too.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kache::core {

// A path split into (root index, rest); root -1 means "literal absolute path".
struct RootedPath {
  int root = -1;
  std::string rest;  // for root >= 0: the part after the root, starting with '/' or empty
  bool operator==(const RootedPath&) const = default;
};

class PathRoots {
 public:
  struct Root {
    std::string path;  // absolute, lexically normal
    std::string name;  // fixed name, e.g. "/kache/build"
  };
  PathRoots() = default;
  // Roots in priority order; identical paths keep the first name. Empty means "no normalization".
  explicit PathRoots(std::vector<Root> roots);

  bool enabled() const { return !roots_.empty(); }
  const std::vector<Root>& roots() const { return roots_; }

  // abs: an absolute path, spelled as the compiler spelled it (not normalized: "/b/../include/h.h"
  // stays below the root "/b", so in another checkout it resolves the way the compiler resolves it).
  RootedPath split(const std::string& abs) const;
  std::string join(const RootedPath& p) const;      // back to this checkout's path
  std::string key_form(const RootedPath& p) const;  // with the fixed name, for hashing
  std::string key_form(const std::string& abs) const { return key_form(split(abs)); }

  // How a path written in a flag value is keyed, and why (for KACHE_LOG=kache=trace). An absolute path
  // below a root becomes the root's fixed name plus the rest (the miss's prefix maps write the same
  // name into the object, the depfile and diagnostics are stored with the root as a placeholder), one
  // outside every root stays literal, a relative one stays as spelled (the compiler writes it as
  // spelled; the working directory it is resolved against is the build root).
  struct KeyedValue {
    std::string form;
    std::string why;
  };
  KeyedValue key_value(const std::string& value) const;
  // The same for a list (nvcc splits -I/-isystem values on commas): each element keyed on its own.
  KeyedValue key_list(const std::string& value, char separator) const;

  // -fmacro-prefix-map=<root>=<name> and -fdebug-prefix-map=<root>=<name> rules, ordered so GCC (which
  // lets the last matching rule win) applies the longest root first. Not -ffile-prefix-map: GCC 12
  // lets any -ffile-prefix-map beat every -fmacro-prefix-map whatever the order, so a user's own
  // -fmacro-prefix-map could never win over kache's rules; separate rules put before the user's lose
  // to each of the user's.
  std::vector<std::string> prefix_map_flags() const;

  // Replaces root spellings in text by placeholders / placeholders by roots (dependency files).
  std::string templatize(const std::string& text) const;
  std::string instantiate(const std::string& text) const;
  // The same for plain text (the compiler's diagnostics): paths as written, without make's escaping.
  std::string templatize_text(const std::string& text) const;
  std::string instantiate_text(const std::string& text) const;

 private:
  std::vector<Root> roots_;             // priority order, deduplicated
  std::vector<std::size_t> by_length_;  // indices, longest path first
};

// For kache --show-config: the roots a compile in `cwd` gets (the working directory, each base dir;
// the source's and the output's directories are per compile) and how path values are keyed.
std::string describe_path_keys(const std::vector<std::string>& base_dirs, bool normalize, const std::string& cwd);

}  // namespace kache::core
