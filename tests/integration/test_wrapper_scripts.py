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

    def test_link_retargeted_in_the_path_a_wrapper_runs(self):
        self.script("v1/gcc", f'exec {GCC} "$@"')
        self.script("v2/gcc", f'exec {GCC} -DX=4 "$@"')
        os.symlink("v1", self.path("cur"))
        driver = self.script("bin/gcc", f'exec {self.path("cur", "gcc")} "$@"')
        self.compile(driver)
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 1, 0))
        os.unlink(self.path("cur"))
        os.symlink("v2", self.path("cur"))
        self.compile(driver)  # the object a plain build gives now (X = 4)
        self.assertEqual(self.counts(), (1, 2, 0))

    def test_target_of_a_wrapper_of_a_wrapper_replaced(self):
        inner = self.script("v1/gcc", f'exec {GCC} "$@"')
        driver = self.script("bin/gcc", f'exec {inner} "$@"')
        self.compile(driver)
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 1, 0))
        self.script("v1/gcc", f'exec {GCC} -DX=5 "$@"')
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 2, 0))

    def assert_passes_through(self, driver, env=None):
        r = self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, env=env, check=False)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (0, 0), s)
        self.assertEqual(s.get("passthrough_reasons"), {"wrapper-script": 1}, s)

    def test_name_built_at_run_time_passes_through(self):
        self.script("w/real/gcc", f'exec {GCC} "$@"')
        self.assert_passes_through(self.script("w/gcc", 'exec "$(dirname "$0")/real/gcc" "$@"'))

    def test_environment_variable_in_a_wrapper_passes_through(self):
        self.assert_passes_through(self.script("w/gcc", f'exec {GCC} $EXTRA_FLAGS "$@"'), env={"EXTRA_FLAGS": "-DX=6"})

    def test_program_a_wrapper_finds_on_path(self):
        # `exec mygcc "$@"`: found on the PATH the wrapper inherits; one placed earlier on PATH later
        # is what the wrapper runs then.
        os.makedirs(self.path("early"))
        self.script("late/mygcc", f'exec {GCC} "$@"')
        driver = self.script("w/gcc", 'exec mygcc "$@"')
        env = {"PATH": self.path("early") + ":" + self.path("late") + ":" + os.environ["PATH"]}
        self.env.update(env)
        self.compile(driver)
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 1, 0))
        self.script("early/mygcc", f'exec {GCC} -DX=8 "$@"')
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 2, 0))

    def follows_on_path(self, body, x):
        # mygcc found on the PATH the wrapper inherits; one placed earlier on PATH later is what the
        # wrapper runs then: a miss, and the object a plain build gives now.
        os.makedirs(self.path("early"))
        self.script("late/mygcc", f'exec {GCC} "$@"')
        driver = self.script("w/gcc", body)
        self.env["PATH"] = self.path("early") + ":" + self.path("late") + ":" + os.environ["PATH"]
        self.compile(driver)
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 1, 0))
        self.script("early/mygcc", f'exec {GCC} -DX={x} "$@"')
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 2, 0))

    def test_program_a_wrapper_runs_without_exec(self):
        # No exec: the shell runs mygcc just the same. Served the first object before.
        self.follows_on_path('mygcc "$@"', 9)

    def test_program_among_the_shells_own_words(self):
        # Builtins, a case with alternatives, a loop, a comment, an assignment prefix and $?: none of
        # them a program; the one program is found and followed.
        self.follows_on_path(textwrap.dedent("""\
            set -e
            # a comment naming nothing: gcc-13 "$@"
            if [ -z "$1" ]; then echo "usage: gcc ARGS" >&2; exit 2; fi
            case "$1" in
              --version) ;;
              -c | -S) : compile ;;
            esac
            for a in "$@"; do test -n "$a" || true; done
            LC_ALL=C mygcc "$@" </dev/null
            status=$?
            exit $status"""), 10)

    def test_program_run_through_a_launcher_passes_through(self):
        # nice, timeout and the like run the program their arguments name, which kache would not key.
        self.script("late/mygcc", f'exec {GCC} "$@"')
        self.env["PATH"] = self.path("late") + ":" + os.environ["PATH"]
        self.assert_passes_through(self.script("w/gcc", 'nice -n 5 mygcc "$@"'))

    def test_script_that_sources_or_sets_path_passes_through(self):
        self.write("conf.sh", "X=1\n")
        self.assert_passes_through(self.script("w/gcc", f'. ./conf.sh\nexec {GCC} "$@"'))
        self.kache(["--zero-stats"])
        self.assert_passes_through(self.script("w2/gcc", 'PATH=/opt/other:$PATH\nexec gcc "$@"'))

    def test_program_not_on_path_passes_through(self):
        # The wrapper fails as it does without kache: its exit code and message are the build's.
        driver = self.script("w/gcc", 'exec no-such-gcc-anywhere "$@"')
        plain = subprocess.run([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, env=self.env, capture_output=True, text=True)
        r = self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, check=False)
        self.assertNotEqual(plain.returncode, 0)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-script": 1})

    def test_other_interpreter_passes_through(self):
        body = f'import os, sys\nos.execv("{GCC}", ["{GCC}"] + sys.argv[1:])'
        self.assert_passes_through(self.script("w/gcc", body, interpreter="#!/usr/bin/python3"))

    def test_fifo_a_wrapper_names_never_stalls(self):
        fifo = self.path("pipe")
        os.mkfifo(fifo)
        os.chmod(fifo, 0o755 | stat.S_IFIFO)
        driver = self.script("w/gcc", f'test -p {fifo}\nexec {GCC} "$@"')
        # The probe names the FIFO's path without opening it (a read would wait for a writer forever).
        r = subprocess.run([kachetest.KACHE, driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, env=self.env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.counts(), (0, 1, 0))


if __name__ == "__main__":
    kachetest.main()
