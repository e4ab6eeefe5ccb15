"""C and C++ through kache's gcc adapter, with the real gcc 12 and clang 14 (and clang 19 when
installed): hits, misses, the implied output, dependency files restored, diagnostics replayed, the
passthrough reasons, and one stale-hit trap per input class. Each trap builds through kache, changes
one input, builds again, and requires a miss whose object equals the plain compiler's: a cache that
ignored the input would serve the first object (a hit) and fail the test."""
import os
import shutil
import subprocess
import textwrap
import time
import unittest

import kachetest
from kachetest import KacheTestCase

COMPILERS = [c for c in ("gcc-12", "g++-12", "clang-14", "clang++-14", "clang-19", "clang++-19") if shutil.which(c)]

VALUE_SRC = textwrap.dedent("""
    #include "h.h"
    int value = VAL;
    int twice(int x) { return 2 * x + VAL; }
    """)


class GccCase(KacheTestCase):
    def plain(self, compiler, args, cwd=None, env=None):
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run([compiler] + list(args), cwd=cwd or self.ws, env=e, capture_output=True, text=True)
        if r.returncode != 0:
            self.fail(f"{compiler} {' '.join(args)} failed:\n{r.stderr}")
        return r



class Basics(GccCase):
    def test_hit_and_miss_every_compiler(self):
        self.write("h.h", "#define VAL 3\n")
        self.write("a.c", VALUE_SRC)
        self.write("a.cpp", VALUE_SRC + "#include <vector>\nint n() { return std::vector<int>{1,2}.size(); }\n")
        for compiler in COMPILERS:
            with self.subTest(compiler=compiler):
                self.zero()
                src = "a.cpp" if "++" in compiler else "a.c"
                self.kache([compiler, "-c", src, "-O2", "-o", "k.o"])
                os.unlink(self.path("k.o"))
                self.kache([compiler, "-c", src, "-O2", "-o", "k.o"])
                self.plain(compiler, ["-c", src, "-O2", "-o", "plain.o"])
                self.assert_same_object(self.path("k.o"), self.path("plain.o"))
                self.assert_counts(hits=1, misses=1, passthrough=0)

    def test_driver_name_is_keyed(self):
        # g++ compiles x.c as C++ (and clang++ is clang under another name): no shared entry.
        self.write("h.h", "#define VAL 3\n")
        self.write("a.c", VALUE_SRC + "#ifdef __cplusplus\nint cxx = 1;\n#endif\n")
        self.kache(["gcc-12", "-c", "a.c", "-o", "c.o"])
        self.kache(["g++-12", "-c", "a.c", "-o", "cxx.o"])
        self.assert_counts(hits=0, misses=2)
        self.assert_different_object(self.path("c.o"), self.path("cxx.o"))

    def test_implied_output(self):
        # -c src/a.c writes a.o in the working directory.
        self.write("src/h.h", "#define VAL 3\n")
        self.write("src/a.c", VALUE_SRC)
        os.makedirs(self.path("b"))
        self.kache(["gcc", "-c", "../src/a.c"], cwd=self.path("b"))
        first = self.read("b/a.o", "rb")
        os.unlink(self.path("b/a.o"))
        self.kache(["gcc", "-c", "../src/a.c"], cwd=self.path("b"))
        self.assertEqual(first, self.read("b/a.o", "rb"))
        self.assertFalse([f for f in os.listdir(self.path("b")) if f != "a.o"])
        self.assert_counts(hits=1, misses=1)

    def test_depfile_restored(self):
        self.write("inc/h.h", "#define VAL 3\n")
        self.write("a.cpp", VALUE_SRC + "#include <cstdio>\n")
        forms = [
            (["-MD", "-MF", "deps/a.d", "-o", "out/a.o"], "deps/a.d", "out/a.o"),
            (["-MMD", "-MF", "deps/a.d", "-MT", "custom", "-o", "out/a.o"], "deps/a.d", "out/a.o"),
            (["-MMD", "-o", "out/a.o"], "out/a.d", "out/a.o"),  # implied: the output's name with .d
            (["-MD"], "a.d", "a.o"),                           # implied output and depfile
            (["-MD", "-MP", "-MQ", "$weird", "-o", "out/a.o"], "out/a.d", "out/a.o"),
            # A target that looks like -o: only the real -o is redirected on a miss.
            (["-MD", "-MF", "deps/a.d", "-MT", "-ofoo", "-oout/a.o"], "deps/a.d", "out/a.o"),
        ]
        for flags, dep, obj in forms:
            for compiler in [c for c in COMPILERS if "++" in c]:
                with self.subTest(flags=flags, compiler=compiler):
                    shutil.rmtree(self.cache, ignore_errors=True)
                    for d in ("deps", "out"):
                        shutil.rmtree(self.path(d), ignore_errors=True)
                        os.makedirs(self.path(d))
                    args = [compiler, "-c", "a.cpp", "-Iinc"] + flags
                    self.plain(args[0], args[1:])
                    plain_dep = self.read(dep)
                    os.unlink(self.path(dep))
                    self.kache(args)
                    self.assertEqual(plain_dep, self.read(dep))
                    os.unlink(self.path(dep))
                    os.unlink(self.path(obj))
                    self.kache(args)
                    self.assertEqual(plain_dep, self.read(dep))
                    self.assertTrue(os.path.exists(self.path(obj)))
                    self.assert_counts(hits=1, misses=1)

    def test_diagnostics_replayed(self):
        self.write("w.c", "int f(void) { int unused; return 0; }\n")
        for compiler in [c for c in COMPILERS if "++" not in c]:
            with self.subTest(compiler=compiler):
                self.zero()
                plain = self.plain(compiler, ["-c", "w.c", "-Wall", "-o", "p.o"])
                self.assertIn("unused", plain.stderr)
                miss = self.kache([compiler, "-c", "w.c", "-Wall", "-o", "w.o"])
                hit = self.kache([compiler, "-c", "w.c", "-Wall", "-o", "w.o"])
                self.assertEqual(plain.stderr, miss.stderr)
                self.assertEqual(plain.stderr, hit.stderr)
                self.assert_counts(hits=1, misses=1)

    def test_compile_error_is_the_compilers(self):
        self.write("bad.c", "int f(void) { return x; }\n")
        plain = subprocess.run(["gcc", "-c", "bad.c", "-o", "p.o"], cwd=self.ws, capture_output=True, text=True)
        r = self.kache(["gcc", "-c", "bad.c", "-o", "b.o"], check=False)
        self.assertEqual((plain.returncode, plain.stderr), (r.returncode, r.stderr))

    def test_assembler_with_cpp(self):
        self.write("h.h", "#define VAL 7\n")
        self.write("s.S", '#include "h.h"\n.data\n.globl v\nv: .long VAL\n')
        self.kache(["gcc", "-c", "s.S", "-o", "s.o"])
        os.unlink(self.path("s.o"))
        self.kache(["gcc", "-c", "s.S", "-o", "s.o"])
        self.assert_counts(hits=1, misses=1)

    def test_make_with_cc_and_cxx(self):
        self.write("h.h", "#define VAL 3\n")
        self.write("a.c", VALUE_SRC)
        self.write("b.cpp", VALUE_SRC.replace("value", "bvalue").replace("twice", "btwice"))
        self.write("Makefile", "all: a.o b.o\n%.o: %.c\n\t$(CC) -c $< -o $@ -MMD\n"
                               "%.o: %.cpp\n\t$(CXX) -c $< -o $@ -MMD\nclean:\n\trm -f *.o *.d\n")
        env = dict(self.env)
        for _ in range(2):
            subprocess.run(["make", "-s", "CC=" + kachetest.KACHE + " gcc", "CXX=" + kachetest.KACHE + " g++"],
                           cwd=self.ws, env=env, check=True, capture_output=True)
            subprocess.run(["make", "-s", "clean"], cwd=self.ws, check=True)
        self.assert_counts(hits=2, misses=2, passthrough=0)

    def test_meson_native_file(self):
        if shutil.which("meson") is None or shutil.which("ninja") is None:
            self.skipTest("meson or ninja is not on PATH")
        self.write("h.h", "#define VAL 3\n")
        self.write("a.c", VALUE_SRC)
        self.write("b.cpp", VALUE_SRC.replace("value", "bvalue").replace("twice", "btwice"))
        self.write("meson.build", "project('m', 'c', 'cpp')\nstatic_library('m', 'a.c', 'b.cpp')\n")
        self.write("kache.ini", f"[binaries]\nc = ['{kachetest.KACHE}', 'gcc']\ncpp = ['{kachetest.KACHE}', 'g++']\n")
        for _ in range(2):
            shutil.rmtree(self.path("build"), ignore_errors=True)
            subprocess.run(["meson", "setup", "build", "--native-file", "kache.ini"], cwd=self.ws, env=self.env,
                           check=True, capture_output=True)
            self.zero()
            subprocess.run(["ninja", "-C", "build"], cwd=self.ws, env=self.env, check=True, capture_output=True)
        self.assert_counts(hits=2, misses=0, passthrough=0)

    def test_symlink_named_like_the_compiler(self):
        os.makedirs(self.path("bin"))
        os.symlink(kachetest.KACHE, self.path("bin", "g++"))
        self.write("h.h", "#define VAL 3\n")
        self.write("a.cpp", VALUE_SRC)
        env = {"PATH": self.path("bin") + ":" + self.env["PATH"]}
        for _ in range(2):
            subprocess.run(["g++", "-c", "a.cpp", "-o", "a.o"], cwd=self.ws, env={**self.env, **env}, check=True)
        self.assert_counts(hits=1, misses=1)


class SecondBuildDir(GccCase):
    """CMake's shape: absolute source, -I into the build directory (a generated header), -MD -MF and -o
    in the build directory, -g. A second build directory keys alike (paths under a root by the root's
    name, docs/sharing.md) and gets the object a plain build there gives; a header
    that differs between the two build directories still misses."""

    def compile_in(self, build, compiler="g++-12", gen="#define VAL 3\n"):
        self.write(f"{build}/gen/h.h", gen)
        os.makedirs(self.path(build, "obj"), exist_ok=True)
        src = self.path("src", "a.cpp")
        args = ["-g", "-O1", f"-I{self.path(build, 'gen')}", "-MD", "-MT", "obj/a.o", "-MF", "obj/a.o.d",
                "-o", "obj/a.o", "-c", src]
        self.kache([compiler] + args, cwd=self.path(build))
        self.plain(compiler, args[:3] + ["-o", "obj/plain.o", "-c", src], cwd=self.path(build))
        self.assert_same_object(self.path(build, "obj/a.o"), self.path(build, "obj/plain.o"))
        with open(self.path(build, "obj/a.o.d")) as f:
            self.assertIn(self.path(build, "gen", "h.h"), f.read())

    def test_second_build_dir_hits(self):
        self.write("src/a.cpp", VALUE_SRC)
        for compiler in [c for c in COMPILERS if "++" in c]:
            with self.subTest(compiler=compiler):
                self.zero()
                self.compile_in(f"build1-{compiler}", compiler)
                self.compile_in(f"build2-{compiler}", compiler)
                self.assert_counts(hits=1, misses=1)
                # The same layout with another generated header: a miss, not the first one's object.
                self.compile_in(f"build3-{compiler}", compiler, gen="#define VAL 4\n")
                self.assert_counts(hits=1, misses=2)

    def test_usage_comment_in_a_header_keeps_direct_mode(self):
        # stb_image.h (ggml's examples) shows its use in a comment: `#include ...` lines. No compiler
        # accepts that directive, so it is no computed #include, and the compile keeps its direct-mode
        # record: a second build directory hits (ggml's sam.cpp and yolo-image.cpp missed every time).
        self.write("src/stb.h", "/* it should look like this:\n   #include ...\n   #include ...\n"
                   "   #define STB_IMPLEMENTATION\n*/\nstatic inline int stb(void) { return 7; }\n")
        self.write("src/a.cpp", '#include "stb.h"\n' + VALUE_SRC)
        self.zero()
        self.compile_in("build1")
        self.compile_in("build2")
        self.assert_counts(hits=1, misses=1)


class Passthrough(GccCase):
    CASES = [
        (["gcc", "a.c", "-o", "prog"], "link"),
        (["gcc", "-c", "a.c", "b.c"], "multiple-sources"),
        (["gcc", "-E", "a.c"], "preprocess"),
        (["gcc", "-c", "a.c", "-M"], "dependency-only"),
        (["gcc", "-c", "a.c", "-MM"], "dependency-only"),
        (["gcc", "-S", "a.c"], "output-kind"),
        (["gcc", "-c", "h.h"], "pch"),
        (["g++", "-c", "-x", "c++-header", "h.h", "-o", "h.h.gch"], "pch"),
        (["gcc", "-c", "a.c", "-fprofile-use"], "profile-use"),
        (["gcc", "-c", "a.c", "-fauto-profile=x.afdo"], "profile-use"),
        (["gcc", "-c", "@args.rsp"], "response-file"),
        (["gcc", "-c", "a.c", "-save-temps"], "save-temps"),
        (["gcc", "-c", "a.c", "--coverage"], "coverage"),
        (["gcc", "-c", "a.c", "-fprofile-arcs"], "coverage"),
        (["gcc", "-c", "a.c", "-gsplit-dwarf"], "split-dwarf"),
        (["gcc", "-c", "a.c", "-fdump-tree-all"], "keep-temps"),
        (["gcc", "-c", "a.c", "-Wp,-MD,x.d"], "hidden-input"),
        (["gcc", "-c", "a.c", "-frobnicate-unknown-thing", "-Xfoo"], "unknown-flag"),
        (["gcc", "-c", "a.c", "-fplugin=./p.so"], "plugin"),
        (["clang-14", "-c", "-x", "cuda", "a.c", "--cuda-gpu-arch=sm_90"], "clang-cuda"),
        (["clang-14", "-c", "k.cu"], "clang-cuda"),
        (["gcc", "-c", "s.s"], "language"),
        (["gcc", "--version"], "informational"),
    ]

    def test_reasons(self):
        self.write("a.c", "int a;\n")
        self.write("b.c", "int b;\n")
        self.write("h.h", "int h;\n")
        self.write("s.s", ".data\n")
        self.write("k.cu", "int k;\n")
        self.write("args.rsp", "a.c\n")
        for args, reason in self.CASES:
            with self.subTest(args=args):
                self.zero()
                self.kache(args, check=False)
                s = self.stats()
                self.assertEqual(s["passthrough"], 1, s)
                self.assertEqual(s["passthrough_reasons"].get(reason), 1, s)

    def test_reasons_under_clang(self):
        # The same decisions under each clang (the table is shared; the driver name must not matter).
        self.write("a.c", "int a;\n")
        self.write("b.c", "int b;\n")
        self.write("h.h", "int h;\n")
        self.write("s.s", ".data\n")
        self.write("k.cu", "int k;\n")
        self.write("args.rsp", "a.c\n")
        clangs = [c for c in COMPILERS if c.startswith("clang-")]
        self.assertIn("clang-14", clangs)
        for clang in clangs:
            for args, reason in self.CASES:
                if args[0] != "gcc" or reason in ("profile-use", "coverage", "keep-temps", "plugin", "split-dwarf"):
                    continue  # gcc-only spellings; clang's own runs below them would fail differently
                with self.subTest(clang=clang, args=args):
                    self.zero()
                    self.kache([clang] + args[1:], check=False)
                    s = self.stats()
                    self.assertEqual(s["passthrough_reasons"].get(reason), 1, s)

    def test_clang_environment_refused(self):
        # clang's own side outputs and command-line rewriting (env_table.cpp's clang rows).
        self.write("a.c", "int a;\n")
        for var, reason in (("CC_PRINT_HEADERS", "env_side_output"), ("CC_PRINT_OPTIONS", "env_side_output"),
                            ("CCC_OVERRIDE_OPTIONS", "env_unmodeled"), ("AS_SECURE_LOG_FILE", "env_side_output")):
            with self.subTest(var=var):
                self.zero()
                self.kache(["clang-14", "-c", "a.c", "-o", "a.o"], env={var: self.path("side.txt")}, check=False)
                s = self.stats()
                self.assertEqual(s["passthrough_reasons"].get(reason), 1, s)

    def test_env_depfile(self):
        self.write("a.c", "int a;\n")
        self.kache(["gcc", "-c", "a.c"], env={"DEPENDENCIES_OUTPUT": "x.d"})
        s = self.stats()
        self.assertEqual(s["passthrough_reasons"].get("env_depfile"), 1, s)

    def test_allowlisted_unknown_flag_is_cached(self):
        self.write("a.c", "int a;\n")
        # -C (keep comments) is a real gcc flag kache's table does not list.
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "-C"}
        self.kache(["gcc", "-c", "a.c", "-C"], env=env)
        self.kache(["gcc", "-c", "a.c", "-C"], env=env)
        self.assert_counts(hits=1, misses=1, passthrough=0)
        self.zero()
        self.kache(["gcc", "-c", "a.c", "-C"])
        self.assert_counts(hits=0, misses=0, passthrough=1)


C_COMPILERS = [c for c in ("gcc-12", "clang-14", "clang-19") if shutil.which(c)]
CXX_COMPILERS = [c for c in ("g++-12", "clang++-14", "clang++-19") if shutil.which(c)]


class Soundness(GccCase):
    """One stale-hit trap per input class, for every compiler installed (gcc 12, clang 14, clang 19).
    Each: build through kache, change one input, build again: a miss, and the plain compiler's object
    (a cache that ignored the input would serve the first object). Each compiler's case runs in its
    own directory, ws/<compiler>/."""

    def each_compiler(self, body, compilers=None):
        compilers = C_COMPILERS if compilers is None else compilers
        self.assertIn("gcc-12" if compilers is C_COMPILERS else "g++-12", compilers)
        self.assertTrue(any("clang" in c for c in compilers), "clang-14 is part of the test set-up")
        for compiler in compilers:
            with self.subTest(compiler=compiler):
                self.zero()
                self.d = compiler
                os.makedirs(self.path(self.d), exist_ok=True)
                body(compiler)

    def w(self, rel, text):
        return self.write(os.path.join(self.d, rel), text)

    def p(self, *rel):
        return self.path(self.d, *rel)

    def trap(self, compiler, args, edit, env=None, env2=None, args2=None):
        env2 = env if env2 is None else env2
        args2 = args if args2 is None else args2
        self.kache([compiler] + args + ["-o", self.p("k.o")], env=env, cwd=self.p())
        before = self.read(os.path.join(self.d, "k.o"), "rb")
        edit()
        self.kache([compiler] + args2 + ["-o", self.p("k.o")], env=env2, cwd=self.p())
        self.plain(compiler, args2 + ["-o", self.p("plain.o")], env=env2, cwd=self.p())
        self.assert_same_object(self.p("k.o"), self.p("plain.o"))
        self.assertNotEqual(before, self.read(os.path.join(self.d, "k.o"), "rb"))
        self.assert_counts(hits=0, misses=2)

    def same_size_and_mtime_edit(self, rel, text):
        """An edit that keeps the file's size and modification time (only its ctime moves)."""
        p = self.p(rel)
        st = os.stat(p)
        self.assertEqual(st.st_size, len(text))

        def edit():
            with open(p, "w") as f:
                f.write(text)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
            time.sleep(0.01)
        return edit

    def test_header_edit_keeping_size_and_mtime(self):
        def case(cc):
            self.w("h.h", "#define VAL 1\n")
            self.w("a.c", VALUE_SRC)
            self.trap(cc, ["-c", "a.c"], self.same_size_and_mtime_edit("h.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_header_edit_under_mmd(self):
        # -MMD leaves system headers out of the user's depfile; the closure still has the project's.
        def case(cc):
            self.w("h.h", "#define VAL 1\n")
            self.w("a.cpp", VALUE_SRC + "#include <vector>\n")
            self.trap(cc, ["-c", "a.cpp", "-MMD"], self.same_size_and_mtime_edit("h.h", "#define VAL 3\n"))
        self.each_compiler(case, CXX_COMPILERS)

    def test_header_appearing_earlier_on_search_path(self):
        def case(cc):
            self.w("b/h.h", "#define VAL 1\n")
            self.w("a.c", VALUE_SRC.replace('"h.h"', "<h.h>"))
            os.makedirs(self.p("a"))
            self.trap(cc, ["-c", "a.c", "-Ia", "-Ib"], lambda: self.w("a/h.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_header_appearing_earlier_among_isystem_dirs(self):
        def case(cc):
            self.w("b/h.h", "#define VAL 1\n")
            self.w("a.c", VALUE_SRC.replace('"h.h"', "<h.h>"))
            os.makedirs(self.p("a"))
            self.trap(cc, ["-c", "a.c", "-isystem", "a", "-idirafter", "b"], lambda: self.w("a/h.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_header_appearing_next_to_source(self):
        def case(cc):
            self.w("inc/h.h", "#define VAL 1\n")
            self.w("src/a.c", VALUE_SRC)
            self.trap(cc, ["-c", "src/a.c", "-Iinc"], lambda: self.w("src/h.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_has_include(self):
        def case(cc):
            self.w("a.c", '#if __has_include("opt.h")\n#include "opt.h"\n#else\n#define VAL 1\n#endif\n'
                   "int value = VAL;\n")
            self.trap(cc, ["-c", "a.c"], lambda: self.w("opt.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_has_include_target_deleted(self):
        # Present on the first build but only tested, never included: no depfile names it.
        def case(cc):
            self.w("opt.h", "// present\n")
            self.w("a.c", '#if __has_include(<opt.h>)\n#define VAL 1\n#else\n#define VAL 2\n#endif\n'
                   "int value = VAL;\n")
            self.trap(cc, ["-c", "a.c", "-I."], lambda: os.unlink(self.p("opt.h")))
        self.each_compiler(case)

    def test_has_include_target_deleted_beside_a_computed_include(self):
        # A computed #include leaves the compile without a direct-mode record (kache cannot tell which
        # names it looks up): the lookup goes through the preprocessor's dependency list instead, which
        # does not name a __has_include target either.
        def case(cc):
            self.w("opt.h", "// present\n")
            self.w("b/h.h", "#define HV 0\n")
            self.w("a.c", "#define HDR <h.h>\n#include HDR\n"
                   "#if __has_include(<opt.h>)\n#define VAL 1\n#else\n#define VAL 2\n#endif\n"
                   "int value = VAL + HV;\n")
            self.trap(cc, ["-c", "a.c", "-I.", "-Ib"], lambda: os.unlink(self.p("opt.h")))
        self.each_compiler(case)

    def test_precompiled_header_appearing_beside_an_included_header(self):
        # GCC reads h.h.gch instead of an #include'd h.h when one lies beside it, without checking the
        # header's content and without naming either file in -MD: a stale PCH (built from an older
        # h.h) changes the object. kache must miss and not store what it cannot key.
        self.d = "gcc-12"
        os.makedirs(self.p("old"))
        self.w("old/h.h", "#define VAL 5\n")
        self.plain("gcc-12", ["-x", "c-header", self.p("old", "h.h"), "-o", self.p("old", "h.h.gch")])
        self.w("h.h", "#define VAL 1\n")
        self.w("a.c", VALUE_SRC)
        self.kache(["gcc-12", "-c", "a.c", "-o", self.p("k.o")], cwd=self.p())
        self.kache(["gcc-12", "-c", "a.c", "-o", self.p("k.o")], cwd=self.p())
        self.assert_counts(hits=1, misses=1)
        os.rename(self.p("old", "h.h.gch"), self.p("h.h.gch"))
        for _ in range(2):
            self.kache(["gcc-12", "-c", "a.c", "-o", self.p("k.o")], cwd=self.p())
            self.plain("gcc-12", ["-c", "a.c", "-o", self.p("plain.o")], cwd=self.p())
            self.assert_same_object(self.p("k.o"), self.p("plain.o"))
        self.assert_counts(hits=1, misses=3)
        self.assertEqual(self.stats()["not_stored_reasons"].get("precompiled-header"), 2)

    def test_forced_include_edit(self):
        def case(cc):
            self.w("pre.h", "#define VAL 1\n")
            self.w("a.c", "int value = VAL;\n")
            self.trap(cc, ["-c", "a.c", "-include", "pre.h"], self.same_size_and_mtime_edit("pre.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_imacros_edit(self):
        def case(cc):
            self.w("inc/m.h", "#define VAL 1\n")
            self.w("a.c", "int value = VAL;\n")
            self.trap(cc, ["-c", "a.c", "-imacros", "inc/m.h"],
                      self.same_size_and_mtime_edit("inc/m.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_forced_include_appearing_in_cwd(self):
        def case(cc):
            self.w("inc/pre.h", "#define VAL 1\n")
            self.w("a.c", "int value = VAL;\n")
            self.trap(cc, ["-c", "a.c", "-Iinc", "-include", "pre.h"], lambda: self.w("pre.h", "#define VAL 2\n"))
        self.each_compiler(case)

    def test_cpath(self):
        def case(cc):
            self.w("one/h.h", "#define VAL 1\n")
            self.w("two/h.h", "#define VAL 2\n")
            self.w("a.c", VALUE_SRC.replace('"h.h"', "<h.h>"))
            self.trap(cc, ["-c", "a.c"], lambda: None, env={"CPATH": self.p("one")}, env2={"CPATH": self.p("two")})
        self.each_compiler(case)

    def test_c_include_path(self):
        def case(cc):
            self.w("one/h.h", "#define VAL 1\n")
            self.w("two/h.h", "#define VAL 2\n")
            self.w("a.c", VALUE_SRC.replace('"h.h"', "<h.h>"))
            self.trap(cc, ["-c", "a.c"], lambda: None, env={"C_INCLUDE_PATH": self.p("one")},
                      env2={"C_INCLUDE_PATH": self.p("two")})
        self.each_compiler(case)

    def test_cplus_include_path(self):
        def case(cc):
            self.w("one/h.h", "#define VAL 1\n")
            self.w("two/h.h", "#define VAL 2\n")
            self.w("a.cpp", VALUE_SRC.replace('"h.h"', "<h.h>"))
            self.trap(cc, ["-c", "a.cpp"], lambda: None, env={"CPLUS_INCLUDE_PATH": self.p("one")},
                      env2={"CPLUS_INCLUDE_PATH": self.p("two")})
        self.each_compiler(case, CXX_COMPILERS)

    def test_header_appearing_in_cpath_dir(self):
        def case(cc):
            self.w("two/h.h", "#define VAL 2\n")
            self.w("a.c", VALUE_SRC.replace('"h.h"', "<h.h>"))
            os.makedirs(self.p("one"))
            env = {"CPATH": self.p("one") + ":" + self.p("two")}
            self.trap(cc, ["-c", "a.c"], lambda: self.w("one/h.h", "#define VAL 1\n"), env=env)
        self.each_compiler(case)

    def test_compiler_replaced_in_place(self):
        # A driver whose content changes while its size and modification time stay.
        def case(cc):
            drv = self.w("bin/cc", f"#!/bin/sh\nexec {cc} -DVAL=1 \"$@\"\n")
            os.chmod(drv, 0o755)
            st = os.stat(drv)
            self.w("a.c", "int value = VAL;\n")

            def edit():
                with open(drv, "w") as f:
                    f.write(f"#!/bin/sh\nexec {cc} -DVAL=2 \"$@\"\n")
                os.utime(drv, ns=(st.st_atime_ns, st.st_mtime_ns))
            if "clang" in cc:
                # clang's -### shows no driver options: a clang wrapper that adds one passes through.
                self.kache([drv, "-c", "a.c", "-o", self.p("k.o")], cwd=self.p())
                self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-script": 1})
                return
            self.trap(drv, ["-c", "a.c"], edit)
        self.each_compiler(case)

    def test_clang_config_file_appearing_beside_the_driver(self):
        # clang reads default configuration files from its executable's directory: clang 19 clang.cfg,
        # clang 14 <prefix>.cfg for a driver named <prefix>-clang. Their options reach every compile.
        # A private copy of the driver (the installed ones' directories are the system's); the
        # resource directory is found at ../lib as beside the real one.
        cases = [(v, name, cfg) for v, name, cfg in (("14", "x86_64-clang", "x86_64.cfg"), ("19", "clang", "clang.cfg"))
                 if os.path.exists(f"/usr/lib/llvm-{v}/bin/clang")]
        self.assertTrue(cases)
        for version, name, cfg in cases:
            with self.subTest(clang=version):
                self.zero()
                self.d = "llvm" + version
                os.makedirs(self.p("bin"))
                shutil.copy2(f"/usr/lib/llvm-{version}/bin/clang", self.p("bin", "clang"))
                os.symlink(f"/usr/lib/llvm-{version}/lib", self.p("lib"))
                if name != "clang":
                    os.symlink("clang", self.p("bin", name))
                self.w("a.c", "#ifndef VAL\n#define VAL 1\n#endif\nint value = VAL;\n")
                self.trap(self.p("bin", name), ["-c", "a.c"], lambda: self.w(f"bin/{cfg}", "-DVAL=2\n"))
                # Then edited in place, size and modification time kept (`clang --version` names a
                # configuration file in use, not its content). A fresh cache: the first build misses.
                shutil.rmtree(self.cache)
                self.trap(self.p("bin", name), ["-c", "a.c"], self.same_size_and_mtime_edit(f"bin/{cfg}", "-DVAL=3\n"))

    def test_gcc_installation_appearing_beside_clang(self):
        # clang takes the C++ standard library of the newest GCC installation it finds, under /usr and
        # beside its own installation (<prefix>/lib/gcc/<triple>/<version>/crtbegin.o). A private copy
        # of clang 19 (14 is the same code); a GCC "99" appearing beside it brings include/c++/99.
        if not os.path.exists("/usr/lib/llvm-19/bin/clang"):
            self.skipTest("clang 19 is not installed")
        self.d = "llvm"
        os.makedirs(self.p("bin"))
        os.makedirs(self.p("lib"))
        shutil.copy2("/usr/lib/llvm-19/bin/clang", self.p("bin", "clang++"))
        os.symlink("/usr/lib/llvm-19/lib/clang", self.p("lib", "clang"))
        self.w("a.cpp", "#if __has_include(<gcc99_marker.h>)\n#define VAL 2\n#else\n#define VAL 1\n#endif\n"
               "int value = VAL;\n")

        def install_gcc99():
            os.makedirs(self.p("lib/gcc/x86_64-linux-gnu/99"))
            shutil.copy("/usr/lib/gcc/x86_64-linux-gnu/12/crtbegin.o", self.p("lib/gcc/x86_64-linux-gnu/99"))
            self.w("include/c++/99/gcc99_marker.h", "// libstdc++ 99\n")
        self.trap(self.p("bin", "clang++"), ["-c", "a.cpp"], install_gcc99)

    def private_clang(self, version, name="clang"):
        """A private copy of clang <version> at ws/<self.d>/bin/<name>, its resource directory found at
        ../lib/clang as beside the real one."""
        os.makedirs(self.p("bin"))
        os.makedirs(self.p("lib"))
        shutil.copy2(f"/usr/lib/llvm-{version}/bin/clang", self.p("bin", name))
        os.symlink(f"/usr/lib/llvm-{version}/lib/clang", self.p("lib", "clang"))
        return self.p("bin", name)

    def test_clang_config_file_including_another_file(self):
        # A configuration file beside the driver may pull in another file with an @path line (expanded
        # like a response file); that file's options reach every compile, its content is keyed nowhere:
        # the compile passes through (clang-config-include). Editing it must never serve the old object.
        cases = [(v, name, cfg) for v, name, cfg in (("14", "x86_64-clang", "x86_64.cfg"), ("19", "clang", "clang.cfg"))
                 if os.path.exists(f"/usr/lib/llvm-{v}/bin/clang")]
        self.assertTrue(cases)
        for version, name, cfg in cases:
            with self.subTest(clang=version):
                self.zero()
                self.d = "llvm" + version
                driver = self.private_clang(version, "clang")
                if name != "clang":
                    os.symlink("clang", self.p("bin", name))
                    driver = self.p("bin", name)
                extra = self.w("extra.txt", "-DVAL=1\n")
                self.w(f"bin/{cfg}", f"  @{extra}\n")
                self.w("a.c", "int value = VAL;\n")
                self.kache([driver, "-c", "a.c", "-o", self.p("k.o")], cwd=self.p())
                self.kache([driver, "-c", "a.c", "-o", self.p("k.o")], cwd=self.p())
                before = self.read(os.path.join(self.d, "k.o"), "rb")
                self.w("extra.txt", "-DVAL=2\n")
                self.kache([driver, "-c", "a.c", "-o", self.p("k.o")], cwd=self.p())
                self.plain(driver, ["-c", "a.c", "-o", self.p("plain.o")], cwd=self.p())
                self.assert_same_object(self.p("k.o"), self.p("plain.o"))
                self.assertNotEqual(before, self.read(os.path.join(self.d, "k.o"), "rb"))
                s = self.assert_counts(hits=0, misses=0, passthrough=3)
                self.assertEqual(s["passthrough_reasons"].get("clang-config-include"), 3, s)

    def test_gcc_version_directory_becoming_an_installation_beside_clang(self):
        # clang takes <prefix>/lib/gcc/<triple>/<version>/ for a GCC installation only when it holds
        # crtbegin.o: one appearing in an existing, empty version directory switches the C++ standard
        # library (include/c++/99) while lib/gcc and the triple directory stay as they were.
        src = "#include <version>\n#ifdef KV\nint v = KV;\n#else\nint v = 12;\n#endif\n"
        versions = [v for v in ("19", "14") if os.path.exists(f"/usr/lib/llvm-{v}/bin/clang")]
        if not versions:
            self.skipTest("neither clang 19 nor clang 14 is installed")
        for version in versions:
            with self.subTest(clang=version):
                self.zero()
                self.d = "llvm-gcc99-" + version
                driver = self.private_clang(version, "clang++")
                os.makedirs(self.p("lib/gcc/x86_64-linux-gnu/99"))
                self.w("include/c++/99/version", "#define KV 99\n")
                self.w("g.cpp", src)

                def crtbegin_appears():
                    shutil.copy("/usr/lib/gcc/x86_64-linux-gnu/12/crtbegin.o", self.p("lib/gcc/x86_64-linux-gnu/99"))
                self.trap(driver, ["-c", "g.cpp"], crtbegin_appears)

    def test_multiarch_libstdcxx_dir_appearing_beside_clang(self):
        # With GCC 99 beside clang, clang searches Debian's multiarch include/<triple>/c++/99 only when
        # it exists: it appearing in an existing include/<triple>/c++ changes only that directory.
        versions = [v for v in ("19", "14") if os.path.exists(f"/usr/lib/llvm-{v}/bin/clang")]
        if not versions:
            self.skipTest("neither clang 19 nor clang 14 is installed")
        for version in versions:
            with self.subTest(clang=version):
                self.zero()
                self.d = "llvm-multiarch-" + version
                driver = self.private_clang(version, "clang++")
                os.makedirs(self.p("lib/gcc/x86_64-linux-gnu/99"))
                shutil.copy("/usr/lib/gcc/x86_64-linux-gnu/12/crtbegin.o", self.p("lib/gcc/x86_64-linux-gnu/99"))
                self.w("include/c++/99/version", "// libstdc++ 99\n")
                os.makedirs(self.p("include/x86_64-linux-gnu/c++"))
                self.w("a.cpp", "#if __has_include(<bits/kv_marker.h>)\n#define VAL 2\n#else\n#define VAL 1\n#endif\n"
                       "int value = VAL;\n")
                self.trap(driver, ["-c", "a.cpp"],
                          lambda: self.w("include/x86_64-linux-gnu/c++/99/bits/kv_marker.h", "\n"))

    def test_define_change(self):
        def case(cc):
            self.w("a.c", "int value = VAL;\n")
            self.trap(cc, ["-c", "a.c", "-DVAL=1"], lambda: None, args2=["-c", "a.c", "-DVAL=2"])
        self.each_compiler(case)

    def test_optimization_change(self):
        def case(cc):
            self.w("a.c", "int f(int x) { int s = 0; for (int i = 0; i < x; ++i) s += i * x; return s; }\n")
            self.trap(cc, ["-c", "a.c", "-O0"], lambda: None, args2=["-c", "a.c", "-O2"])
        self.each_compiler(case)

    def test_include_through_macro(self):
        def case(cc):
            self.w("b/h.h", "#define VAL 1\n")
            self.w("a.c", '#define HDR <h.h>\n#include HDR\nint value = VAL;\n')
            os.makedirs(self.p("a"))
            self.trap(cc, ["-c", "a.c", "-Ia", "-Ib"], lambda: self.w("a/h.h", "#define VAL 2\n"))
        self.each_compiler(case)


if __name__ == "__main__":
    kachetest.main()
