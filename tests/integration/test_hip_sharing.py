"""hipcc through kache shares entries as the gcc and nvcc routes do (issue 23, item 6): a second build
directory of one checkout, a second checkout at another path (KACHE_PATHS_BASE_DIRS) and a remote
store (a redis-server started here on loopback) hit, and what they restore is byte-for-byte what plain
hipcc writes there: the HSACO bundle, a `-c -g` host object whose DWARF names this build's paths, and
spec 003's `-Xclang -dependency-file` naming this checkout's headers. The probe of hipcc is memoized
per flags, not per file: a new file's miss asks hipcc nothing. Exits 77 (skipped) without hipcc.
"""
import os
import re
import shutil
import subprocess
import sys
import time

import kachetest
import servers
from kachetest import KacheTestCase

HIPCC = shutil.which("hipcc")
STRACE = shutil.which("strace")
TARGET = "--offload-arch=gfx90a"

KERNEL = r"""
#include <hip/hip_runtime.h>
#include "q.h"
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x + 1]) * Q; }
int host_entry(int y) { return y * 3 + 1; }
"""
# A static device variable the host names: under -fgpu-rdc clang externalizes it under a name hashed from
# the compile's cuid (the source's real path and every argument, -o included).
RDC_KERNEL = r"""
#include <hip/hip_runtime.h>
static __device__ int sv[4];
__global__ void k(int* x) { x[threadIdx.x] = sv[threadIdx.x]; }
void host_set(int* h) { hipMemcpyToSymbol(HIP_SYMBOL(sv), h, sizeof(sv)); }
"""


class HipSharing(KacheTestCase):
    def setUp(self):
        # KacheTestCase's workspace without its nvcc requirement.
        self.private_workspace("kache-hipshare-", kachetest.HIP_VARIABLES)
        for checkout in ("one", "elsewhere/two"):
            self.write(f"{checkout}/include/q.h", "#define Q 3.0f\n")
            self.write(f"{checkout}/src/k.hip", KERNEL)
            self.write(f"{checkout}/src/k2.hip", KERNEL.replace("* Q", "* Q * 2.0f"))
            self.write(f"{checkout}/src/rdc.hip", RDC_KERNEL)
            for build in ("build-a", "build-b"):
                os.makedirs(self.path(checkout, build), exist_ok=True)
        # Files older than the clock tick a compile starts in (see KacheTestCase.write).
        time.sleep(0.05)

    # --- commands --------------------------------------------------------------------------------
    def commands(self, checkout, unit="k"):
        """What CMake custom commands or Meson write: absolute source and -I, outputs in the build dir."""
        root = self.path(checkout)
        src, inc = f"{root}/src/{unit}.hip", f"-I{root}/include"
        return {
            f"{unit}.hsaco": ["--genco", TARGET, inc, src, "-o", f"{unit}.hsaco"],
            f"{unit}.o": ["-c", TARGET, inc, src, "-o", f"{unit}.o", "-MD", "-MF", f"{unit}.o.d"],
            f"{unit}-g.o": ["-c", "-g", TARGET, inc, src, "-o", f"{unit}-g.o"],
        }

    def run_tool(self, tool, args, cwd, env=None):
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run(tool + args, cwd=cwd, env=e, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, f"{' '.join(tool + args)}:\n{r.stdout}\n{r.stderr}")

    def build(self, checkout, build_dir, env=None, commands=None):
        """Every command through kache in checkout/build_dir; returns {output: bytes}."""
        cwd = self.path(checkout, build_dir)
        outputs = {}
        for out, args in (commands or self.commands(checkout)).items():
            self.run_tool([kachetest.KACHE, "hipcc"], args, cwd, env)
            with open(os.path.join(cwd, out), "rb") as f:
                outputs[out] = f.read()
        return outputs

    def assert_plain(self, checkout, build_dir, outputs, commands=None, files=()):
        """Plain hipcc's outputs (and `files`, e.g. depfiles) in the same place equal kache's. A -g object
        is compared by every allocated section (its device code carries the device DWARF, which names this
        build's directories as plain clang writes them) and by the paths its host DWARF names."""
        cwd = self.path(checkout, build_dir)
        kept = {}
        for f in files:
            with open(os.path.join(cwd, f), "rb") as fh:
                kept[f] = fh.read()
        for out, args in (commands or self.commands(checkout)).items():
            self.run_tool([HIPCC], args, cwd)  # over kache's: the same command, the same names
            plain_out, kache_out = os.path.join(cwd, out), os.path.join(cwd, "kache-" + out)
            with open(plain_out, "rb") as f:
                plain = f.read()
            if "-g" not in args:
                self.assertEqual(outputs[out], plain, f"{checkout}/{build_dir}/{out}: kache's differs from plain hipcc's")
                continue
            with open(kache_out, "wb") as f:
                f.write(outputs[out])
            self.assert_same_object(kache_out, plain_out)
            self.assertEqual(self.comp_dirs(kache_out), self.comp_dirs(plain_out))
            self.assertEqual(self.comp_dirs(kache_out), {cwd})
        for f, data in kept.items():
            with open(os.path.join(cwd, f), "rb") as fh:
                self.assertEqual(data, fh.read(), f"{checkout}/{build_dir}/{f}: kache's differs from plain hipcc's")

    def comp_dirs(self, obj):
        """The host object's DW_AT_comp_dir values, as the kernel resolves them ('//a' is '/a')."""
        r = subprocess.run(["llvm-dwarfdump-15", "--debug-info", obj], capture_output=True, text=True, check=True)
        return {os.path.normpath(d) for d in re.findall(r'DW_AT_comp_dir\s+\("([^"]+)"\)', r.stdout)}

    def counts(self, env=None):
        s = self.stats(env=env)
        return {"hits": s["hits"], "misses": s["misses"], "passthrough": s["passthrough"]}

    # --- tests -----------------------------------------------------------------------------------
    def test_second_build_dir_hits_with_this_builds_paths(self):
        self.build("one", "build-a")
        self.assertEqual(self.counts(), {"hits": 0, "misses": 3, "passthrough": 0})
        b = self.build("one", "build-b")
        # The -g object's device code names build-a (its DWARF's comp_dir, inside the offload bundle), which
        # no placeholder can stand for at the path's own length: it is stored per checkout and misses here.
        self.assertEqual(self.counts(), {"hits": 2, "misses": 4, "passthrough": 0})
        self.assertTrue(self.stats()["stored_per_checkout"], self.stats())
        # The -g object names build-b (DW_AT_comp_dir) as plain hipcc's does there.
        self.assertIn(self.path("one", "build-b").encode(), b["k-g.o"])
        self.assertNotIn(self.path("one", "build-a").encode(), b["k-g.o"])
        self.assert_plain("one", "build-b", b, files=["k.o.d"])

    def test_second_checkout_hits_with_base_dirs(self):
        self.build("one", "build-a", env={"KACHE_PATHS_BASE_DIRS": self.path("one")})
        two = self.build("elsewhere/two", "build-a", env={"KACHE_PATHS_BASE_DIRS": self.path("elsewhere/two")})
        self.assertEqual(self.counts(), {"hits": 2, "misses": 4, "passthrough": 0})  # -g: per checkout
        self.assertIn(self.path("elsewhere/two", "include", "q.h"), self.read("elsewhere/two/build-a/k.o.d"))
        self.assertIn(self.path("elsewhere/two", "src").encode(), two["k-g.o"])
        self.assertNotIn(self.path("one").encode() + b"/", two["k-g.o"])
        self.assert_plain("elsewhere/two", "build-a", two, files=["k.o.d"])

    def test_spec_003_depfile_names_this_builds_paths(self):
        def commands(checkout):
            root = self.path(checkout)
            return {"k.hsaco": ["--genco", TARGET, f"-I{root}/include", f"{root}/src/k.hip", "-o", "k.hsaco",
                                "-Xclang", "-dependency-file", "-Xclang", "k.hsaco.d", "-Xclang", "-MT", "-Xclang",
                                f"{root}/build-a/k.hsaco"]}
        base = lambda c: {"KACHE_PATHS_BASE_DIRS": self.path(c)}
        self.build("one", "build-a", env=base("one"), commands=commands("one"))
        two = self.build("elsewhere/two", "build-a", env=base("elsewhere/two"), commands=commands("elsewhere/two"))
        self.assertEqual(self.counts(), {"hits": 1, "misses": 1, "passthrough": 0})
        depfile = self.read(os.path.join("elsewhere/two", "build-a", "k.hsaco.d"))
        self.assertIn(self.path("elsewhere/two", "include", "q.h"), depfile)
        self.assertIn(self.path("elsewhere/two", "build-a", "k.hsaco") + ":", depfile)
        self.assertNotIn(self.path("one"), depfile)
        self.assert_plain("elsewhere/two", "build-a", two, commands=commands("elsewhere/two"), files=["k.hsaco.d"])

    def test_remote_round_trip_through_redis(self):
        if servers.missing("redis-server"):
            self.skipTest("redis-server is not installed")
        with servers.Redis() as redis:
            one = {"KACHE_DIR": self.path("cache-one"), "KACHE_REMOTE_STORAGE": redis.url,
                   "KACHE_PATHS_BASE_DIRS": self.path("one")}
            two = {"KACHE_DIR": self.path("cache-two"), "KACHE_REMOTE_STORAGE": redis.url,
                   "KACHE_PATHS_BASE_DIRS": self.path("elsewhere/two")}
            self.build("one", "build-a", env=one)
            s = self.stats(env=one)
            self.assertEqual((s["misses"], s["remote_writes"] > 0), (3, True), s)
            self.assertTrue(any(k.startswith("kache:") for k in redis.keys()))
            # The second checkout's cache dir is empty: the shared entries come from redis.
            two_out = self.build("elsewhere/two", "build-a", env=two)
            s = self.stats(env=two)
            # The -g object is stored per checkout (its device DWARF names the checkout): a miss here.
            self.assertEqual((s["hits"], s["misses"], s["remote_hits"]), (2, 1, 2), s)
        self.assert_plain("elsewhere/two", "build-a", two_out, files=["k.o.d"])

    def test_rdc_passes_through_without_a_cuid_and_equals_plain_with_one(self):
        static = re.compile(rb"_ZL2sv\.static\.([0-9a-f]+)")
        cwd = self.path("one", "src", "liba")
        self.write("one/src/liba/x.hip", RDC_KERNEL)
        time.sleep(0.05)
        # Without -cuid= clang names sv after a hash of the whole line, -o included: plain hipcc's own
        # objects differ between two -o values, so no cache can give this -o's bytes.
        for out in ("p1.o", "p2.o"):
            self.run_tool([HIPCC], ["-c", "-fgpu-rdc", TARGET, "x.hip", "-o", out], cwd)
        self.assertNotEqual(static.search(self.read("one/src/liba/p1.o", "rb")).group(1),
                            static.search(self.read("one/src/liba/p2.o", "rb")).group(1))
        self.run_tool([kachetest.KACHE, "hipcc"], ["-c", "-fgpu-rdc", TARGET, "x.hip", "-o", "x.o"], cwd)
        self.assertEqual(self.counts(), {"hits": 0, "misses": 0, "passthrough": 1})
        self.assertEqual(self.stats()["passthrough_reasons"].get("offload-cuid"), 1)
        # With -cuid= the names follow it alone: cached, and a hit in another build dir is plain's bytes.
        args = ["-c", "-fgpu-rdc", "-cuid=liba-x", TARGET, "../src/liba/x.hip"]
        for build in ("build-a", "build-b"):
            bdir = self.path("one", build)
            os.makedirs(bdir, exist_ok=True)
            self.run_tool([HIPCC], args + ["-o", "plain.o"], bdir)
            self.run_tool([kachetest.KACHE, "hipcc"], args + ["-o", "x.o"], bdir)
            self.assertEqual(self.read(f"one/{build}/x.o", "rb"), self.read(f"one/{build}/plain.o", "rb"), build)
            self.assertIsNotNone(static.search(self.read(f"one/{build}/x.o", "rb")))
        self.assertEqual(self.counts(), {"hits": 1, "misses": 1, "passthrough": 1})

    def test_explain_names_the_flag_hipcc_added_differently(self):
        cwd = self.path("one", "build-a")
        args = self.commands("one")["k.hsaco"]
        self.run_tool([kachetest.KACHE, "hipcc"], args, cwd)
        # With -O2 given hipcc adds no -O3: explain shows the toolchain differing and why.
        r = subprocess.run([kachetest.KACHE, "explain", "--", "hipcc", "-O2"] + args, cwd=cwd, env=self.env,
                           capture_output=True, text=True, check=True)
        entry = re.search(r"^\s+entry: (.*)$", r.stdout, re.M)
        now = re.search(r"^\s+now: (.*)$", r.stdout, re.M)
        self.assertTrue(entry and now, r.stdout)
        self.assertIn(" -O3 ", entry.group(1))
        self.assertNotIn(" -O3 ", now.group(1))
        self.assertRegex(r.stdout, r"arg\s+\(absent\) -> -O2")

    def executed(self, args, cwd):
        """The argv of every program one kache compile runs (strace -f), kache itself excluded."""
        trace = self.path("trace")
        subprocess.run([STRACE, "-f", "-qq", "-v", "-s", "4096", "-e", "trace=execve", "-o", trace,
                        kachetest.KACHE, "hipcc"] + args, cwd=cwd, env=self.env, check=True, capture_output=True)
        with open(trace) as f:
            calls = re.findall(r'execve\("([^"]+)", \[(.*?)\]', f.read())
        return [(prog, argv) for prog, argv in calls if os.path.realpath(prog) != os.path.realpath(kachetest.KACHE)]

    def test_a_new_file_with_the_same_flags_asks_hipcc_nothing(self):
        if not STRACE:
            self.skipTest("strace is not installed")
        cwd = self.path("one", "build-a")
        first = self.commands("one", "k")["k.hsaco"]
        self.run_tool([kachetest.KACHE, "hipcc"], first, cwd)
        second = self.commands("one", "k2")["k2.hsaco"]
        ran = self.executed(second, cwd)
        probes = [argv for _, argv in ran if '"-###"' in argv]
        self.assertEqual(probes, [], "the second file's miss probed hipcc again")
        self.assertTrue(any(p.endswith("hipcc") for p, _ in ran), "the miss must run hipcc itself")
        self.assertEqual(self.counts(), {"hits": 0, "misses": 2, "passthrough": 0})
        # A second build directory probes once for itself (its working directory is in the memo's key)
        # but gets the same toolchain id: its first file hits.
        self.build("one", "build-b", commands={"k2.hsaco": second})
        self.assertEqual(self.counts(), {"hits": 1, "misses": 2, "passthrough": 0})


if __name__ == "__main__":
    if HIPCC is None:
        print("hipcc is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
