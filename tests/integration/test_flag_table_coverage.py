"""The gcc/clang flag table against what the installed compilers document.

Every option gcc 12, clang 14 and clang 19 list in their help (`gcc --help` and `--help=<class>`,
`clang --help-hidden`) that takes a file, a path or a directory (its metavar: <file>, <path>, <dir>,
FILE, filename...; or its description: "...to a file", "...directory") must be modelled by the table
(an include directory, a forced include, the output, the dependency file), refused (a named
passthrough), or unknown (a passthrough naming the option). None may be merely keyed: a keyed option
that reads a file gives a stale object when the file changes, one that writes a file leaves it
unwritten on a hit. The table is asked through the hidden `kache --classify-gcc-flags ARG...`, one
process for every option (src/compiler/gcc/flag_table.cpp).

The traps compile for real: a profile read by -fbranch-probabilities that changes between two
compiles, and an optimization record that every compile must write.
"""
import os
import re
import shutil
import subprocess

import kachetest
from kachetest import KacheTestCase

GCC = shutil.which("gcc-12") or shutil.which("gcc")
CLANGS = [c for c in ("clang-14", "clang-19") if shutil.which(c)]

# A metavar or a description that says the option names a file, a path or a directory.
FILE_METAVAR = re.compile(r"file|path|dir|directory|filename|filespec|dsopath|script", re.I)
FILE_WORDS = re.compile(r"\b(file|files|filename|directory|directories|path|paths)\b", re.I)
# Description phrases that mention files without the option naming one.
NOT_A_FILE_OPTION = re.compile(r"source files?|input files?|object files?|per-file|file-scope|file scope|"
                               r"header files?|same file|in files|translation unit|the file name|file names|"
                               r"include paths?|search paths?|code paths?|execution paths?|critical path|"
                               r"paths leading|assembly files|intermediate files|control-flow paths?|in paths|paths that", re.I)

# Keyed although the help mentions a file or a path, each with the reason that is sound.
KEYED_WITH_A_PATH = {
    # Path prefixes rewritten in what the compiler writes: strings, nothing is read.
    "-fdebug-prefix-map": "a string rewrite of paths in debug info",
    "-ffile-prefix-map": "a string rewrite of paths in debug info, macros and coverage",
    "-fmacro-prefix-map": "a string rewrite of __FILE__",
    # clang: the directory name written into debug info instead of the cwd; a string.
    "-fdebug-compilation-dir": "a string written into debug info",
    "-ffile-compilation-dir": "a string written into debug info",
    # The link step's options: -c never links (keyed verbatim all the same).
    "-L": "link step only",
    "-T": "link step only",
    "-Wl,": "link step only",
    "-Xlinker": "link step only",
    "-l": "link step only",
    "-fuse-ld": "link step only",
    "-rtlib": "link step only",
    "-unwindlib": "link step only",
    "-static-pie": "link step only",
    "-pie": "link step only",
    "-shared": "link step only",
    "-rdynamic": "link step only",
    "-fuse-linker-plugin": "link step only",
    # Fewer standard directories searched: the dependency list still names every header read.
    "-nostdinc": "fewer directories searched",
    "-nostdinc++": "fewer directories searched",
    # Phony targets in the dependency file kache stores and restores.
    "-MP": "changes only the stored dependency file",
}
# What a file option may be classified as (flag_table.cpp's effects that model the file).
MODELLED = {"include-dir", "forced-include", "output", "dep-file", "dep-target", "driver-prefix"}


def help_lines(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    return (r.stdout + r.stderr).splitlines()


OPTION_LINE = re.compile(
    r"^ {2,6}(--?[A-Za-z0-9#][^\s<\[=,]*)([=,]?)(\S*)(?: (<[^>]*>|[A-Z][A-Z_]+|filename))?(?:\s+(.*))?$")


def documented_options(argv):
    """[(name, joined, separate metavar, description)] from one help text. `joined` is what follows
    the name in the same word ("=<file>", "<dir>", ",<arg>"); the description may be on the next line."""
    lines = help_lines(argv)
    out = []
    for i, line in enumerate(lines):
        m = OPTION_LINE.match(line)
        if not m:
            continue
        name, sep, joined, separate, desc = m.groups()
        if not desc and i + 1 < len(lines) and re.match(r"^\s{8,}\S", lines[i + 1]) and \
                not OPTION_LINE.match(lines[i + 1]):
            desc = lines[i + 1].strip()
        out.append((name, sep + joined, separate or "", desc or ""))
    return out


def takes_a_file(joined, separate, desc):
    if FILE_METAVAR.search(joined) or FILE_METAVAR.search(separate):
        return True
    return bool(FILE_WORDS.search(NOT_A_FILE_OPTION.sub("", desc)))


def spelling(name, joined, separate):
    """The argument to classify: the option with a value where it takes one in the same word."""
    if joined.startswith("=") or joined.startswith(","):
        return name + joined[0] + "x"
    if joined:
        return name + "x"  # -J<directory>, -fopt-info[-<type>=filename]
    return name


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def classify(args):
    r = subprocess.run([kachetest.KACHE, "--classify-gcc-flags"] + args, capture_output=True, text=True)
    classes = dict(line.split("\t", 1) for line in r.stdout.splitlines() if "\t" in line)
    return r, classes


class FlagTableCoverage(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.assertIsNotNone(GCC)
        self.assertTrue(CLANGS, "clang-14 or clang-19 is installed")

    def file_options(self):
        helps = [[GCC, "--help"], [GCC, "--help=common", "--help=optimizers", "--help=warnings", "--help=target",
                                   "--help=c", "--help=c++"]]
        helps += [[c, "--help-hidden"] for c in CLANGS]
        found = {}
        total = 0
        for argv in helps:
            options = documented_options(argv)
            self.assertGreater(len(options), 30, f"parsed {argv}")
            total += len(options)
            for name, joined, separate, desc in options:
                if not takes_a_file(joined, separate, desc):
                    continue
                # -fno-profile-use, -fno-sanitize-ignorelist...: turn an option off (flag_table.cpp's
                # -fno- and -gno- families).
                if re.match(r"-[fg]no-", name):
                    continue
                # Warnings (-Wmissing-include-dirs, -Wanalyzer-file-leak) choose diagnostics only; -Wa,
                # -Wp, and -Wl, pass options on and are checked.
                if name.startswith("-W") and not re.match(r"-W[apl]$", name):
                    continue
                found.setdefault(spelling(name, joined, separate), (name, argv[0], joined or separate, desc))
        return found, total

    def test_every_documented_file_option_is_modelled_refused_or_unknown(self):
        found, total = self.file_options()
        # The help texts list far more options than take files; the parse found both kinds.
        self.assertGreater(total, 2000)
        self.assertGreater(len(found), 150)
        for known in ("-fprofile-use=x", "-o", "-MF", "-fdump-final-insns=x", "-fsanitize-ignorelist=x",
                      "-foptimization-record-file=x", "-fprebuilt-module-path=x", "-isystem", "-I"):
            self.assertIn(known, found, "the help parse finds it")
        r, classes = classify(sorted(found))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(classes), set(found), "one class per option asked")
        if os.environ.get("KACHE_SHOW_CLASSES") == "1":
            for arg in sorted(found):
                print(f"{classes[arg]:28} {arg:45} {found[arg][1]} {found[arg][2]!r}: {found[arg][3]}")
        keyed = []
        for arg, (name, compiler, metavar, desc) in sorted(found.items()):
            cls = classes[arg]
            if cls == "unknown" or cls.startswith("refused:") or cls in MODELLED:
                continue
            if name.rstrip("=") in KEYED_WITH_A_PATH or name in KEYED_WITH_A_PATH:
                continue
            keyed.append(f"{arg} ({compiler} {metavar!r}: {desc}) is {cls}")
        self.assertEqual(keyed, [], "options naming a file that the table keys without modelling the file")
        # What the classes look like, so this test cannot pass by classifying nothing.
        self.assertEqual(classes["-fprofile-use=x"], "refused:profile-use")
        self.assertEqual(classes["-I"], "include-dir")

    def test_the_table_is_closed(self):
        r, classes = classify(["-fPIC", "-fno-exceptions", "-fkache-no-such-option", "-fbranch-probabilities",
                               "-gen-cdb-fragment-path", "-Wall", "-O2", "-frobnicate=3"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(classes, {"-fPIC": "keyed", "-fno-exceptions": "keyed", "-fkache-no-such-option": "unknown",
                                   "-fbranch-probabilities": "refused:profile-use",
                                   "-gen-cdb-fragment-path": "refused:side-output", "-Wall": "keyed", "-O2": "keyed",
                                   "-frobnicate=3": "unknown"})

    def test_compiles_with_file_options_pass_through_naming_the_option(self):
        # End to end, on options the former catch-all "-f" keyed: the real compile runs, and the log
        # names the reason and the option.
        self.write("a.c", "int f(int x) { return x > 3 ? x * 2 : x - 1; }\n")
        cases = [(GCC, "-fbranch-probabilities", "profile-use"),
                 (GCC, "-fkache-no-such-option", "unknown-flag")]
        cases += [(c, "-fprebuilt-module-path=mods", "modules") for c in CLANGS]
        cases += [(c, "-foptimization-record-file=a.yaml", "side-output") for c in CLANGS]
        for compiler, flag, reason in cases:
            with self.subTest(compiler=compiler, flag=flag):
                r, log = self.log_of([compiler, "-c", "a.c", "-o", "a.o", flag])
                self.assertIn(f"passthrough ({reason}): {flag}", log)

    def test_the_allow_list_still_admits_an_unknown_option(self):
        self.write("a.c", "int f(int x) { return x; }\n")
        flag = "-fgimple"  # gcc 12 accepts it for C; the table does not list it
        r, log = self.log_of([GCC, "-c", "a.c", "-o", "a.o", flag])
        self.assertIn(f"passthrough (unknown-flag): {flag}", log)
        self.zero()
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": flag}
        self.kache([GCC, "-c", "a.c", "-o", "a.o", flag], env=env)
        os.unlink(self.path("a.o"))
        self.kache([GCC, "-c", "a.c", "-o", "a.o", flag], env=env)
        self.assert_counts(hits=1, misses=1, passthrough=0)


class FileOptionTraps(KacheTestCase):
    """Options that read or write files beside the object, on real compiles."""

    PROFILED = ("int slow(int);\nint fast(int);\n"
                "int pick(int x) { int s = 0; for (int i = 0; i < 64; ++i) {\n"
                "  if (x > 5) s += fast(i); else s += slow(i); }\n  return s; }\n")
    MAIN = ("#include <stdlib.h>\nint pick(int);\n"
            "int slow(int i) { return i * 3; }\nint fast(int i) { return i + 1; }\n"
            "int main(int argc, char** argv) { int s = 0; for (int i = 0; i < 1000; ++i) s += pick(atoi(argv[1]));"
            " return s == 42; }\n")

    def profile(self, run_with):
        """Writes p.gcda (beside p.o in the workspace) from an instrumented run with argv[1] = run_with."""
        gcda = self.path("p.gcda")
        if os.path.exists(gcda):
            os.unlink(gcda)
        subprocess.run([GCC, "-O2", "-fprofile-arcs", "-c", "p.c", "-o", "p.o"], cwd=self.ws, check=True)
        subprocess.run([GCC, "-fprofile-arcs", "p.o", "main.c", "-o", "prog"], cwd=self.ws, check=True)
        subprocess.run([self.path("prog"), str(run_with)], cwd=self.ws, check=False)
        self.assertTrue(os.path.exists(gcda))

    def test_a_changed_profile_is_not_served_stale(self):
        self.write("p.c", self.PROFILED)
        self.write("main.c", self.MAIN)
        for flag in ("-fbranch-probabilities", "-fprofile-use"):
            with self.subTest(flag=flag):
                shutil.rmtree(self.cache, ignore_errors=True)
                objects = []
                for run_with in (10, 0):  # the hot branch flips between the two profiles
                    self.profile(run_with)
                    cmd = ["-O2", flag, "-Wno-missing-profile", "-c", "p.c", "-o", "p.o"]
                    subprocess.run([GCC] + cmd, cwd=self.ws, check=True)
                    plain = self.path(f"plain{run_with}.o")
                    os.replace(self.path("p.o"), plain)
                    self.kache([GCC] + cmd)
                    cached = self.path(f"kache{run_with}.o")
                    os.replace(self.path("p.o"), cached)
                    objects.append((plain, cached))
                # The two profiles give two objects (else this test could not fail) ...
                self.assertNotEqual(file_bytes(objects[0][0]), file_bytes(objects[1][0]))
                # ... and kache gives plain gcc's object for each (whole files: with a profile, gcc
                # moves code to .text.hot and .text.unlikely).
                for plain, cached in objects:
                    self.assertEqual(file_bytes(plain), file_bytes(cached), f"{cached} is not {plain}")

    def test_an_optimization_record_is_written_by_every_compile(self):
        self.write("a.c", "int f(int* x, int n) { int s = 0; for (int i = 0; i < n; ++i) s += x[i]; return s; }\n")
        for compiler in CLANGS:
            with self.subTest(compiler=compiler):
                for _ in range(2):
                    if os.path.exists(self.path("a.yaml")):
                        os.unlink(self.path("a.yaml"))
                    self.kache([compiler, "-O2", "-c", "a.c", "-o", "a.o", "-foptimization-record-file=a.yaml"])
                    self.assertTrue(os.path.exists(self.path("a.yaml")), "the record file is written")

    def test_stack_usage_is_written_by_every_compile(self):
        self.write("a.c", "int f(int n) { volatile char b[64]; b[0] = (char)n; return b[0]; }\n")
        for _ in range(2):
            if os.path.exists(self.path("a.su")):
                os.unlink(self.path("a.su"))
            self.kache([GCC, "-O2", "-c", "a.c", "-o", "a.o", "-fstack-usage"])
            self.assertTrue(os.path.exists(self.path("a.su")), "the .su file is written")


if __name__ == "__main__":
    kachetest.main()
