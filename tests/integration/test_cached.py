"""Spec "What is cached": single-source -c, -dc and -c -rdc=true are cached whole; a hit restores the
object and the -MF file and replays what the compile printed; two misses give byte-identical objects."""
import os
import shutil

import kachetest
from kachetest import KERNEL, KacheTestCase


class Cached(KacheTestCase):
    def test_compile_miss_then_hit_restores_object(self):
        self.write("k.cu", KERNEL)
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o", "-arch=sm_80"])
        self.assert_counts(hits=0, misses=1)
        first = self.read("k.o", "rb")
        os.unlink(self.path("k.o"))
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o", "-arch=sm_80"])
        self.assert_counts(hits=1, misses=1)
        self.assertEqual(first, self.read("k.o", "rb"))
        self.nvcc(["-c", "k.cu", "-o", "plain.o", "-arch=sm_80"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    def test_device_compile_and_rdc_are_cached(self):
        self.write("k.cu", KERNEL)
        for flags in (["-dc"], ["-c", "-rdc=true"], ["-c", "--relocatable-device-code=true"]):
            self.kache(["nvcc"] + flags + ["k.cu", "-o", "k.o"])
            os.unlink(self.path("k.o"))
            self.kache(["nvcc"] + flags + ["k.cu", "-o", "k.o"])
            self.nvcc(flags + ["k.cu", "-o", "plain.o"])
            self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assert_counts(hits=3, misses=3)  # -rdc=true spelled two ways keys apart: flags are keyed verbatim

    def test_device_link_runs_uncached(self):
        self.write("k.cu", KERNEL)
        self.kache(["nvcc", "-dc", "k.cu", "-o", "k.o"])
        self.kache(["nvcc", "-dlink", "k.o", "-o", "link.o"])
        self.assertTrue(os.path.exists(self.path("link.o")))
        s = self.assert_counts(misses=1, passthrough=1)
        self.assertEqual(s["passthrough_reasons"].get("device-link"), 1)

    def test_hit_restores_depfile_as_nvcc_writes_it(self):
        self.write("inc/h.h", "#define VAL 2.0f\n")
        self.write("k.cu", '#include "inc/h.h"\n__global__ void k(float* x) { x[0] = VAL; }\n')
        args = ["-c", "k.cu", "-o", "out/k.o", "-MD", "-MF", "out/k.d", "-MT", "out/k.o"]
        os.makedirs(self.path("out"))
        self.kache(["nvcc"] + args)
        miss_dep = self.read("out/k.d")
        os.unlink(self.path("out/k.d"))
        os.unlink(self.path("out/k.o"))
        self.kache(["nvcc"] + args)
        self.assert_counts(hits=1, misses=1)
        self.nvcc(args[:-4] + ["-MD", "-MF", "out/plain.d", "-MT", "out/k.o"])
        plain = self.read("out/plain.d")
        self.assertEqual(plain, miss_dep)
        self.assertEqual(plain, self.read("out/k.d"))
        self.assertIn("inc/h.h", plain)

    def test_mmd_depfile_and_system_header_edits(self):
        # -MMD leaves out headers found through -isystem; the key must still cover them.
        self.write("sys/s.h", "#define SYSVAL 1\n")
        self.write("k.cu", '#include <s.h>\nint host_value() { return SYSVAL; }\n__global__ void k(int* x) { x[0] = SYSVAL; }\n')
        args = ["-c", "k.cu", "-isystem", "sys", "-MMD", "-MF", "k.d"]
        self.kache(["nvcc"] + args + ["-o", "k.o"])
        self.kache(["nvcc"] + args + ["-o", "k.o"])
        self.assert_counts(hits=1, misses=1)
        self.nvcc(args[:-2] + ["-MF", "plain.d", "-o", "k.o"])
        self.assertEqual(self.read("plain.d"), self.read("k.d"))
        self.assertNotIn("sys/s.h", self.read("k.d"))
        self.write("sys/s.h", "#define SYSVAL 2\n")
        self.kache(["nvcc"] + args + ["-o", "k.o"])
        self.nvcc(args[:-2] + ["-MF", "plain.d", "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assert_counts(hits=1, misses=2)

    def test_default_depfile_target_is_the_output(self):
        self.write("k.cu", KERNEL)
        os.makedirs(self.path("o"))
        self.kache(["nvcc", "-c", "k.cu", "-o", "o/k.o", "-MD", "-MF", "o/k.d"])
        self.kache(["nvcc", "-c", "k.cu", "-o", "o/k.o", "-MD", "-MF", "o/k.d"])
        self.nvcc(["-c", "k.cu", "-o", "o/k.o", "-MD", "-MF", "o/plain.d"])
        self.assertEqual(self.read("o/plain.d"), self.read("o/k.d"))
        self.assertTrue(self.read("o/k.d").startswith("o/k.o"))

    def test_hit_replays_warnings(self):
        self.write("w.cu", "__global__ void k(float* x) { int unused_variable; x[0] = 1.0f; }\n")
        r1 = self.kache(["nvcc", "-c", "w.cu", "-o", "w.o"])
        self.assertIn("unused_variable", r1.stderr)
        r2 = self.kache(["nvcc", "-c", "w.cu", "-o", "w.o"])
        self.assert_counts(hits=1, misses=1)
        self.assertEqual(r1.stderr, r2.stderr)
        plain = self.nvcc(["-c", "w.cu", "-o", "p.o"])
        self.assertEqual(plain.stderr, r2.stderr)

    def test_two_misses_give_byte_identical_objects(self):
        self.write("k.cu", KERNEL + "namespace { __device__ int hidden; int local() { return hidden; } }\n")
        for flags in (["-c"], ["-dc"], ["-c", "-g"]):
            self.kache(["nvcc"] + flags + ["k.cu", "-o", "a.o"])
            first = self.read("a.o", "rb")
            self.kache(["--clear"])
            self.kache(["nvcc"] + flags + ["k.cu", "-o", "a.o"])
            self.kache(["--clear"])
            self.assertEqual(first, self.read("a.o", "rb"), f"flags {flags}")

    def test_misses_in_two_checkouts_give_byte_identical_objects(self):
        for d in ("one", "two"):
            self.write(d + "/src/k.cu", KERNEL)
            os.makedirs(self.path(d, "build"))
            self.kache(["nvcc", "-c", "../src/k.cu", "-o", "k.o", "-g"], cwd=self.path(d, "build"))
            self.kache(["--clear"])
        # Each names its own checkout (issue 27: as plain nvcc -g does, same length here); nothing else differs.
        one, two = self.read("one/build/k.o", "rb"), self.read("two/build/k.o", "rb")
        self.assertIn(self.path("one").encode(), one)
        self.assertEqual(one.replace(self.path("one").encode(), self.path("two").encode()), two)

    def test_output_in_other_directory_and_absolute_paths(self):
        self.write("src/k.cu", KERNEL)
        os.makedirs(self.path("build"))
        src, out = self.path("src/k.cu"), self.path("build/k.o")
        self.kache(["nvcc", "-c", src, "-o", out], cwd=self.path("build"))
        os.unlink(out)
        self.kache(["nvcc", "-c", src, "-o", out], cwd=self.path("build"))
        self.assert_counts(hits=1, misses=1)
        self.assertTrue(os.path.exists(out))

    def test_trace_log_lists_key_components(self):
        self.write("k.cu", KERNEL)
        r, log = self.log_of(["nvcc", "-c", "k.cu", "-o", "k.o", "-arch=sm_80"], env={"KACHE_LOG": "kache=trace"})
        r = self.kache(["nvcc", "-c", "k.cu", "-o", "k.o", "-arch=sm_80"], env={"KACHE_LOG": "kache=trace"})
        for field in ("toolchain", "arg = -arch=sm_80", "source-content", "NVCC_APPEND_FLAGS", "direct key"):
            self.assertIn(field, r.stderr)


if __name__ == "__main__":
    kachetest.main()
