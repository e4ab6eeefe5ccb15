#include "core/path_roots.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "util/fs.hpp"
#include "util/text.hpp"

namespace kache::core {

namespace {
// Placeholders cannot occur in a dependency file: make syntax has no control characters.
std::string placeholder(std::size_t index) { return "\x01" + std::to_string(index) + "\x01"; }
// A root spelled verbatim, unescaped: how GCC, clang and nvcc write a -MT target.
std::string verbatim_placeholder(std::size_t index) { return "\x02" + std::to_string(index) + "\x02"; }

// Where the first rule's targets end: its first ':' followed by whitespace or the end.
std::size_t targets_end(const std::string& text) {
  for (std::size_t i = text.find(':'); i != std::string::npos; i = text.find(':', i + 1)) {
    if (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\t' || text[i + 1] == '\n' ||
        text[i + 1] == '\r') {
      return i;
    }
  }
  return 0;
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

// A code point's UTF-16 or UTF-32 code units, in the byte order asked.
void append_units(std::string& out, char32_t cp, int width, bool big_endian) {
  auto unit = [&](std::uint32_t u) {
    for (int i = 0; i < width; ++i) {
      const int shift = 8 * (big_endian ? width - 1 - i : i);
      out += static_cast<char>((u >> shift) & 0xff);
    }
  };
  if (width == 2 && cp > 0xffff) {
    unit(0xd800 + ((cp - 0x10000) >> 10));
    unit(0xdc00 + ((cp - 0x10000) & 0x3ff));
  } else {
    unit(cp);
  }
}

// The code points of UTF-8 text; nullopt when it is not valid UTF-8.
std::optional<std::u32string> decode_utf8(std::string_view text) {
  std::u32string out;
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const int extra = lead < 0x80 ? 0 : (lead >> 5) == 6 ? 1 : (lead >> 4) == 14 ? 2 : (lead >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + static_cast<std::size_t>(extra) >= text.size()) return std::nullopt;
    char32_t cp = extra == 0 ? lead : lead & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto c = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((c >> 6) != 2) return std::nullopt;
      cp = (cp << 6) | (c & 0x3f);
    }
    out += cp;
    i += static_cast<std::size_t>(extra) + 1;
  }
  return out;
}
}  // namespace

// A path as the compiler can write it into a string literal: as is (narrow and u8 literals), and as
// UTF-16 and UTF-32 in both byte orders (L"" is UTF-32 on Linux and UTF-16 under -fshort-wchar, u"" is
// UTF-16 and U"" UTF-32; big-endian targets swap the bytes). A path that is no valid UTF-8 is also
// widened byte by byte. Other execution character sets (-fexec-charset) are not searched: compiles
// that name one are stored per checkout (ArgumentFacts::foreign_charset in compiler/argument_facts.hpp).
std::vector<std::string> string_literal_encodings(std::string_view path) {
  std::vector<std::string> forms{std::string(path)};
  std::u32string points;
  if (auto decoded = decode_utf8(path)) {
    points = std::move(*decoded);
  } else {
    for (char c : path) points += static_cast<char32_t>(static_cast<unsigned char>(c));
  }
  for (const int width : {2, 4}) {
    for (const bool big_endian : {false, true}) {
      std::string form;
      for (char32_t cp : points) append_units(form, cp, width, big_endian);
      forms.push_back(std::move(form));
    }
  }
  return forms;
}

std::string escape_make(std::string_view path, MakeEscaping escaping) {
  std::string out;
  std::size_t backslashes = 0;  // just before this character
  for (char c : path) {
    if (escaping == MakeEscaping::clang && c == '\\') c = '/';
    const bool space = c == ' ' || (c == '\t' && escaping == MakeEscaping::gcc);
    if (space || (c == '#' && escaping != MakeEscaping::spaces_only)) {
      if (escaping == MakeEscaping::gcc && space) out.append(backslashes, '\\');
      out += '\\';
    } else if (c == '$' && escaping != MakeEscaping::spaces_only) {
      out += '$';
    }
    out += c;
    backslashes = c == '\\' ? backslashes + 1 : 0;
  }
  return out;
}

bool ends_path_component(std::string_view text, std::size_t end) {
  if (end >= text.size()) return true;
  const unsigned char next = static_cast<unsigned char>(text[end]);
  return !(std::isalnum(next) || std::string_view("._-+@~#%").find(static_cast<char>(next)) != std::string_view::npos);
}

bool names_path(std::string_view text, std::string_view root) {
  if (root.empty()) return false;
  for (std::size_t hit = text.find(root); hit != std::string_view::npos; hit = text.find(root, hit + 1)) {
    if (ends_path_component(text, hit + root.size())) return true;
  }
  return false;
}

std::string debug_placeholder(const std::string& root_name) {
  std::string name = root_name;
  if (name.starts_with("/kache/")) name = name.substr(7);
  std::string p = "/kache.root." + name;
  p.resize(std::max(p.size(), kPlaceholderLength), '_');
  return p;
}

std::optional<std::string> padded_root(const std::string& path) {
  if (path.empty() || path.size() > kPlaceholderLength) return std::nullopt;
  return std::string(kPlaceholderLength - path.size(), '/') + path;
}

PathRoots::PathRoots(std::vector<Root> roots, std::vector<Root> aliases, int) {
  for (auto& r : roots) {
    if (r.path.empty() || r.path == "/") continue;  // "/" would remap the whole system
    bool dup = std::any_of(roots_.begin(), roots_.end(), [&](const Root& x) { return x.path == r.path; });
    if (!dup) roots_.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < roots_.size(); ++i) spellings_.push_back({roots_[i].path, i});
  for (auto& a : aliases) {
    if (a.path.empty() || a.path == "/") continue;
    const auto named = std::find_if(roots_.begin(), roots_.end(), [&](const Root& r) { return r.name == a.name; });
    const bool known = std::any_of(spellings_.begin(), spellings_.end(), [&](const Spelling& s) { return s.path == a.path; });
    if (named != roots_.end() && !known) spellings_.push_back({a.path, static_cast<std::size_t>(named - roots_.begin())});
  }
  // Equal lengths keep the given order. std::sort with the position as tie-break, not std::stable_sort:
  // libstdc++ 12's stable_sort uses std::get_temporary_buffer, which clang 19 warns is deprecated.
  std::vector<std::size_t> order(spellings_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const std::size_t la = spellings_[a].path.size(), lb = spellings_[b].path.size();
    return la != lb ? la > lb : a < b;
  });
  std::vector<Spelling> sorted;
  for (std::size_t i : order) sorted.push_back(spellings_[i]);
  spellings_ = std::move(sorted);
}

RootedPath PathRoots::split(const std::string& abs) const {
  for (const auto& s : spellings_) {
    if (util::path_starts_with(abs, s.path)) return RootedPath{static_cast<int>(s.root), abs.substr(s.path.size())};
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

std::vector<std::string> PathRoots::debug_map_flags() const {
  std::vector<std::string> flags;
  for (auto it = spellings_.rbegin(); it != spellings_.rend(); ++it) {
    if (it->path.size() > kPlaceholderLength) continue;  // stays real: the object is then per checkout
    flags.push_back("-fdebug-prefix-map=" + it->path + "=" + debug_placeholder(roots_[it->root].name));
  }
  return flags;
}

std::string PathRoots::debug_form(const std::string& abs) const {
  for (const auto& s : spellings_) {
    if (s.path.size() > kPlaceholderLength || !util::path_starts_with(abs, s.path)) continue;
    return debug_placeholder(roots_[s.root].name) + abs.substr(s.path.size());
  }
  return abs;
}

namespace {
using MappedPlaceholders = std::vector<std::pair<std::string, const std::string*>>;

// The placeholders in bytes (a section at base, or the whole output): one pass for the prefix every
// placeholder shares (objects with a fatbin run to hundreds of MB), then which root's, if any, starts
// there, and whether it starts a NUL-terminated string of a string section.
void find_in(std::string_view bytes, std::uint64_t base, bool strings, const MappedPlaceholders& mapped,
             PathRoots::Placeholders& found) {
  static constexpr std::string_view kPrefix = "/kache.root.";
  const std::boyer_moore_horspool_searcher searcher(kPrefix.begin(), kPrefix.end());
  for (auto it = std::search(bytes.begin(), bytes.end(), searcher); it != bytes.end();
       it = std::search(it + 1, bytes.end(), searcher)) {
    const std::size_t at = static_cast<std::size_t>(it - bytes.begin());
    const std::string_view here = bytes.substr(at);
    for (const auto& [placeholder, name] : mapped) {
      if (!here.starts_with(placeholder)) continue;
      const std::size_t end = placeholder.size();
      const bool whole = here.size() == end || here[end] == '/' || here[end] == '\0';
      PathPatch patch{base + at, *name, 0};
      const std::size_t nul = here.find('\0', end);
      if (strings && (at == 0 || bytes[at - 1] == '\0') && nul != std::string_view::npos) patch.string_size = nul + 1;
      (whole ? found.roots : found.siblings).push_back(std::move(patch));
      it += static_cast<std::ptrdiff_t>(end - 1);
      break;
    }
  }
}
}  // namespace

PathRoots::Placeholders PathRoots::find_placeholders(std::string_view object) const {
  MappedPlaceholders mapped;
  for (const auto& r : roots_) {
    if (padded_root(r.path)) mapped.emplace_back(debug_placeholder(r.name), &r.name);  // others got no rule
  }
  Placeholders found;
  if (mapped.empty()) return found;
  const auto sections = elf_sections(object);
  if (!sections) {
    find_in(object, 0, false, mapped, found);
    return found;
  }
  auto find_in_debug_sections = [&](std::string_view file, const std::vector<ElfSection>& in) {
    const auto base = static_cast<std::uint64_t>(file.data() - object.data());
    for (const auto& s : in) {
      if (is_debug_section(s)) find_in(file.substr(s.offset, s.size), base + s.offset, holds_strings(s), mapped, found);
    }
  };
  find_in_debug_sections(object, *sections);
  // Device code objects a host object embeds (hipcc's .hip_fatbin bundle): the prefix maps reach their
  // debug sections too.
  for (const auto& s : *sections) {
    for (const std::string_view code : offload_bundle_entries(object.substr(s.offset, s.size))) {
      if (const auto inner = elf_sections(code)) find_in_debug_sections(code, *inner);
    }
  }
  auto by_offset = [](const PathPatch& a, const PathPatch& b) { return a.offset < b.offset; };
  std::sort(found.roots.begin(), found.roots.end(), by_offset);
  std::sort(found.siblings.begin(), found.siblings.end(), by_offset);
  return found;
}

std::optional<std::string> PathRoots::restored_root(const std::string& root_name) const {
  for (const auto& r : roots_) {
    if (r.name == root_name && padded_root(r.path)) return r.path;
  }
  return std::nullopt;
}

std::optional<std::string> PathRoots::patch_text(const std::string& root_name) const {
  for (const auto& r : roots_) {
    if (r.name == root_name) return padded_root(r.path);
  }
  return std::nullopt;
}

// One pass over the object whatever the number of forms: every root spelling is absolute, so each of
// its forms holds a '/' (at offset 0, or 1 and 3 in the big-endian ones); each '/' of the object is
// tried as that byte of every form not yet found. Five memmem passes per spelling took 1.0 s on 64 MiB
// with four roots; objects hold few '/' bytes. A form counts only where the path component it ends
// with ends too (issue 35: "/w/proj" does not name "/w/proj-deps"), read in the form's own code units.
std::vector<std::size_t> PathRoots::roots_in(std::string_view bytes) const {
  struct Form {
    std::string text;
    std::size_t slash;  // offset of the first '/' in text
    std::size_t root;
    int width;  // bytes per code unit
    bool big_endian;
  };
  // string_literal_encodings' order: narrow, UTF-16LE, UTF-16BE, UTF-32LE, UTF-32BE.
  constexpr std::pair<int, bool> kUnits[] = {{1, false}, {2, false}, {2, true}, {4, false}, {4, true}};
  std::vector<Form> forms;
  for (const auto& s : spellings_) {
    std::vector<std::string> encodings = string_literal_encodings(s.path);
    for (std::size_t i = 0; i < encodings.size() && i < std::size(kUnits); ++i) {
      const std::size_t slash = encodings[i].find('/');
      if (slash == std::string::npos) continue;  // roots are absolute: never
      forms.push_back({std::move(encodings[i]), slash, s.root, kUnits[i].first, kUnits[i].second});
    }
  }
  // Whether the code unit after a match at [begin, end) continues its last path component.
  auto component_ends = [&](const Form& f, std::size_t end) {
    if (end + static_cast<std::size_t>(f.width) > bytes.size()) return true;
    std::uint32_t unit = 0;
    for (int i = 0; i < f.width; ++i) {
      const auto byte = static_cast<unsigned char>(bytes[end + static_cast<std::size_t>(i)]);
      unit |= static_cast<std::uint32_t>(byte) << (8 * (f.big_endian ? f.width - 1 - i : i));
    }
    if (unit >= 0x80) return true;  // as ends_path_component reads a byte beyond ASCII
    const char c = static_cast<char>(unit);
    return ends_path_component(std::string_view(&c, 1), 0);
  };
  std::vector<std::size_t> found;
  const char* data = bytes.data();
  for (const void* hit = std::memchr(data, '/', bytes.size()); hit != nullptr && !forms.empty();) {
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - data);
    for (auto f = forms.begin(); f != forms.end();) {
      const bool here = at >= f->slash && bytes.size() - (at - f->slash) >= f->text.size() &&
                        std::memcmp(data + at - f->slash, f->text.data(), f->text.size()) == 0 &&
                        component_ends(*f, at - f->slash + f->text.size());
      if (!here) {
        ++f;
        continue;
      }
      const std::size_t root = f->root;
      found.push_back(root);
      std::erase_if(forms, [&](const Form& other) { return other.root == root; });
      f = forms.begin();
    }
    hit = at + 1 < bytes.size() ? std::memchr(data + at + 1, '/', bytes.size() - at - 1) : nullptr;
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

std::string PathRoots::templatize(const std::string& text, MakeEscaping escaping) const {
  std::string out = text;
  for (const auto& s : spellings_) replace_path_prefixes(out, escape_make(s.path, escaping), placeholder(s.root));
  // A -MT target is written as given, unescaped: a root spelled with a character make escapes is found
  // there verbatim (the dependencies are escaped, and a raw spelling there could span two of them).
  const std::size_t end = targets_end(out);
  std::string targets = out.substr(0, end);
  for (const auto& s : spellings_) {
    if (escape_make(s.path, escaping) != s.path) replace_path_prefixes(targets, s.path, verbatim_placeholder(s.root));
  }
  return targets + out.substr(end);
}

std::string PathRoots::instantiate(const std::string& text, MakeEscaping escaping) const {
  std::string out = text;
  for (std::size_t i = 0; i < roots_.size(); ++i) {
    util::replace_all(out, placeholder(i), escape_make(roots_[i].path, escaping));
    util::replace_all(out, verbatim_placeholder(i), roots_[i].path);
  }
  return out;
}

std::string PathRoots::templatize_text(const std::string& text) const {
  std::string out = text;
  for (const auto& s : spellings_) {
    // Each whole-component occurrence, so "/w/p-deps/h.h" keeps its own path.
    std::string replaced;
    std::size_t copied = 0;
    for (std::size_t hit = out.find(s.path); hit != std::string::npos; hit = out.find(s.path, hit + 1)) {
      if (hit < copied || !ends_path_component(out, hit + s.path.size())) continue;
      replaced.append(out, copied, hit - copied);
      replaced += placeholder(s.root);
      copied = hit + s.path.size();
    }
    if (copied == 0) continue;
    replaced.append(out, copied);
    out = std::move(replaced);
  }
  return out;
}

std::string PathRoots::instantiate_text(const std::string& text) const {
  std::string out = text;
  for (std::size_t i = 0; i < roots_.size(); ++i) util::replace_all(out, placeholder(i), roots_[i].path);
  return out;
}

namespace {
// How many bytes a patch replaces.
std::uint64_t patch_span(const PathPatch& p) { return p.string_size != 0 ? p.string_size : kPlaceholderLength; }

// What replaces `current` (the patch's span of the stored object) here; nullopt when the span does not
// hold the placeholder the patch names, or this checkout has no such root (the entry is unusable here).
std::optional<std::string> replacement(const PathPatch& p, std::string_view current, const PathRoots& roots) {
  const std::string placeholder = debug_placeholder(p.root_name);
  if (current.size() != patch_span(p) || !current.starts_with(placeholder)) return std::nullopt;
  if (p.string_size == 0) return roots.patch_text(p.root_name);
  const std::optional<std::string> root = roots.restored_root(p.root_name);
  if (!root || current.back() != '\0' || current.find('\0') != current.size() - 1) return std::nullopt;
  std::string out = *root;
  out.append(current.substr(placeholder.size()));  // the rest of the name and its NUL
  out.resize(current.size(), '\0');                // the root is no longer than the placeholder
  return out;
}
}  // namespace

bool apply_path_patches(std::string& bytes, const std::vector<PathPatch>& patches, const PathRoots& roots) {
  for (const auto& p : patches) {
    if (p.offset > bytes.size() || bytes.size() - p.offset < patch_span(p)) return false;
    const std::optional<std::string> text =
        replacement(p, std::string_view(bytes).substr(p.offset, patch_span(p)), roots);
    if (!text) return false;
    bytes.replace(p.offset, text->size(), *text);
  }
  return true;
}

bool apply_path_patches(const std::string& file, const std::vector<PathPatch>& patches, const PathRoots& roots) {
  if (patches.empty()) return true;
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = true;
  std::string seen;
  for (const auto& p : patches) {
    const auto at = static_cast<off_t>(p.offset);
    // The placeholder must be where the entry says (the store's checksum covers the bytes; this
    // covers a record that does not describe them).
    seen.assign(patch_span(p), '\0');
    std::optional<std::string> text;
    if (::pread(fd, seen.data(), seen.size(), at) == static_cast<ssize_t>(seen.size()))
      text = replacement(p, seen, roots);
    if (!text || ::pwrite(fd, text->data(), text->size(), at) != static_cast<ssize_t>(text->size())) {
      ok = false;
      break;
    }
  }
  ::close(fd);
  return ok;
}

std::string describe_path_keys(const std::vector<std::string>& base_dirs, bool normalize, const std::string& cwd) {
  if (!normalize) {
    return "path keys: literal (nvcc.path_normalize = false): every path and flag value keyed as written\n";
  }
  std::string out = "path keys (a compile run from this directory):\n";
  out += fmt::format("  {:<13} = {} (the working directory; $PWD's spelling when it names it)\n", "/kache/build",
                     util::lexically_normal(cwd));
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
      "  objects name this checkout's real paths: a miss maps each root (up to " +
      std::to_string(kPlaceholderLength) +
      " characters) in debug info to a placeholder\n"
      "  of that length, replaced in place by the real root on install and on every hit (exact in string sections,\n"
      "  padded with '/' where a name's length is fixed); an object naming a root anyway (__FILE__, assert(), -gz,\n"
      "  the user's own prefix maps) is stored per checkout, and so is LTO code (-flto), which no scan can read\n"
      "  -lineinfo: the source's path as nvcc resolves it is keyed literally (device code names it)\n"
      "  KACHE_LOG=kache=trace shows each path of a compile as keyed, and why\n";
  return out;
}

}  // namespace kache::core
