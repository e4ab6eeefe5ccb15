// Issue 35 item 5: the classes of path rewriting at the unit level: placeholders found only in debug
// sections and restored byte-exact in string sections, siblings of a root, make's escapes per compiler,
// whole-component matching of roots, LTO objects and compressed fat binaries.
#include <gtest/gtest.h>

#include <elf.h>
#include <zstd.h>

#include <cstring>
#include <string>
#include <vector>

#include "compiler/job_paths.hpp"
#include "core/elf.hpp"
#include "core/fatbin.hpp"
#include "core/path_roots.hpp"

namespace kache::core {
namespace {

struct Section {
  std::string name;
  std::uint64_t flags;
  std::string bytes;
};

// A minimal ELF64 object: the sections' bytes one after another, then .shstrtab, then the headers.
std::string elf_with(const std::vector<Section>& sections, std::vector<std::uint64_t>* offsets = nullptr) {
  std::string f(sizeof(Elf64_Ehdr), '\0');
  std::string names(1, '\0');
  std::vector<Elf64_Shdr> headers(1);
  for (const auto& s : sections) {
    Elf64_Shdr h{};
    h.sh_name = static_cast<Elf64_Word>(names.size());
    h.sh_type = SHT_PROGBITS;
    h.sh_flags = s.flags;
    h.sh_offset = f.size();
    h.sh_size = s.bytes.size();
    if (offsets) offsets->push_back(f.size());
    names += s.name + '\0';
    f += s.bytes;
    headers.push_back(h);
  }
  Elf64_Shdr table{};
  table.sh_name = static_cast<Elf64_Word>(names.size());
  names += std::string(".shstrtab") + '\0';
  table.sh_type = SHT_STRTAB;
  table.sh_offset = f.size();
  table.sh_size = names.size();
  f += names;
  headers.push_back(table);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_shoff = f.size();
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<Elf64_Half>(headers.size());
  eh.e_shstrndx = static_cast<Elf64_Half>(headers.size() - 1);
  for (const auto& h : headers) f.append(reinterpret_cast<const char*>(&h), sizeof h);
  std::memcpy(f.data(), &eh, sizeof eh);
  return f;
}

const PathRoots here({{"/w/proj", "/kache/build"}, {"/w/proj/src", "/kache/src"}});
const PathRoots there({{"/v/other-proj", "/kache/build"}, {"/v/other-proj/src", "/kache/src"}});

TEST(PathRewrites, PlaceholdersAreSearchedOnlyInDebugSections) {
  const std::string ph = debug_placeholder("/kache/src");
  std::vector<std::uint64_t> at;
  const std::string object = elf_with({{".rodata.str1.1", SHF_ALLOC | SHF_MERGE | SHF_STRINGS, ph + "/lit.c" + '\0'},
                                       {".debug_line", 0, std::string(3, 'x') + ph + "/x.c" + '\0'}},
                                      &at);
  const auto found = here.find_placeholders(object);
  ASSERT_EQ(found.roots.size(), 1u);  // the string literal in .rodata is the program's own
  EXPECT_EQ(found.roots[0].offset, at[1] + 3);
  EXPECT_EQ(found.roots[0].string_size, 0u);  // no string section: fixed length, padded
  EXPECT_EQ(elf_sections(object)->size(), 4u);
  EXPECT_FALSE(elf_sections(object.substr(0, object.size() - 1)));  // headers cut off
}

TEST(PathRewrites, PlaceholdersInEmbeddedDeviceCodeAreFound) {
  // hipcc -g: clang passes the prefix maps to the device compile too; its code object sits in the host
  // object's .hip_fatbin, a clang offload bundle.
  const std::string ph = debug_placeholder("/kache/src");
  std::vector<std::uint64_t> inner_at;
  const std::string device = elf_with({{".debug_str", SHF_MERGE | SHF_STRINGS, ph + "/k.hip" + '\0'}}, &inner_at);
  std::string bundle = "__CLANG_OFFLOAD_BUNDLE__";
  auto put = [&](std::uint64_t v) { bundle.append(reinterpret_cast<const char*>(&v), sizeof v); };
  const std::string id = "hipv4-amdgcn-amd-amdhsa--gfx803";
  const std::uint64_t header = 24 + 8 + 3 * 8 + id.size();
  put(1);
  put(header);
  put(device.size());
  put(id.size());
  bundle += id + device;
  ASSERT_EQ(offload_bundle_entries(bundle).size(), 1u);
  EXPECT_TRUE(offload_bundle_entries(bundle.substr(0, bundle.size() - 1)).empty());  // an entry cut off
  std::vector<std::uint64_t> at;
  const std::string object = elf_with({{".hip_fatbin", SHF_ALLOC, bundle}, {".rodata", SHF_ALLOC, ph + "/lit"}}, &at);
  const auto found = here.find_placeholders(object);
  ASSERT_EQ(found.roots.size(), 1u);
  EXPECT_EQ(found.roots[0].offset, at[0] + header + inner_at[0]);
  EXPECT_EQ(found.roots[0].string_size, ph.size() + 7);
}

TEST(PathRewrites, NamesInStringSectionsAreRestoredByteExact) {
  const std::string ph = debug_placeholder("/kache/src");
  const std::string strings = std::string("a") + '\0' + ph + "/x.c" + '\0' + ph + '\0';
  std::vector<std::uint64_t> at;
  std::string object = elf_with({{".debug_line_str", SHF_MERGE | SHF_STRINGS, strings}}, &at);
  const auto found = here.find_placeholders(object);
  ASSERT_EQ(found.roots.size(), 2u);
  EXPECT_EQ(found.roots[0].string_size, ph.size() + 5);
  EXPECT_EQ(found.roots[1].string_size, ph.size() + 1);
  const std::size_t size = object.size();
  ASSERT_TRUE(apply_path_patches(object, found.roots, there));
  EXPECT_EQ(object.size(), size);
  const std::string restored = object.substr(at[0], strings.size());
  const std::string first = "/v/other-proj/src/x.c";
  EXPECT_EQ(restored.substr(0, 2 + first.size() + 1), std::string("a") + '\0' + first + '\0');
  EXPECT_EQ(restored.substr(2 + first.size(), ph.size() + 5 - first.size()),
            std::string(ph.size() + 5 - first.size(), '\0'));
  const std::size_t second = 2 + ph.size() + 5;
  EXPECT_EQ(restored.substr(second, 18), std::string("/v/other-proj/src") + '\0');
  // A record whose size does not end at the string's NUL describes other bytes: refused.
  std::string again = elf_with({{".debug_line_str", SHF_MERGE | SHF_STRINGS, strings}});
  auto wrong = here.find_placeholders(again).roots;
  wrong[0].string_size += 1;
  EXPECT_FALSE(apply_path_patches(again, wrong, there));
}

TEST(PathRewrites, APlaceholderContinuedByMoreOfItsComponentIsASibling) {
  const std::string ph = debug_placeholder("/kache/build");
  std::string object =
      elf_with({{".debug_str", SHF_MERGE | SHF_STRINGS, ph + "-deps/include" + '\0' + ph + '\0' + ph + "/b" + '\0'}});
  const auto found = here.find_placeholders(object);
  ASSERT_EQ(found.siblings.size(), 1u);
  ASSERT_EQ(found.roots.size(), 2u);
  ASSERT_TRUE(apply_path_patches(object, found.siblings, here));
  EXPECT_NE(object.find(std::string("/w/proj-deps/include") + '\0'), std::string::npos);
}

TEST(PathRewrites, RootsAreMatchedByWholeComponents) {
  EXPECT_TRUE(names_path("x /w/proj/a.h", "/w/proj"));
  EXPECT_TRUE(names_path(std::string("/w/proj") + '\0', "/w/proj"));
  EXPECT_TRUE(names_path("'/w/proj': no such", "/w/proj"));
  EXPECT_FALSE(names_path("/w/proj-deps/a.h /w/proj2/b.h /w/project", "/w/proj"));
  EXPECT_EQ(here.roots_in("/w/proj-deps/include/dep.h"), std::vector<std::size_t>{});
  const PathRoots b(std::vector<PathRoots::Root>{{"/v/q", "/kache/build"}});
  const PathRoots a(std::vector<PathRoots::Root>{{"/w/proj", "/kache/build"}});
  const std::string err = "/w/proj-deps/d.h:1:2: warning: x\nIn file included from /w/proj/x.c:1:\n";
  EXPECT_EQ(b.instantiate_text(a.templatize_text(err)),
            "/w/proj-deps/d.h:1:2: warning: x\nIn file included from /v/q/x.c:1:\n");
}

TEST(PathRewrites, MakeEscapesAreTheCompilersOwn) {
  // Measured: gcc-12, clang-14/19 and nvcc 13 -MD on a directory named "a#b$c d", "t<tab>ab\ x".
  EXPECT_EQ(escape_make("/t/a#b$c d", MakeEscaping::gcc), "/t/a\\#b$$c\\ d");
  EXPECT_EQ(escape_make("/t/a#b$c d", MakeEscaping::clang), "/t/a\\#b$$c\\ d");
  EXPECT_EQ(escape_make("/t/a#b d", MakeEscaping::spaces_only), "/t/a#b\\ d");
  EXPECT_EQ(escape_make("/t/t\tab\\ x", MakeEscaping::gcc), "/t/t\\\tab\\\\\\ x");
  EXPECT_EQ(escape_make("/t/t\tab\\ x", MakeEscaping::clang), "/t/t\tab/\\ x");
  const PathRoots a(std::vector<PathRoots::Root>{{"/w/fix#12 $x", "/kache/build"}});
  const PathRoots b(std::vector<PathRoots::Root>{{"/v/b#2 $$y", "/kache/build"}});
  const std::string dep = "x.o: /w/fix\\#12\\ $$x/gen.h /w/fix\\#12\\ $$x-deps/d.h\n";
  const std::string tmpl = a.templatize(dep, MakeEscaping::gcc);
  EXPECT_EQ(b.instantiate(tmpl, MakeEscaping::gcc), "x.o: /v/b\\#2\\ $$$$y/gen.h /w/fix\\#12\\ $$x-deps/d.h\n");
  EXPECT_EQ(a.instantiate(tmpl, MakeEscaping::gcc), dep);
  // A -MT target is written verbatim (measured: clang 19 "-MT <root>/build/warn.o" in "tw#1 $x A").
  const std::string targeted = "/w/fix#12 $x/b/x.o: /w/fix\\#12\\ $$x/gen.h\n";
  EXPECT_EQ(b.instantiate(a.templatize(targeted, MakeEscaping::clang), MakeEscaping::clang),
            "/v/b#2 $$y/b/x.o: /v/b\\#2\\ $$$$y/gen.h\n");
}

TEST(PathRewrites, LtoObjectsAreRecognized) {
  EXPECT_TRUE(is_lto_object(std::string("BC\xC0\xDE", 4) + "rest"));
  EXPECT_TRUE(is_lto_object(std::string("\xDE\xC0\x17\x0B", 4) + "rest"));
  EXPECT_TRUE(is_lto_object(elf_with({{".gnu.lto_.opts", SHF_EXCLUDE, "x"}})));
  EXPECT_TRUE(is_lto_object(elf_with({{".llvmbc", 0, "x"}})));
  EXPECT_FALSE(is_lto_object(elf_with({{".text", SHF_ALLOC, "x"}, {".gnu.debuglto_.debug_info", 0, "x"}})));
}

// A container holding one entry with `payload`, compressed with zstd when asked (flag 0x8000 and the
// decompressed size, as nvcc 13 --compress-mode=size writes them).
std::string fatbin(const std::string& payload, bool compressed) {
  std::string data = payload;
  if (compressed) {
    data.resize(ZSTD_compressBound(payload.size()));
    data.resize(ZSTD_compress(data.data(), data.size(), payload.data(), payload.size(), 3));
  }
  const std::size_t padded = (data.size() + 7) / 8 * 8;
  std::string entry(64, '\0');
  auto put = [](std::string& s, std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(entry, 0, 2, 2);
  put(entry, 4, 64, 4);
  put(entry, 8, padded, 8);
  put(entry, 16, data.size(), 4);
  put(entry, 40, compressed ? 0x8011 : 0x11, 8);
  put(entry, 56, compressed ? payload.size() : 0, 8);
  std::string header(16, '\0');
  put(header, 0, 0xBA55ED50, 4);
  put(header, 4, 1, 2);
  put(header, 6, 16, 2);
  put(header, 8, 64 + padded, 8);
  data.resize(padded, '\0');
  return header + entry + data;
}

// The compressed entries read_compressed_device_code hands over, and whether it could read them all.
std::pair<std::vector<std::string>, bool> device_code(std::string_view bytes) {
  std::vector<std::string> seen;
  const bool readable = read_compressed_device_code(bytes, [&](std::string_view code) { seen.emplace_back(code); });
  return {seen, readable};
}

TEST(PathRewrites, CompressedDeviceCodeIsReadBack) {
  const std::string code = "\x7f" "ELF .file 1 \"/w/proj/gen.cuh\"";
  EXPECT_EQ(device_code("host " + fatbin(code, false) + " more"), (std::pair<std::vector<std::string>, bool>{{}, true}));
  EXPECT_EQ(device_code("host " + fatbin(code, true)), (std::pair<std::vector<std::string>, bool>{{code}, true}));
  std::string other = fatbin(code, true);
  other[16 + 64] ^= 0x01;  // no zstd frame: another compression kache cannot read
  EXPECT_FALSE(device_code(other).second);
  EXPECT_FALSE(device_code(fatbin(code, true).substr(0, 40)).second);  // cut off
  EXPECT_TRUE(device_code("no fat binary here").second);
}

}  // namespace
}  // namespace kache::core
