"""Issue 35 item 5: a config file that is no regular file never blocks a compile.

A FIFO at any config location (the system file, the user's file, the cache dir's own kache.toml) made
every compile wait forever for a writer: in a group-shared cache dir, any member could stall everyone's
builds. kache opens a config file without waiting and refuses anything but a regular file with one
sentence in its log; the compile goes on with the other layers' settings."""
import os
import subprocess

import kachetest
from kachetest import KacheTestCase

SOURCE = "int f(void) { return 1; }\n"
OLD = 1_600_000_000 * 10**9
# A bound on a compile that must not wait at all: reached only by the bug this file tests.
HANG_BOUND_S = 120


class SpecialConfigFiles(KacheTestCase):
    def compile_with_fifo(self, fifo, env):
        self.write("a.c", SOURCE, mtime_ns=OLD)
        os.makedirs(os.path.dirname(fifo), exist_ok=True)
        os.mkfifo(fifo)
        e = dict(self.env)
        e.update(env)
        try:
            r = subprocess.run([kachetest.KACHE, "gcc", "-c", "a.c", "-o", "a.o"], cwd=self.ws, env=e,
                               capture_output=True, text=True, timeout=HANG_BOUND_S)
        except subprocess.TimeoutExpired:
            self.fail(f"the compile waited on the FIFO {fifo}")
        self.assertEqual(r.returncode, 0, r.stderr)
        # The build's one warning line (issue 42: a pipe's reader sees it), the compiler's stderr besides.
        self.assertEqual(r.stderr.splitlines(), [f"kache: warning: the config file {fifo} is a FIFO, not a regular "
                                                 f"file; its settings are not read (set KACHE_CONFIG to a file). "
                                                 f"(logged in {self.cache}/kache.log)"])
        self.assertTrue(os.path.exists(self.path("a.o")))
        with open(os.path.join(self.cache, "kache.log")) as f:
            self.assertIn(f"the config file {fifo} is a FIFO, not a regular file", f.read())
        # The compile was cached as usual: the FIFO's layer is skipped, not the cache.
        self.assertEqual(self.stats()["misses"], 1)

    def test_user_config_fifo(self):
        fifo = self.path("user.toml")
        self.compile_with_fifo(fifo, {"KACHE_CONFIG": fifo})

    def test_system_config_fifo(self):
        fifo = self.path("etc", "kache.toml")
        self.compile_with_fifo(fifo, {"KACHE_SYSTEM_CONFIG": fifo})

    def test_cache_dir_config_fifo(self):
        self.compile_with_fifo(os.path.join(self.cache, "kache.toml"), {})

    def test_set_config_refuses_a_fifo(self):
        fifo = self.path("user.toml")
        os.mkfifo(fifo)
        e = dict(self.env, KACHE_CONFIG=fifo)
        try:
            r = subprocess.run([kachetest.KACHE, "--set-config", "cache.max_size=1G"], cwd=self.ws, env=e,
                               capture_output=True, text=True, timeout=HANG_BOUND_S)
        except subprocess.TimeoutExpired:
            self.fail("kache --set-config waited on the FIFO")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is a FIFO, not a regular file", r.stderr)


if __name__ == "__main__":
    kachetest.main()
