// Dependency-file layouts: the renderer against the files gcc 12.2, clang 14 and clang 19 wrote (captured
// below: one checkout at /tmp/s, one at a much longer root; -MMD -MP, and -MD with three -MT/-MQ
// targets), byte for byte, and the re-wrap a restore in the other checkout does.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/depfile.hpp"

namespace kache::core {
namespace {

struct Captured {
  const char* compiler;
  DepfileLayout layout;
  std::string short_root;  // the compiler's depfile in /tmp/s
  std::string long_root;   // the same compile in kLongRoot
};

const std::string kLongRoot = "/tmp/a_checkout_with_a_much_longer_root_path_for_kache";

std::string with_root(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

const std::vector<Captured>& captured() {
  static const std::vector<Captured> all = {
      {"gcc mmd_mp", DepfileLayout::gcc72,
       R"(a.o: /tmp/s/a.c /tmp/s/sub/header_with_a_rather_long_name_1.h \
 /tmp/s/sub/header_with_a_rather_long_name_2.h /tmp/s/inc\ dir/sp\ ace.h \
 /tmp/s/sub/d$$ol\#h.h /tmp/s/sub/header_with_a_rather_long_name_3.h \
 /tmp/s/sub/header_with_a_rather_long_name_4.h
/tmp/s/sub/header_with_a_rather_long_name_1.h:
/tmp/s/sub/header_with_a_rather_long_name_2.h:
/tmp/s/inc\ dir/sp\ ace.h:
/tmp/s/sub/d$$ol\#h.h:
/tmp/s/sub/header_with_a_rather_long_name_3.h:
/tmp/s/sub/header_with_a_rather_long_name_4.h:
)",
       R"(a.o: /tmp/a_checkout_with_a_much_longer_root_path_for_kache/a.c \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h:
)"},
      {"gcc md_targets", DepfileLayout::gcc72,
       R"(a_target_that_is_quite_long_number_one.o \
 second_long_target_name_xxxxxxxxxxxxx.o q$$\ t.o: /tmp/s/a.c \
 /usr/include/stdc-predef.h /tmp/s/sub/header_with_a_rather_long_name_1.h \
 /tmp/s/sub/header_with_a_rather_long_name_2.h /tmp/s/inc\ dir/sp\ ace.h \
 /tmp/s/sub/d$$ol\#h.h /usr/include/stdio.h \
 /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
 /usr/include/features.h /usr/include/features-time64.h \
 /usr/include/x86_64-linux-gnu/bits/wordsize.h \
 /usr/include/x86_64-linux-gnu/bits/timesize.h \
 /usr/include/x86_64-linux-gnu/sys/cdefs.h \
 /usr/include/x86_64-linux-gnu/bits/long-double.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stdarg.h \
 /usr/include/x86_64-linux-gnu/bits/types.h \
 /usr/include/x86_64-linux-gnu/bits/typesizes.h \
 /usr/include/x86_64-linux-gnu/bits/time64.h \
 /usr/include/x86_64-linux-gnu/bits/types/__fpos_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__mbstate_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__fpos64_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__FILE.h \
 /usr/include/x86_64-linux-gnu/bits/types/FILE.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_FILE.h \
 /usr/include/x86_64-linux-gnu/bits/stdio_lim.h \
 /usr/include/x86_64-linux-gnu/bits/floatn.h \
 /usr/include/x86_64-linux-gnu/bits/floatn-common.h \
 /tmp/s/sub/header_with_a_rather_long_name_3.h \
 /tmp/s/sub/header_with_a_rather_long_name_4.h
)",
       R"(a_target_that_is_quite_long_number_one.o \
 second_long_target_name_xxxxxxxxxxxxx.o q$$\ t.o: \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/a.c \
 /usr/include/stdc-predef.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h \
 /usr/include/stdio.h \
 /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
 /usr/include/features.h /usr/include/features-time64.h \
 /usr/include/x86_64-linux-gnu/bits/wordsize.h \
 /usr/include/x86_64-linux-gnu/bits/timesize.h \
 /usr/include/x86_64-linux-gnu/sys/cdefs.h \
 /usr/include/x86_64-linux-gnu/bits/long-double.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stdarg.h \
 /usr/include/x86_64-linux-gnu/bits/types.h \
 /usr/include/x86_64-linux-gnu/bits/typesizes.h \
 /usr/include/x86_64-linux-gnu/bits/time64.h \
 /usr/include/x86_64-linux-gnu/bits/types/__fpos_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__mbstate_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__fpos64_t.h \
 /usr/include/x86_64-linux-gnu/bits/types/__FILE.h \
 /usr/include/x86_64-linux-gnu/bits/types/FILE.h \
 /usr/include/x86_64-linux-gnu/bits/types/struct_FILE.h \
 /usr/include/x86_64-linux-gnu/bits/stdio_lim.h \
 /usr/include/x86_64-linux-gnu/bits/floatn.h \
 /usr/include/x86_64-linux-gnu/bits/floatn-common.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h \
 /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h
)"},
      {"clang-14 mmd_mp", DepfileLayout::clang75,
       R"(a.o: /tmp/s/a.c /tmp/s/sub/header_with_a_rather_long_name_1.h \
  /tmp/s/sub/header_with_a_rather_long_name_2.h /tmp/s/inc\ dir/sp\ ace.h \
  /tmp/s/sub/d$$ol\#h.h /tmp/s/sub/header_with_a_rather_long_name_3.h \
  /tmp/s/sub/header_with_a_rather_long_name_4.h

/tmp/s/sub/header_with_a_rather_long_name_1.h:

/tmp/s/sub/header_with_a_rather_long_name_2.h:

/tmp/s/inc\ dir/sp\ ace.h:

/tmp/s/sub/d$$ol\#h.h:

/tmp/s/sub/header_with_a_rather_long_name_3.h:

/tmp/s/sub/header_with_a_rather_long_name_4.h:
)",
       R"(a.o: /tmp/a_checkout_with_a_much_longer_root_path_for_kache/a.c \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h

/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h:

/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h:

/tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h:

/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h:

/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h:

/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h:
)"},
      {"clang-14 md_targets", DepfileLayout::clang75,
       R"(a_target_that_is_quite_long_number_one.o \
  second_long_target_name_xxxxxxxxxxxxx.o q$$\ t.o: /tmp/s/a.c \
  /tmp/s/sub/header_with_a_rather_long_name_1.h \
  /tmp/s/sub/header_with_a_rather_long_name_2.h /tmp/s/inc\ dir/sp\ ace.h \
  /tmp/s/sub/d$$ol\#h.h /usr/include/stdio.h \
  /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
  /usr/include/features.h /usr/include/features-time64.h \
  /usr/include/x86_64-linux-gnu/bits/wordsize.h \
  /usr/include/x86_64-linux-gnu/bits/timesize.h \
  /usr/include/stdc-predef.h /usr/include/x86_64-linux-gnu/sys/cdefs.h \
  /usr/include/x86_64-linux-gnu/bits/long-double.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
  /usr/lib/llvm-14/lib/clang/14.0.6/include/stddef.h \
  /usr/lib/llvm-14/lib/clang/14.0.6/include/stdarg.h \
  /usr/include/x86_64-linux-gnu/bits/types.h \
  /usr/include/x86_64-linux-gnu/bits/typesizes.h \
  /usr/include/x86_64-linux-gnu/bits/time64.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__mbstate_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos64_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/struct_FILE.h \
  /usr/include/x86_64-linux-gnu/bits/stdio_lim.h \
  /usr/include/x86_64-linux-gnu/bits/floatn.h \
  /usr/include/x86_64-linux-gnu/bits/floatn-common.h \
  /tmp/s/sub/header_with_a_rather_long_name_3.h \
  /tmp/s/sub/header_with_a_rather_long_name_4.h
)",
       R"(a_target_that_is_quite_long_number_one.o \
  second_long_target_name_xxxxxxxxxxxxx.o q$$\ t.o: \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/a.c \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h \
  /usr/include/stdio.h \
  /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
  /usr/include/features.h /usr/include/features-time64.h \
  /usr/include/x86_64-linux-gnu/bits/wordsize.h \
  /usr/include/x86_64-linux-gnu/bits/timesize.h \
  /usr/include/stdc-predef.h /usr/include/x86_64-linux-gnu/sys/cdefs.h \
  /usr/include/x86_64-linux-gnu/bits/long-double.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
  /usr/lib/llvm-14/lib/clang/14.0.6/include/stddef.h \
  /usr/lib/llvm-14/lib/clang/14.0.6/include/stdarg.h \
  /usr/include/x86_64-linux-gnu/bits/types.h \
  /usr/include/x86_64-linux-gnu/bits/typesizes.h \
  /usr/include/x86_64-linux-gnu/bits/time64.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__mbstate_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos64_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/struct_FILE.h \
  /usr/include/x86_64-linux-gnu/bits/stdio_lim.h \
  /usr/include/x86_64-linux-gnu/bits/floatn.h \
  /usr/include/x86_64-linux-gnu/bits/floatn-common.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h
)"},
      {"clang-19 mmd_mp", DepfileLayout::clang75_packed,
       R"(a.o: /tmp/s/a.c /tmp/s/sub/header_with_a_rather_long_name_1.h \
  /tmp/s/sub/header_with_a_rather_long_name_2.h /tmp/s/inc\ dir/sp\ ace.h \
  /tmp/s/sub/d$$ol\#h.h /tmp/s/sub/header_with_a_rather_long_name_3.h \
  /tmp/s/sub/header_with_a_rather_long_name_4.h
/tmp/s/sub/header_with_a_rather_long_name_1.h:
/tmp/s/sub/header_with_a_rather_long_name_2.h:
/tmp/s/inc\ dir/sp\ ace.h:
/tmp/s/sub/d$$ol\#h.h:
/tmp/s/sub/header_with_a_rather_long_name_3.h:
/tmp/s/sub/header_with_a_rather_long_name_4.h:
)",
       R"(a.o: /tmp/a_checkout_with_a_much_longer_root_path_for_kache/a.c \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h:
/tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h:
)"},
      {"clang-19 md_targets", DepfileLayout::clang75_packed,
       R"(a_target_that_is_quite_long_number_one.o \
  second_long_target_name_xxxxxxxxxxxxx.o q$$\ t.o: /tmp/s/a.c \
  /tmp/s/sub/header_with_a_rather_long_name_1.h \
  /tmp/s/sub/header_with_a_rather_long_name_2.h /tmp/s/inc\ dir/sp\ ace.h \
  /tmp/s/sub/d$$ol\#h.h /usr/include/stdio.h \
  /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
  /usr/include/features.h /usr/include/features-time64.h \
  /usr/include/x86_64-linux-gnu/bits/wordsize.h \
  /usr/include/x86_64-linux-gnu/bits/timesize.h \
  /usr/include/stdc-predef.h /usr/include/x86_64-linux-gnu/sys/cdefs.h \
  /usr/include/x86_64-linux-gnu/bits/long-double.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
  /usr/lib/llvm-19/lib/clang/19/include/stddef.h \
  /usr/lib/llvm-19/lib/clang/19/include/__stddef_size_t.h \
  /usr/lib/llvm-19/lib/clang/19/include/__stddef_null.h \
  /usr/lib/llvm-19/lib/clang/19/include/stdarg.h \
  /usr/lib/llvm-19/lib/clang/19/include/__stdarg___gnuc_va_list.h \
  /usr/include/x86_64-linux-gnu/bits/types.h \
  /usr/include/x86_64-linux-gnu/bits/typesizes.h \
  /usr/include/x86_64-linux-gnu/bits/time64.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__mbstate_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos64_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/struct_FILE.h \
  /usr/include/x86_64-linux-gnu/bits/stdio_lim.h \
  /usr/include/x86_64-linux-gnu/bits/floatn.h \
  /usr/include/x86_64-linux-gnu/bits/floatn-common.h \
  /tmp/s/sub/header_with_a_rather_long_name_3.h \
  /tmp/s/sub/header_with_a_rather_long_name_4.h
)",
       R"(a_target_that_is_quite_long_number_one.o \
  second_long_target_name_xxxxxxxxxxxxx.o q$$\ t.o: \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/a.c \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_1.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_2.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/inc\ dir/sp\ ace.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/d$$ol\#h.h \
  /usr/include/stdio.h \
  /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
  /usr/include/features.h /usr/include/features-time64.h \
  /usr/include/x86_64-linux-gnu/bits/wordsize.h \
  /usr/include/x86_64-linux-gnu/bits/timesize.h \
  /usr/include/stdc-predef.h /usr/include/x86_64-linux-gnu/sys/cdefs.h \
  /usr/include/x86_64-linux-gnu/bits/long-double.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs.h \
  /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
  /usr/lib/llvm-19/lib/clang/19/include/stddef.h \
  /usr/lib/llvm-19/lib/clang/19/include/__stddef_size_t.h \
  /usr/lib/llvm-19/lib/clang/19/include/__stddef_null.h \
  /usr/lib/llvm-19/lib/clang/19/include/stdarg.h \
  /usr/lib/llvm-19/lib/clang/19/include/__stdarg___gnuc_va_list.h \
  /usr/include/x86_64-linux-gnu/bits/types.h \
  /usr/include/x86_64-linux-gnu/bits/typesizes.h \
  /usr/include/x86_64-linux-gnu/bits/time64.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__mbstate_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__fpos64_t.h \
  /usr/include/x86_64-linux-gnu/bits/types/__FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/FILE.h \
  /usr/include/x86_64-linux-gnu/bits/types/struct_FILE.h \
  /usr/include/x86_64-linux-gnu/bits/stdio_lim.h \
  /usr/include/x86_64-linux-gnu/bits/floatn.h \
  /usr/include/x86_64-linux-gnu/bits/floatn-common.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_3.h \
  /tmp/a_checkout_with_a_much_longer_root_path_for_kache/sub/header_with_a_rather_long_name_4.h
)"},
  };
  return all;
}

const std::vector<DepfileLayout> kAll = {DepfileLayout::gcc72, DepfileLayout::clang75, DepfileLayout::clang75_packed};

TEST(DepfileLayout, RendersWhatEachCompilerWrote) {
  for (const auto& c : captured()) {
    for (const std::string* text : {&c.short_root, &c.long_root}) {
      const auto rules = tokenize_depfile(*text);
      ASSERT_TRUE(rules) << c.compiler;
      EXPECT_EQ(render_depfile(*rules, c.layout), *text) << c.compiler;
      EXPECT_EQ(depfile_layout_of(*text, {c.layout}), c.layout) << c.compiler;
      // Wrapped lines tell GCC from clang, -MP rules clang 14 from clang 19 (without them the two agree).
      const bool mp = !rules->phony_targets.empty();
      for (const DepfileLayout other : kAll) {
        const bool clang_pair = c.layout != DepfileLayout::gcc72 && other != DepfileLayout::gcc72;
        if (other == c.layout || (clang_pair && !mp)) continue;
        EXPECT_FALSE(layout_reproduces(*text, other)) << c.compiler << " " << layout_name(other);
      }
    }
  }
}

// A restore in the other checkout: the stored text with that checkout's root, re-wrapped, is what the
// compiler wrote there (the text as stored keeps the first checkout's line breaks, which differ).
TEST(DepfileLayout, RewrapMatchesTheCompilerInAnotherCheckout) {
  for (const auto& c : captured()) {
    const std::string moved_long = with_root(c.short_root, "/tmp/s", kLongRoot);
    EXPECT_NE(moved_long, c.long_root) << c.compiler;
    EXPECT_EQ(rewrap_depfile(moved_long, c.layout), c.long_root) << c.compiler;
    EXPECT_EQ(rewrap_depfile(with_root(c.long_root, kLongRoot, "/tmp/s"), c.layout), c.short_root) << c.compiler;
  }
}

TEST(DepfileLayout, TokenizerKeepsEscapesAndCountsUnescaped) {
  const auto rules = tokenize_depfile("a\\ b.o x.o: s.c inc\\ dir/sp\\ ace.h \\\n d$$ol\\#h.h\n\ninc\\ dir/sp\\ ace.h:\n");
  ASSERT_TRUE(rules);
  EXPECT_EQ(rules->targets, (std::vector<DepfileWord>{{"a\\ b.o", 5}, {"x.o", 3}}));
  EXPECT_EQ(rules->deps, (std::vector<DepfileWord>{{"s.c", 3}, {"inc\\ dir/sp\\ ace.h", 16}, {"d$$ol\\#h.h", 8}}));
  EXPECT_EQ(rules->phony_targets, std::vector<std::string>{"inc\\ dir/sp\\ ace.h"});
}

TEST(DepfileLayout, OnlyOneRuleAndEmptyRulesTokenize) {
  EXPECT_FALSE(tokenize_depfile("no rule here\n"));
  EXPECT_FALSE(tokenize_depfile("a.o: a.c"));                      // unterminated: not as a compiler writes
  EXPECT_FALSE(tokenize_depfile("a.o: a.c\nb.o: b.c\n"));          // a second rule with dependencies
  EXPECT_FALSE(depfile_layout_of("a.o:  a.c\n", kAll));            // two spaces: no compiler's layout
  EXPECT_FALSE(depfile_layout_of("a.o: a.c\n", {}));               // nvcc: no candidates
  EXPECT_EQ(depfile_layout_of("a.o: a.c b.h\n", {DepfileLayout::clang75}), DepfileLayout::clang75);
}

TEST(DepfileLayout, NamesRoundTrip) {
  for (const DepfileLayout l : kAll) EXPECT_EQ(parse_layout_name(layout_name(l)), l);
  EXPECT_FALSE(parse_layout_name("gcc"));
}

}  // namespace
}  // namespace kache::core
