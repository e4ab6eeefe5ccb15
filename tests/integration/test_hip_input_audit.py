"""Input audit of hipcc compiles (issue 23): every file a `kache hipcc` miss reads and every program it
runs must be something kache keys: in the closure kache recorded (its "closure file" trace lines), in
the toolchain id (its "toolchain file" lines: hipcc's files, the clang chain, the bitcode), or in the
gcc audit's allow-list (tests/integration/test_gcc_input_audit.py) and the few below, each with its
reason. Runs each miss under strace as the gcc audit does; exits 77 where hipcc is absent.
"""
import os
import re
import shutil
import sys
import tempfile
import time

import kachetest
import test_gcc_input_audit as gcc_audit
from kachetest import KacheTestCase

HIPCC = shutil.which("hipcc")

# Reads of hipcc's chain that are not inputs of the output, one reason each.
HIP_ALLOWED = [
    # Perl's own library, which hipcc.pl loads (Cwd, File::Basename...): part of the interpreter,
    # whose executable is keyed, as shared libraries are part of the programs that load them.
    re.compile(r"^/usr/(lib/x86_64-linux-gnu/perl[^/]*|share/perl[^/]*|lib/x86_64-linux-gnu/perl5)/"),
    # clang's distribution detection (it decides default linker flags and multiarch paths; the
    # compile's include dirs come from gcc's probe of the same clang, which keys them).
    re.compile(r"^/etc/(debian_version|os-release|lsb-release)$|^/usr/lib/os-release$"),
    # clang's intermediates of this compile in its temporary directory (<stem>-XXXXXX/: each device
    # object and linked code object), written by the compile before the bundler or lld reads them;
    # clang writes them through a temporary name and renames, so the trace's writes do not name them.
    re.compile(r"^/tmp/[^/]+-[0-9a-f]{6}/[^/]+\.(o|out)$"),
]

KERNEL = r"""
#include <hip/hip_runtime.h>
#include "inc/q.h"
#if defined(__gfx1030__)
#include "inc/only1030.h"
#endif
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x + 1]) * Q; }
"""


class HipInputAudit(KacheTestCase):
    traced_miss = gcc_audit.GccInputAudit.traced_miss
    uncovered = gcc_audit.GccInputAudit.uncovered

    def setUp(self):
        # KacheTestCase's workspace without its nvcc requirement.
        self.ws = tempfile.mkdtemp(prefix="kache-hip-audit-")
        self.cache = os.path.join(self.ws, ".cache")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("KACHE_") and not k.startswith("HIP") and k not in ("DEVICE_LIB_PATH", "CPATH")}
        self.env["KACHE_DIR"] = self.cache
        self.env["KACHE_CONFIG"] = os.path.join(self.ws, ".kache.toml")
        self.env["XDG_CONFIG_HOME"] = os.path.join(self.ws, ".config")
        if gcc_audit.STRACE is None:
            self.skipTest("strace is not installed")
        self.write("inc/q.h", "#define Q 1.0f\n")
        self.write("inc/only1030.h", "#define ONLY1030 1\n")
        self.write("k.hip", KERNEL)
        time.sleep(0.05)

    def assert_audited(self, args, compiler="hipcc"):
        reads, found, progs = self.uncovered(compiler, args, self.ws)
        reads = [p for p in reads if not any(a.search(p) for a in HIP_ALLOWED)]
        found = [p for p in found if not any(a.search(p) for a in HIP_ALLOWED)]
        self.assertEqual(reads, [], "files read outside the closure, the toolchain and the allow-lists")
        self.assertEqual(found, [], "files found (stat) outside the closure and the allow-lists")
        self.assertEqual(progs, [], "programs run outside the toolchain id")

    def test_genco_two_targets(self):
        self.assert_audited(["--genco", "--offload-arch=gfx90a", "--offload-arch=gfx1030", "k.hip", "-o", "k.hsaco"])

    def test_host_object(self):
        self.assert_audited(["-c", "--offload-arch=gfx90a", "k.hip", "-o", "k.o"])

    def test_clang_x_hip(self):
        if shutil.which("clang++-15") is None:
            self.skipTest("clang++-15 is not installed")
        self.assert_audited(["--rocm-path=/usr", "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
                             "--offload-arch=gfx90a", "--offload-arch=gfx1030", "-x", "hip", "-c", "k.hip", "-o", "k.o"],
                            "clang++-15")


if __name__ == "__main__":
    if HIPCC is None:
        print("hipcc is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
