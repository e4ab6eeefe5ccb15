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

    def counted_build(self, args, env=None):
        """kache nvcc ARGS under strace; returns {"cicc": n, "ptxas": n} processes started."""
        self.round += 1
        log = self.path(f"strace-{self.round}.log")
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run([STRACE, "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", log, KACHE, "nvcc"]
                           + args, cwd=self.ws, env=e, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        counts = {"cicc": 0, "ptxas": 0}
        with open(log) as f:
            for line in f:
                if "execve(" not in line or not line.rstrip().endswith("= 0"):
                    continue
                program = line.split('execve("', 1)[1].split('"', 1)[0]
                name = os.path.basename(program)
                if name in counts:
                    counts[name] += 1
        return counts

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
            self.build(gencodes(80, 90), "d.o", extra)
            got = self.read(name)
            os.unlink(self.path(name))
            self.nvcc(["-c", "k.cu", "-o", "d.o"] + gencodes(80, 90) + extra)
            self.assertEqual(got, self.read(name), f"{extra}: the stage path's dependency file differs from nvcc's")
            self.assertIn("inc/k.h", got)
        self.assertEqual(self.stats()["stages_whole"], {})

    def test_mmd_dependency_file_is_nvccs(self):
        # -MMD leaves out system headers and what they include, even a -I header (GCC flags both).
        self.write("sys/s.h", '#include "u.h"\n')
        self.write("usr/u.h", "#define U 1\n")
        self.write("m.cu", '#include <s.h>\n#include "inc/k.h"\n__global__ void k(float* x) { x[0] = U * FACTOR; }\n')
        time.sleep(0.05)
        args = ["-c", "m.cu", "-o", "m.o"] + gencodes(80, 90) + ["-isystem", "sys", "-Iusr", "-MMD", "-MF", "m.d"]
        self.counted_build(args)
        got = self.read("m.d")
        os.unlink(self.path("m.d"))
        self.nvcc(args)
        self.assertEqual(got, self.read("m.d"))
        self.assertIn("inc/k.h", got)
        self.assertNotIn("u.h", got)
        s = self.stats()
        self.assertEqual(s["stages_whole"], {}, s)
        self.assertEqual(s["stages"]["ptx"]["misses"], 2, s)

if __name__ == "__main__":
    kachetest.main()
