"""Inputs of a gcc/clang compile that no -MD list names, found by the tools rather than by spelling
(issue 27 item 3). Each trap builds through kache, changes the hidden input, builds again, and requires
what the plain compiler gives: a cache that ignored the input would serve the first result.

- Files GNU as opens (.incbin/.include, however the directive is spelled: string concatenation in
  inline asm, upper case in a .S file) are listed by the assembler itself (-Wa,--MD) and keyed.
- clang's integrated assembler lists nothing: a compile whose preprocessed source may make it open a
  file is not stored (assembler-inputs).
- __DATE__/__TIME__/__TIMESTAMP__ however spelled (token pasting): an output holding the wall clock or a
  file time is not stored (unpinned-time); clang 14 ignores SOURCE_DATE_EPOCH.
- __has_embed targets are watched; #pragma GCC dependency is not stored; -Wmissing-include-dirs passes
  through."""
import os
import shutil
import subprocess
import textwrap
import time
import unittest

from kachetest import KacheTestCase

GCC = "gcc-12"
CLANGS = [c for c in ("clang-14", "clang-19") if shutil.which(c)]
OLD_NS = (int(time.time()) - 3600) * 1_000_000_000  # an hour ago: outside any clock tick of the compiles

CONCAT_INCBIN = textwrap.dedent("""\
    asm(".section .rodata\\n"
        ".globl blob\\nblob:\\n"
        ".inc" "bin \\"blob.bin\\"\\n"
        ".previous");
    int anchor;
    """)

UPPER_INCBIN_S = textwrap.dedent("""\
    .section .rodata
    .globl blob
    blob:
    .INCBIN "blob.bin"
    """)


class HiddenCase(KacheTestCase):
    def plain(self, compiler, args, check=True):
        r = subprocess.run([compiler] + list(args), cwd=self.ws, env=self.env, capture_output=True, text=True)
        if check and r.returncode != 0:
            self.fail(f"{compiler} {' '.join(args)} failed:\n{r.stderr}")
        return r

    def not_stored(self, reason):
        return self.stats()["not_stored_reasons"].get(reason, 0)

    def edit_blob_and_rebuild(self, compiler, src):
        """Builds src twice through kache with blob.bin changed in between; the second object must be
        the plain compiler's of the new blob."""
        self.write("blob.bin", "first blob\n", mtime_ns=OLD_NS)
        self.write(src, CONCAT_INCBIN if src.endswith(".c") else UPPER_INCBIN_S, mtime_ns=OLD_NS)
        self.kache([compiler, "-c", src, "-o", "k.o"])
        self.write("blob.bin", "second blob, longer\n", mtime_ns=OLD_NS + 10**9)
        self.kache([compiler, "-c", src, "-o", "k.o"])
        self.plain(compiler, ["-c", src, "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))


class AssemblerInputs(HiddenCase):
    def test_gcc_incbin_spelled_by_string_concatenation_is_keyed(self):
        self.edit_blob_and_rebuild(GCC, "a.c")
        # Listed by the assembler, so keyed and stored: the same blob again is a hit.
        os.unlink(self.path("k.o"))
        self.kache([GCC, "-c", "a.c", "-o", "k.o"])
        self.assert_counts(hits=1, misses=2)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    def test_gcc_upper_case_incbin_in_an_S_file_is_keyed(self):
        self.edit_blob_and_rebuild(GCC, "s.S")
        self.assert_counts(hits=0, misses=2)

    def test_clang_inline_asm_incbin_is_not_stored(self):
        for clang in CLANGS:
            with self.subTest(compiler=clang):
                self.zero()
                self.edit_blob_and_rebuild(clang, "a.c")
                self.assert_counts(hits=0, misses=2)
                self.assertEqual(self.not_stored("assembler-inputs"), 2)

    def test_clang_without_asm_directives_is_still_cached(self):
        # The check must not refuse ordinary code (stdio.h's __asm__ symbol renames included).
        for clang in CLANGS:
            with self.subTest(compiler=clang):
                self.zero()
                self.write("p.c", "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }\n",
                           mtime_ns=OLD_NS)
                self.kache([clang, "-c", "p.c", "-o", "p.o"])
                self.kache([clang, "-c", "p.c", "-o", "p.o"])
                self.assert_counts(hits=1, misses=1)


class TimeMacros(HiddenCase):
    def test_timestamp_spelled_by_token_pasting_is_not_stored(self):
        # GCC 12 does not pin __TIMESTAMP__ with SOURCE_DATE_EPOCH: it is the source's mtime.
        src = "#define CAT(a, b) a##b\nconst char *stamp = CAT(__TIME, STAMP__);\n"
        self.write("t.c", src, mtime_ns=OLD_NS)
        self.kache([GCC, "-c", "t.c", "-o", "k.o"])
        os.utime(self.path("t.c"), ns=(OLD_NS + 7 * 10**9, OLD_NS + 7 * 10**9))
        self.kache([GCC, "-c", "t.c", "-o", "k.o"])
        self.plain(GCC, ["-c", "t.c", "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assert_counts(hits=0, misses=2)
        # The second compile's source changed just before it (utime): input-changed may name it first.
        self.assertGreaterEqual(self.not_stored("unpinned-time"), 1)

    def test_clang14_date_and_time_are_not_stored(self):
        if "clang-14" not in CLANGS:
            self.skipTest("clang-14 is not installed")
        # clang 14 ignores SOURCE_DATE_EPOCH: __TIME__ is the wall clock of the compile, which a hit a
        # second later would replay.
        self.write("d2.c", "#define P(a, b) a##b\nconst char *when = P(__DA, TE__) \" \" P(__TI, ME__);\n",
                   mtime_ns=OLD_NS)
        self.kache(["clang-14", "-c", "d2.c", "-o", "k.o"])
        self.kache(["clang-14", "-c", "d2.c", "-o", "k.o"])
        self.assert_counts(hits=0, misses=2)
        self.assertEqual(self.not_stored("unpinned-time"), 2)

    def test_clang14_time_used_as_a_number_is_not_stored(self):
        if "clang-14" not in CLANGS:
            self.skipTest("clang-14 is not installed")
        # The expansion never reaches the object as a string: the preprocessed source holds it.
        self.write("n.c", "int second_digit = __TIME__[7] - '0';\n", mtime_ns=OLD_NS)
        self.kache(["clang-14", "-c", "n.c", "-o", "k.o"])
        self.kache(["clang-14", "-c", "n.c", "-o", "k.o"])
        self.assert_counts(hits=0, misses=2)
        self.assertEqual(self.not_stored("unpinned-time"), 2)

    def test_pinned_date_is_still_cached(self):
        # GCC honours SOURCE_DATE_EPOCH (kache pins it): the expansion is fixed, so the result is stored.
        self.write("d.c", "const char *when = __DATE__ \" \" __TIME__;\n", mtime_ns=OLD_NS)
        self.kache([GCC, "-c", "d.c", "-o", "k.o"])
        self.kache([GCC, "-c", "d.c", "-o", "k.o"])
        self.assert_counts(hits=1, misses=1)


class OtherHiddenInputs(HiddenCase):
    def test_has_embed_target_appearing_is_a_miss(self):
        if "clang-19" not in CLANGS:
            self.skipTest("clang-19 is not installed")
        src = textwrap.dedent("""\
            #if __has_embed("blob.bin")
            const char blob[] = {
            #embed "blob.bin"
            };
            #else
            const char blob[] = {0};
            #endif
            """)
        self.write("e.c", src, mtime_ns=OLD_NS)
        self.kache(["clang-19", "-std=c2x", "-c", "e.c", "-o", "k.o"])
        self.write("blob.bin", "now it exists\n", mtime_ns=OLD_NS)
        self.kache(["clang-19", "-std=c2x", "-c", "e.c", "-o", "k.o"])
        self.plain("clang-19", ["-std=c2x", "-c", "e.c", "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assert_counts(hits=0, misses=2)

    def test_pragma_gcc_dependency_is_not_stored(self):
        for compiler in [GCC] + CLANGS:
            with self.subTest(compiler=compiler):
                self.zero()
                self.write("dep.h", "int unused;\n", mtime_ns=OLD_NS)
                self.write("p.c", '#pragma GCC dependency "dep.h"\nint z;\n', mtime_ns=OLD_NS + 10**9)
                first = self.kache([compiler, "-c", "p.c", "-o", "k.o"])
                self.assertEqual(first.stderr, "")
                # dep.h newer than the source: the compiler warns.
                os.utime(self.path("dep.h"), ns=(OLD_NS + 5 * 10**9, OLD_NS + 5 * 10**9))
                second = self.kache([compiler, "-c", "p.c", "-o", "k.o"])
                plain = self.plain(compiler, ["-c", "p.c", "-o", "plain.o"])
                self.assertNotEqual(plain.stderr, "")
                self.assertEqual(second.stderr, plain.stderr)
                self.assertEqual(self.not_stored("pragma-dependency"), 2)

    def test_missing_include_dir_warning_as_error_passes_through(self):
        os.makedirs(self.path("inc"))
        self.write("m.c", "int m;\n", mtime_ns=OLD_NS)
        args = [GCC, "-Wmissing-include-dirs", "-Werror", "-Iinc", "-c", "m.c", "-o", "k.o"]
        self.kache(args)
        os.rmdir(self.path("inc"))
        r = self.kache(args, check=False)
        plain = self.plain(GCC, args[1:], check=False)
        self.assertNotEqual(plain.returncode, 0)
        self.assertEqual((r.returncode, r.stderr), (plain.returncode, plain.stderr))
        self.assertEqual(self.stats()["passthrough_reasons"].get("missing-include-dirs"), 2)


if __name__ == "__main__":
    unittest.main()
