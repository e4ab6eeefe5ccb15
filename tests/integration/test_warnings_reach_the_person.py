"""A compile's warnings reach the person running the build (issue 42): under Ninja a compile's stderr is a
pipe, which Ninja prints under the command. The first warning of each cause in each build is one line
"kache: warning: ..." there; later ones of that build go to <cache>/kache.log only; a new build shows it
again. A configure check's compile (conftest.c, CMake's try_compile) keeps a clean stderr, and
log.warnings = "log" keeps every warning off stderr.

The warning used is a refused setting (KACHE_MAX_SIZE=lots), which every compile meets. Each build is
started in a session of its own, as an interactive shell starts each job in its own process group: the
build kache names is that group (core::event_build_id)."""
import os
import re
import shutil
import subprocess
import time

import kachetest

WARNING = re.compile(r"^kache: warning: KACHE_MAX_SIZE='lots' is not a size.*$", re.M)
NINJA_TIMEOUT_S = 120


class WarningsUnderNinja(kachetest.KacheTestCase):
    def setUp(self):
        if shutil.which("ninja") is None or shutil.which("gcc") is None:
            self.skipTest("needs ninja and gcc")
        self.private_workspace("kache-warn-")
        self.env["KACHE_MAX_SIZE"] = "lots"
        for name in ("a", "b", "c", "d"):
            self.write(f"{name}.c", f"int {name}(void) {{ return 1; }}\n")
        self.write("conftest.c", "int main(void) { return 0; }\n")

    def ninja_file(self, directory, sources):
        rules = [f"rule cc\n  command = {kachetest.KACHE} gcc -c $in -o $out\n"]
        rules += [f"build {os.path.splitext(s)[0]}.o: cc {s}\n" for s in sources]
        with open(os.path.join(directory, "build.ninja"), "w") as f:
            f.write("".join(rules))

    def ninja(self, directory=None, env=None):
        """One build: ninja in a new session, its output (the compiles' stderr included) as one text."""
        e = dict(self.env, **(env or {}))
        r = subprocess.run(["ninja", "-j2"], cwd=directory or self.ws, env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True, timeout=NINJA_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stdout)
        return r.stdout

    def clean(self, directory=None):
        subprocess.run(["ninja", "-t", "clean"], cwd=directory or self.ws, check=True, capture_output=True)

    def logged(self):
        with open(os.path.join(self.cache, "kache.log")) as f:
            return [line for line in f.read().splitlines() if "KACHE_MAX_SIZE='lots'" in line]

    def test_first_warning_of_each_build_is_shown_once(self):
        self.ninja_file(self.ws, ["a.c", "b.c", "c.c", "d.c"])
        first = self.ninja()
        shown = WARNING.findall(first)
        self.assertEqual(len(shown), 1, first)
        self.assertNotIn("kache: kache:", first)
        self.assertIn('for example, KACHE_MAX_SIZE=10G', shown[0])
        # The compile that shows the warning may not be the one that logs it (two run at once): it names
        # the log only where the log already held the line, so the name is there or absent, never wrong.
        if "logged in" in shown[0]:
            self.assertTrue(shown[0].endswith(f" (logged in {self.cache}/kache.log)"), shown[0])
        self.assertEqual(len(self.logged()), 1)
        # A new build: shown once again; the log keeps its one line of the hour, which the warning names.
        self.clean()
        second = self.ninja()
        shown = WARNING.findall(second)
        self.assertEqual(len(shown), 1, second)
        self.assertIn(f"(logged in {self.cache}/kache.log)", shown[0])
        self.assertEqual(len(self.logged()), 1)

    def test_log_that_cannot_be_written_is_never_named(self):
        os.makedirs(os.path.join(self.cache, "kache.log"))  # a directory: no line can be appended
        self.ninja_file(self.ws, ["a.c", "b.c", "c.c"])
        out = self.ninja()
        shown = WARNING.findall(out)
        self.assertEqual(len(shown), 1, out)
        self.assertNotIn("kache.log", shown[0])

    def test_configure_check_compiles_keep_a_clean_stderr(self):
        # autoconf (ac_c_werror_flag) fails a check on any stderr line; so does CMake's FAIL_REGEX.
        self.ninja_file(self.ws, ["conftest.c"])
        self.assertNotIn("kache:", self.ninja())
        scratch = self.path("build", "CMakeFiles", "CMakeScratch", "TryCompile-x1")
        os.makedirs(scratch)
        shutil.copy(self.path("a.c"), scratch)
        self.ninja_file(scratch, ["a.c"])
        self.assertNotIn("kache:", self.ninja(scratch))
        self.assertEqual(len(self.logged()), 1, "the warning is still logged")

    def test_cmake_try_compile_with_fail_regex_passes(self):
        if shutil.which("cmake") is None:
            self.skipTest("needs cmake")
        self.write("proj/CMakeLists.txt", """cmake_minimum_required(VERSION 3.20)
project(p C)
include(CheckCSourceCompiles)
check_c_source_compiles("int main(void) { return 0; }" KACHE_QUIET_CHECK FAIL_REGEX "kache: warning")
if(NOT KACHE_QUIET_CHECK)
  message(FATAL_ERROR "a configure check saw kache's warning")
endif()
add_library(p STATIC a.c)
""")
        shutil.copy(self.path("a.c"), self.path("proj"))
        r = subprocess.run(["cmake", "-S", "proj", "-B", "proj/build", "-G", "Ninja",
                            f"-DCMAKE_C_COMPILER_LAUNCHER={kachetest.KACHE}"], cwd=self.ws, env=self.env,
                           capture_output=True, text=True, start_new_session=True, timeout=NINJA_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = self.ninja(self.path("proj", "build"))
        self.assertEqual(len(WARNING.findall(out)), 1, out)

    def test_log_warnings_setting_keeps_stderr_clean(self):
        self.ninja_file(self.ws, ["a.c", "b.c"])
        self.assertNotIn("kache:", self.ninja(env={"KACHE_LOG_WARNINGS": "log"}))
        self.assertEqual(len(self.logged()), 1)
        self.clean()
        self.write(".kache.toml", '[log]\nwarnings = "log"\n')
        self.assertNotIn("kache:", self.ninja())
        r = self.kache(["-k", "log.warnings"])
        self.assertEqual(r.stdout.strip(), "log")

    def test_a_warning_free_build_prints_nothing(self):
        del self.env["KACHE_MAX_SIZE"]
        self.ninja_file(self.ws, ["a.c", "b.c", "c.c"])
        self.assertNotIn("kache:", self.ninja())


class WarningsOfSingleCompiles(kachetest.KacheTestCase):
    """A compile kache does not serve (a passthrough, an info query, stdin, a configure probe) keeps a
    stderr that is the compiler's alone and claims nothing of its build; each build is named by
    KACHE_BUILD_ID here, so no process group is involved."""

    def setUp(self):
        if shutil.which("gcc") is None:
            self.skipTest("needs gcc")
        self.private_workspace("kache-warn1-")
        self.env["KACHE_MAX_SIZE"] = "lots"
        for name in ("a", "b", "c"):
            self.write(f"{name}.c", f"int {name}(void) {{ return 1; }}\n")

    def gcc(self, args, build, input=None):
        return self.kache(["gcc"] + args, env={"KACHE_BUILD_ID": build}, input=input)

    def test_cc_crate_flag_check_keeps_stderr_empty(self):
        # The cc crate's flag_if_supported: a flag is supported only when the compile's stderr is empty.
        self.write("out/flag_check.c", "int main(void) { return 0; }\n")
        r = self.gcc(["-Wlogical-op", "-c", self.path("out", "flag_check.c"), "-o", self.path("out", "x.o")], "cc1")
        self.assertEqual(r.stderr, "")

    def test_dumpversion_prints_the_version_alone(self):
        want = subprocess.run(["gcc", "-dumpversion"], capture_output=True, text=True, check=True).stdout
        r = self.gcc(["-dumpversion"], "dv1")
        self.assertEqual((r.stdout, r.stderr), (want, ""))

    def test_stdin_and_dev_null_compiles_keep_stderr_empty(self):
        with open(self.path("a.c")) as f:
            source = f.read()
        self.assertEqual(self.gcc(["-c", "-x", "c", "-", "-o", "x.o"], "in1", input=source).stderr, "")
        self.assertEqual(self.gcc(["-c", "a.c", "-o", "/dev/null"], "in1").stderr, "")
        # ... and they claimed nothing: the build's first served compile shows the warning.
        self.assertEqual(len(kachetest.kache_warnings(self.gcc(["-c", "b.c", "-o", "b.o"], "in1").stderr)), 1)

    def test_probes_claim_nothing_of_the_build(self):
        probes = [("conftest.c", "."), ("sanitycheckc.c", "meson-private"), ("testfile.c", "meson-private/tmp1"),
                  ("CMakeCCompilerId.c", "CMakeFiles/3.25.1/CompilerIdC")]
        for source, directory in probes:
            self.write(os.path.join(directory, source), "int main(void) { return 0; }\n")
            r = self.kache(["gcc", "-c", source, "-o", "probe.o"], cwd=self.path(directory),
                           env={"KACHE_BUILD_ID": "cfg1"})
            self.assertEqual(r.stderr, "", source)
        r = self.gcc(["-c", "a.c", "-o", "a.o"], "cfg1")
        self.assertEqual(len(kachetest.kache_warnings(r.stderr)), 1, r.stderr)

    def test_each_compile_typed_at_a_terminal_is_a_build(self):
        # An interactive shell runs each command in a group of its own, the compile's stderr a terminal:
        # two hand-typed compiles are two builds, each shows the warning.
        import pty
        env = dict(self.env)
        env.pop("KACHE_BUILD_ID", None)
        seen = []
        for name in ("a", "b"):
            master, slave = pty.openpty()
            subprocess.run([kachetest.KACHE, "gcc", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=self.ws, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, check=True,
                           preexec_fn=os.setpgrp)
            os.close(slave)
            text = b""
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                text += chunk
            os.close(master)
            seen.append(text.decode())
        self.assertIn("KACHE_MAX_SIZE", seen[0])
        self.assertIn("KACHE_MAX_SIZE", seen[1], "a second hand-typed compile is a build of its own")

    def test_a_stale_stamp_is_taken_over(self):
        self.assertEqual(len(kachetest.kache_warnings(self.gcc(["-c", "a.c", "-o", "a.o"], "st1").stderr)), 1)
        self.assertEqual(self.gcc(["-c", "b.c", "-o", "b.o"], "st1").stderr, "")
        # An earlier build of the same id (a reused process group) 13 hours ago: its stamp is no longer this build's.
        warned = os.path.join(self.cache, "warned")
        old = time.time() - 13 * 3600
        for name in os.listdir(warned):
            if name.startswith("b"):
                os.utime(os.path.join(warned, name), (old, old))
        self.assertEqual(len(kachetest.kache_warnings(self.gcc(["-c", "c.c", "-o", "c.o"], "st1").stderr)), 1)


if __name__ == "__main__":
    kachetest.main()
