"""The toolchain probe in a cache dir without its memo (a new machine's first build, issue 16): compiles
started together probe the toolchain once, the others wait for that probe's memo; a prober that dies
lets the waiting compile go on at once; and the content digests the probe takes (XXH3-128 since
issue 16) still tell a tool edited in place, size and modification time kept, from the original.

The probes are counted by wrapper scripts standing in for nvcc and gcc: each notes the probe's own
command (nvcc's dry run of probe.cu, the driver's --version) in a file, then holds the probe (sleeps, or
waits until the test releases it), so that compiles started together certainly overlap in the probe
(without the lock each would probe)."""
import os
import re
import shutil
import signal
import subprocess
import time
import unittest

import kachetest
from kachetest import KacheTestCase

KERNEL = "__global__ void k(int* p) { p[0] = VAL; }\nint host_value() { return VAL; }\n"

# The probe counter and holder, a compiled program the wrappers run by absolute path (kache follows a
# wrapper it can read, tests/integration/test_wrapper_scripts.py, which a shell loop over "$a" is not).
# `hook-nvcc ARGS...` counts nvcc's dry run of probe.cu, `hook-gcc ARGS...` the driver's --version, in
# probes.txt beside the hook; each then holds for the seconds in pause.txt there or, when it says
# "until-released", until the test creates pause.txt.released (bounded, against a hung test). The
# wrappers name neither file: a file a wrapper names is keyed, and the count changes with every probe.
# The tool is the hook's own name: a wrapper passes a program nothing but "$@" and harmless flags.
HOOK_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void hold(const char* pause) {
  char p[64] = {0};
  FILE* f = fopen(pause, "r");
  if (f) { if (!fgets(p, sizeof p, f)) p[0] = 0; fclose(f); }
  p[strcspn(p, "\n")] = 0;
  if (strcmp(p, "until-released") == 0) {
    char released[4096];
    snprintf(released, sizeof released, "%s.released", pause);
    for (int i = 0; i < 2400 && access(released, F_OK) != 0; ++i) usleep(50000);
  } else {
    usleep((useconds_t)(atof(p) * 1e6));
  }
}
int main(int argc, char** argv) {
  if (argc < 2) return 0;
  const char* base = strrchr(argv[0], '/');
  const char* tool = strstr(base ? base + 1 : argv[0], "nvcc") ? "nvcc" : "gcc";
  char dir[4096], count[4200], pause[4200];
  snprintf(dir, sizeof dir, "%s", argv[0]);
  char* slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  snprintf(count, sizeof count, "%s/probes.txt", dir);
  snprintf(pause, sizeof pause, "%s/pause.txt", dir);
  int probe = 0;
  for (int i = 1; i < argc; ++i) {
    size_t n = strlen(argv[i]);
    if (strcmp(tool, "nvcc") == 0 && n >= 9 && strcmp(argv[i] + n - 9, "/probe.cu") == 0) probe = 1;
  }
  if (strcmp(tool, "gcc") == 0 && strcmp(argv[1], "--version") == 0) probe = 1;
  if (!probe) return 0;
  FILE* c = fopen(count, "a");
  if (c) { fputs("probe\n", c); fclose(c); }
  hold(pause);
  return 0;
}
"""

NVCC_WRAPPER = """#!/bin/sh
{hook}-nvcc "$@"
exec "{real}" "$@"
"""

GCC_WRAPPER = """#!/bin/sh
{hook}-gcc "$@"
exec gcc-12 "$@"
"""

# The probe of compiles started together is held until every other compile waits for its memo: a fixed
# pause (1 s) let a compile slowed by a loaded machine arrive after the memo, and see no wait at all.
PAUSE = "until-released"
# Waiting compiles give up on the probe's lock after cache.lock_timeout (10 s) and probe too: the rest of
# the held probe may take longer on a loaded machine. This bound only guards against a hung test.
LOCK_TIMEOUT_S = "300"


class ProbeOnce(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.count = self.path("probes.txt")
        self.pause = self.write("pause.txt", PAUSE)
        self.hook = self.path("hook")
        subprocess.run(["gcc", "-O1", "-x", "c", "-", "-o", self.hook + "-nvcc"], input=HOOK_C, text=True, check=True)
        shutil.copy(self.hook + "-nvcc", self.hook + "-gcc")

    def wrapper(self, rel, template, **fields):
        p = self.write(rel, template.format(count=self.count, pause=self.pause, hook=self.hook, **fields))
        os.chmod(p, 0o755)
        return p

    def nvcc_wrapper(self):
        return self.wrapper("bin/nvcc", NVCC_WRAPPER, real=os.path.join(kachetest.nvcc_home(), "nvcc"))

    def probes(self):
        if not os.path.exists(self.count):
            return 0
        with open(self.count) as f:
            return len(f.read().splitlines())

    def start(self, args, log, **popen):
        e = dict(self.env, KACHE_LOG="kache=debug", KACHE_LOG_FILE=self.path(log), KACHE_LOCK_TIMEOUT=LOCK_TIMEOUT_S)
        return subprocess.Popen([kachetest.KACHE] + args, cwd=self.ws, env=e, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **popen)

    def wait_for(self, what, condition, proc):
        """Polls `condition` while `proc` runs (a generous bound only against a hung test)."""
        deadline = time.monotonic() + 120
        while not condition() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(condition(), f"never saw: {what}")

    def finish(self, proc):
        out, err = proc.communicate()
        self.assertEqual(proc.returncode, 0, f"{proc.args} failed:\n{out}\n{err}")

    def log(self, name):
        with open(self.path(name)) as f:
            return f.read()

    def waiting(self, log):
        return os.path.exists(self.path(log)) and "waiting for its memo" in self.log(log)

    def compile_together(self, compiler, sources):
        logs = [f"log{i}.txt" for i in range(len(sources))]
        procs = [self.start([compiler, "-DVAL=%d" % i, "-c", src, "-o", src + ".o"], log)
                 for i, (src, log) in enumerate(zip(sources, logs))]
        # One of them probes (held), every other one waits for its memo: then the probe may end.
        deadline = time.monotonic() + 120
        while not (self.probes() >= 1 and sum(map(self.waiting, logs)) >= len(sources) - 1):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                break
            time.sleep(0.02)
        with open(self.pause + ".released", "w"):
            pass
        for p in procs:
            self.finish(p)
        return logs

    def test_nvcc_compiles_started_together_probe_once(self):
        nvcc = self.nvcc_wrapper()
        self.write("a.cu", KERNEL)
        self.write("b.cu", KERNEL)
        self.compile_together(nvcc, ["a.cu", "b.cu"])
        self.assertEqual(self.probes(), 1, self.log("log0.txt") + self.log("log1.txt"))
        self.assert_counts(misses=2, passthrough=0)
        # One of them waited for the other's probe and then used its memo.
        self.assertIn("waited", self.log("log0.txt") + self.log("log1.txt"))

    def test_gcc_compiles_started_together_probe_once(self):
        cc = self.wrapper("bin/cc", GCC_WRAPPER)
        self.write("a.c", "int value = VAL;\n")
        self.write("b.c", "int value = VAL;\n")
        self.write("c.c", "int value = VAL;\n")
        self.compile_together(cc, ["a.c", "b.c", "c.c"])
        # The wrapper is read by behaviour (wrapper.hpp): the toolchain probe asks the driver it runs
        # (gcc-12), past the hook, so at most one probe is seen here.
        self.assertLessEqual(self.probes(), 1)
        self.assert_counts(misses=3, passthrough=0)

    def test_a_prober_that_dies_lets_the_waiting_compile_probe(self):
        nvcc = self.nvcc_wrapper()
        self.write("a.cu", KERNEL)
        self.write("b.cu", KERNEL)
        with open(self.pause, "w") as f:
            f.write("30")
        # The first compile is inside its probe, in nvcc's dry run (in a process group of its own, so
        # that the wrapper and its sleep, left behind when kache dies, go at the end) ...
        first = self.start([nvcc, "-DVAL=1", "-c", "a.cu", "-o", "a.o"], "log0.txt", start_new_session=True)

        def end_group():
            try:
                os.killpg(first.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.addCleanup(end_group)
        self.wait_for("the first compile's probe", lambda: self.probes() == 1, first)
        with open(self.pause, "w") as f:
            f.write("0")
        # ... when the second starts and waits for its memo ...
        second = self.start([nvcc, "-DVAL=2", "-c", "b.cu", "-o", "b.o"], "log1.txt")
        self.wait_for("the second compile waiting", lambda: os.path.exists(self.path("log1.txt")) and
                      "waiting for its memo" in self.log("log1.txt"), second)
        # ... and the first kache dies; its dry run (the wrapper's sleep) goes on, and must not hold the lock.
        first.send_signal(signal.SIGKILL)
        first.communicate()
        self.finish(second)
        log = self.log("log1.txt")
        # The dead prober's lock went with it: the second took it (not the wait's deadline) and probed.
        self.assertRegex(log, r"waited \d+ ms for another process's probe", log)
        self.assertNotIn("ms: probing too", log)
        self.assertEqual(self.probes(), 2)


class ToolEditedInPlace(KacheTestCase):
    """A program nvcc runs, changed in place with its size and modification time kept (only the ctime
    and the content tell): the next compile misses and builds what nvcc builds now."""

    def test_ptxas_edited_keeping_size_and_mtime(self):
        real_bin = kachetest.nvcc_home()
        real_root = os.path.dirname(real_bin)
        bin_dir = self.path("toolkit", "bin")
        os.makedirs(bin_dir)
        for tool in ("nvcc", "cudafe++", "fatbinary", "nvlink"):
            os.symlink(os.path.join(real_bin, tool), os.path.join(bin_dir, tool))
        with open(os.path.join(real_bin, "nvcc.profile")) as f:
            profile = re.sub(r"(?m)^TOP\s*=.*$", "TOP = " + real_root, f.read())
        self.write("toolkit/bin/nvcc.profile", profile)
        ptxas = self.write("toolkit/bin/ptxas", '#!/bin/sh\nexec "%s" -O3 "$@"\n' % os.path.join(real_bin, "ptxas"))
        os.chmod(ptxas, 0o755)
        st = os.stat(ptxas)
        nvcc = os.path.join(bin_dir, "nvcc")
        self.write("k.cu", "__global__ void k(float* x, float a) { x[threadIdx.x] = x[threadIdx.x] * a + a; }\n")
        args = [nvcc, "-c", "k.cu", "-arch=sm_80"]
        self.kache(args + ["-o", "k.o"])
        self.kache(args + ["-o", "k.o"])
        self.assert_counts(hits=1, misses=1)
        before = self.read("k.o", "rb")
        with open(ptxas, "w") as f:
            f.write('#!/bin/sh\nexec "%s" -O0 "$@"\n' % os.path.join(real_bin, "ptxas"))
        os.utime(ptxas, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertEqual((os.stat(ptxas).st_size, os.stat(ptxas).st_mtime_ns), (st.st_size, st.st_mtime_ns))
        self.kache(args + ["-o", "k.o"])
        subprocess.run(args + ["-o", "plain.o"], cwd=self.ws, env=self.env, check=True)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assertNotEqual(before, self.read("k.o", "rb"))
        self.assert_counts(hits=1, misses=2)


class DriverThatCannotAnswer(KacheTestCase):
    """A host driver that fails one of the probe's questions (here -print-prog-name=): its passes stay
    unknown, so no memo of partial facts is written and the compile runs uncached, with its own output
    (review of the probe: the memo was stored without cc1/cc1plus/as, whose later change went unseen)."""

    def test_a_failed_question_passes_the_compile_through(self):
        real = shutil.which("gcc")
        # It fails -### too: a wrapper script is otherwise read as the driver it runs (wrapper.hpp).
        driver = self.write("pf/gcc", '#!/bin/sh\ncase "$*" in *-print-prog-name=*|*-###*) exit 1;; esac\n'
                                      'exec "%s" "$@"\n' % real)
        os.chmod(driver, 0o755)
        self.write("x.c", "int twice(int x) { return 2 * x; }\n")
        for _ in range(2):
            r = self.kache([driver, "-c", "x.c", "-o", "x.o"], check=False)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (0, 0), s)
        self.assertEqual(s["passthrough"] + s.get("errors", 0) + s.get("uncached", 0) > 0, True, s)
        toolchains = os.path.join(self.cache, "toolchains")
        self.assertFalse(os.path.isdir(toolchains) and any(
            n.endswith(".lock") is False and not n.startswith(".") and n != "content" for n in os.listdir(toolchains)),
            "a memo was written")
        subprocess.run([real, "-c", "x.c", "-o", "plain.o"], cwd=self.ws, check=True)
        self.assert_same_object(self.path("x.o"), self.path("plain.o"))


if __name__ == "__main__":
    kachetest.main()
