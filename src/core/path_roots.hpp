#pragma once
// Path normalization for sharing entries between checkouts (spec: "Remote sharing").
// A set of roots (build dir, source dir, output dir, [paths] base_dirs) each get a fixed name; paths
// under a root are keyed by that name. The object names this checkout's real paths (issue 27): a miss
// maps each root in debug info to a fixed-length placeholder, the entry stores the object with the
// placeholders and where they lie, and the object installed or restored has each placeholder replaced
// in place by the real root, left-padded with '/' to the same length (see PathPatch).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/elf.hpp"

namespace kache::core {

// The length of every debug-info placeholder, and so the longest root a placeholder can stand for.
// 160 covers deep CI workspaces (/builds/<runner>/<id>/<group>/<project>/build, Jenkins
// workspace@2 paths: 60-100 characters) with room; each directory string under a root in the debug
// info grows to this length, a few hundred bytes per object. A longer root gets no placeholder: its
// real path stays in the object, which is then stored per checkout.
inline constexpr std::size_t kPlaceholderLength = 160;
// Names the placeholder scheme in the key, so entries made under another scheme (the fixed
// /kache/src names of earlier versions) are never served.
// v2: names in string sections restored byte-exact (PathPatch::string_size), placeholders searched in
// debug sections only.
inline constexpr const char* kPlaceholderScheme = "debug-placeholders-v2/160";

// The placeholder standing for the root named root_name ("/kache/build"): "/kache.root.build" padded
// with '_' to kPlaceholderLength. No real path spells it; it is always followed by the rest of a path.
std::string debug_placeholder(const std::string& root_name);
// What replaces a placeholder: the root's path left-padded with '/' to kPlaceholderLength
// ("//////home/u/p" names "/home/u/p" on Linux). nullopt when the path is longer than that.
std::optional<std::string> padded_root(const std::string& path);

// How a compiler escapes a path in a make-syntax dependency file (measured on paths holding ' ', tab, '#',
// '$', ':' and '\\'): GCC 12 (libcpp mkdeps) writes "\\ " and "\\<tab>" (doubling the backslashes just
// before), "\\#" and "$$"; clang 14/19 turn '\\' into '/' and write "\\ ", "\\#" and "$$" (a tab as is);
// nvcc 12/13 escapes spaces only. None escapes ':' in a dependency.
enum class MakeEscaping { spaces_only, gcc, clang };
std::string escape_make(std::string_view path, MakeEscaping escaping);

// Whether text may name `root` or a path below it: an occurrence of the root's spelling not continued
// by more characters of the same path component (an ASCII letter or digit, or one of "._-+@~#%"): "/w/p"
// in "/w/p/x.h", "/w/p" or "'/w/p':", not in "/w/p-deps/x.h" nor "/w/p2". GCC's prefix maps and
// a plain substring search match the spelling alone (issue 35: a sibling "<root>-deps" is no root).
bool names_path(std::string_view text, std::string_view root);
// The same at one occurrence: text[pos, pos + root_size) is the root's spelling.
bool ends_path_component(std::string_view text, std::size_t end);

// Where a placeholder lies in a stored object, and which root (by name: indices differ between
// checkouts whose roots coincide differently) it stands for.
struct PathPatch {
  std::uint64_t offset = 0;
  std::string root_name;
  // 0: a name of fixed length (DWARF 4's line-table directories, an inline DW_FORM_string): the
  // placeholder is replaced by the root left-padded with '/'. Else the size, its NUL included, of the
  // string the placeholder starts in a string section (holds_strings: .debug_str, .debug_line_str):
  // replaced by the root, the rest of the string and NULs up to that size, so the name reads exactly
  // as the compiler writes it here (gdb's `info source`, `set substitute-path`, addr2line).
  std::uint64_t string_size = 0;
  bool operator==(const PathPatch&) const = default;
};

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
  // aliases: other spellings of roots (name = the root's name): the build root is spelled as $PWD
  // when GCC takes it from there (the compiler writes that spelling), its getcwd() spelling is an
  // alias; paths below either key alike, placeholders cover both, restores write the root's path.
  explicit PathRoots(std::vector<Root> roots) : PathRoots(std::move(roots), {}, 0) {}
  static PathRoots with_aliases(std::vector<Root> roots, std::vector<Root> aliases) {
    return PathRoots(std::move(roots), std::move(aliases), 0);
  }

  bool enabled() const { return !roots_.empty(); }
  const std::vector<Root>& roots() const { return roots_; }

  // abs: an absolute path, spelled as the compiler spelled it (not normalized: "/b/../include/h.h"
  // stays below the root "/b", so in another checkout it resolves the way the compiler resolves it).
  RootedPath split(const std::string& abs) const;
  std::string join(const RootedPath& p) const;      // back to this checkout's path
  std::string key_form(const RootedPath& p) const;  // with the fixed name, for hashing
  std::string key_form(const std::string& abs) const { return key_form(split(abs)); }

  // How a path written in a flag value is keyed, and why (for KACHE_LOG=kache=trace). An absolute path
  // below a root becomes the root's fixed name plus the rest (the miss's debug maps write the root's
  // placeholder into the object, the depfile and diagnostics are stored with the root as a placeholder;
  // an object naming the real path is stored per checkout), one
  // outside every root stays literal, a relative one stays as spelled (the compiler writes it as
  // spelled; the working directory it is resolved against is the build root).
  struct KeyedValue {
    std::string form;
    std::string why;
  };
  KeyedValue key_value(const std::string& value) const;
  // The same for a list (nvcc splits -I/-isystem values on commas): each element keyed on its own.
  KeyedValue key_list(const std::string& value, char separator) const;

  // -fdebug-prefix-map=<spelling>=<placeholder> for each root spelling of kPlaceholderLength or less,
  // ordered so GCC and clang >= 15 (the last matching rule wins) apply the longest first; clang 14
  // sorts its rules in reverse string order, which also puts a longer path before its prefix.
  // No -fmacro-prefix-map: __FILE__ keeps the real path, as a plain compile gives it (rewriting it in
  // .rodata is unsound: its length is baked into code), so such an object is stored per checkout.
  std::vector<std::string> debug_map_flags() const;
  // abs as the debug maps write it: the placeholder of the root it lies below plus the rest, or abs
  // itself when no placeholder covers it.
  std::string debug_form(const std::string& abs) const;
  // The placeholders of mapped roots in an object (ascending offsets): in its debug sections and those of
  // the device code objects it embeds (a clang offload bundle), where the prefix maps put them (a string
  // literal spelled like one elsewhere is the program's own); in the whole output when it is no ELF
  // file. GCC's and clang's prefix maps match a root's spelling as a string, so "/w/p-deps/h.h" came out as the
  // placeholder of "/w/p" followed by "-deps/h.h": such a sibling (a placeholder continued by more of its path
  // component) names no root, and is replaced by this checkout's root in the stored bytes too.
  struct Placeholders {
    std::vector<PathPatch> roots;     // followed by '/', a NUL or the end: this checkout's root on restore
    std::vector<PathPatch> siblings;  // a path beside the root: its own text, here and in the entry
  };
  Placeholders find_placeholders(std::string_view object) const;
  // What replaces a patch's placeholder here; nullopt when this checkout has no such root or its path is
  // longer than a placeholder (the entry cannot be restored here).
  std::optional<std::string> patch_text(const std::string& root_name) const;
  // The root's path itself (for a name restored byte-exact); nullopt as for patch_text.
  std::optional<std::string> restored_root(const std::string& root_name) const;
  // The roots (indices into roots()) a spelling of which appears in bytes (the object scan).
  std::vector<std::size_t> roots_in(std::string_view bytes) const;

  // Replaces root spellings in text by placeholders / placeholders by roots (dependency files).
  // escaping: how the compiler that wrote the text spells a path (a root is found, and written, so).
  std::string templatize(const std::string& text, MakeEscaping escaping = MakeEscaping::spaces_only) const;
  std::string instantiate(const std::string& text, MakeEscaping escaping = MakeEscaping::spaces_only) const;
  // The same for plain text (the compiler's diagnostics): paths as written, without make's escaping.
  std::string templatize_text(const std::string& text) const;
  std::string instantiate_text(const std::string& text) const;

 private:
  PathRoots(std::vector<Root> roots, std::vector<Root> aliases, int);
  struct Spelling {
    std::string path;
    std::size_t root;
  };
  std::vector<Root> roots_;           // priority order, deduplicated
  std::vector<Spelling> spellings_;  // every root's path and aliases, longest first
};

// The byte strings a string literal holding `path` can be in an object: the path itself (narrow and u8
// literals) and its UTF-16 and UTF-32 forms in both byte orders (wide, u and U literals).
std::vector<std::string> string_literal_encodings(std::string_view path);

// Replaces the placeholder at each patch's offset in file by this checkout's root (pwrite in place;
// sizes and offsets in the ELF file stay). False when a root is missing or too long, or the file does
// not hold the placeholder there (the file is then unusable).
bool apply_path_patches(const std::string& file, const std::vector<PathPatch>& patches, const PathRoots& roots);
// The same on bytes in memory.
bool apply_path_patches(std::string& bytes, const std::vector<PathPatch>& patches, const PathRoots& roots);

// For kache --show-config: the roots a compile in `cwd` gets (the working directory, each base dir;
// the source's and the output's directories are per compile) and how path values are keyed.
std::string describe_path_keys(const std::vector<std::string>& base_dirs, bool normalize, const std::string& cwd);

}  // namespace kache::core
