#include "core/path_roots.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
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
// that name one are stored per checkout (names_foreign_charset in compiler/job_paths.hpp).
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

std::vector<PathPatch> PathRoots::find_placeholders(std::string_view object) const {
  // One pass for the prefix every placeholder shares (objects with a fatbin run to hundreds of MB),
  // then which root's placeholder, if any, starts there.
  std::vector<std::pair<std::string, const std::string*>> mapped;
  for (const auto& r : roots_) {
    if (padded_root(r.path)) mapped.emplace_back(debug_placeholder(r.name), &r.name);  // others got no rule
  }
  std::vector<PathPatch> patches;
  if (mapped.empty()) return patches;
  static constexpr std::string_view kPrefix = "/kache.root.";
  const std::boyer_moore_horspool_searcher searcher(kPrefix.begin(), kPrefix.end());
  for (auto it = std::search(object.begin(), object.end(), searcher); it != object.end();
       it = std::search(it + 1, object.end(), searcher)) {
    const std::string_view here = object.substr(static_cast<std::size_t>(it - object.begin()));
    for (const auto& [placeholder, name] : mapped) {
      if (!here.starts_with(placeholder)) continue;
      patches.push_back({static_cast<std::uint64_t>(it - object.begin()), *name});
      it += static_cast<std::ptrdiff_t>(placeholder.size() - 1);
      break;
    }
  }
  return patches;
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
// with four roots; objects hold few '/' bytes.
std::vector<std::size_t> PathRoots::roots_in(std::string_view bytes) const {
  struct Form {
    std::string text;
    std::size_t slash;  // offset of the first '/' in text
    std::size_t root;
  };
  std::vector<Form> forms;
  std::vector<std::size_t> found;
  for (const auto& s : spellings_) {
    for (std::string& f : string_literal_encodings(s.path)) {
      const std::size_t slash = f.find('/');
      if (slash != std::string::npos) {
        forms.push_back({std::move(f), slash, s.root});
      } else if (!f.empty() && ::memmem(bytes.data(), bytes.size(), f.data(), f.size()) != nullptr) {
        found.push_back(s.root);  // no '/' (never seen: roots are absolute)
      }
    }
  }
  const char* data = bytes.data();
  for (const void* hit = std::memchr(data, '/', bytes.size()); hit != nullptr && !forms.empty();) {
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - data);
    for (auto f = forms.begin(); f != forms.end();) {
      const bool here = at >= f->slash && bytes.size() - (at - f->slash) >= f->text.size() &&
                        std::memcmp(data + at - f->slash, f->text.data(), f->text.size()) == 0;
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

std::string PathRoots::templatize(const std::string& text) const {
  std::string out = text;
  for (const auto& s : spellings_) replace_path_prefixes(out, escape_make(s.path), placeholder(s.root));
  return out;
}

std::string PathRoots::instantiate(const std::string& text) const {
  std::string out = text;
  for (std::size_t i = 0; i < roots_.size(); ++i) util::replace_all(out, placeholder(i), escape_make(roots_[i].path));
  return out;
}

std::string PathRoots::templatize_text(const std::string& text) const {
  std::string out = text;
  for (const auto& s : spellings_) util::replace_all(out, s.path, placeholder(s.root));
  return out;
}

std::string PathRoots::instantiate_text(const std::string& text) const {
  std::string out = text;
  for (std::size_t i = 0; i < roots_.size(); ++i) util::replace_all(out, placeholder(i), roots_[i].path);
  return out;
}

bool apply_path_patches(std::string& bytes, const std::vector<PathPatch>& patches, const PathRoots& roots) {
  for (const auto& p : patches) {
    const std::optional<std::string> text = roots.patch_text(p.root_name);
    if (!text || p.offset > bytes.size() || bytes.size() - p.offset < kPlaceholderLength ||
        bytes.compare(p.offset, kPlaceholderLength, debug_placeholder(p.root_name)) != 0) {
      return false;
    }
    bytes.replace(p.offset, kPlaceholderLength, *text);
  }
  return true;
}

bool apply_path_patches(const std::string& file, const std::vector<PathPatch>& patches, const PathRoots& roots) {
  if (patches.empty()) return true;
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = true;
  std::string seen(kPlaceholderLength, '\0');
  for (const auto& p : patches) {
    const std::optional<std::string> text = roots.patch_text(p.root_name);
    const auto at = static_cast<off_t>(p.offset);
    // The placeholder must be where the entry says (the store's checksum covers the bytes; this
    // covers a record that does not describe them).
    if (!text || ::pread(fd, seen.data(), seen.size(), at) != static_cast<ssize_t>(seen.size()) ||
        seen != debug_placeholder(p.root_name) ||
        ::pwrite(fd, text->data(), text->size(), at) != static_cast<ssize_t>(text->size())) {
      ok = false;
      break;
    }
  }
  ::close(fd);
  return ok;
}

namespace {
// The section headers of an ELF file of class C (Elf32_/Elf64_ types), read with bounds checks.
template <typename Ehdr, typename Shdr>
bool elf_has_compressed_section(std::string_view f) {
  Ehdr eh;
  if (f.size() < sizeof eh) return false;
  std::memcpy(&eh, f.data(), sizeof eh);
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Shdr) || eh.e_shoff > f.size()) return false;
  auto section = [&](std::uint64_t i, Shdr& sh) {
    const std::uint64_t at = eh.e_shoff + i * sizeof(Shdr);
    if (at > f.size() || f.size() - at < sizeof(Shdr)) return false;
    std::memcpy(&sh, f.data() + at, sizeof sh);
    return true;
  };
  Shdr first;
  if (!section(0, first)) return false;
  // More than SHN_LORESERVE sections: the count and the name table's index live in section 0.
  const std::uint64_t count = eh.e_shnum != 0 ? eh.e_shnum : first.sh_size;
  const std::uint64_t names_index = eh.e_shstrndx == SHN_XINDEX ? first.sh_link : eh.e_shstrndx;
  Shdr names;
  const bool have_names = section(names_index, names) && names.sh_offset <= f.size() &&
                          f.size() - names.sh_offset >= names.sh_size;
  for (std::uint64_t i = 0; i < count; ++i) {
    Shdr sh;
    if (!section(i, sh)) return false;
    if (sh.sh_flags & SHF_COMPRESSED) return true;
    if (have_names && sh.sh_name < names.sh_size) {
      const std::string_view table = f.substr(names.sh_offset, names.sh_size);
      if (table.substr(sh.sh_name).starts_with(".zdebug")) return true;
    }
  }
  return false;
}
}  // namespace

bool has_compressed_sections(std::string_view object) {
  if (object.size() < EI_NIDENT || std::memcmp(object.data(), ELFMAG, SELFMAG) != 0) return false;
  // Objects of this machine's byte order only (kache compiles for the machine it runs on).
  if (object[EI_DATA] != ELFDATA2LSB) return false;
  if (object[EI_CLASS] == ELFCLASS64) return elf_has_compressed_section<Elf64_Ehdr, Elf64_Shdr>(object);
  if (object[EI_CLASS] == ELFCLASS32) return elf_has_compressed_section<Elf32_Ehdr, Elf32_Shdr>(object);
  return false;
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
      "  of that length, replaced in place by the real root (padded with '/') on install and on every hit;\n"
      "  an object naming a root anyway (__FILE__, assert(), -gz, the user's own prefix maps) is stored per checkout\n"
      "  -lineinfo: the source's path as nvcc resolves it is keyed literally (device code names it)\n"
      "  KACHE_LOG=kache=trace shows each path of a compile as keyed, and why\n";
  return out;
}

}  // namespace kache::core
