"""Input audit of clang's CUDA mode (issue 23): every file a `kache clang++-19 -x cuda --cuda-device-only`
miss reads or finds and every program it runs must be something kache keys: in the closure kache
recorded (its "closure file" trace lines), in the toolchain id (its "toolchain file" lines: the clang,
the programs of its -### plan, libdevice, the CUDA installation's cuda.h and ptxas), or in the short
allow-list below, each with its reason. Unlike the gcc audit, nothing of the CUDA installation is
allowed here: clang reads it for this compile. Runs each miss under strace as the gcc audit does (its
tracer); exits 77 where clang++-19 or nvcc is absent.
"""
import os
import re
import shutil
import sys
import time

import kachetest
import test_gcc_input_audit as gcc_audit
from kachetest import KacheTestCase

CLANG = shutil.which("clang++-19")
NVCC = shutil.which("nvcc")

# Reads of clang's chain that are not inputs of the output, one reason each.
ALLOWED = [
    # clang's distribution detection (it decides default linker flags and multiarch paths; the
    # compile's include dirs come from gcc's probe of the same clang, which keys them).
    re.compile(r"^/etc/(debian_version|os-release|lsb-release)$|^/usr/lib/os-release$"),
    # clang's intermediate of this compile (the device PTX ptxas assembles), written by the device
    # cc1 in /tmp before ptxas reads it.
    re.compile(r"^/tmp/k-sm_[0-9]+[af]?-[0-9a-f]{6}\.s$"),
    # kache's scratch directory of this miss (.kache-XXXXXX beside the output).
    re.compile(r"/\.kache-[^/]+/"),
]

KERNEL = r"""
#include "inc/q.h"
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x + 1]) * Q; }
"""


class ClangCudaInputAudit(KacheTestCase):
    traced_miss = gcc_audit.GccInputAudit.traced_miss

    def setUp(self):
        # KacheTestCase's workspace without its nvcc-only environment.
        self.private_workspace("kache-clang-cuda-audit-")
        if gcc_audit.STRACE is None:
            self.skipTest("strace is not installed")
        self.write("stub/texture_fetch_functions.h", "")
        self.write("inc/q.h", "#define Q 1.0f\n")
        self.write("k.cu", KERNEL)
        time.sleep(0.05)

    def uncovered(self, args):
        self.zero()
        closure, tools, reads, found, written, execs = self.traced_miss(CLANG, args, self.ws)
        s = self.stats()
        self.assertEqual(s["misses"], 1, s)
        self.assertEqual(s.get("not_stored_reasons", {}), {}, "this case is expected to be stored")
        scratch = [os.path.realpath(p) for p in (self.cache, self.env["KACHE_CONFIG"], self.path("kache.log"))]
        kache_bin = os.path.realpath(kachetest.KACHE)

        def covered(p):
            return (p in closure or p in tools or p in written or p == kache_bin or os.path.isdir(p)
                    or any(p.startswith(a) for a in gcc_audit.ALLOWED_PREFIXES)
                    or gcc_audit.SHARED_LIBRARY.search(p)
                    or any(a.search(p) for a in ALLOWED)
                    or any(p.startswith(r) for r in scratch))

        reads_left = sorted(p for p in reads if not covered(p))
        # Stat-only finds: the gcc audit's list of clang's own installation lookups (its probe keys
        # what they decide), never the CUDA installation (gcc_audit.STAT_ONLY_PATTERN is not used).
        found_left = sorted(p for p in found - reads
                            if not covered(p) and not any(p.startswith(a) for a in gcc_audit.STAT_ONLY))
        progs_left = sorted(p for p in execs if p not in tools and p != kache_bin)
        return reads_left, found_left, progs_left

    def assert_audited(self, args):
        reads, found, progs = self.uncovered(args)
        self.assertEqual(reads, [], "files read outside the closure, the toolchain and the allow-list")
        self.assertEqual(found, [], "files found (stat) outside the closure and the allow-lists")
        self.assertEqual(progs, [], "programs run outside the toolchain id")

    def test_ptx(self):
        self.assert_audited(["-x", "cuda", "--cuda-device-only", "-S", "--cuda-gpu-arch=sm_90", "-isystem", "stub",
                             "k.cu", "-o", "k.ptx"])

    def test_cubin(self):
        self.assert_audited(["-x", "cuda", "--cuda-device-only", "-c", "--cuda-gpu-arch=sm_80", "-isystem", "stub",
                             "k.cu", "-o", "k.cubin"])

    def test_cubin_through_a_wrapper_script(self):
        # An installation whose bin/ptxas is a wrapper script (`exec <real ptxas> "$@"`, the form of
        # /usr/local/bin/ptxas on the CI machine): the real ptxas the script runs is keyed too.
        real = os.path.realpath(shutil.which("ptxas") or os.path.join(os.path.dirname(os.path.realpath(NVCC)), "ptxas"))
        home = os.path.dirname(os.path.dirname(real))
        for d in ("include", "nvvm", "lib64"):
            os.makedirs(self.path("cuda"), exist_ok=True)
            os.symlink(os.path.join(home, d), self.path("cuda", d))
        if os.path.exists(os.path.join(home, "version.json")):
            os.symlink(os.path.join(home, "version.json"), self.path("cuda", "version.json"))
        self.write("cuda/bin/ptxas", f'#!/bin/sh\nexec {real} "$@"\n')
        os.chmod(self.path("cuda/bin/ptxas"), 0o755)
        self.assert_audited(["-x", "cuda", "--cuda-device-only", "-c", "--cuda-gpu-arch=sm_80",
                             "--cuda-path=" + self.path("cuda"), "-isystem", "stub", "k.cu", "-o", "k.cubin"])


if __name__ == "__main__":
    if CLANG is None or NVCC is None:
        print("clang++-19 or nvcc is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
