"""nvcc's stage cache (issue 24, KACHE_NVCC_STAGES=1): a miss runs nvcc's own trajectory and reuses cicc's
PTX and ptxas's cubin per architecture. strace counts the cicc and ptxas processes a miss runs:

  (a) a host-only edit runs no ptxas;
  (b) an architecture added to the list runs cicc and ptxas for it alone;
  (c) a one-architecture build after the four-architecture one runs neither, also from a redis-server
      (started here on loopback) with an empty local cache;
  (d) a device edit only sm_90 sees reruns sm_90's cicc and ptxas alone.

Every object equals the one kache builds with the stage cache off (byte for byte; that one equals plain
nvcc's, test_differential.py) and plain nvcc's by section; dependency files equal plain nvcc's. Skipped
(77) without strace.
"""
import json
import os
import shutil
import subprocess
import time

import kachetest
import servers
from kachetest import KACHE, KacheTestCase

STRACE = shutil.which("strace")

SOURCE = r"""
#include "inc/k.h"
__global__ void scale(float* x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  x[threadIdx.x] *= SM90_FACTOR;
#else
  x[threadIdx.x] = sqrtf(x[threadIdx.x]) * FACTOR;
#endif
}
int host_value() { return HOST_VALUE; }
"""
HEADER = "#define FACTOR 2.0f\n#define SM90_FACTOR 3.0f\n#define HOST_VALUE 1\n"


def gencodes(*archs):
    out = []
    for a in archs:
        out += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return out


FOUR = gencodes(75, 80, 86, 90)


class NvccStagesTest(KacheTestCase):
    def setUp(self):
        super().setUp()
        if STRACE is None:
            self.skipTest("strace is not installed")
        self.env["KACHE_NVCC_STAGES"] = "1"
        self.write("inc/k.h", HEADER)
        self.write("k.cu", SOURCE)
        time.sleep(0.05)
        self.round = 0

    def traced(self, args):
        """kache nvcc ARGS under strace; returns (its result, the path of every program it started)."""
        self.round += 1
        log = self.path(f"strace-{self.round}.log")
        r = subprocess.run([STRACE, "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", log, KACHE, "nvcc"]
                           + args, cwd=self.ws, env=self.env, capture_output=True, text=True)
        with open(log) as f:
            programs = [line.split('execve("', 1)[1].split('"', 1)[0] for line in f
                        if "execve(" in line and line.rstrip().endswith("= 0")]
        return r, programs

    def counted_build(self, args):
        """kache nvcc ARGS under strace; returns {"cicc": n, "ptxas": n} processes started."""
        r, programs = self.traced(args)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [os.path.basename(p) for p in programs]
        return {"cicc": names.count("cicc"), "ptxas": names.count("ptxas")}

    def assert_depfile_is_nvccs(self, args, depfile):
        """A stage-path build writes DEPFILE as plain nvcc does; returns its text."""
        self.counted_build(args)
        got = self.read(depfile)
        os.unlink(self.path(depfile))
        self.nvcc(args)
        self.assertEqual(got, self.read(depfile), f"{args}: the stage path's dependency file differs from nvcc's")
        return got

    def build(self, archs, out, extra=(), compare=False):
        """A stage-path build of k.cu into OUT, with compare checked against stages off and plain nvcc;
        returns the counts."""
        args = ["-c", "k.cu", "-o", out] + list(archs) + list(extra)
        counts = self.counted_build(args)
        if not compare:
            return counts
        whole = out + ".whole.o"
        self.kache(["nvcc", "-c", "k.cu", "-o", whole] + list(archs) + list(extra),
                   env={"KACHE_NVCC_STAGES": "0", "KACHE_DIR": self.path("whole-cache")})
        self.assertEqual(self.read(out, "rb"), self.read(whole, "rb"),
                         f"{out}: the stage path's object differs from the whole compile's")
        plain = out + ".plain.o"
        self.nvcc(["-c", "k.cu", "-o", plain] + list(archs) + list(extra))
        self.assert_same_object(self.path(out), self.path(plain))
        return counts

    def stages(self):
        return self.stats()["stages"]

    def test_one_architecture_after_four_runs_no_device_stage(self):
        self.assertEqual(self.build(FOUR, "four.o", compare=True), {"cicc": 4, "ptxas": 4})
        self.assertEqual(self.build(gencodes(90), "one.o", compare=True), {"cicc": 0, "ptxas": 0})
        s = self.stages()
        self.assertEqual((s["ptx"]["hits"], s["cubin"]["hits"]), (1, 1), s)
        last = json.loads(self.kache(["explain", "--last", "--json"]).stdout)
        self.assertEqual(last["stages"], ["reused ptx compute_90", "reused cubin sm_90"], last)
        self.assert_counts(hits=0, misses=2)

    def test_added_architecture_runs_its_stages_alone(self):
        self.assertEqual(self.build(FOUR, "four.o"), {"cicc": 4, "ptxas": 4})
        self.assertEqual(self.build(FOUR + gencodes(100), "five.o", compare=True), {"cicc": 1, "ptxas": 1})

    def test_host_only_edit_runs_no_ptxas(self):
        self.assertEqual(self.build(FOUR, "a.o"), {"cicc": 4, "ptxas": 4})
        self.write("inc/k.h", HEADER.replace("HOST_VALUE 1", "HOST_VALUE 2"))
        time.sleep(0.05)
        # The preprocessed device text holds the host function too, so cicc reruns; its PTX is the same.
        self.assertEqual(self.build(FOUR, "b.o", compare=True), {"cicc": 4, "ptxas": 0})
        self.assert_counts(hits=0, misses=2)

    def test_device_edit_only_sm90_sees_reruns_sm90_alone(self):
        self.assertEqual(self.build(FOUR, "a.o"), {"cicc": 4, "ptxas": 4})
        self.write("inc/k.h", HEADER.replace("SM90_FACTOR 3.0f", "SM90_FACTOR 5.0f"))
        time.sleep(0.05)
        # The #if leaves the other architectures' preprocessed text alike: their cicc is reused too.
        self.assertEqual(self.build(FOUR, "b.o", compare=True), {"cicc": 1, "ptxas": 1})
        self.assert_different_object(self.path("a.o"), self.path("b.o"))

    def test_one_architecture_from_redis_with_an_empty_local_cache(self):
        with servers.Redis() as redis:
            self.env["KACHE_REMOTE_STORAGE"] = redis.url
            self.assertEqual(self.build(FOUR, "four.o"), {"cicc": 4, "ptxas": 4})
            self.env["KACHE_DIR"] = self.path("second-machine")
            self.assertEqual(self.build(gencodes(90), "one.o", compare=True), {"cicc": 0, "ptxas": 0})
            s = self.stats()
            self.assertGreaterEqual(s["remote_reads"], 2, s)

    def test_dependency_file_is_nvccs(self):
        for extra, name in ((["-MD", "-MF", "k.d"], "k.d"), (["-MD", "-MF", "t.d", "-MT", "custom"], "t.d")):
            got = self.assert_depfile_is_nvccs(["-c", "k.cu", "-o", "d.o"] + gencodes(80, 90) + extra, name)
            self.assertIn("inc/k.h", got)
        self.assertEqual(self.stats()["stages_whole"], {})

    def test_line_directive_names_stay_out_of_the_dependency_file(self):
        # A #line name is no file the compile entered (bison and flex output name their grammar so): nvcc
        # leaves it out, and so must the rebuilt file, or make stops for want of a rule for it.
        self.write("l.cu", '#include "inc/k.h"\n#line 100 "grammar.y"\n__global__ void k(float* x) { x[0] = FACTOR; }\n')
        time.sleep(0.05)
        got = self.assert_depfile_is_nvccs(["-c", "l.cu", "-o", "l.o"] + gencodes(80) + ["-MD", "-MF", "l.d"], "l.d")
        self.assertNotIn("grammar.y", got)

    def test_lineinfo_in_another_build_directory_names_that_directory(self):
        # cicc makes the line markers' relative names absolute against its working directory (-lineinfo
        # writes them into the PTX): a second build directory with the same headers must not get the first's.
        # The header holds device code, so the line table names it.
        self.write("src/m.cu", '#include "h.cuh"\n__global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n')
        for d in ("a", "b"):
            self.write(f"{d}/inc/h.cuh", "__device__ float twice(float v) { return v * 2.0f; }\n")
        time.sleep(0.05)
        src = self.path("src", "m.cu")
        args = ["-c", src, "-o", "m.o", "-lineinfo", "-Iinc", "--compress-mode=none"] + gencodes(80)
        for d in ("a", "b"):
            r = subprocess.run([KACHE, "nvcc"] + args, cwd=self.path(d), env=self.env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
        whole_env = dict(self.env, KACHE_NVCC_STAGES="0", KACHE_DIR=self.path("whole-cache"))
        r = subprocess.run([KACHE, "nvcc"] + args[:3] + ["whole.o"] + args[4:], cwd=self.path("b"), env=whole_env,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = self.read("b/m.o", "rb")
        self.assertNotIn(self.path("a").encode(), got, "the object built in b names a's directory")
        self.assertEqual(got, self.read("b/whole.o", "rb"))

    def test_failing_stage_is_nvccs_failure_run_once_more_unchanged(self):
        # ptxas fails for sm_75 only (more shared memory than sm_75 has), after sm_80 succeeded: the miss
        # is a failed compile, nvcc's own messages and status; nvcc runs for the dry run and once more
        # unchanged, not also a third time whole.
        self.write("big.cu", "__global__ void k(float* x) { __shared__ float s[20000]; s[threadIdx.x] = x[0];"
                             " __syncthreads(); x[threadIdx.x] = s[threadIdx.x + 1]; }\n")
        time.sleep(0.05)
        args = ["-c", "big.cu", "-o", "big.o"] + gencodes(80, 75)
        plain = self.nvcc(args, check=False)
        self.assertNotEqual(plain.returncode, 0, "the trap needs a compile that fails in a stage")
        self.build(gencodes(80), "probe.o")  # the toolchain probe's nvcc run, memoized from here on
        self.zero()
        r, programs = self.traced(args)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        # The real nvcc's runs: `nvcc` on PATH may be a wrapper script that execs it (CI's is).
        real_nvcc = os.path.realpath(os.path.join(kachetest.nvcc_home(), "nvcc"))
        nvcc_runs = sum(1 for p in programs if os.path.realpath(p) == real_nvcc)
        self.assertEqual(nvcc_runs, 2, "nvcc ran for the dry run and the user's command, and no more")
        s = self.stats()
        self.assertEqual((s["compile_failed"], s["stages_whole"]), (1, {}), s)

    def test_mmd_dependency_file_is_nvccs(self):
        # -MMD leaves out system headers and what they include, even a -I header (GCC flags both).
        self.write("sys/s.h", '#include "u.h"\n')
        self.write("usr/u.h", "#define U 1\n")
        self.write("m.cu", '#include <s.h>\n#include "inc/k.h"\n__global__ void k(float* x) { x[0] = U * FACTOR; }\n')
        time.sleep(0.05)
        args = ["-c", "m.cu", "-o", "m.o"] + gencodes(80, 90) + ["-isystem", "sys", "-Iusr", "-MMD", "-MF", "m.d"]
        got = self.assert_depfile_is_nvccs(args, "m.d")
        self.assertIn("inc/k.h", got)
        self.assertNotIn("u.h", got)
        s = self.stats()
        self.assertEqual(s["stages_whole"], {}, s)
        self.assertEqual(s["stages"]["ptx"]["misses"], 2, s)

if __name__ == "__main__":
    kachetest.main()
