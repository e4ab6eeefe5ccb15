// Path roots (normalization for sharing), dependency-file parsing and the absent-path watch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/depfile.hpp"
#include "core/expansion_scan.hpp"
#include "core/path_roots.hpp"
#include "core/watch.hpp"
#include "util/fs.hpp"

namespace kache::core {
namespace {

PathRoots roots() {
  return PathRoots({{"/p/build", "/kache/build"}, {"/p/src", "/kache/src"}, {"/p/build/obj", "/kache/out"}});
}

TEST(PathRoots, LongestRootWinsAndSpellingIsKept) {
  const PathRoots r = roots();
  EXPECT_EQ(r.split("/p/build/obj/k.o"), (RootedPath{2, "/k.o"}));
  EXPECT_EQ(r.split("/p/build/x.h"), (RootedPath{0, "/x.h"}));
  // As spelled: "../src/../include" stays below the build root and resolves per checkout.
  EXPECT_EQ(r.split("/p/build/../include/h.h"), (RootedPath{0, "/../include/h.h"}));
  EXPECT_EQ(r.split("/p/buildx/y.h"), (RootedPath{-1, "/p/buildx/y.h"}));  // component-wise
  EXPECT_EQ(r.key_form("/p/src/k.cu"), "/kache/src/k.cu");
  const PathRoots other({{"/q/b", "/kache/build"}, {"/q/s", "/kache/src"}, {"/q/b/obj", "/kache/out"}});
  EXPECT_EQ(other.join(r.split("/p/build/../include/h.h")), "/q/b/../include/h.h");
}

TEST(PathRoots, FlagValuesAreKeyedByRootOrLiterally) {
  const PathRoots r = roots();
  EXPECT_EQ(r.key_value("/p/build/gen").form, "/kache/build/gen");
  EXPECT_EQ(r.key_value("/p/build/obj/x.o").form, "/kache/out/x.o");
  EXPECT_EQ(r.key_value("/p/buildx/gen").form, "/p/buildx/gen");  // another directory
  EXPECT_EQ(r.key_value("/usr/include").form, "/usr/include");
  EXPECT_EQ(r.key_value("../include").form, "../include");  // relative: as spelled
  EXPECT_NE(r.key_value("/usr/include").why.find("outside every root"), std::string::npos);
  EXPECT_EQ(r.key_list("/p/src/a,/q,rel", ',').form, "/kache/src/a,/q,rel");
  EXPECT_EQ(PathRoots().key_value("/p/build/gen").form, "/p/build/gen");  // normalization off
}

TEST(PathRoots, DuplicatesAndTheFilesystemRootAreDropped) {
  const PathRoots r({{"/p", "/kache/build"}, {"/p", "/kache/src"}, {"/", "/kache/base0"}});
  ASSERT_EQ(r.roots().size(), 1u);
  EXPECT_EQ(r.key_form("/p/k.cu"), "/kache/build/k.cu");
  EXPECT_FALSE(PathRoots().enabled());
}

TEST(PathRoots, DebugMapsGivePlaceholdersLongestRootLastAndNoMacroMaps) {
  // GCC (and clang >= 15) apply the last matching rule: the longest root's rule comes last. No
  // -fmacro-prefix-map: __FILE__ keeps the real path (issue 27).
  const auto flags = roots().debug_map_flags();
  ASSERT_EQ(flags.size(), 3u);
  EXPECT_EQ(flags[2], "-fdebug-prefix-map=/p/build/obj=" + debug_placeholder("/kache/out"));
  EXPECT_EQ(flags[0], "-fdebug-prefix-map=/p/src=" + debug_placeholder("/kache/src"));
  for (const auto& f : flags) EXPECT_EQ(f.find("macro"), std::string::npos);
  EXPECT_EQ(debug_placeholder("/kache/build").size(), kPlaceholderLength);
  EXPECT_TRUE(debug_placeholder("/kache/base1").starts_with("/kache.root.base1_"));
  EXPECT_NE(debug_placeholder("/kache/base1"), debug_placeholder("/kache/base10"));
  EXPECT_EQ(roots().debug_form("/p/src/a.c"), debug_placeholder("/kache/src") + "/a.c");
  EXPECT_EQ(roots().debug_form("/elsewhere/a.c"), "/elsewhere/a.c");
}

TEST(PathRoots, ARootLongerThanAPlaceholderGetsNoRule) {
  const std::string deep = "/" + std::string(kPlaceholderLength, 'd');
  const PathRoots r({{deep, "/kache/build"}, {"/p/src", "/kache/src"}});
  const auto flags = r.debug_map_flags();
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].find(deep), std::string::npos);
  EXPECT_FALSE(r.patch_text("/kache/build"));
  EXPECT_FALSE(padded_root(deep));
  EXPECT_EQ(*padded_root("/" + std::string(kPlaceholderLength - 1, 'd')), "/" + std::string(kPlaceholderLength - 1, 'd'));
}

TEST(PathRoots, PlaceholdersAreFoundAndReplacedInPlaceByThisCheckoutsRoots) {
  const std::string ph_src = debug_placeholder("/kache/src"), ph_build = debug_placeholder("/kache/build");
  std::string object = std::string("\x7f" "ELF junk\0", 10) + ph_build + std::string(1, '\0') + ph_src + "/a.c" +
                       std::string(1, '\0') + ph_build + "/x";
  const auto patches = roots().find_placeholders(object).roots;
  ASSERT_EQ(patches.size(), 3u);
  EXPECT_EQ(patches[0], (PathPatch{10, "/kache/build"}));
  EXPECT_EQ(patches[1], (PathPatch{11 + kPlaceholderLength, "/kache/src"}));
  EXPECT_EQ(patches[2].root_name, "/kache/build");
  // Another checkout: same sizes, its own paths (leading '/' padding resolves to the root itself).
  const PathRoots there({{"/home/u/other-build", "/kache/build"}, {"/home/u/s", "/kache/src"}});
  std::string here = object;
  ASSERT_TRUE(apply_path_patches(here, patches, there));
  EXPECT_EQ(here.size(), object.size());
  EXPECT_EQ(here.find("/kache.root."), std::string::npos);
  const std::size_t a = here.find("/home/u/s/a.c");
  ASSERT_NE(a, std::string::npos);
  EXPECT_EQ(here.substr(patches[1].offset, kPlaceholderLength - 9), std::string(kPlaceholderLength - 9, '/'));
  // The same through a file (a hit's pwrite on the restored object).
  const std::string file = ::testing::TempDir() + "/kache-patch-test.o";
  util::write_file(file, object);
  ASSERT_TRUE(apply_path_patches(file, patches, there));
  EXPECT_EQ(util::read_file(file), here);
  // A record that does not describe the bytes, or a root missing here: refused, nothing claimed.
  EXPECT_FALSE(apply_path_patches(file, patches, there));  // no placeholder there any more
  std::string copy = object;
  EXPECT_FALSE(apply_path_patches(copy, {{0, "/kache/build"}}, there));
  EXPECT_FALSE(apply_path_patches(copy, {{10, "/kache/base0"}}, there));
  ::unlink(file.c_str());
}

TEST(PathRoots, AnAliasSpellingKeysAndMapsAsItsRoot) {
  // $PWD's spelling of the build directory is the root; getcwd()'s is an alias of it.
  const PathRoots r = PathRoots::with_aliases({{"/link/b", "/kache/build"}, {"/real/s", "/kache/src"}},
                                              {{"/real/b", "/kache/build"}});
  EXPECT_EQ(r.key_form("/real/b/x.h"), "/kache/build/x.h");
  EXPECT_EQ(r.key_form("/link/b/x.h"), "/kache/build/x.h");
  EXPECT_EQ(r.join(r.split("/real/b/x.h")), "/link/b/x.h");
  EXPECT_EQ(r.debug_map_flags().size(), 3u);
  EXPECT_EQ(r.roots_in("text /real/b/k.c"), (std::vector<std::size_t>{0}));
  EXPECT_EQ(*r.patch_text("/kache/build"), std::string(kPlaceholderLength - 7, '/') + "/link/b");
}

TEST(PathRoots, RootsAreFoundInEveryStringLiteralEncoding) {
  const PathRoots r(std::vector<PathRoots::Root>{{"/w/src", "/kache/src"}});
  // L"" (UTF-32LE here; UTF-16LE under -fshort-wchar), u"" and U"", and big-endian targets' forms.
  const std::string utf16le("/\0w\0/\0s\0r\0c\0", 12), utf16be("\0/\0w\0/\0s\0r\0c", 12);
  const std::string utf32le("/\0\0\0w\0\0\0/\0\0\0s\0\0\0r\0\0\0c\0\0\0", 24);
  const std::string utf32be("\0\0\0/\0\0\0w\0\0\0/\0\0\0s\0\0\0r\0\0\0c", 24);
  for (const std::string& form : {utf16le, utf16be, utf32le, utf32be}) {
    EXPECT_EQ(r.roots_in("\x01" + form + "/x.c"), (std::vector<std::size_t>{0}));
  }
  EXPECT_TRUE(r.roots_in(std::string("/\0w\0/\0s\0r\0", 10)).empty());
  // Beyond ASCII the code units are the code point's: U+00E9 is one UTF-16 unit, U+1F600 two (surrogates).
  const auto e_acute = string_literal_encodings("/\xc3\xa9");
  ASSERT_EQ(e_acute.size(), 5u);
  EXPECT_EQ(e_acute[1], std::string("/\0\xe9\0", 4));
  EXPECT_EQ(string_literal_encodings("\xf0\x9f\x98\x80")[1], std::string("\x3d\xd8\x00\xde", 4));
  EXPECT_EQ(string_literal_encodings("\xf0\x9f\x98\x80")[4], std::string("\0\x01\xf6\x00", 4));
  // Not UTF-8: widened byte by byte.
  EXPECT_EQ(string_literal_encodings("/\xff")[1], std::string("/\0\xff\0", 4));
}

TEST(ElfSections, CompressedSectionsAreSeen) {
  // A minimal ELF64 header with two section headers: the null one and a SHF_COMPRESSED one.
  std::string f(64 + 2 * 64, '\0');
  const char ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  std::copy(ident, ident + sizeof ident, f.begin());
  auto put = [&](std::size_t at, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) f[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(0x28, 64, 8);   // e_shoff
  put(0x3a, 64, 2);   // e_shentsize
  put(0x3c, 2, 2);    // e_shnum
  put(0x3e, 0, 2);    // e_shstrndx
  EXPECT_FALSE(has_compressed_sections(f));
  put(64 + 64 + 8, 0x800, 8);  // section 1's sh_flags: SHF_COMPRESSED
  EXPECT_TRUE(has_compressed_sections(f));
  EXPECT_FALSE(has_compressed_sections("not an object"));
  EXPECT_FALSE(has_compressed_sections(f.substr(0, 100)));  // truncated: headers out of range
}

TEST(PathRoots, DepfileTemplatesRoundTripIntoAnotherCheckout) {
  const std::string dep = "obj/k.o : /p/src/k.cu \\\n    /p/build/../inc/a\\ b.h /usr/include/stdio.h\n";
  const std::string tmpl = roots().templatize(dep);
  EXPECT_EQ(tmpl.find("/p/"), std::string::npos);
  const PathRoots other({{"/q/b", "/kache/build"}, {"/q/s", "/kache/src"}, {"/q/b/obj", "/kache/out"}});
  EXPECT_EQ(other.instantiate(tmpl), "obj/k.o : /q/s/k.cu \\\n    /q/b/../inc/a\\ b.h /usr/include/stdio.h\n");
  EXPECT_EQ(roots().instantiate(tmpl), dep);
}

TEST(PathRoots, DiagnosticTemplatesNameAnotherCheckoutsFiles) {
  const PathRoots a({{"/p/my build", "/kache/build"}, {"/p/my build/obj", "/kache/out"}});
  const PathRoots b({{"/q/b", "/kache/build"}, {"/q/b/obj", "/kache/out"}});
  const std::string err = "/p/my build/w.cu(2): warning #177-D: variable \"x\" was declared\n/usr/include/x.h\n";
  const std::string tmpl = a.templatize_text(err);
  EXPECT_EQ(tmpl.find("/p/"), std::string::npos);
  EXPECT_EQ(b.instantiate_text(tmpl), "/q/b/w.cu(2): warning #177-D: variable \"x\" was declared\n/usr/include/x.h\n");
  EXPECT_EQ(a.instantiate_text(tmpl), err);
}

TEST(PathRoots, DepfileTemplatesReplaceWholeLeadingComponentsOnly) {
  // "/p/srcx" is not below the root "/p/src", and "x/p/src/h.h" is a relative path: both stay literal
  // in another checkout.
  const std::string dep = "k.o : /p/src/k.cu /p/srcx/h.h x/p/src/h.h /p/src\\ y/h.h \\\n /p/build/obj/g.h\n";
  const PathRoots other({{"/q/b", "/kache/build"}, {"/q/s", "/kache/src"}, {"/q/b/obj", "/kache/out"}});
  EXPECT_EQ(other.instantiate(roots().templatize(dep)),
            "k.o : /q/s/k.cu /p/srcx/h.h x/p/src/h.h /p/src\\ y/h.h \\\n /q/b/obj/g.h\n");
}

// Found by fuzz_depfile (fuzz/regressions/fuzz_depfile/): a root's spelling inside another path was
// templated too, so a hit in another checkout wrote a dependency file naming files that do not exist
// there (and not the header the object really depends on).
TEST(PathRoots, DepfileTemplatesReplaceOnlyWholeLeadingDirectories) {
  const PathRoots here({{"/p/src", "/kache/src"}, {"/r", "/kache/build"}});
  const PathRoots there({{"/q/s", "/kache/src"}, {"/t", "/kache/build"}});
  const std::string dep =
      "/r/k.o : /p/src/k.cu /home/p/src/a.h /p/srcx/b.h /p/src\\ /p/src:c.h \\\n  /r/p/src/d.h /a\\ /p/src/e.h "
      "/r\n";
  const std::string tmpl = here.templatize(dep);
  EXPECT_EQ(here.instantiate(tmpl), dep);
  EXPECT_EQ(there.instantiate(tmpl),
            "/t/k.o : /q/s/k.cu /home/p/src/a.h /p/srcx/b.h /p/src\\ /p/src:c.h \\\n  /t/p/src/d.h /a\\ /p/src/e.h "
            "/t\n");
}

TEST(Depfile, ParsesNvccOutput) {
  const Depfile d = parse_depfile(
      "out/k.o : k.cu \\\n    /usr/include/stdc-predef.h \\\n    sp\\ ace/h.h \\\n    k.cu \\\n    a$$b.h\n");
  EXPECT_EQ(d.targets, std::vector<std::string>{"out/k.o"});
  EXPECT_EQ(d.deps, (std::vector<std::string>{"k.cu", "/usr/include/stdc-predef.h", "sp ace/h.h", "a$b.h"}));
}

TEST(Depfile, TargetWithSpacesAndPhonyRules) {
  const Depfile d = parse_depfile("a b.o : x.cu y.h\n\ny.h:\n");
  EXPECT_EQ(d.deps, (std::vector<std::string>{"x.cu", "y.h"}));
  EXPECT_THROW(parse_depfile("no colon here\n"), std::runtime_error);
}

TEST(Depfile, AllRulesOfAListingWithOneRulePerCompile) {
  // clang -M over HIP targets (hipcc --dependencies): one rule per device compile and the host's.
  const std::string listing = "k.o: k.hip \\\n  inc/only1030.h\nk.o: k.hip \\\n  inc/only90a.h\nk.o: k.hip inc/q.h\n";
  EXPECT_EQ(parse_depfile(listing).deps, (std::vector<std::string>{"k.hip", "inc/only1030.h"}));
  EXPECT_EQ(parse_depfile(listing, true).deps,
            (std::vector<std::string>{"k.hip", "inc/only1030.h", "inc/only90a.h", "inc/q.h"}));
  EXPECT_EQ(parse_depfile("a b.o : x.cu y.h\n\ny.h:\n", true).deps, (std::vector<std::string>{"x.cu", "y.h"}));
}

TEST(Depfile, TargetIsTemplatedForAnotherOutput) {
  const std::string dep = "o1/x.o : x.cu \\\n    h.h\n";
  const std::string tmpl = templatize_target(dep, "o1/x.o");
  EXPECT_EQ(tmpl.find("o1/x.o"), std::string::npos);
  EXPECT_EQ(instantiate_target(tmpl, "o2/x.o"), "o2/x.o : x.cu \\\n    h.h\n");
  EXPECT_EQ(instantiate_target(tmpl, "o1/x.o"), dep);
  // Through the path roots too (an absolute target below the output root), in either order.
  EXPECT_EQ(instantiate_target(roots().instantiate(roots().templatize(tmpl)), "o2/x.o"), "o2/x.o : x.cu \\\n    h.h\n");
  // Only the whole first token: a target that merely starts like it, or other text, stays as it is.
  EXPECT_EQ(templatize_target("o1/x.oo : x.cu\n", "o1/x.o"), "o1/x.oo : x.cu\n");
  EXPECT_EQ(templatize_target("o1/x.o: x.cu\n", "o1/x.o").substr(3), ": x.cu\n");
  EXPECT_EQ(templatize_target(dep, ""), dep);
  EXPECT_EQ(instantiate_target(dep, "o2/x.o"), dep);
}

TEST(Watch, HasIncludeScan) {
  std::vector<std::string> names;
  bool opaque = false;
  scan_has_include(
      "#if __has_include(<opt/x.h>)\n#elif __has_include_next(\"y.h\")\n#if _CCCL_HAS_INCLUDE(<nv/target>)\n"
      "#define _CCCL_HAS_INCLUDE(_X) __has_include(_X)\n#ifdef __has_include\n#endif",
      names, opaque);
  EXPECT_EQ(names, (std::vector<std::string>{"opt/x.h", "y.h", "nv/target"}));
  EXPECT_FALSE(opaque);
  scan_has_include("#if __has_include(HEADER)\n#endif\n", names, opaque);
  EXPECT_TRUE(opaque);
}

TEST(Watch, HasIncludeWrappersUnderOtherNamesAreOpaque) {
  auto opaque_of = [](std::string_view text) {
    std::vector<std::string> names;
    bool opaque = false;
    scan_has_include(text, names, opaque);
    return opaque;
  };
  // Uses of HAVE(<x>) name headers the scan never sees.
  EXPECT_TRUE(opaque_of("#define HAVE(h) __has_include(h)\n#if HAVE(<x.h>)\n#endif\n"));
  EXPECT_TRUE(opaque_of("#  define HAVE __has_include\n"));
  EXPECT_TRUE(opaque_of("#define HAVE2(h) _CCCL_HAS_INCLUDE(h)\n"));
  // Wrappers the scan matches by name, and the fallback definition of __has_include itself.
  EXPECT_FALSE(opaque_of("#  define _CCCL_HAS_INCLUDE(_X) __has_include(_X)\n"));
  EXPECT_FALSE(opaque_of("#define MY_HAS_INCLUDE_NEXT(x) __has_include_next(x)\n"));
  EXPECT_FALSE(opaque_of("#ifndef __has_include\n#define __has_include(x) 0\n#endif\n"));
  EXPECT_FALSE(opaque_of("#define HAVE_TBB __has_include(<tbb/tbb.h>)\n#if defined(__has_include)\n#endif\n"));
}

TEST(Watch, IncludeNamesOfEveryBranch) {
  std::vector<std::string> names;
  bool opaque = false;
  scan_include_names(
      "#include \"a.h\"\n#if 0\n  #  include <sub/b.h>\n#endif\n#include_next <c.h>\n"
      "// #include \"comment.h\" is no directive\nint include = 1;\n",
      names, opaque);
  EXPECT_EQ(names, (std::vector<std::string>{"a.h", "sub/b.h", "c.h"}));
  EXPECT_FALSE(opaque);
  // stb_image.h's usage comment: `#include ...` is no directive a compile that succeeded could have run.
  scan_include_names("/* it should look like this:\n   #include ...\n   #include ...\n*/\n#include \n", names, opaque);
  EXPECT_FALSE(opaque);
  scan_include_names("#include CONFIG_HEADER\n", names, opaque);
  EXPECT_TRUE(opaque);
  opaque = false;
  scan_include_names("#include \\\n  <continued.h>\n", names, opaque);
  EXPECT_TRUE(opaque);
  opaque = false;
  scan_include_names("#include /* the configured one */ CONFIG_HEADER\n", names, opaque);
  EXPECT_TRUE(opaque);
}

// Spellings of #include a preprocessor accepts but this scan does not read: each makes the compile
// opaque (a #pragma once header reached through one, identical to another, is skipped, unlisted by
// -MD, and served stale after an edit; found in review with gcc 12). Comments and prose do not.
TEST(Watch, UnusualDirectiveSpellingsAreOpaque) {
  const auto opaque_of = [](std::string_view text) {
    std::vector<std::string> names;
    bool opaque = false;
    scan_include_names(text, names, opaque);
    scan_has_include(text, names, opaque);
    return opaque;
  };
  for (std::string_view text : {"%:include \"b.h\"\n", "/**/#include \"b.h\"\n", "#/**/include \"b.h\"\n",
                                "\f#include \"b.h\"\n", "#\\\ninclude \"b.h\"\n", "#inc\\\nlude \"b.h\"\n",
                                "?\?=include \"b.h\"\n", "\xEF\xBB\xBF#include \"b.h\"\n",
                                "#if __has_include/**/(\"n.h\")\n#endif\n", "#if __has_include \\\n(\"n.h\")\n#endif\n"}) {
    EXPECT_TRUE(opaque_of(text)) << text;
  }
  for (std::string_view text : {"// see #include <x.h>\n", "/* #include MACRO */\n", "int include = 1;\n",
                                " * include files come first\n", "#define X 1 \\\n  + 2\n"}) {
    EXPECT_FALSE(opaque_of(text)) << text;
  }
  std::vector<std::string> names;
  bool opaque = false;
  scan_include_names("int a;\r#include \"cr.h\"\r#import \"objc.h\"\n", names, opaque);
  EXPECT_EQ(names, (std::vector<std::string>{"cr.h", "objc.h"}));
  EXPECT_FALSE(opaque);
}

// Issue 39: a __has_include name split by a line splice is read as the compiler reads it, spliced.
TEST(Watch, SplicedHasIncludeIsRead) {
  std::vector<std::string> names;
  bool opaque = false;
  scan_has_include("#if __has_\\\ninclude(\"n.h\")\n#endif\n#if __has_include_\\  \r\nnext(<m.h>)\n#endif\n", names,
                   opaque);
  EXPECT_EQ(names, (std::vector<std::string>{"n.h", "m.h"}));
  EXPECT_FALSE(opaque);
  scan_has_include("#if __has\\\n_include(N_H)\n#endif\n", names, opaque);
  EXPECT_TRUE(opaque);
  opaque = false;
  // Under trigraphs (ISO modes) ??/ splices too.
  scan_has_include("#if __has_?\?/\ninclude(NAME)\n#endif\n", names, opaque);
  EXPECT_TRUE(opaque);
}

// Issue 39: a comment closing on a directive's line may have opened on an earlier one; the preprocessor
// takes the '#' after it as a directive's.
TEST(Watch, IncludeAfterAMultiLineCommentIsRead) {
  std::vector<std::string> names;
  bool opaque = false;
  scan_include_names("/* a comment\n   over lines */ #include \"x.h\"\n/**/\n*/#  include <y.h>\n", names, opaque);
  EXPECT_EQ(names, (std::vector<std::string>{"x.h", "y.h"}));
  EXPECT_FALSE(opaque);
  scan_include_names("/* a comment\n */ #include CONFIG_H\n", names, opaque);
  EXPECT_TRUE(opaque);
}

// Issue 39: __has_include built by token pasting is no word the scan sees; scan_pastes says when a paste
// may have built one (the pipeline then makes the closure opaque), over every project file together.
TEST(Watch, PastedHasIncludeMayBeBuilt) {
  const auto builds = [](std::initializer_list<std::string_view> files) {
    PasteScan all;
    for (std::string_view f : files) all |= scan_pastes(f).has_include;
    return all.may_build();
  };
  EXPECT_TRUE(builds({"#define CAT(a, b) a##b\n#if CAT(__has_, include)(\"x.h\")\n#endif\n"}));
  EXPECT_TRUE(builds({"#define CAT(a, b) a ## b\n", "#if CAT(__has_incl, ude)(<x.h>)\n#endif\n"}));
  EXPECT_TRUE(builds({"#define H __has_##include\n#if H(\"x.h\")\n#endif\n"}));
  EXPECT_TRUE(builds({"%:define H(x) __has_ %:%: x\n"}));
  EXPECT_TRUE(builds({"#define CAT(a, b) a##b\n#define P1 __has_\n#define P2 include\n"}));
  EXPECT_TRUE(builds({"#define CAT(a, b) a##\\\nb\n#if CAT(__has_, include_next)(<x.h>)\n#endif\n"}));
  // A paste of other pieces, and pieces where no paste or #if reaches them, build nothing.
  EXPECT_FALSE(builds({"#define CAT(a, b) a##b\nint CAT(my, var) = 1;\n#include \"next.h\"\n"}));
  EXPECT_FALSE(builds({"#define CAT(a, b) a##b\n#if defined(__has_include) && VERSION > 2\n#endif\n"}));
  EXPECT_FALSE(builds({"#define CAT(a, b) a##b\n#if defined(HAS_INCLUDE) || defined NEXT\n#endif\n"}));
  EXPECT_FALSE(builds({"#if __has_include(\"x.h\")\n#endif\n#define STR(x) #x\n"}));
}

// Issue 39: where a file may make the compiler expand a path (core/expansion_scan.hpp).
TEST(ExpansionScan, PathWords) {
  const auto scan = [](std::string_view text) {
    const PathExpansion e = scan_path_expansions(text);
    std::string out = std::string(e.here ? "here " : "") + (e.base ? "base " : "") + (e.anywhere ? "anywhere" : "");
    for (const auto& m : e.macros) out += "macro:" + m + " ";
    return out;
  };
  EXPECT_EQ(scan("int n = sizeof(__FILE__);\n"), "here ");
  EXPECT_EQ(scan("#line 10 \"x.c\"\n"), "here ");
  EXPECT_EQ(scan("const char* b = __BASE_FILE__;\n"), "base ");
  // A macro's body expands where the macro is used (scan_macro_uses finds where); a default argument
  // where the call is; a directive the scan cannot read anywhere.
  EXPECT_EQ(scan("#define WHERE __FILE__\n#  define CHECK(x) f(x, __FILE__)\n"), "macro:WHERE macro:CHECK ");
  EXPECT_EQ(scan("#define WHERE \\\n  log(__FI\\\nLE__)\n"), "macro:WHERE ");
  EXPECT_EQ(scan("#define WHERE /* a comment\n over lines */ __FILE__\n"), "anywhere");
  EXPECT_EQ(scan("#/**/define WHERE __FILE__\n"), "anywhere");
  // Without trigraphs the next line is code of its own; with them, the macro's body: both are taken.
  EXPECT_EQ(scan("#define WHERE ?\?/\n  __FILE__\n"), "here macro:WHERE ");
  EXPECT_EQ(scan("void f(std::source_location l = std::source_location::current());\n"), "anywhere");
  EXPECT_EQ(scan("const char* f(const char* s = __builtin_FILE());\n"), "anywhere");
  // The base name (the key holds it), other words, and parts of longer identifiers.
  EXPECT_EQ(scan("int n = sizeof(__FILE_NAME__) + sizeof(__builtin_FILE_NAME());\n"), "");
  EXPECT_EQ(scan("int MY__FILE__X, line = 1; // one line\ninline int g();\n"), "");
  EXPECT_EQ(scan_path_expansions("int a;\n#define W __FILE__\n").spelling, "__FILE__");
  // Where path macros are used: in code or an #if (here), in another macro's body (one more macro).
  const std::vector<std::string> macros{"WHERE"};
  EXPECT_TRUE(scan_macro_uses("int n = sizeof(WHERE);\n", macros).uses);
  EXPECT_FALSE(scan_macro_uses("#define WHERE __FILE__\n#ifdef WHERE\n#endif\n#undef WHERE\n", macros).uses);
  EXPECT_EQ(scan_macro_uses("#define HERE(x) g(x, WHERE)\n", macros).defines, std::vector<std::string>{"HERE"});
  EXPECT_TRUE(scan_macro_uses("/* a\n */ #define HERE WHERE\n", macros).anywhere);
  EXPECT_TRUE(scan_macro_uses("#define CAT(a, b) a##b\nint n = sizeof(CAT(WHE, RE));\n", macros).pastes.may_build());
  // Pasted together.
  EXPECT_TRUE(scan_pastes("#define CAT(a, b) a##b\nint n = sizeof(CAT(__FI, LE__));\n").path.may_build());
  EXPECT_FALSE(scan_pastes("#define CAT(a, b) a##b\nint n = sizeof(CAT(x, y));\n").path.may_build());
}

TEST(Watch, HiddenInputMarkers) {
  EXPECT_EQ(scan_hidden_inputs("asm(\".incbin \\\"blob.bin\\\"\");"), "incbin");
  EXPECT_EQ(scan_hidden_inputs("asm(\".include \\\"x.s\\\"\");"), "asm-include");
  EXPECT_EQ(scan_hidden_inputs("const char* t = __TIMESTAMP__;"), "timestamp");
  EXPECT_EQ(scan_hidden_inputs("#include <x.h>\nint incbin_count; int MY__TIMESTAMP__X;\n.includes"), "");
}

TEST(Watch, PragmaDependencyIsFoundInAnySpelling) {
  EXPECT_TRUE(names_pragma_dependency("#pragma GCC dependency \"dep.h\"\n"));
  EXPECT_TRUE(names_pragma_dependency("_Pragma(\"GCC  dependency \\\"dep.h\\\"\")"));
  EXPECT_TRUE(names_pragma_dependency("#pragma clang dependency \"x\""));
  EXPECT_FALSE(names_pragma_dependency("// a dependency of GCC\nint dependency_count;\n#pragma GCC dependencies"));
}

TEST(Watch, AssemblerInputsAreSuspectedAcrossStringConcatenationAndCase) {
  EXPECT_TRUE(may_read_assembler_inputs("asm(\".inc\" \"bin \\\"blob\\\"\");"));
  EXPECT_TRUE(may_read_assembler_inputs("asm(\".inc\"\n   \"lude \\\"x.s\\\"\");"));
  EXPECT_TRUE(may_read_assembler_inputs(".section .rodata\n.INCBIN \"blob\"\n"));
  EXPECT_TRUE(may_read_assembler_inputs("asm(\".macro m a\\n.inc\\\\()\\a\\n.endm\");"));
  // stdio.h's symbol renames and line markers naming /usr/include are no directives.
  EXPECT_FALSE(may_read_assembler_inputs(
      "# 1 \"/usr/include/stdio.h\" 1 3 4\nextern int fscanf(FILE*, const char*, ...) __asm__ (\"\" \"__isoc99_fscanf\");"));
}

TEST(Watch, HasEmbedTargetsAreNamedLikeHasInclude) {
  std::vector<std::string> names;
  bool opaque = false;
  scan_has_include("#if __has_embed(\"blob.bin\")\n#endif\n", names, opaque);
  EXPECT_EQ(names, std::vector<std::string>{"blob.bin"});
  EXPECT_FALSE(opaque);
}

TEST(Watch, ExistingHasIncludeTargetsOutsideTheClosureAreReported) {
  util::TempDir dir("/tmp");
  const std::string a = util::join_path(dir.path(), "a");
  util::create_directories(a);
  util::write_file(util::join_path(a, "h.h"), "");
  util::write_file(util::join_path(a, "opt.h"), "");
  std::vector<std::string> present;
  const auto absent = watch_set({util::join_path(a, "h.h")}, {a}, {}, {"opt.h", "h.h", "none.h"}, nullptr, &present);
  EXPECT_EQ(present, std::vector<std::string>{util::join_path(a, "opt.h")});  // h.h is in the closure
  EXPECT_EQ(absent, std::vector<std::string>{util::join_path(a, "none.h")});
}

TEST(Watch, ShadowingCandidatesAndHasIncludeTargets) {
  util::TempDir dir("/tmp");
  const std::string a = util::join_path(dir.path(), "a"), b = util::join_path(dir.path(), "b");
  util::create_directories(a);
  util::create_directories(util::join_path(b, "sub"));
  util::write_file(util::join_path(b, "sub/h.h"), "");
  const std::string src_dir = util::join_path(dir.path(), "src");
  util::create_directories(src_dir);
  const std::vector<std::string> w = watch_set({util::join_path(b, "sub/h.h")}, {src_dir, a, b}, {}, {"opt.h"});
  auto has = [&](const std::string& p) { return std::find(w.begin(), w.end(), p) != w.end(); };
  // a/sub is missing: one absent path stands for a/sub/h.h and everything else below it.
  EXPECT_TRUE(has(util::join_path(a, "sub")));
  EXPECT_TRUE(has(util::join_path(src_dir, "sub")));
  EXPECT_FALSE(has(util::join_path(b, "sub/h.h")));  // the recorded file itself
  EXPECT_TRUE(has(util::join_path(src_dir, "opt.h")));
  EXPECT_TRUE(has(util::join_path(a, "opt.h")));
}

TEST(Watch, AbsentPathsAreGroupedUnderTheirDirectorysIdentity) {
  util::TempDir dir("/tmp");
  const std::string inc = util::join_path(dir.path(), "inc");
  util::create_directories(inc);
  const std::vector<std::string> absent = {util::join_path(inc, "x.h"), util::join_path(inc, "thrust"),
                                           util::join_path(dir.path(), "gone/..")};
  auto always = [](const std::string&, const util::FileIdentity&, std::int64_t) { return true; };
  auto groups = group_absent(absent, {}, always);
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0].dir, inc);
  EXPECT_EQ((*groups)[0].names, (std::vector<std::string>{"x.h", "thrust"}));
  ASSERT_TRUE((*groups)[0].guard);
  EXPECT_EQ(*(*groups)[0].guard, *util::stat_identity(inc));
  // "gone/.." is kept as spelled: its directory "gone" does not exist, so nothing guards it.
  EXPECT_EQ((*groups)[1].dir, util::join_path(dir.path(), "gone"));
  EXPECT_EQ((*groups)[1].names, std::vector<std::string>{".."});
  EXPECT_FALSE((*groups)[1].guard);

  // A directory changed within the clock tick gets no guard: its names are checked one by one.
  auto never = [](const std::string&, const util::FileIdentity&, std::int64_t) { return false; };
  auto racy = group_absent(absent, {}, never);
  ASSERT_TRUE(racy);
  EXPECT_FALSE((*racy)[0].guard);

  // In a toolchain directory a guarded group keeps no names (its identity alone must hold); an
  // unguarded one keeps them.
  auto sys = group_absent(absent, {inc}, always);
  ASSERT_TRUE(sys);
  EXPECT_TRUE((*sys)[0].guard);
  EXPECT_TRUE((*sys)[0].names.empty());
  EXPECT_EQ(group_absent(absent, {inc}, never)->at(0).names.size(), 2u);

  // Creating a name moves the directory's identity (what a lookup relies on) once the clock tick of the
  // directory's last change has passed (within it, the directory is racy and gets no guard, above).
  // Without multigrain timestamps (Linux < 6.13) a write within the tick could keep mtime and ctime.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto before = *util::stat_identity(inc);
  util::write_file(util::join_path(inc, "x.h"), "");
  EXPECT_FALSE(*util::stat_identity(inc) == before);
  // ... and a name that exists by the time it is grouped means no record at all.
  EXPECT_FALSE(group_absent(absent, {}, always));
}

TEST(Watch, ListingDigestIsTheDirectorysSortedNames) {
  util::TempDir dir("/tmp");
  const std::string a = util::join_path(dir.path(), "a"), b = util::join_path(dir.path(), "b");
  util::create_directories(util::join_path(a, "sub"));
  util::write_file(util::join_path(a, "z.h"), "1");
  util::write_file(util::join_path(a, "m.h"), "2");
  EXPECT_EQ(directory_names(a), (std::vector<std::string>{"m.h", "sub", "z.h"}));
  EXPECT_FALSE(directory_names(util::join_path(a, "z.h")));  // not a directory
  EXPECT_FALSE(listing_digest(util::join_path(dir.path(), "missing")));
  // Another directory (another identity) with the same names, created in another order and with other
  // contents: the same listing. Only names count (contents are checked through the closure's files).
  util::create_directories(util::join_path(b, "sub"));
  util::write_file(util::join_path(b, "z.h"), "other");
  util::write_file(util::join_path(b, "m.h"), "");
  ASSERT_FALSE(*util::stat_identity(a) == *util::stat_identity(b));
  ASSERT_TRUE(listing_digest(a));
  EXPECT_EQ(listing_digest(a), listing_digest(b));
  // A name more, or one renamed: another listing.
  util::write_file(util::join_path(b, "new.h"), "");
  EXPECT_NE(listing_digest(a), listing_digest(b));
  ::unlink(util::join_path(b, "new.h").c_str());
  EXPECT_EQ(listing_digest(a), listing_digest(b));
  ::rename(util::join_path(b, "m.h").c_str(), util::join_path(b, "n.h").c_str());
  EXPECT_NE(listing_digest(a), listing_digest(b));
  // Names are length-prefixed: {"ab"} and {"a", "b"} differ.
  EXPECT_NE(names_digest({"ab"}), names_digest({"a", "b"}));
  EXPECT_NE(names_digest({}), names_digest({""}));
}

TEST(Watch, GuardedToolchainGroupKeepsTheListingTakenUnderItsGuard) {
  util::TempDir dir("/tmp");
  const std::string inc = util::join_path(dir.path(), "inc");
  util::create_directories(inc);
  util::write_file(util::join_path(inc, "present.h"), "");
  const std::vector<std::string> absent = {util::join_path(inc, "x.h"), util::join_path(inc, "thrust")};
  auto always = [](const std::string&, const util::FileIdentity&, std::int64_t) { return true; };
  auto never = [](const std::string&, const util::FileIdentity&, std::int64_t) { return false; };
  auto sys = group_absent(absent, {inc}, always);
  ASSERT_TRUE(sys);
  ASSERT_TRUE((*sys)[0].listing);
  EXPECT_EQ((*sys)[0].listing, listing_digest(inc));
  // Outside the toolchain the names are kept and checked: no listing. Unguarded (racy): none either.
  EXPECT_FALSE(group_absent(absent, {}, always)->at(0).listing);
  EXPECT_FALSE(group_absent(absent, {inc}, never)->at(0).listing);
  // An observed guard that no longer matches the directory: the listing read now may not be the one
  // of the guard's moment, so none is kept (the identity alone must then hold, as before).
  util::FileIdentity old = *util::stat_identity(inc);
  old.mtime_ns -= 1'000'000'000;
  Observations seen{{inc, {old, 1, 0}},
                    {absent[0], {std::nullopt, 2, 0}},
                    {absent[1], {std::nullopt, 3, 0}}};
  auto stale = group_absent(absent, {inc}, always, &seen);
  ASSERT_TRUE(stale);
  EXPECT_EQ((*stale)[0].guard, old);
  EXPECT_FALSE((*stale)[0].listing);
  // A watched name that is an entry exists() calls missing (a dangling link): its target could appear
  // elsewhere with the listing unchanged, so no listing is kept.
  ASSERT_EQ(::symlink(util::join_path(dir.path(), "nowhere").c_str(), absent[0].c_str()), 0);
  auto dangling = group_absent(absent, {inc}, always);
  ASSERT_TRUE(dangling);
  EXPECT_TRUE((*dangling)[0].guard);
  EXPECT_FALSE((*dangling)[0].listing);
}

TEST(Watch, ObservedDirectoryGuardsOnlyNamesCheckedAfterIt) {
  util::TempDir dir("/tmp");
  const std::string inc = util::join_path(dir.path(), "inc");
  util::create_directories(inc);
  const std::string x = util::join_path(inc, "x.h");
  util::FileIdentity fake = *util::stat_identity(inc);
  fake.mtime_ns = 1;  // tells the observed identity apart from a fresh stat
  std::int64_t clock_seen = -1;
  auto trusted = [&](const std::string&, const util::FileIdentity&, std::int64_t clock) {
    clock_seen = clock;
    return true;
  };
  // The directory was stat'ed (order 1, clock 42) before its name (order 2): that identity is the guard,
  // judged by the clock of that moment.
  Observations before{{inc, {fake, 1, 42}}, {x, {std::nullopt, 2, 43}}};
  auto g = group_absent({x}, {}, trusted, &before);
  ASSERT_TRUE(g);
  EXPECT_EQ((*g)[0].guard, fake);
  EXPECT_EQ(clock_seen, 42);
  // Stat'ed after its name was found missing: a creation in between would be inside that identity, so
  // the directory is stat'ed again and the name re-checked.
  Observations after{{inc, {fake, 2, 42}}, {x, {std::nullopt, 1, 43}}};
  g = group_absent({x}, {}, trusted, &after);
  ASSERT_TRUE(g);
  EXPECT_EQ((*g)[0].guard, util::stat_identity(inc));
  EXPECT_NE(clock_seen, 42);
  // watch_set records its stats in order: a search directory before the names below it.
  const std::string b = util::join_path(dir.path(), "b");
  util::create_directories(b);
  util::write_file(util::join_path(b, "h.h"), "");
  Observations seen;
  const auto absent = watch_set({util::join_path(b, "h.h")}, {inc, b}, {}, {}, &seen);
  ASSERT_EQ(absent, std::vector<std::string>{util::join_path(inc, "h.h")});
  EXPECT_LT(seen.at(inc).order, seen.at(util::join_path(inc, "h.h")).order);
  EXPECT_FALSE(seen.at(util::join_path(inc, "h.h")).id);
}

TEST(Watch, SplitLastKeepsTheSpelling) {
  EXPECT_EQ(split_last("/a/b/.."), (std::pair<std::string, std::string>{"/a/b", ".."}));
  EXPECT_EQ(split_last("/x"), (std::pair<std::string, std::string>{"/", "x"}));
  EXPECT_EQ(split_last("/a/./h.h"), (std::pair<std::string, std::string>{"/a/.", "h.h"}));
}

}  // namespace
}  // namespace kache::core
