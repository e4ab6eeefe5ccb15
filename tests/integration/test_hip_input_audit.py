"""Input audit of hipcc compiles (issue 23): every file a `kache hipcc` miss reads and every program it
runs must be something kache keys: in the closure kache recorded (its "closure file" trace lines), in
the toolchain id (its "toolchain file" lines: hipcc's files, the clang chain, the bitcode), or in the
gcc audit's allow-list (tests/integration/test_gcc_input_audit.py) and the few below, each with its
reason. Runs each miss under strace as the gcc audit does; exits 77 where hipcc is absent.

The environment half: every variable a `kache hipcc` or `kache clang++ -x hip` miss asks for (a getenv()
hook over every process but kache: perl, clang, lld, the bundler) and every `$ENV{NAME}` of hipcc's
Perl (which reads %ENV directly, never getenv) must be a row of src/compiler/env_table.cpp that applies
to that route, or be allowed below with a reason; and every hip/hipcc row does what it says.
"""
import os
import re
import shutil
import subprocess
import sys
import time

import kachetest
import test_gcc_input_audit as gcc_audit
from kachetest import KacheTestCase
from test_soundness import GETENV_HOOK, assert_row_effect

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

# Names read that need no row of env_table.cpp, one reason each.
ENV_ALLOWED = {
    # The getenv hook's own log path.
    "KACHE_GETENV_LOG": "the audit's hook",
    # hipcc.pl assigns it ($ENV{HCC_EXTRA_LIBRARIES}="\n") for the programs it runs and never reads it; no
    # program of the chain asks for it (the hook sees none).
    "HCC_EXTRA_LIBRARIES": "written by hipcc.pl, read by nothing",
}

# The readers whose rows apply to each route (env_table.cpp's reads()).
ROUTE_READERS = {"hipcc": ("host", "hip", "hipcc"), "clang_hip": ("host", "hip")}


def env_rows():
    """Every row of src/compiler/env_table.cpp: [(name, effect, reason, reader)]."""
    with open(os.path.join(kachetest.SOURCE_DIR, "src", "compiler", "env_table.cpp")) as f:
        return re.findall(r'\{"([^"]+)", E::(\w+), "([^"]*)", R::(\w+)\}', f.read())


def route_table(route):
    """{name: (effect, reason)} of the rows deciding each variable on the route (the most specific reader's)."""
    order = ROUTE_READERS[route]
    table = {}
    for name, effect, reason, reader in sorted((r for r in env_rows() if r[3] in order), key=lambda r: order.index(r[3])):
        table[name] = (effect, reason)
    return table


def perl_env_names(hipcc):
    """The names hipcc's Perl (the script, hipcc.pl, hipvars.pm beside it) reads from %ENV."""
    names = set()
    script = os.path.realpath(hipcc)
    for path in (script, os.path.join(os.path.dirname(script), "hipcc.pl"),
                 os.path.join(os.path.dirname(script), "hipvars.pm")):
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                names |= set(re.findall(r"\$ENV\{\s*['\"]?(\w+)['\"]?\s*\}", f.read()))
    return names


KERNEL = r"""
#include <hip/hip_runtime.h>
#include "inc/q.h"
#if defined(__gfx1030__)
#include "inc/only1030.h"
#endif
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x + 1]) * Q; }
"""


def hip_workspace(test):
    """KacheTestCase's workspace without its nvcc requirement, and the kernel."""
    test.private_workspace("kache-hip-audit-", kachetest.HIP_VARIABLES)
    test.write("inc/q.h", "#define Q 1.0f\n")
    test.write("inc/only1030.h", "#define ONLY1030 1\n")
    test.write("k.hip", KERNEL)
    time.sleep(0.05)


class HipInputAudit(KacheTestCase):
    traced_miss = gcc_audit.GccInputAudit.traced_miss
    uncovered = gcc_audit.GccInputAudit.uncovered

    def setUp(self):
        if gcc_audit.STRACE is None:
            self.skipTest("strace is not installed")
        hip_workspace(self)

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


# Values a hip/hipcc row's variable is given in the row check: ones hipcc and clang survive (the key is
# computed after the probe, which must succeed); others get "/kache-audit".
ROW_VALUES = {
    "ROCM_PATH": "/usr", "HIP_PATH": "/usr", "HIP_ROCCLR_HOME": "/usr", "HIP_CLANG_PATH": "/usr/bin",
    "HIP_DEVICE_LIB_PATH": "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
    "DEVICE_LIB_PATH": "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "HIP_PLATFORM": "amd", "HIP_COMPILER": "clang",
    "HIP_RUNTIME": "rocclr", "HIP_CLANG_HCC_COMPAT_MODE": "1", "HIP_COMPILE_CXX_AS_HIP": "1", "PERLIO": ":raw",
    "PERL_UNICODE": "0", "PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0", "PERL_INTERNAL_RAND_SEED": "1",
    "PERL_SIGNALS": "safe", "PERL_DESTRUCT_LEVEL": "0", "PERL_HASH_SEED_DEBUG": "0",
    # Keyed while empty (set and not empty they pass through: checked apart).
    "HIPCC_COMPILE_FLAGS_APPEND": "", "HIPCC_LINK_FLAGS_APPEND": "",
}
CLANG_HIP = ["clang++-15", "--rocm-path=/usr", "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
             "--offload-arch=gfx90a", "-x", "hip", "-c", "e.hip", "-o", "e.o"]


class HipEnvironmentAudit(KacheTestCase):
    def setUp(self):
        hip_workspace(self)
        for name in ("PERL5LIB", "PERLLIB", "PERL5OPT", "ROCM_PATH", "LD_PRELOAD"):
            self.env.pop(name, None)

    def read_names(self, args, compiler="hipcc"):
        """{name: programs} a kache miss's processes (not kache) ask for, under the getenv hook."""
        self.write("hook.c", GETENV_HOOK)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", self.path("hook.so"), self.path("hook.c"), "-ldl"],
                       check=True, capture_output=True)
        log = self.path("getenv-%s.log" % compiler)
        self.kache([compiler] + args, env={"LD_PRELOAD": self.path("hook.so"), "KACHE_GETENV_LOG": log})
        read = {}
        for line in self.read(log).splitlines():
            prog, name = line.split(" ", 1)
            if prog != "kache":
                read.setdefault(name, set()).add(prog)
        return read

    def assert_rows_for(self, route, read):
        table = route_table(route)
        missing = sorted(f"{n} (read by {', '.join(sorted(p))})" for n, p in read.items()
                         if n not in table and n not in ENV_ALLOWED)
        self.assertEqual(missing, [], f"variables the {route} route reads that env_table.cpp has no row for")

    def test_every_variable_hipcc_reads_is_in_the_table(self):
        read = self.read_names(["--genco", "--offload-arch=gfx90a", "--offload-arch=gfx1030", "k.hip", "-o", "k.hsaco"])
        for name, progs in self.read_names(["-c", "--offload-arch=gfx90a", "k.hip", "-o", "k.o", "-MD"]).items():
            read.setdefault(name, set()).update(progs)
        self.assertIn("PERL5LIB", read)  # the hook works for perl
        self.assertIn("HIP_DEVICE_LIB_PATH", read)  # and for clang under hipcc
        perl = perl_env_names(HIPCC)
        self.assertIn("HIPCC_COMPILE_FLAGS_APPEND", perl)  # the scripts were found and read
        for name in perl:
            read.setdefault(name, set()).add("hipcc's Perl")
        self.assert_rows_for("hipcc", read)

    def test_every_variable_clang_x_hip_reads_is_in_the_table(self):
        if shutil.which("clang++-15") is None:
            self.skipTest("clang++-15 is not installed")
        read = self.read_names(CLANG_HIP[1:-4] + ["-c", "k.hip", "-o", "k.o"], CLANG_HIP[0])
        self.assertIn("HIP_DEVICE_LIB_PATH", read)
        self.assert_rows_for("clang_hip", read)

    def keys_of(self, argv, env, memo_line):
        r = self.kache(argv, env=dict(env, KACHE_LOG="kache=trace"), check=False)
        log = r.stderr
        direct = re.search(r"direct key = (\w+)", log)
        memo = re.search(memo_line + r" = (\w+)", log)
        passthrough = re.search(r"passthrough \(([\w-]+)\)", log)
        return (direct.group(1) if direct else None, memo.group(1) if memo else None,
                passthrough.group(1) if passthrough else None, log)

    def assert_hip_rows_effects(self, route, argv):
        # A source that fails at once: the key is computed (and logged) before the compiler runs.
        self.write("e.hip", "#error audit\n")
        base_direct, base_memo, _, log = self.keys_of(argv, {}, "hipcc memo key")
        self.assertTrue(base_direct and base_memo, log)
        rows = 0
        for name, effect, reason, reader in env_rows():
            if reader not in ROUTE_READERS[route][1:] or effect in ("Modeled", "Inert"):
                continue  # host rows: the gcc audit; Modeled rows have tests of their own
            rows += 1
            with self.subTest(variable=name, effect=effect):
                value = ROW_VALUES.get(name, "/kache-audit")
                effect = "Keyed" if effect == "RefusedNonEmpty" else effect
                assert_row_effect(self, effect, reason, self.keys_of(argv, {name: value}, "hipcc memo key"),
                                  base_direct, base_memo)
        return rows

    def test_every_hipcc_row_is_keyed_probed_or_refused(self):
        rows = self.assert_hip_rows_effects("hipcc", ["hipcc", "--genco", "--offload-arch=gfx90a", "e.hip", "-o", "e.hsaco"])
        self.assertGreater(rows, 40)
        # Set and not empty, a RefusedNonEmpty row passes the compile through.
        for name in ("HIPCC_COMPILE_FLAGS_APPEND", "HIPCC_LINK_FLAGS_APPEND"):
            _, _, passthrough, log = self.keys_of(["hipcc", "--genco", "--offload-arch=gfx90a", "e.hip", "-o", "e.hsaco"],
                                                  {name: "-O1"}, "hipcc memo key")
            self.assertEqual(passthrough, "env-flags-shell", log)

    def test_every_hip_row_is_keyed_probed_or_refused_for_clang(self):
        if shutil.which("clang++-15") is None:
            self.skipTest("clang++-15 is not installed")
        self.assertGreater(self.assert_hip_rows_effects("clang_hip", CLANG_HIP), 4)


if __name__ == "__main__":
    if HIPCC is None:
        print("hipcc is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
