"""Remote execution (issue 34, docs/remote-execution.md): with nvcc.stages on and remote_execution.server
set, a miss sends every cicc and ptxas to an REAPI server as one action each, all architectures at once.

BuildGrid (PyPI, scripts/setup.sh's venv; its scheduler in a private PostgreSQL) runs on loopback here,
with two `kache worker`s serving nvcc's toolchain:

  (a) a 3-architecture miss: its 3 cicc and 3 ptxas all ran on the workers (counted from the workers' own
      logs and by kache's remote_ran counters), and the object equals a local stage-cache build's by every
      allocated section;
  (b) the server killed: the next miss runs every stage here, counted as remote_fallback.unreachable, and
      its object is the same;
  (c) a second server whose only worker has another toolchain id: the worker refuses each action, the
      miss runs them here (remote_fallback.refused), object the same.

Skipped (77) without BuildGrid or PostgreSQL.
"""
import os

import servers
from kachetest import KACHE, KacheTestCase, main

SOURCE = r"""
__global__ void scale(float* x, float a) { x[threadIdx.x] = sqrtf(x[threadIdx.x]) * a; }
int host_value() { return 7; }
"""
ARCHS = ("75", "80", "90")


def gencodes():
    args = []
    for a in ARCHS:
        args += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return args


class RemoteExecutionTest(KacheTestCase):
    def setUp(self):
        super().setUp()
        why = servers.missing_buildgrid()
        if why:
            self.skipTest(why)
        self.write("k.cu", SOURCE)
        self.env["KACHE_NVCC_STAGES"] = "1"

    def counters(self, prefix):
        out = self.kache(["--print-stats"]).stdout
        return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
                if line.startswith(prefix) and len(line.split()) == 2}

    def compile(self, out, env=None):
        self.kache(["nvcc", "-c", "k.cu", "-o", out] + gencodes(), env=env)
        return self.path(out)

    def local_object(self):
        """The object kache builds with the stage cache on and no remote execution, in a cache of its own."""
        return self.compile("local.o", env={"KACHE_DIR": self.path("local-cache")})

    def test_stages_run_on_workers_then_fall_back(self):
        local = self.local_object()
        with servers.BuildGrid() as grid:
            remote = {"KACHE_REMOTE_EXECUTION": grid.url, "KACHE_REMOTE_EXECUTION_TIMEOUT": "300"}
            with servers.KacheWorker(KACHE, grid.url, "w1", nvcc=kachetest_nvcc()) as w1, \
                 servers.KacheWorker(KACHE, grid.url, "w2", nvcc=kachetest_nvcc()) as w2:
                obj = self.compile("remote.o", env=remote)
                cicc = w1.ran("cicc") + w2.ran("cicc")
                ptxas = w1.ran("ptxas") + w2.ran("ptxas")
                self.assertEqual((len(cicc), len(ptxas)), (3, 3), "every cicc and ptxas ran on a worker")
                self.assertEqual(self.counters("remote_ran."), {"remote_ran.ptx": 3, "remote_ran.cubin": 3})
                self.assertIn("6 stages ran on workers, 0 ran here instead", self.kache(["-s"]).stdout)
                self.assertIn("ran remotely ptx compute_80", self.kache(["explain", "--last"]).stdout)
                self.assert_same_object(obj, local)
                # (b) the server gone: every stage runs here, the build goes on.
                grid.kill()
                self.kache(["-C"])
                self.zero()
                obj = self.compile("fallback.o", env=remote)
                self.assertEqual(self.counters("remote_fallback."), {"remote_fallback.unreachable": 6})
                self.assertEqual(self.counters("remote_ran."), {})
                self.assert_same_object(obj, local)

    def test_worker_of_another_toolchain_refuses(self):
        local = self.local_object()
        with servers.BuildGrid() as grid, \
             servers.KacheWorker(KACHE, grid.url, "other", toolchain_id="another-toolchain") as other:
            self.zero()
            obj = self.compile("refused.o", env={"KACHE_REMOTE_EXECUTION": grid.url,
                                                 "KACHE_REMOTE_EXECUTION_TIMEOUT": "300"})
            self.assertEqual(other.ran(), [], "the worker ran nothing of another toolchain")
            self.assertEqual(self.counters("remote_fallback."), {"remote_fallback.refused": 6})
            self.assert_same_object(obj, local)


def kachetest_nvcc():
    import kachetest
    return kachetest.NVCC


if __name__ == "__main__":
    main()
