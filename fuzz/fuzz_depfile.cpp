// Fuzzes dependency-file parsing and the templating that lets one stored dependency file serve
// another checkout.
// Input: "ROOT\tROOT...\n" (the roots of this checkout: build, source, base dirs), then depfile text.
// Properties, when the text parses:
//  - every dependency is a non-empty name, and writing the list back in make syntax parses to the
//    same list (the unescaping is consistent);
//  - templatize then instantiate with the same roots gives back the text exactly;
//  - instantiated for another checkout (every root moved below "/\\x02moved"), each dependency below a root
//    names the same file below the moved root, and every other dependency is unchanged.
#include <stdexcept>
#include <string>

#include "core/depfile.hpp"
#include "core/path_roots.hpp"
#include "fuzz_check.hpp"

using namespace kache;

namespace {

// Make syntax as GCC/nvcc write it, with a backslash escaped too so the round trip is exact.
std::string write_depfile(const std::vector<std::string>& deps) {
  std::string out = "t.o:";
  for (const auto& d : deps) {
    out += " ";
    for (char c : d) {
      if (c == ' ' || c == '#' || c == '\\') out += '\\';
      if (c == '$') out += '$';
      out += c;
    }
  }
  return out + "\n";
}

// Roots as the pipeline makes them: absolute, lexically normal, no trailing slash, not "/".
bool usable_root(const std::string& r) {
  if (r.size() < 2 || r[0] != '/' || r.back() == '/') return false;
  for (unsigned char c : r) {
    if (c < 0x20 || c == 0x7f) return false;  // control characters never reach a root
  }
  // Neither nvcc nor GCC escapes a backslash, so a root holding one has no unambiguous spelling in
  // make syntax ("/u\\" then a newline reads as a continuation). Not a checkout path in practice.
  if (r.find('\\') != std::string::npos) return false;
  // nvcc writes '$' as is, while the parser reads "$$" as one '$' (GCC's escape): a root spelled with
  // "$$" is not read back as written. Known and left: no real checkout path holds "$$".
  if (r.find("$$") != std::string::npos) return false;
  const std::string s = r + "/";
  return s.find("//") == std::string::npos && s.find("/./") == std::string::npos && s.find("/../") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = kache::fuzz::as_view(data, size);
  const std::size_t nl = input.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::string text(input.substr(nl + 1));

  std::vector<core::PathRoots::Root> here, moved;
  for (const auto& r : kache::fuzz::split(input.substr(0, nl), '\t')) {
    if (!usable_root(r)) continue;
    const std::string name = "/kache/r" + std::to_string(here.size());
    here.push_back({r, name});
    moved.push_back({"/\x02moved" + r, name});
  }

  core::Depfile dep;
  try {
    dep = core::parse_depfile(text);
  } catch (const std::runtime_error&) {
    return 0;
  }
  for (const auto& d : dep.deps) KACHE_FUZZ_CHECK(!d.empty());
  KACHE_FUZZ_CHECK(core::parse_depfile(write_depfile(dep.deps)).deps == dep.deps);

  // Placeholders are control characters, which no dependency file holds.
  for (char c : text) {
    if (c == '\x01' || c == '\x02') return 0;
  }
  const core::PathRoots roots_here(here), roots_moved(moved);
  if (roots_here.roots().size() != here.size()) return 0;  // duplicates: indices would differ
  const std::string tmpl = roots_here.templatize(text);
  KACHE_FUZZ_CHECK(roots_here.instantiate(tmpl) == text);

  const core::Depfile other = core::parse_depfile(roots_moved.instantiate(tmpl));
  KACHE_FUZZ_CHECK(other.deps.size() == dep.deps.size());
  for (std::size_t i = 0; i < dep.deps.size(); ++i) {
    const core::RootedPath p = roots_here.split(dep.deps[i]);
    KACHE_FUZZ_CHECK(other.deps[i] == (p.root < 0 ? dep.deps[i] : roots_moved.join(p)));
  }
  return 0;
}
