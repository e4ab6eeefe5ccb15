"""Issue 35 item 5: a root's path in a string literal of any encoding makes the object per checkout.

`L"" __FILE__` is stored as UTF-32 (UTF-16 under -fshort-wchar), `u"" __FILE__` as UTF-16 and
`U"" __FILE__` as UTF-32: a byte search for the path's UTF-8 text does not see them, and the entry was
shared between checkouts, so a second clone's program printed the first clone's path. Each program
here prints only the wide literal (no narrow copy of the path is in its object); in each of two clones
sharing one cache, the program built through kache prints what the plain compiler's prints there. An
execution character set no search reads (-fexec-charset=IBM1047) is stored per checkout too."""
import os
import shutil
import subprocess

import kachetest
from kachetest import KacheTestCase

COMPILERS = [c for c in ("gcc-12", "clang-19", "clang-14") if shutil.which(c)]
# (name, element type, literal prefix, extra flags)
VARIANTS = [
    ("wide", "wchar_t", "L", []),
    ("wide-short", "wchar_t", "L", ["-fshort-wchar"]),
    ("utf16", "unsigned short", "u", []),
    ("utf32", "unsigned int", "U", []),
    # EBCDIC (GCC converts through iconv; clang accepts only UTF-8): no search reads it, so the
    # command is stored per checkout.
    ("ebcdic", "char", "", ["-fexec-charset=IBM1047"]),
]
SOURCE = """#include <stdio.h>
#include <stddef.h>
static const {type} where[] = {prefix}"" __FILE__;
int main(void) {{
  for (size_t i = 0; where[i]; ++i) putchar((int)where[i]);
  putchar('\\n');
  return 0;
}}
"""
OLD = 1_600_000_000 * 10**9


class LiteralEncodings(KacheTestCase):
    def run_program(self, compiler, root, obj):
        exe = obj + ".exe"
        subprocess.run([compiler, obj, "-o", exe], check=True, capture_output=True, cwd=os.path.join(root, "build"))
        return subprocess.run([exe], check=True, capture_output=True).stdout

    def build_both(self, compiler, root, flags):
        build = os.path.join(root, "build")
        args = ["-O2", "-c", os.path.join(root, "src", "w.c")] + flags
        self.kache([compiler] + args + ["-o", "k.o"], cwd=build)
        subprocess.run([compiler] + args + ["-o", "p.o"], check=True, capture_output=True, cwd=build)
        return (self.run_program(compiler, root, os.path.join(build, "k.o")),
                self.run_program(compiler, root, os.path.join(build, "p.o")))

    def test_wide_file_names_each_checkout(self):
        if not COMPILERS:
            self.skipTest("no gcc-12 or clang")
        for compiler in COMPILERS:
            for name, type_, prefix, flags in VARIANTS:
                if name == "ebcdic" and not compiler.startswith("gcc"):
                    continue
                with self.subTest(compiler=compiler, literal=name):
                    case = f"{compiler}-{name}"
                    roots = [self.path(case, "one"), self.path(case, "clone-two")]
                    for root in roots:
                        self.write(os.path.join(root, "src", "w.c"), SOURCE.format(type=type_, prefix=prefix),
                                   mtime_ns=OLD)
                        os.makedirs(os.path.join(root, "build"), exist_ok=True)
                    for root in roots:
                        served, plain = self.build_both(compiler, root, flags)
                        self.assertEqual(served, plain, f"{root}: the program built through kache")
                        self.assertIn(root.encode("cp500" if name == "ebcdic" else "utf-8"), served)
                    s = self.stats()
                    self.assertGreaterEqual(s["stored_per_checkout"].get("path-in-object", 0), 2, s)
                    self.zero()

    def test_nvcc_host_code_wide_file_names_each_checkout(self):
        # nvcc's host compile goes through the same object scan.
        source = SOURCE.format(type="wchar_t", prefix="L").replace("stdio.h", "cstdio").replace("stddef.h", "cstddef")
        roots = [self.path("nvcc", "one"), self.path("nvcc", "clone-two")]
        for root in roots:
            self.write(os.path.join(root, "src", "w.cu"), source, mtime_ns=OLD)
            os.makedirs(os.path.join(root, "build"), exist_ok=True)
        for root in roots:
            build = os.path.join(root, "build")
            args = ["-c", os.path.join(root, "src", "w.cu")]
            self.kache(["nvcc"] + args + ["-o", "k.o"], cwd=build)
            self.nvcc(args + ["-o", "p.o"], cwd=build)
            outputs = []
            for obj in ("k.o", "p.o"):
                self.nvcc([obj, "-o", obj + ".exe"], cwd=build)
                outputs.append(subprocess.run([os.path.join(build, obj + ".exe")], check=True,
                                              capture_output=True).stdout)
            self.assertEqual(outputs[0], outputs[1], f"{root}: the program built through kache")
            self.assertIn(root.encode(), outputs[0])
        self.assertEqual(self.stats()["stored_per_checkout"].get("path-in-object"), 2)


if __name__ == "__main__":
    kachetest.main()
