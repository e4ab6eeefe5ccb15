"""clang's CUDA mode through kache (issue 23): `kache clang++-19 -x cuda --cuda-device-only -S|-c
--cuda-gpu-arch=sm_XX` with the real clang-19 and CUDA 13 (nvcc's toolkit); exits 77 (skipped) where
clang-19 or nvcc is absent.

clang-19's CUDA wrapper includes texture_fetch_functions.h, which CUDA 13 dropped: the compiles here
put an empty stand-in on their own line (-isystem stub), the same for plain clang and kache, so what a
user sees is clang's own behaviour. A miss and a hit give plain clang's bytes (PTX for -S, a cubin for
-c); traps edit an input no dependency list names, or one the toolkit gives, and expect plain clang's
new output; a toolkit clang cannot use passes through with clang's own error and exit status.
"""
import os
import shutil
import subprocess
import sys
import time

import kachetest
from kachetest import KacheTestCase

CLANG = shutil.which("clang++-19")
NVCC = shutil.which("nvcc")
# The toolkit above the nvcc that really runs: `nvcc` on PATH may be a wrapper script (CI's is).
CUDA = os.path.dirname(kachetest.nvcc_home()) if NVCC else None

KERNEL = r"""
#include "inc/q.h"
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x + 1]) * Q; }
"""
STUB = ["-isystem", "stub"]  # the empty texture_fetch_functions.h clang-19's wrapper includes
PTX = ["-x", "cuda", "--cuda-device-only", "-S", "--cuda-gpu-arch=sm_90"] + STUB + ["k.cu"]
CUBIN = ["--offload-device-only", "-c", "--offload-arch=sm_80"] + STUB + ["k.cu"]  # a .cu is CUDA to clang


class ClangCudaTest(KacheTestCase):
    def setUp(self):
        # KacheTestCase's workspace without its nvcc-only environment.
        self.private_workspace("kache-clang-cuda-")
        self.write("stub/texture_fetch_functions.h", "")
        self.write("inc/q.h", "#define Q 1.0f\n")
        self.write("k.cu", KERNEL)
        # Files older than the clock tick a compile starts in (see KacheTestCase.write).
        time.sleep(0.05)

    def clang(self, args, check=True):
        r = subprocess.run([CLANG] + args, cwd=self.ws, env=self.env, capture_output=True, text=True)
        if check:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def plain_and_cached(self, args, out):
        """Plain clang's output, then kache's (which must equal it); returns the bytes."""
        self.clang(args + ["-o", "plain-" + out])
        self.kache([CLANG] + args + ["-o", out])
        plain, cached = self.read("plain-" + out, "rb"), self.read(out, "rb")
        self.assertEqual(plain, cached, f"kache's {out} differs from plain clang's")
        return plain

    def test_ptx_miss_then_hit_is_plain_clangs(self):
        plain = self.plain_and_cached(PTX, "k.ptx")
        self.assertIn(b".target sm_90", plain)
        os.remove(self.path("k.ptx"))
        self.kache([CLANG] + PTX + ["-o", "k.ptx"])
        self.assertEqual(self.read("k.ptx", "rb"), plain)
        s = self.assert_counts(hits=1, misses=1, passthrough=0)
        self.assertEqual(s["output_kinds"]["ptx"], {"hits": 1, "misses": 1})

    def test_cubin_miss_then_hit_is_plain_clangs(self):
        plain = self.plain_and_cached(CUBIN, "k.cubin")
        self.assertTrue(plain.startswith(b"\x7fELF"))
        os.remove(self.path("k.cubin"))
        self.kache([CLANG] + CUBIN + ["-o", "k.cubin"])
        self.assertEqual(self.read("k.cubin", "rb"), plain)
        s = self.assert_counts(hits=1, misses=1, passthrough=0)
        self.assertEqual(s["output_kinds"]["cubin"], {"hits": 1, "misses": 1})
        # A direct hit runs no process: the -### probe is memoized (only kache itself is executed).
        strace = shutil.which("strace")
        if strace:
            os.remove(self.path("k.cubin"))
            trace = self.path("execs.txt")
            r = subprocess.run([strace, "-f", "-qq", "-e", "trace=execve", "-o", trace, kachetest.KACHE, CLANG]
                               + CUBIN + ["-o", "k.cubin"], cwd=self.ws, env=self.env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(trace) as f:
                execs = [line for line in f if "execve(" in line]
            self.assertEqual(len(execs), 1, "".join(execs))
            self.assertEqual(self.read("k.cubin", "rb"), plain)
            self.assert_counts(hits=2, misses=1)

    def test_header_edit_keeping_size_and_mtime_misses(self):
        for args, out in ((PTX, "k.ptx"), (CUBIN, "k.cubin")):
            before = self.plain_and_cached(args, out)
            st = os.stat(self.path("inc/q.h"))
            self.write("inc/q.h", "#define Q 3.0f\n", mtime_ns=st.st_mtime_ns)
            self.assertEqual(os.stat(self.path("inc/q.h")).st_size, st.st_size)
            time.sleep(0.05)
            after = self.plain_and_cached(args, out)
            self.assertNotEqual(before, after, "the edit must change the device code, or the trap proves nothing")
            self.write("inc/q.h", "#define Q 1.0f\n")
            time.sleep(0.05)
        self.assert_counts(hits=0, misses=4, passthrough=0)

    def toolkit_of_links(self, name="cuda"):
        """A CUDA toolkit at ws/<name> made of links to the installed one, nvvm/libdevice a copy."""
        root = self.path(name)
        os.makedirs(os.path.join(root, "nvvm", "libdevice"))
        for e in os.listdir(CUDA):
            if e != "nvvm":
                os.symlink(os.path.join(CUDA, e), os.path.join(root, e))
        for e in os.listdir(os.path.join(CUDA, "nvvm")):
            if e != "libdevice":
                os.symlink(os.path.join(CUDA, "nvvm", e), os.path.join(root, "nvvm", e))
        libdevice = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
        shutil.copy(os.path.join(CUDA, "nvvm", "libdevice", "libdevice.10.bc"), libdevice)
        return root, libdevice

    def test_swapped_libdevice_misses(self):
        root, libdevice = self.toolkit_of_links()
        # Another libdevice: its __nv_sqrtf (sqrtf's device body) triples instead.
        self.write("fake.c", "float __nv_sqrtf(float x) { return x * 3.0f; }\n")
        self.clang(["-x", "c", "--target=nvptx64-nvidia-cuda", "-emit-llvm", "-c", "fake.c", "-o", "fake.bc"])
        time.sleep(0.05)
        for args, out in ((PTX, "k.ptx"), (CUBIN, "k.cubin")):
            args = args + ["--cuda-path=" + root]
            before = self.plain_and_cached(args, out)
            saved = libdevice + ".saved"
            os.rename(libdevice, saved)
            shutil.copy(self.path("fake.bc"), libdevice)
            time.sleep(0.05)
            after = self.plain_and_cached(args, out)
            self.assertNotEqual(before, after, "the swap must change the device code, or the trap proves nothing")
            os.replace(saved, libdevice)
            time.sleep(0.05)
        self.assert_counts(hits=0, misses=4, passthrough=0)

    def test_toolkit_behind_a_retargeted_link_misses(self):
        # clang takes the installation above the real path of the ptxas PATH finds: PATH's ptxas is a link
        # through ws/cur, which first names toolkit a, then b (another libdevice). No directory on PATH or
        # under /usr/local changes: only where the links lead.
        self.write("fake.c", "float __nv_sqrtf(float x) { return x * 3.0f; }\n")
        self.clang(["-x", "c", "--target=nvptx64-nvidia-cuda", "-emit-llvm", "-c", "fake.c", "-o", "fake.bc"])
        for name in ("cuda-a", "cuda-b"):
            root, libdevice = self.toolkit_of_links(name)
            # A bin of its own whose ptxas resolves there (a wrapper), so the real path stays in it.
            os.remove(os.path.join(root, "bin"))
            os.makedirs(os.path.join(root, "bin"))
            for e in os.listdir(os.path.join(CUDA, "bin")):
                if e != "ptxas":
                    os.symlink(os.path.join(CUDA, "bin", e), os.path.join(root, "bin", e))
            self.write(f"{name}/bin/ptxas", '#!/bin/sh\nexec %s "$@"\n' % os.path.join(CUDA, "bin", "ptxas"))
            os.chmod(os.path.join(root, "bin", "ptxas"), 0o755)
        shutil.copy(self.path("fake.bc"), libdevice)  # toolkit b's
        os.symlink("cuda-a", self.path("cur"))
        os.makedirs(self.path("pbin"))
        os.symlink(self.path("cur", "bin", "ptxas"), self.path("pbin", "ptxas"))
        self.env["PATH"] = self.path("pbin") + os.pathsep + self.env["PATH"]
        time.sleep(0.05)
        before = self.plain_and_cached(PTX, "k.ptx")
        os.remove(self.path("cur"))
        os.symlink("cuda-b", self.path("cur"))
        after = self.plain_and_cached(PTX, "k.ptx")
        self.assertNotEqual(before, after, "toolkit b must change the device code, or the trap proves nothing")
        self.assert_counts(hits=0, misses=2, passthrough=0)

    def assert_passes_through_as_clang_fails(self, args, clang=None):
        """kache's exit status and stderr are plain clang's (which fails), counted as clang-cuda-toolkit."""
        clang = clang or CLANG
        plain = subprocess.run([clang] + args + ["-o", "plain.out"], cwd=self.ws, env=self.env,
                               capture_output=True, text=True)
        self.assertNotEqual(plain.returncode, 0, "the toolkit must be unusable, or the case proves nothing")
        r = self.kache([clang] + args + ["-o", "k.out"], check=False)
        self.assertEqual((r.returncode, r.stderr), (plain.returncode, plain.stderr))
        self.assertFalse(os.path.exists(self.path("k.out")))

    def test_toolkit_clang_cannot_use_passes_through(self):
        self.zero()
        # CUDA 13 without a texture_fetch_functions.h: clang's wrapper cannot include it.
        no_stub = [a for a in PTX if a not in STUB]
        self.assert_passes_through_as_clang_fails(no_stub)
        # A --cuda-path without the toolkit: clang's "cannot find libdevice for sm_90".
        self.assert_passes_through_as_clang_fails(PTX + ["--cuda-path=" + self.path("no-cuda")])
        cases = 2
        # clang-15 does not know sm_90 ("unsupported CUDA gpu architecture", with -### exiting 0), and
        # does not support CUDA 13 at all ("newer than the latest supported version 11.5": its wrapper
        # needs the texture<> template CUDA 12 removed).
        clang15 = shutil.which("clang++-15")
        if clang15:
            self.assert_passes_through_as_clang_fails(PTX, clang15)
            self.assert_passes_through_as_clang_fails([a.replace("sm_90", "sm_80") for a in PTX], clang15)
            cases += 2
        s = self.assert_counts(hits=0, misses=0, passthrough=cases)
        self.assertEqual(s["passthrough_reasons"], {"clang-cuda-toolkit": cases}, s)

    def test_full_compile_passes_through(self):
        # A full -c bundles with fatbinary -image, which CUDA 13's fatbinary does not take.
        args = ["-x", "cuda", "-c", "--cuda-gpu-arch=sm_90"] + STUB + ["k.cu"]
        plain = self.clang(args + ["-o", "plain.o"], check=False)
        r = self.kache([CLANG] + args + ["-o", "k.o"], check=False)
        self.assertEqual((r.returncode, r.stderr), (plain.returncode, plain.stderr))
        s = self.assert_counts(hits=0, misses=0, passthrough=1)
        self.assertEqual(s["passthrough_reasons"], {"clang-cuda": 1}, s)


if __name__ == "__main__":
    if CLANG is None or NVCC is None:
        print("clang++-19 or nvcc is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
