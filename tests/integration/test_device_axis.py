"""The device axis (spec 004: the architecture set is part of a build's identity). The same source and
the same output path built for sm_80, then sm_90, then sm_80 again: three correct objects, the third a
hit, and both entries kept (sm_90 once more is a hit too). Each object is checked twice: against plain
nvcc's, and by the device ELFs cuobjdump lists in it.

test_stale_cache_fails_this_test runs the sequence against tests/integration/stale_wrapper.py (a cache
keyed on the output path alone) and requires it to fail, so this test is known to be able to fail."""
import os
import shutil
import subprocess
import sys
import textwrap
import unittest

import buildsys
import kachetest
from kachetest import KacheTestCase

KERNEL = textwrap.dedent("""
    struct Tile { float scale; int width; };
    __global__ void axpy(Tile t, const float* x, float* y) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
    #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      y[i] += t.scale * x[i] + 9.0f;  // a Hopper-only path, so the two builds differ in code too
    #else
      if (i < t.width) y[i] += t.scale * x[i];
    #endif
    }
    void launch(Tile t, const float* x, float* y) { axpy<<<1, 32>>>(t, x, y); }
    """)


class DeviceAxis(KacheTestCase):
    def build(self, flags, arch, label):
        """kache, then plain nvcc, for one arch; the two objects must agree and hold that arch only."""
        args = flags + ["k.cu", "-arch=" + arch, "-o", "out/k.o"]
        self.kache(["nvcc"] + args)
        if not os.path.exists(self.path(f"ref/{arch}.o")):
            self.nvcc(flags + ["k.cu", "-arch=" + arch, "-o", f"ref/{arch}.o"])
        got, ref = self.path("out/k.o"), self.path(f"ref/{arch}.o")
        self.assertEqual(buildsys.section_diff(got, ref), [],
                         f"{label}: the object kache left for -arch={arch} differs from plain nvcc's")
        self.assertEqual(buildsys.elf_archs(got), {arch}, f"{label}: device code in the object")
        shutil.copyfile(got, self.path(f"kept/{label}.o"))

    def sequence(self, flags):
        for d in ("out", "ref", "kept"):
            os.makedirs(self.path(d), exist_ok=True)
        self.write("k.cu", KERNEL)
        self.build(flags, "sm_80", "1-sm_80")
        self.assert_counts(hits=0, misses=1)
        self.build(flags, "sm_90", "2-sm_90")
        self.assert_counts(hits=0, misses=2)
        self.assertNotEqual(buildsys.section_diff(self.path("kept/1-sm_80.o"), self.path("kept/2-sm_90.o")), [])
        self.build(flags, "sm_80", "3-sm_80")
        self.assert_counts(hits=1, misses=2)
        # Both entries are kept: sm_90 again is a hit as well, and gives the sm_90 object.
        self.build(flags, "sm_90", "4-sm_90")
        s = self.assert_counts(hits=2, misses=2)
        self.assertGreaterEqual(s["entries"], 2, s)

    def test_whole_program_compile_sm80_sm90_sm80(self):
        self.sequence(["-c"])

    def test_relocatable_device_code_sm80_sm90_sm80(self):
        self.sequence(["-dc"])

    def test_architecture_set_is_identity(self):
        # {sm_80} and {sm_80, sm_90} are different builds: the set is keyed, not its first member.
        self.write("k.cu", KERNEL)
        one = ["-gencode=arch=compute_80,code=sm_80"]
        two = one + ["-gencode=arch=compute_90,code=sm_90"]
        for label, gencode, archs in (("one", one, {"sm_80"}), ("two", two, {"sm_80", "sm_90"}),
                                      ("one-again", one, {"sm_80"})):
            self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"] + gencode)
            self.nvcc(["-c", "k.cu", "-o", "plain.o"] + gencode)
            self.assertEqual(buildsys.section_diff(self.path("k.o"), self.path("plain.o")), [], label)
            self.assertEqual(buildsys.elf_archs(self.path("k.o")), archs, label)
        self.assert_counts(hits=1, misses=2)

    @unittest.skipIf(os.environ.get("KACHE_UNDER_TEST"), "already running against a launcher under test")
    def test_stale_cache_fails_this_test(self):
        wrapper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stale_wrapper.py")
        env = dict(os.environ, KACHE_UNDER_TEST=wrapper, PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run([sys.executable, os.path.abspath(__file__),
                            "DeviceAxis.test_whole_program_compile_sm80_sm90_sm80"],
                           env=env, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0, "the sequence passed with a cache that serves stale objects:\n"
                            + r.stderr[-3000:])
        self.assertIn("2-sm_90: the object kache left for -arch=sm_90 differs from plain nvcc's", r.stderr)


if __name__ == "__main__":
    kachetest.main()
