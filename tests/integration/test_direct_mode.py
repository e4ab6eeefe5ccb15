"""Direct mode: a hit runs no process; it only hits when the files nvcc would read now are the ones
recorded, and falls back to compiling (never a stale hit) otherwise."""
import os
import re
import shutil
import subprocess
import textwrap
import time
import unittest

import kachetest
from kachetest import KACHE, KacheTestCase

SRC = textwrap.dedent("""
    #include "cfg.h"
    __global__ void k(float* x) { x[threadIdx.x] = DEVVAL; }
    int host_value() { return HOSTVAL; }
    """)


class DirectMode(KacheTestCase):
    def build(self, extra=(), env=None, out="k.o"):
        return self.kache(["nvcc", "-c", "k.cu", "-o", out] + list(extra), env=env)

    def check_current(self, extra=(), env=None):
        """Builds through kache and with plain nvcc; the objects must be equivalent."""
        self.build(extra, env)
        self.nvcc(["-c", "k.cu", "-o", "plain.o"] + list(extra), env=env)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    @unittest.skipIf(shutil.which("strace") is None, "strace is not installed")
    def test_hit_spawns_no_process(self):
        self.write("cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        self.write("k.cu", SRC)
        self.build()
        self.build()  # the toolchain memo and the manifest are now warm
        trace = self.path("trace")
        env = dict(self.env)
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # LeakSanitizer cannot run under ptrace (sanitizer build)
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", trace,
                        KACHE, "nvcc", "-c", "k.cu", "-o", "k.o"], cwd=self.ws, env=env, check=True)
        # "PID syscall(args...) = result": match the syscall name, not text inside the arguments.
        call = re.compile(r"^\d+\s+(execve|clone3?|v?fork)\(")
        with open(trace) as f:
            calls = [m.group(1) for m in map(call.match, f) if m]
        self.assertEqual(calls, ["execve"], "a hit must start no process (only kache's own execve)")
        self.assert_counts(hits=2, misses=1)

    def test_content_change_keeping_size_and_mtime(self):
        self.write("cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        self.write("k.cu", SRC)
        self.build()
        st = os.stat(self.path("cfg.h"))
        self.write("cfg.h", "#define DEVVAL 2.0f\n#define HOSTVAL 2\n", mtime_ns=st.st_mtime_ns)
        self.assertEqual(os.stat(self.path("cfg.h")).st_size, st.st_size)
        self.check_current()
        self.assert_counts(hits=0, misses=2)

    def test_touch_without_change_still_hits(self):
        self.write("cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        self.write("k.cu", SRC)
        self.build()
        os.utime(self.path("cfg.h"))
        self.build()
        self.assert_counts(hits=1, misses=1)

    def test_header_appears_earlier_in_include_path(self):
        self.write("b/cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        os.makedirs(self.path("a"))
        self.write("k.cu", SRC.replace('"cfg.h"', "<cfg.h>"))
        self.build(["-Ia", "-Ib"])
        self.write("a/cfg.h", "#define DEVVAL 5.0f\n#define HOSTVAL 5\n")
        self.check_current(["-Ia", "-Ib"])
        self.assert_counts(hits=0, misses=2)

    def test_header_appears_next_to_the_source(self):
        self.write("inc/cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        self.write("k.cu", SRC)
        self.build(["-Iinc"])
        self.write("cfg.h", "#define DEVVAL 6.0f\n#define HOSTVAL 6\n")
        self.check_current(["-Iinc"])
        self.assert_counts(hits=0, misses=2)

    def test_unrelated_file_next_to_the_headers_still_hits(self):
        """A new file in an include directory moves the directory's identity; the recorded names are
        then checked one by one, and none of them appeared: still a hit. A name that matters does miss."""
        self.write("inc/cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        self.write("k.cu", "#include <cstdio>\n" + SRC.replace('"cfg.h"', "<cfg.h>"))
        self.build(["-Iinc"])
        self.write("inc/notes.txt", "unrelated\n")
        r, log = self.log_of(["nvcc", "-c", "k.cu", "-o", "k.o", "-Iinc"])
        self.assertEqual(r.returncode, 0, log)
        self.assert_counts(hits=1, misses=1)
        # <cstdio> would now be found in inc/ first: that must not hit.
        self.write("inc/cstdio", "#include_next <cstdio>\n#define HOSTVAL_SHADOW 1\n")
        self.check_current(["-Iinc"])
        self.assert_counts(hits=1, misses=2)

    def test_has_include_target_appears(self):
        self.write("k.cu", textwrap.dedent("""
            #if __has_include("extra.h")
            #include "extra.h"
            #else
            #define HOSTVAL 1
            #endif
            int host_value() { return HOSTVAL; }
            __global__ void k(float* x) { x[0] = HOSTVAL; }
            """))
        self.build()
        self.write("extra.h", "#define HOSTVAL 7\n")
        self.check_current()
        self.assert_counts(hits=0, misses=2)

    def test_symlink_retargeted(self):
        self.write("v1.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        self.write("v2.h", "#define DEVVAL 2.0f\n#define HOSTVAL 2\n")
        st = os.stat(self.path("v1.h"))
        os.utime(self.path("v2.h"), ns=(st.st_mtime_ns, st.st_mtime_ns))
        os.symlink("v1.h", self.path("cfg.h"))
        self.write("k.cu", SRC)
        self.build()
        os.unlink(self.path("cfg.h"))
        os.symlink("v2.h", self.path("cfg.h"))
        self.check_current()
        self.assert_counts(hits=0, misses=2)

    def test_include_path_from_environment(self):
        self.write("one/cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n")
        self.write("two/cfg.h", "#define DEVVAL 2.0f\n#define HOSTVAL 2\n")
        self.write("k.cu", SRC.replace('"cfg.h"', "<cfg.h>"))
        self.build(env={"CPATH": self.path("one")})
        self.check_current(env={"CPATH": self.path("two")})
        self.assert_counts(hits=0, misses=2)
        self.build(env={"CPATH": self.path("one")})
        self.assert_counts(hits=1, misses=2)

    def test_host_compiler_earlier_on_path(self):
        self.write("cfg.h", "#ifndef DEVVAL\n#define DEVVAL 1.0f\n#endif\n#define HOSTVAL 1\n")
        self.write("k.cu", SRC)
        self.build()
        wrapper = self.write("bin/gcc", "#!/bin/sh\nexec /usr/bin/gcc -DDEVVAL=9.0f \"$@\"\n")
        os.chmod(wrapper, 0o755)
        env = {"PATH": self.path("bin") + ":" + os.environ["PATH"]}
        self.check_current(env=env)
        self.assert_counts(hits=0, misses=2)

    def test_host_compiler_upgraded_in_place(self):
        self.write("cfg.h", "#ifndef DEVVAL\n#define DEVVAL 1.0f\n#endif\n#define HOSTVAL 1\n")
        self.write("k.cu", SRC)
        wrapper = self.write("bin/gcc", "#!/bin/sh\nexec /usr/bin/gcc -DDEVVAL=3.0f \"$@\"\n")
        os.chmod(wrapper, 0o755)
        env = {"PATH": self.path("bin") + ":" + os.environ["PATH"]}
        self.build(env=env)
        self.write("bin/gcc", "#!/bin/sh\nexec /usr/bin/gcc -DDEVVAL=4.0f \"$@\"\n")
        self.check_current(env=env)
        self.assert_counts(hits=0, misses=2)

    def test_different_nvcc_on_path(self):
        self.write("cfg.h", "#ifndef DEVVAL\n#define DEVVAL 1.0f\n#endif\n#define HOSTVAL 1\n")
        self.write("k.cu", SRC)
        self.build()
        wrapper = self.write("nv/nvcc", f"#!/bin/sh\nexec {kachetest.NVCC} -DDEVVAL=8.0f \"$@\"\n")
        os.chmod(wrapper, 0o755)
        env = {"PATH": self.path("nv") + ":" + os.environ["PATH"]}
        self.build(env=env)
        r = subprocess.run([wrapper, "-c", "k.cu", "-o", "plain.o"], cwd=self.ws, capture_output=True)
        self.assertEqual(r.returncode, 0)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assert_counts(hits=0, misses=2)

    def test_future_timestamp_is_clock_skew_not_a_change(self):
        future = time.time_ns() + 3600 * 10**9
        self.write("cfg.h", "#define DEVVAL 1.0f\n#define HOSTVAL 1\n", mtime_ns=future)
        self.write("k.cu", SRC)
        self.build()
        self.assertEqual(self.stats()["stored"], 1)
        self.build()
        self.assert_counts(hits=1, misses=1)
        # A file recorded with a time the clock has not reached is checked by content every time.
        self.write("cfg.h", "#define DEVVAL 2.0f\n#define HOSTVAL 2\n", mtime_ns=future)
        self.check_current()
        self.assert_counts(hits=1, misses=2)


if __name__ == "__main__":
    kachetest.main()
