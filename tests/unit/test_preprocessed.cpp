// The preprocessed-mode fallback's reading of preprocessed output (issue 39): line markers keyed by the
// path roots' names, and the files they say were read.
#include <gtest/gtest.h>

#include "core/path_roots.hpp"
#include "core/preprocessed.hpp"

namespace kache::core {
namespace {

PathRoots roots(const std::string& checkout) {
  return PathRoots({{checkout + "/build", "/kache/build"}, {checkout + "/src", "/kache/src"}});
}

// What GCC 12 prints for `gcc -E -g ../src/a.c` in <checkout>/build, cfg.h included through a macro.
std::string gcc_output(const std::string& checkout) {
  return "# 0 \"../src/a.c\"\n"
         "# 1 \"" +
         checkout +
         "/build//\"\n"
         "# 0 \"<built-in>\"\n"
         "# 0 \"<command-line>\"\n"
         "# 1 \"/usr/include/stdc-predef.h\" 1 3 4\n"
         "# 0 \"<command-line>\" 2\n"
         "# 1 \"../src/a.c\"\n"
         "# 1 \"" +
         checkout +
         "/src/cfg.h\" 1\n"
         "\n"
         "# 3 \"../src/a.c\" 2\n"
         "const char* where = \"" +
         checkout + "/src/a.c\";\n";
}

TEST(Preprocessed, LineMarkersAreKeyedByTheRootsNamesAndNothingElse) {
  const std::string one = keyed_line_markers(gcc_output("/w/one"), roots("/w/one"));
  const std::string two = keyed_line_markers(gcc_output("/w/two"), roots("/w/two"));
  EXPECT_NE(one.find("# 1 \"/kache/src/cfg.h\" 1\n"), std::string::npos) << one;
  EXPECT_NE(one.find("# 1 \"/kache/build//\"\n"), std::string::npos) << one;
  EXPECT_NE(one.find("# 1 \"/usr/include/stdc-predef.h\" 1 3 4\n"), std::string::npos) << one;
  // A path in the program's text (a __FILE__ expansion) is the program's: keyed as printed.
  EXPECT_NE(one.find("\"/w/one/src/a.c\";"), std::string::npos) << one;
  EXPECT_NE(one, two);
  const std::string marker_only = "# 1 \"/w/one/src/cfg.h\" 1\nint x;\n";
  EXPECT_EQ(keyed_line_markers(marker_only, roots("/w/one")),
            keyed_line_markers("# 1 \"/w/two/src/cfg.h\" 1\nint x;\n", roots("/w/two")));
}

TEST(Preprocessed, NoMarkerIsReadInsideOtherLines) {
  const std::string text = "#pragma GCC diagnostic push\n#12 \"/w/one/src/x.h\"\n  # 1 \"/w/one/src/x.h\"\n";
  EXPECT_EQ(keyed_line_markers(text, roots("/w/one")), text);
  const std::string clang_line = "#line 4 \"/w/one/src/x.h\"\n";
  EXPECT_EQ(keyed_line_markers(clang_line, roots("/w/one")), "#line 4 \"/kache/src/x.h\"\n");
}

TEST(Preprocessed, FilesAreTheMainFileAndEveryFileEntered) {
  const auto files = line_marker_files(gcc_output("/w/one"));
  ASSERT_TRUE(files);
  EXPECT_EQ(*files, (std::vector<std::string>{"../src/a.c", "/usr/include/stdc-predef.h", "/w/one/src/cfg.h"}));
  // A #line directive's name (a marker without flags) is no file read.
  const auto lined = line_marker_files("# 1 \"a.y\"\n# 7 \"grammar.y\"\nint x;\n");
  ASSERT_TRUE(lined);
  EXPECT_EQ(*lined, std::vector<std::string>{"a.y"});
}

TEST(Preprocessed, AnEscapedNameIsNotGuessed) {
  EXPECT_FALSE(line_marker_files("# 1 \"a.c\"\n# 1 \"we\\\"ird.h\" 1\n"));
  const std::string text = "# 1 \"/w/one/src/we\\\\ird.h\" 1\n";
  EXPECT_EQ(keyed_line_markers(text, roots("/w/one")), text);
}

}  // namespace
}  // namespace kache::core
