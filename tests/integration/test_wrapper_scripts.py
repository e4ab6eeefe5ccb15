"""Wrapper scripts in the toolchain (a toolkit's /usr/local/bin/nvcc or ptxas is `exec /real/path "$@"`):
what a wrapper runs is keyed as the wrapper is. A link on the way retargeted, a wrapper's target replaced
two levels down: a miss, and the object a plain build gives now. A wrapper whose programs cannot be read
off its text (a name built at run time, an environment variable, a command not on PATH, another
interpreter) passes through with the reason wrapper-script, and a FIFO a wrapper names never stalls it.
Each stale case served the first object before the wrappers were followed.
"""
import os
import shutil
import stat
import subprocess
import textwrap

import kachetest
from kachetest import KacheTestCase

GCC = shutil.which("gcc")
SOURCE = "#ifndef X\n#define X 3\n#endif\nint x = X;\nint f(void) { return x; }\n"


class WrapperScripts(KacheTestCase):
    def setUp(self):
        super().setUp()
        if GCC is None:
            self.skipTest("gcc is not installed")
        self.write("m.c", SOURCE)

    def script(self, rel, body, interpreter="#!/bin/sh"):
        p = self.write(rel, f"{interpreter}\n{body}\n")
        os.chmod(p, 0o755)
        return p

    def compile(self, driver, check_plain=True):
        r = self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws)
        self.assertEqual(r.stderr, "")
        if check_plain:
            subprocess.run([driver, "-c", "m.c", "-o", "plain.o"], cwd=self.ws, env=self.env, check=True)
            self.assert_same_object(self.path("m.o"), self.path("plain.o"))
        return r

    def counts(self):
        s = self.stats()
        return s["hits"], s["misses"], s["passthrough"]

    def assert_follows(self, driver, change):
        """A miss, a hit; then after change() a miss again, with the object a plain build gives now."""
        self.compile(driver)
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 1, 0))
        change()
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 2, 0))

    def test_link_retargeted_in_the_path_a_wrapper_runs(self):
        self.script("v1/gcc", f'exec {GCC} "$@"')
        self.script("v2/gcc", f'exec {GCC} -DX=4 "$@"')
        os.symlink("v1", self.path("cur"))

        def retarget():
            os.unlink(self.path("cur"))
            os.symlink("v2", self.path("cur"))

        self.assert_follows(self.script("bin/gcc", f'exec {self.path("cur", "gcc")} "$@"'), retarget)

    def test_target_of_a_wrapper_of_a_wrapper_replaced(self):
        inner = self.script("v1/gcc", f'exec {GCC} "$@"')
        self.assert_follows(self.script("bin/gcc", f'exec {inner} "$@"'),
                            lambda: self.script("v1/gcc", f'exec {GCC} -DX=5 "$@"'))

    def assert_passes_through(self, driver, env=None):
        r = self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, env=env, check=False)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (0, 0), s)
        self.assertEqual(s.get("passthrough_reasons"), {"wrapper-script": 1}, s)

    def test_name_built_at_run_time_is_read_on_every_compile(self):
        # A command substitution can read anything: the wrapper's reading is made again on each compile,
        # so a program placed where it points is the one keyed.
        self.script("w/real/gcc", f'exec {GCC} "$@"')
        driver = self.script("w/gcc", 'exec "$(dirname "$0")/real/gcc" "$@"')
        self.assert_follows(driver, lambda: self.script("w/real/gcc", f'exec {GCC} -DX=6 "$@"'))

    def test_program_a_wrapper_finds_on_path(self):
        # `exec mygcc "$@"`: found on the PATH the wrapper inherits.
        self.follows_on_path('exec mygcc "$@"', 8)

    def follows_on_path(self, body, x):
        # mygcc found on the PATH the wrapper inherits; one placed earlier on PATH later is what the
        # wrapper runs then: a miss, and the object a plain build gives now.
        os.makedirs(self.path("early"))
        self.script("late/mygcc", f'exec {GCC} "$@"')
        driver = self.script("w/gcc", body)
        self.env["PATH"] = self.path("early") + ":" + self.path("late") + ":" + os.environ["PATH"]
        self.assert_follows(driver, lambda: self.script("early/mygcc", f'exec {GCC} -DX={x} "$@"'))

    def test_program_a_wrapper_runs_without_exec(self):
        # No exec: the shell runs mygcc just the same. Served the first object before.
        self.follows_on_path('mygcc "$@"', 9)

    def test_program_among_the_lines_kache_reads(self):
        # Assignments, set, builtins that print, a harmless added flag and exec with its own environment:
        # the one program is found and followed.
        self.follows_on_path(textwrap.dedent("""\
            set -eu
            # a comment naming nothing: gcc-13 "$@"
            MODE=wrapped
            export MODE
            echo "compiling ($MODE)" >/dev/null
            MODE2=x exec mygcc -Wall "$@"
            """), 10)

    def test_scripts_kache_cannot_read_pass_through(self):
        # Each could run a program kache does not key or change what it writes (found by an adversarial
        # review; the ones marked stale served the first object before).
        tool = self.script("tools/mygcc", f'exec {GCC} "$@"')
        self.write("rsp", "-DX=2\n")
        self.write("plain", "#ifndef X\n")
        os.chmod(self.path("plain"), 0o755)
        cases = {
            "a test of a path that may appear (stale)": f'if [ -x /opt/kache-absent/gcc ]; then exec /opt/kache-absent/gcc "$@"; fi\nexec {tool} "$@"',
            "an absent path": f'exec /opt/kache-absent/gcc "$@"',
            "a variable in the program (stale)": f'V=tools\nexec {self.ws}/$V/mygcc "$@"',
            "a glob in the program (stale)": f'exec {self.ws}/too*/mygcc "$@"',
            "a conditional default (stale)": f'KFLAGS=${{KFLAGS:--O0}}\nexec {tool} $KFLAGS "$@"',
            "a name set after its use (stale)": f'exec {tool} $OPTS "$@"\nOPTS=',
            "a launcher (stale)": f'exec ccache {tool} "$@"',
            "a response file (stale)": f'exec {tool} @{self.path("rsp")} "$@"',
            "a flag that writes a file": f'exec {tool} -MD "$@"',
            "a -B directory (stale)": f'exec {tool} -B{self.ws}/ "$@"',
            "a case with a subshell (stale)": f'case "$1" in\n  *) ({tool} "$@") ;;\nesac',
            "a file read into a variable (stale)": f'read FLAGS < {self.path("rsp")}\nexec {tool} $FLAGS "$@"',
            "a trap (stale)": f'trap \'{tool} "$@"\' EXIT\ntrue',
            "a redirection before the program (stale)": f'< /dev/null {tool} "$@"',
            "a nested program with no #! (stale)": f'exec {self.path("plain")} "$@"',
            "a function": f'f() {{ {tool} "$@"; }}\nf "$@"',
            "eval": f'eval exec {tool} \'"$@"\'',
            "a PATH of its own": f'PATH={self.ws}/tools:$PATH\nexec mygcc "$@"',
        }
        for n, (what, body) in enumerate(cases.items()):
            with self.subTest(what):
                self.kache(["--zero-stats"])
                driver = self.script(f"w{n}/gcc", body)
                r = self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, check=False)
                plain = subprocess.run([driver, "-c", "m.c", "-o", "plain.o"], cwd=self.ws, env=self.env,
                                       capture_output=True, text=True)
                self.assertEqual(r.returncode, plain.returncode, r.stderr)
                s = self.stats()
                if s["passthrough"] == 0:
                    # Read by behaviour (compiler/gcc/wrapper.hpp): cached as the command it stands for,
                    # which an earlier case may have stored already.
                    self.assertEqual(s["misses"] + s["hits"], 1, s)
                    self.assert_same_object(self.path("m.o"), self.path("plain.o"))
                else:
                    self.assertIn(next(iter(s["passthrough_reasons"])), ("wrapper-script", "wrapper-environment"), s)

    def test_program_run_through_a_launcher(self):
        # nice runs the program its arguments name: the driver at the end of the chain is what is keyed.
        self.follows_on_path('nice -n 5 mygcc "$@"', 11)

    def test_script_that_sources_a_file_passes_through(self):
        # The sourced file may export what the compiler reads (CPATH) or cd: nothing -### shows.
        self.write("conf.sh", "export CPATH=/opt/inc\n")
        driver = self.script("w/gcc", f'. ./conf.sh\nexec {GCC} "$@"')
        r = self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws)
        self.assertEqual(r.stderr, "")
        self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-environment": 1})

    def test_program_not_on_path_passes_through(self):
        # The wrapper fails as it does without kache: its exit code and message are the build's.
        driver = self.script("w/gcc", 'exec no-such-gcc-anywhere "$@"')
        plain = subprocess.run([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, env=self.env, capture_output=True, text=True)
        r = self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, check=False)
        self.assertNotEqual(plain.returncode, 0)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-script": 1})

    def test_other_interpreter(self):
        self.write("flag", "-DX=1")
        body = f'import os, sys\nos.execv("{GCC}", ["{GCC}", open("{self.path("flag")}").read()] + sys.argv[1:])'
        driver = self.script("w/gcc", body, interpreter="#!/usr/bin/python3")
        self.assert_follows(driver, lambda: self.write("flag", "-DX=2"))

    def test_fifo_a_wrapper_names_never_stalls(self):
        fifo = self.path("pipe")
        os.mkfifo(fifo)
        os.chmod(fifo, 0o755 | stat.S_IFIFO)
        driver = self.script("w/gcc", f'test -p {fifo}\nexec {GCC} "$@"')
        # The probe names the FIFO's path without opening it (a read would wait for a writer forever).
        r = subprocess.run([kachetest.KACHE, driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, env=self.env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(sum(self.counts()), 1)  # a path that is no regular file is watched, never opened


if __name__ == "__main__":
    kachetest.main()
