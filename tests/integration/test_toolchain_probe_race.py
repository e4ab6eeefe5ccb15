"""A toolchain file repointed between the probe's stat and its hash (a symlinked toolchain dir flipped:
what `ln -sfn cuda-13.0 /usr/local/cuda`, update-alternatives or an install by rename do).

ProbeFiles::add() stats a file (the identity the toolchain memo and the content memo are keyed by);
digest_pending() hashes it later, by path (util::xxh128_file_hex opens the path again). When the path
reaches another file meanwhile, the memo pairs the first file's identity with the second file's content
digest: once the path points back, every compile with the first toolchain gets the second toolchain's
id, and its objects (a hit returns the other toolchain's object; a miss stores this toolchain's object
under the other's id, for every cache dir sharing the remote). The same race as the direct-mode one
fixed with util::hash_file_as (test_verified_identities_race.py), in the toolchain probe.

The flip is made deterministic by gdb: a breakpoint on util::xxh128_file_hex for the driver's path runs
it (no timing). Skipped without gdb or symbols (a Release build). Written by the review of the
wt-probe merge (7027d64); both tests fail on main at a5242ce.
"""
import os
import shutil
import subprocess
import time
import unittest

import kachetest
from kachetest import KACHE, KacheTestCase

GCC = shutil.which("gcc")
GDB = shutil.which("gdb")


@unittest.skipIf(GCC is None or GDB is None, "gcc and gdb are needed")
class ToolchainRepointedBetweenStatAndHash(KacheTestCase):
    def setUp(self):
        super().setUp()
        # Two toolchains that differ in what they build: b's objects carry debug sections.
        self.write("a/gcc", f"#!/bin/sh\nexec {GCC} \"$@\"\n")
        self.write("b/gcc", f"#!/bin/sh\nexec {GCC} -g \"$@\"\n")
        os.chmod(self.path("a/gcc"), 0o755)
        os.chmod(self.path("b/gcc"), 0o755)
        os.symlink("a", self.path("cur"))
        self.driver = self.path("cur", "gcc")
        self.write("x.c", "int triple(int x) { return 3 * x; }\n")
        time.sleep(0.05)  # the scripts' times leave the clock tick

    def point_cur_to(self, target):
        kachetest.repoint(self.path("cur"), target)  # a/gcc and b/gcc keep their identities

    def flip_script(self, target):
        return kachetest.repoint_script(self.path(f"flip-{target}.sh"), self.path("cur"), target)

    def compile(self):
        self.kache([self.driver, "-O2", "-c", "x.c", "-o", "x.o"])
        return self.read("x.o", "rb")

    def real(self):
        subprocess.run([self.driver, "-O2", "-c", "x.c", "-o", "real.o"], cwd=self.ws, check=True)
        return self.read("real.o", "rb")

    def gdb_compile(self, commands):
        env = dict(self.env)
        env["ASAN_OPTIONS"] = "detect_leaks=0"
        args = [GDB, "-q", "-batch"]
        for c in commands:
            args += ["-ex", c]
        args += ["--args", KACHE, self.driver, "-O2", "-c", "x.c", "-o", "x.o"]
        r = subprocess.run(args, cwd=self.ws, env=env, capture_output=True, text=True)
        if " hit Breakpoint " not in r.stdout:
            self.skipTest("gdb could not stop kache where it hashes the driver (no symbols?):\n" + r.stdout + r.stderr)
        return r

    def hash_breaks(self):
        # Where the driver's content is hashed: xxh128_file_hex (a5242ce) or xxh128_file_hex_as (the
        # suggested fix); gdb sets no breakpoint on the one that is absent.
        return [f'break kache::util::{f} if $_streq(path._M_dataplus._M_p, "{self.driver}")'
                for f in ("xxh128_file_hex", "xxh128_file_hex_as")]

    def test_a_toolchain_replaced_during_the_compile_stores_nothing(self):
        # The probe reads a/gcc; before the compile runs, cur points at b/gcc, which builds the object.
        # Stored under a's toolchain id, the next compile with a back would get b's object.
        self.gdb_compile(["break Pipeline::compile", "run", f"shell {self.flip_script('b')}",
                          "delete", "continue"])
        self.point_cur_to("a")
        self.assertEqual(self.compile(), self.real(), "x.o: built by b/gcc under a/gcc's id, cur/gcc is a/gcc")

    def test_toolchain_memo_pairs_one_identity_with_the_other_content(self):
        # The probe stats cur/gcc = a/gcc, the hash reads b/gcc.
        self.gdb_compile([*self.hash_breaks(), "run", f"shell {self.flip_script('b')}", "delete", "continue"])
        self.point_cur_to("a")  # back: a/gcc, untouched since its identity was taken
        self.assertEqual(self.compile(), self.real(), "x.o: built by b/gcc, cur/gcc is a/gcc")

    def test_content_memo_outlives_the_toolchain_memo(self):
        # As above, and the path is back at a/gcc before the check after the hash: the content memo
        # (toolchains/content/, keyed by path and identity, shared by every probe of the cache dir)
        # records b's digest for a/gcc's identity.
        self.point_cur_to("b")
        self.compile()  # b's object, under b's toolchain id
        self.point_cur_to("a")
        self.gdb_compile([*self.hash_breaks(), "run", f"shell {self.flip_script('b')}", "delete",
                          f"break 'kache::util::stat_identity(char const*)' if $_streq(path, \"{self.driver}\")", "continue",
                          f"shell {self.flip_script('a')}", "delete", "continue"])
        self.assertEqual(os.path.realpath(self.driver), self.path("a", "gcc"))
        # A probe for another environment (here: the toolchain memos gone) hashes nothing again.
        tc = os.path.join(self.cache, "toolchains")
        for name in os.listdir(tc):
            if os.path.isfile(os.path.join(tc, name)):
                os.unlink(os.path.join(tc, name))
        self.assertEqual(self.compile(), self.real(), "x.o: built by b/gcc, cur/gcc is a/gcc")


@unittest.skipIf(GCC is None or GDB is None, "gcc and gdb are needed")
class DriverRewrittenWithinItsSecondAfterTheProbe(KacheTestCase):
    """A driver (a wrapper script) rewritten in place, same size, after the probe hashed it but within the
    same second, on a file system with whole-second times (ext4 with 128-byte inodes): the rewrite keeps
    the identity the probe stat'ed. Whether the probe's files are outside their clock tick
    (ToolFiles::settled, before the toolchain memo is written) was judged by a clock read after the
    hash: the memo paired that identity with the old content's toolchain id. A compile by the new driver
    then stored its object under the old driver's id, and once the driver went back to the old content
    (probed afresh: the same id) kache returned the new driver's object.

    Placed by gdb: at gcc::probe_toolchain the driver is rewritten with its content just after a second
    begins (a new identity, probed); at ToolFiles::settled it is rewritten with other content of the same
    size, and kache continues over two seconds later. Skipped where the rewrite could not be placed in that
    second (a slow machine), without a loop mount, or without symbols. Ported from the reviewer's
    memo_race2.sh; fails on a kache that reads its clock after the hash."""

    def setUp(self):
        super().setUp()
        self.fs = self.mount_whole_second_fs()
        self.driver = os.path.join(self.fs, "gcc")
        with open(self.driver, "w") as f:
            f.write(self.wrapper("1"))
        os.chmod(self.driver, 0o755)
        self.write("x.c", "int v(void) { return V; }\n")
        self.write("z.c", "int z(void) { return 0; }\n")
        time.sleep(2.1)  # past the two seconds after which whole-second times are trusted

    def wrapper(self, v):
        return f'#!/bin/sh\nexec {GCC} -DV={v} "$@"\n'  # the same size whatever digit v is

    def set_driver(self, v):
        with open(self.driver, "w") as f:  # in place: the same inode
            f.write(self.wrapper(v))

    def compile(self):
        self.kache([self.driver, "-O2", "-c", "x.c", "-o", "x.o"])
        return self.read("x.o", "rb")

    def real(self):
        subprocess.run([self.driver, "-O2", "-c", "x.c", "-o", "real.o"], cwd=self.ws, check=True)
        return self.read("real.o", "rb")

    def test_memo_pairs_the_rewritten_driver_with_the_content_hashed_before(self):
        log = self.path("rewrites.log")
        same = kachetest.rewrite_script(self.path("same-content.sh"), self.driver, self.wrapper("1"), log,
                                        at_second_start=True)
        other = kachetest.rewrite_script(self.path("other-content.sh"), self.driver, self.wrapper("2"), log,
                                         sleep_after=2.1)
        env = dict(self.env)
        env["ASAN_OPTIONS"] = "detect_leaks=0"
        # z.c: only the probe matters. Both breakpoints set before the run: nothing but kache's own work
        # between the two rewrites.
        r = subprocess.run([GDB, "-q", "-batch", "-ex", "break kache::compiler::gcc::probe_toolchain",
                            "-ex", "break kache::compiler::ToolFiles::settled", "-ex", "run",
                            "-ex", f"shell {same}", "-ex", "continue", "-ex", f"shell {other}",
                            "-ex", "delete", "-ex", "continue",
                            "--args", KACHE, self.driver, "-O2", "-c", "z.c", "-o", "z.o"],
                           cwd=self.ws, env=env, capture_output=True, text=True)
        out = r.stdout + r.stderr
        at_probe, at_settled = out.find("Breakpoint 1, "), out.find("Breakpoint 2, ")
        if at_probe < 0 or at_settled < at_probe:
            self.skipTest("gdb could not stop kache in gcc::probe_toolchain, then in ToolFiles::settled "
                          "(no symbols?):\n" + out)
        self.skip_unless_kept_its_identity(log, out)
        # The driver is now V=2, untouched during this compile: its object is right, and stored under the
        # toolchain id the memo holds for the driver's identity.
        self.assertEqual(self.compile(), self.real(), "x.o: not the object of the driver as it is (V=2)")
        # Later the driver goes back to V=1 (a new identity, probed afresh).
        self.set_driver("1")
        time.sleep(2.1)  # past the two seconds after which its whole-second time is trusted (a memo)
        self.assertEqual(self.compile(), self.real(), "x.o: built by the driver with V=2, the driver is V=1")


if __name__ == "__main__":
    kachetest.main()
