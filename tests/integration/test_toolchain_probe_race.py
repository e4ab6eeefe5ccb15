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


if __name__ == "__main__":
    kachetest.main()
