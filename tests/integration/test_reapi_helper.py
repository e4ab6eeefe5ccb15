"""kache-reapi (docs/remote-execution.md): gRPC and protobuf live only in the helper program beside kache,
so that a hit never pays protobuf's descriptor registration (2.4 M instructions of every Debug hit while
kache linked them: 9.07 M against 6.66 M, callgrind).

  (a) kache holds none of the REAPI messages' descriptors (the generated code embeds each .proto's name),
      kache-reapi beside it holds them;
  (b) a miss with remote execution set runs kache-reapi: with no server listening, each stage falls back
      as unreachable, counted, and the object is the local one;
  (c) a kache without kache-reapi beside it: each stage runs here, counted as remote_fallback.error;
  (d) gcc misses meant to go whole: with no server, unreachable; with -g (the object would name the
      working directory), directory; with an absolute -I of the project, paths; each object as without
      remote execution.

No BuildGrid needed; (b) and (c) need nvcc.
"""
import os
import shutil
import subprocess

import servers
from kachetest import KACHE, KacheTestCase, main

PROTO_NAME = b"build/bazel/remote/execution/v2/remote_execution.proto"
SOURCE = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
GENCODES = ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80"]


def helper_of(kache):
    return os.path.join(os.path.dirname(os.path.realpath(kache)), "kache-reapi")


class ReapiHelperTest(KacheTestCase):
    def counters(self, prefix, kache=None):
        out = self.run_kache(kache, ["--print-stats"]).stdout
        return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
                if line.startswith(prefix) and len(line.split()) == 2}

    def run_kache(self, kache, args, env=None):
        if kache is None:
            return self.kache(args, env=env)
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run([kache] + args, cwd=self.ws, env=e, capture_output=True, text=True, check=True)

    def test_kache_links_no_protobuf(self):
        with open(os.path.realpath(KACHE), "rb") as f:
            self.assertFalse(PROTO_NAME in f.read(), "kache links the REAPI messages: every hit pays protobuf's start")
        helper = helper_of(KACHE)
        self.assertTrue(os.access(helper, os.X_OK), f"{helper} is not beside kache")
        with open(helper, "rb") as f:
            self.assertTrue(PROTO_NAME in f.read(), f"{helper} holds no REAPI messages")

    def staged_miss(self, out, kache=None):
        self.write("k.cu", SOURCE)
        env = {"KACHE_NVCC_STAGES": "1", "KACHE_REMOTE_EXECUTION": f"grpc://127.0.0.1:{servers.free_port()}",
               "KACHE_REMOTE_EXECUTION_TIMEOUT": "60"}
        self.run_kache(kache, ["nvcc", "-c", "k.cu", "-o", out] + GENCODES, env=env)
        return self.path(out)

    def test_no_server_falls_back_through_the_helper(self):
        self.write("k.cu", SOURCE)
        self.kache(["nvcc", "-c", "k.cu", "-o", "local.o"] + GENCODES,
                   env={"KACHE_DIR": self.path("local-cache"), "KACHE_NVCC_STAGES": "1"})
        local = self.path("local.o")
        obj = self.staged_miss("remote.o")
        self.assertEqual(self.counters("remote_fallback."), {"remote_fallback.unreachable": 4})
        self.assert_same_object(obj, local)

    def test_missing_helper_falls_back_as_error(self):
        alone = self.path("alone")
        os.makedirs(alone)
        kache = os.path.join(alone, "kache")
        shutil.copy2(os.path.realpath(KACHE), kache)
        self.staged_miss("alone.o", kache=kache)
        self.assertEqual(self.counters("remote_fallback.", kache=kache), {"remote_fallback.error": 4})

    def test_gcc_compiles_that_cannot_go_whole(self):
        old = 1_600_000_000 * 10**9
        self.write("main.c", '#include "h.h"\nint f(void) { return H; }\n', mtime_ns=old)
        self.write("inc/h.h", "#define H 7\n", mtime_ns=old)
        remote = {"KACHE_REMOTE_EXECUTION": f"grpc://127.0.0.1:{servers.free_port()}"}
        cases = [("unreachable", ["-Iinc"]), ("directory", ["-Iinc", "-g"]), ("paths", ["-I" + self.path("inc")])]
        for i, (why, flags) in enumerate(cases):
            self.zero()
            out = f"r{i}.o"
            self.kache(["gcc", "-c", "main.c", "-O1", "-o", out] + flags, env=remote)
            self.assertEqual(self.counters("remote_fallback."), {f"remote_fallback.{why}": 1}, flags)
            self.kache(["gcc", "-c", "main.c", "-O1", "-o", f"l{i}.o"] + flags, env={"KACHE_DIR": self.path(f"c{i}")})
            self.assert_same_object(self.path(out), self.path(f"l{i}.o"))


if __name__ == "__main__":
    main()
