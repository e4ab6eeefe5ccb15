"""Inputs of a gcc/clang compile that no -MD list names, found by the tools rather than by spelling
(issue 27 item 3). Each trap builds through kache, changes the hidden input, builds again, and requires
what the plain compiler gives: a cache that ignored the input would serve the first result.

- Files GNU as opens (.incbin/.include, however the directive is spelled: string concatenation in
  inline asm, upper case in a .S file) are listed by the assembler itself (-Wa,--MD) and keyed.
- clang's integrated assembler lists nothing: a compile whose preprocessed source may make it open a
  file is not stored (assembler-inputs).
- __DATE__/__TIME__/__TIMESTAMP__ however spelled (token pasting, a system header, behind a pragma): the
  compiler's -Wdate-time says which were expanded; __TIME__/__TIMESTAMP__ are not stored (time-macro),
  __DATE__ alone (GCC) is stored under the day; nothing is pinned for gcc/clang.
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
    """gcc/clang misses pin nothing (nvcc's SOURCE_DATE_EPOCH rule is spec 000's, test_sharing.py); the
    compiler's -Wdate-time says which time macros a compile expanded, however spelled."""

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
        self.assertGreaterEqual(self.not_stored("time-macro"), 1)

    def test_pasted_timestamp_used_as_one_character_is_not_stored(self):
        # Index 18 of "Sun Sep 13 12:26:40 2020" is the seconds' last digit: the object holds one byte
        # of the expansion, which no search of the outputs can recognise.
        src = "#define CAT(a, b) a##b\nint digit = CAT(__TIME, STAMP__)[18];\n"
        for compiler in [GCC] + CLANGS:
            with self.subTest(compiler=compiler):
                self.zero()
                self.write("c.c", src, mtime_ns=OLD_NS)
                self.kache([compiler, "-O2", "-c", "c.c", "-o", "k.o"])
                os.utime(self.path("c.c"), ns=(OLD_NS + 7 * 10**9, OLD_NS + 7 * 10**9))
                self.kache([compiler, "-O2", "-c", "c.c", "-o", "k.o"])
                self.plain(compiler, ["-O2", "-c", "c.c", "-o", "plain.o"])
                self.assert_same_object(self.path("k.o"), self.path("plain.o"))
                self.assert_counts(hits=0, misses=2)
                self.assertGreaterEqual(self.not_stored("time-macro"), 1)  # input-changed may come first

    def test_time_from_a_system_header_macro_and_behind_a_pragma_is_not_stored(self):
        # An expansion inside a system header (no warning there by default), and one after a pragma
        # that silences -Wdate-time (clang honours it while preprocessing).
        self.write("sys/when.h", "#define WHEN() __TIME__\nstatic const char *sys_time = __TIME__;\n",
                   mtime_ns=OLD_NS)
        self.write("s.c", '#include <when.h>\nconst char *w(void) { return sys_time; }\n', mtime_ns=OLD_NS)
        self.write("p.c", '#define S(x) #x\n#define P(x) _Pragma(S(x))\nP(GCC diagnostic ignored "-Wdate-time")\n'
                   "int second = __TIME__[7];\n", mtime_ns=OLD_NS)
        for compiler in [GCC] + CLANGS:
            for src in ("s.c", "p.c"):
                with self.subTest(compiler=compiler, source=src):
                    self.zero()
                    self.kache([compiler, "-isystem", "sys", "-c", src, "-o", "k.o"])
                    self.assertEqual(self.not_stored("time-macro"), 1)

    def test_date_is_todays_and_stored_under_the_day(self):
        # A plain gcc or clang prints today's __DATE__ (kache used to pin SOURCE_DATE_EPOCH=0 for every
        # compiler: "Jan  1 1970"). GCC names the macro in its warning: __DATE__ alone is stored, keyed
        # by the day; clang's warning does not say which macro, so its result is not stored.
        self.write("d.c", "#define CAT(a, b) a##b\nconst char *day = CAT(__DA, TE__);\n", mtime_ns=OLD_NS)
        for compiler in [GCC] + CLANGS:
            with self.subTest(compiler=compiler):
                self.zero()
                started = time.time()
                self.kache([compiler, "-c", "d.c", "-o", "k.o"], env={"SOURCE_DATE_EPOCH": None})
                self.kache([compiler, "-c", "d.c", "-o", "k.o"], env={"SOURCE_DATE_EPOCH": None})
                self.plain(compiler, ["-c", "d.c", "-o", "plain.o"])
                ended = time.time()
                days = {time.strftime("%b %e %Y", time.localtime(t)).encode() for t in (started, ended)}
                with open(self.path("k.o"), "rb") as f:
                    obj = f.read()
                self.assertTrue(any(d in obj for d in days), f"want one of {days}")
                if len(days) == 1:  # no midnight between the two builds
                    self.assert_same_object(self.path("k.o"), self.path("plain.o"))
                    if compiler == GCC:
                        self.assert_counts(hits=1, misses=1)
                    else:
                        self.assert_counts(hits=0, misses=2)
                        self.assertEqual(self.not_stored("time-macro"), 2)

    def test_exported_source_date_epoch_is_keyed(self):
        self.write("e.c", "const char *day = __DATE__;\n", mtime_ns=OLD_NS)
        for epoch, year in (("0", b"1970"), ("31536000", b"1971")):
            self.kache([GCC, "-c", "e.c", "-o", "k.o"], env={"SOURCE_DATE_EPOCH": epoch})
            with open(self.path("k.o"), "rb") as f:
                self.assertIn(b"Jan  1 " + year, f.read())
        self.assert_counts(hits=0, misses=2)

    def test_date_time_warnings_stay_out_of_the_users_stderr(self):
        # The check's -Wdate-time output is kache's; -Werror does not turn it into a failure; a user who
        # asks for -Wdate-time gets exactly the plain compiler's warning.
        self.write("w.c", "const char *when = __TIME__;\n", mtime_ns=OLD_NS)
        for compiler in [GCC] + CLANGS:
            for flags in ([], ["-Werror"], ["-Wall", "-Wextra", "-Werror"], ["-Wdate-time"], ["-w", "-Wdate-time"]):
                with self.subTest(compiler=compiler, flags=flags):
                    r = self.kache([compiler, "-c", "w.c", "-o", "k.o"] + flags, check=False)
                    p = self.plain(compiler, ["-c", "w.c", "-o", "plain.o"] + flags, check=False)
                    self.assertEqual((r.returncode, r.stdout, r.stderr), (p.returncode, p.stdout, p.stderr))

    def test_clang14_time_used_as_a_number_is_not_stored(self):
        if "clang-14" not in CLANGS:
            self.skipTest("clang-14 is not installed")
        self.write("n.c", "int second_digit = __TIME__[7] - '0';\n", mtime_ns=OLD_NS)
        self.kache(["clang-14", "-c", "n.c", "-o", "k.o"])
        self.kache(["clang-14", "-c", "n.c", "-o", "k.o"])
        self.assert_counts(hits=0, misses=2)
        self.assertEqual(self.not_stored("time-macro"), 2)

    def test_sources_without_time_macros_are_still_cached(self):
        # The check must not refuse ordinary code: stdio.h and friends expand no time macro.
        self.write("o.c", "#include <stdio.h>\n#include <time.h>\nint main(void) { return printf(\"hi\\n\"); }\n",
                   mtime_ns=OLD_NS)
        for compiler in [GCC] + CLANGS:
            with self.subTest(compiler=compiler):
                self.zero()
                self.kache([compiler, "-Wall", "-Werror", "-c", "o.c", "-o", "o.o"])
                self.kache([compiler, "-Wall", "-Werror", "-c", "o.c", "-o", "o.o"])
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
