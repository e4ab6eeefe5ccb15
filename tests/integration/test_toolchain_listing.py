"""A toolchain directory with another identity but the same names (what another machine's copy of the
toolchain looks like): direct mode still hits, by the digest of the directory's names recorded with the
manifest, without running the compiler; a name added to the directory makes it decline.

The toolchain is a private install of clang 14: its executable copied into DIR/bin and its resource
include directory (a system include directory, ahead of /usr/include) copied into DIR/lib/clang/V/include,
where clang looks for it. "Another machine" is that directory moved away and copied back: another inode
and other times, the same names and contents.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import kachetest
from kachetest import KACHE, KacheTestCase

CLANG = shutil.which("clang-14")
SRC = """#include <stddef.h>
#include <stdio.h>
#ifdef KB_SHADOW
int kb_shadowed = KB_SHADOW;
#endif
int f(void) { return (int)sizeof(size_t) + printf("x"); }
"""


@unittest.skipIf(CLANG is None, "clang-14 is not installed")
class ToolchainDirectoryElsewhere(KacheTestCase):
    def setUp(self):
        super().setUp()
        resource = subprocess.run([CLANG, "-print-resource-dir"], capture_output=True, text=True,
                                  check=True).stdout.strip()
        # Outside the workspace (the build root): a toolchain lives in a directory of its own.
        tc = tempfile.mkdtemp(prefix="kache-tc-")
        self.addCleanup(shutil.rmtree, tc, ignore_errors=True)
        self.clang = os.path.join(tc, "bin", "clang")
        os.makedirs(os.path.dirname(self.clang))
        shutil.copy2(os.path.realpath(CLANG), self.clang)
        self.inc = os.path.join(tc, "lib", "clang", os.path.basename(resource), "include")
        shutil.copytree(os.path.join(resource, "include"), self.inc, symlinks=True)
        probe = subprocess.run([self.clang, "-E", "-v", "-x", "c", "/dev/null"], capture_output=True, text=True)
        if self.inc not in probe.stderr:
            self.skipTest(f"the copied clang does not search {self.inc}")
        self.write("x.c", SRC)
        time.sleep(0.05)  # the copied directory's times leave the clock tick (a guard must be trusted)

    def compile(self, out="x.o", env=None, src="x.c"):
        return self.kache([self.clang, "-O2", "-c", src, "-o", out], env=env)

    def opened_under(self, directory, src, out):
        """The files under `directory` one compile of `src` opened (to hash a header, or list a directory)."""
        trace = self.path("trace-open")
        env = dict(self.env)
        env["ASAN_OPTIONS"] = "detect_leaks=0"
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", trace, KACHE, self.clang, "-O2",
                        "-c", src, "-o", out], cwd=self.ws, env=env, check=True)
        with open(trace) as f:
            return [p for p in re.findall(r'open(?:at)?\([^"]*"([^"]+)"', f.read()) if p.startswith(directory)]

    def move_toolchain(self):
        """The same directory as another machine has it: new inode and times, same names and files."""
        os.rename(self.inc, self.inc + ".orig")
        shutil.copytree(self.inc + ".orig", self.inc, symlinks=True)
        shutil.rmtree(self.inc + ".orig")
        time.sleep(0.05)

    def execs(self, out):
        """The programs one compile runs, by strace: kache's own execve first."""
        trace = self.path("trace")
        env = dict(self.env)
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # LeakSanitizer cannot run under ptrace (sanitizer build)
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", trace, KACHE, self.clang, "-O2",
                        "-c", "x.c", "-o", out], cwd=self.ws, env=env, check=True)
        call = re.compile(r'^\d+\s+execve\("([^"]*)"')
        with open(trace) as f:
            return [m.group(1) for m in map(call.match, f) if m]

    @unittest.skipIf(shutil.which("strace") is None, "strace is not installed")
    def test_same_names_hit_directly_without_the_compiler(self):
        self.compile()
        self.compile()  # the toolchain memo and the manifest are warm: a direct hit
        self.assertEqual(self.stats()["direct_hits"], 1)
        self.move_toolchain()
        self.zero()
        r, log = self.log_of([self.clang, "-O2", "-c", "x.c", "-o", "x.o"])
        self.assertEqual(r.returncode, 0, log)
        self.assertNotIn("toolchain directory", log)
        s = self.stats()
        self.assertEqual((s["hits"], s["direct_hits"], s["misses"]), (1, 1, 0), log)
        # Recorded again under this directory's identity: the next hit is one stat, and runs nothing.
        self.assertEqual(self.execs("x.o"), [KACHE])
        subprocess.run([self.clang, "-O2", "-c", "x.c", "-o", "plain.o"], cwd=self.ws, check=True)
        self.assert_same_object(self.path("x.o"), self.path("plain.o"))

    @unittest.skipIf(shutil.which("strace") is None, "strace is not installed")
    def test_remote_hit_in_an_empty_cache_is_a_direct_hit(self):
        import servers
        if servers.missing("redis-server"):
            self.skipTest(servers.missing("redis-server"))
        with servers.Redis() as redis:
            remote = {"KACHE_REMOTE_STORAGE": redis.url}
            self.compile(env=remote)  # a miss: stored locally and in redis
            self.move_toolchain()
            # Another machine: an empty cache dir, the same remote. Its first compile probes the
            # toolchain; the direct lookup must not need the preprocessor.
            other = {"KACHE_DIR": self.path("other-cache"), **remote}
            r = self.kache([self.clang, "-O2", "-c", "x.c", "-o", "x.o"], env={**other, "KACHE_LOG": "kache=debug"})
            s = self.stats(env=other)
            # One compile served from the remote: one remote hit, two values read (its manifest and object).
            self.assertEqual((s["hits"], s["direct_hits"], s["misses"], s["remote_hits"], s["remote_reads"]),
                             (1, 1, 0, 1, 2), r.stderr)
            self.assertNotIn("toolchain directory", r.stderr)
            subprocess.run([self.clang, "-O2", "-c", "x.c", "-o", "plain.o"], cwd=self.ws, check=True)
            self.assert_same_object(self.path("x.o"), self.path("plain.o"))

    @unittest.skipIf(shutil.which("strace") is None, "strace is not installed")
    def test_what_one_compile_verified_the_next_does_not_read_again(self):
        # Two translation units with the same headers, each with its own manifest. After the move, the
        # first hit reads the headers it includes and lists the directory; the second finds them verified
        # under their new identities by this cache dir and reads none of them.
        self.write("y.c", SRC.replace("int f(void)", "int g(void)"))
        self.compile()
        self.compile(out="y.o", src="y.c")
        self.move_toolchain()
        self.zero()
        self.assertTrue(self.opened_under(self.inc, "x.c", "x.o"))
        self.assertEqual(self.opened_under(self.inc, "y.c", "y.o"), [])
        s = self.stats()
        self.assertEqual((s["hits"], s["direct_hits"], s["misses"]), (2, 2, 0), s)
        for src, out in (("x.c", "x.o"), ("y.c", "y.o")):
            subprocess.run([self.clang, "-O2", "-c", src, "-o", "plain.o"], cwd=self.ws, check=True)
            self.assert_same_object(self.path(out), self.path("plain.o"))

    def test_a_header_edited_after_another_compile_verified_it(self):
        # What a compile verified holds for that identity only: the header edited since (a new identity)
        # is read again, and the second unit's cached object is not served.
        self.write("y.c", SRC.replace("int f(void)", "int g(void)"))
        self.compile()
        self.compile(out="y.o", src="y.c")
        self.move_toolchain()
        self.compile()  # verifies the moved headers for this cache dir
        with open(os.path.join(self.inc, "stddef.h"), "a") as f:
            f.write("\nint kb_edited_after_verification;\n")
        time.sleep(0.05)
        self.zero()
        self.compile(out="y.o", src="y.c")
        self.assert_counts(hits=0, misses=1)
        self.assertIn(b"kb_edited_after_verification",
                      subprocess.run(["nm", self.path("y.o")], capture_output=True).stdout)

    def test_a_name_added_to_the_directory_declines(self):
        self.compile()
        self.move_toolchain()
        # A header that shadows <stdio.h> (the copied resource directory comes before /usr/include):
        # what clang compiles now differs, and the recorded listing no longer matches.
        with open(os.path.join(self.inc, "stdio.h"), "w") as f:
            f.write("#define KB_SHADOW 7\n#include_next <stdio.h>\n")
        time.sleep(0.05)
        self.zero()
        r, log = self.log_of([self.clang, "-O2", "-c", "x.c", "-o", "x.o"])
        self.assertEqual(r.returncode, 0, log)
        self.assertIn("toolchain directory", log)
        self.assert_counts(hits=0, misses=1)
        subprocess.run([self.clang, "-O2", "-c", "x.c", "-o", "plain.o"], cwd=self.ws, check=True)
        self.assert_same_object(self.path("x.o"), self.path("plain.o"))
        self.assertIn(b"kb_shadowed", subprocess.run(["nm", self.path("x.o")], capture_output=True).stdout)

    def test_an_unrelated_name_added_declines_direct_mode(self):
        # Only the names are recorded, not which ones matter: any new name means the listing differs.
        self.compile()
        self.move_toolchain()
        with open(os.path.join(self.inc, "unrelated_kb.h"), "w") as f:
            f.write("/* nothing */\n")
        time.sleep(0.05)
        self.zero()
        r, log = self.log_of([self.clang, "-O2", "-c", "x.c", "-o", "x.o"])
        self.assertEqual(r.returncode, 0, log)
        self.assertIn("toolchain directory", log)
        self.assertEqual(self.stats()["direct_hits"], 0)


if __name__ == "__main__":
    kachetest.main()
