"""Objects that run. examples/saxpy's program (saxpy, scale and a block reduction in one static set of
whole-program TUs, a sum of squares through relocatable device code calling a __device__ function of
another TU, and a host-only reference under #ifndef __CUDA_ARCH__ that main() compares against) is
built three ways: plain nvcc, through kache with an empty cache (all misses), and through kache again
into a fresh directory (all hits; the statistics prove which). On a machine with an NVIDIA GPU all
three run, exit 0 ("OK: GPU and host agree") and print identical output.

A second test does the same for a standalone fatbin (spec 003's shape): tests/gpu/affine.cu built with
`nvcc --fatbin` for sm_75 and sm_90 by plain nvcc, by kache (a miss) and by kache into a fresh
directory (a hit, the fatbin restored), each loaded by tests/gpu/load_fatbin.cpp with the driver API
(cuModuleLoadData) and run: the three must print the same results and "OK: GPU and host agree".

Run it on a GPU machine with: KACHE_BIN=<build>/kache python3 tests/integration/test_gpu_run.py

Without a GPU (`nvidia-smi -L` fails or is missing, as in CI) the test is skipped before building,
says so, and the script exits 77, which CTest reports as skipped (SKIP_RETURN_CODE)."""
import os
import shutil
import subprocess
import sys
import unittest

import buildsys
import kachetest
from kachetest import KacheTestCase

ARCH = ["-gencode=arch=compute_75,code=sm_75", "-gencode=arch=compute_75,code=compute_75",
        "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90"]
FLAGS = ["-O2", "-std=c++17"]
UNITS = [("src", "saxpy", "-c"), ("src", "reduce", "-c"), ("src", "scale", "-c"),
         ("rdc", "device_ops", "-dc"), ("rdc", "sumsq", "-dc"), ("app", "main", "-c")]


def gpu():
    """(True, the GPU list) when nvidia-smi -L lists a GPU, else (False, why not)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False, "nvidia-smi is not on PATH"
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"nvidia-smi -L failed: {e}"
    if r.returncode != 0 or "GPU" not in r.stdout:
        return False, f"nvidia-smi -L failed ({r.returncode}): {(r.stdout + r.stderr).strip()[:200]}"
    return True, r.stdout.strip()


class GpuRun(KacheTestCase):
    def setUp(self):
        super().setUp()
        ok, what = gpu()
        if not ok:
            self.skipTest(f"no NVIDIA GPU on this machine ({what}); the build-and-run test needs one")
        self.gpus = what
        self.src = buildsys.copy_example("saxpy", self.path("saxpy"))

    def build(self, name, compiler):
        """Compiles every TU with compiler (a list), links with plain nvcc (it device-links the -dc
        objects), returns the program's path."""
        out = os.path.join(self.src, name)
        os.makedirs(out)
        for directory, unit, mode in UNITS:
            buildsys.run(compiler + ARCH + FLAGS + [mode, f"{directory}/{unit}.cu", "-o", f"{name}/{unit}.o"],
                         cwd=self.src, env=self.env)
        objects = [f"{name}/{unit}.o" for _, unit, _ in UNITS]
        buildsys.run([buildsys.NVCC] + ARCH + objects + ["-o", f"{name}/saxpy"], cwd=self.src, env=self.env)
        return os.path.join(out, "saxpy")

    def test_plain_miss_and_hit_programs_run_identically(self):
        print(f"\nGPU: {self.gpus}", file=sys.stderr)
        programs = {"plain nvcc": self.build("plain", [buildsys.NVCC])}
        programs["kache miss"] = self.build("miss", [buildsys.LAUNCHER, "nvcc"])
        self.assert_counts(hits=0, misses=len(UNITS))
        self.zero()
        programs["kache hit"] = self.build("hit", [buildsys.LAUNCHER, "nvcc"])
        self.assert_counts(hits=len(UNITS), misses=0)
        for _, unit, _ in UNITS:
            for build in ("miss", "hit"):
                got, ref = (os.path.join(self.src, d, unit + ".o") for d in (build, "plain"))
                self.assertEqual(buildsys.section_diff(got, ref), [], f"{build}/{unit}.o")
        outputs = {}
        for label, program in programs.items():
            r = subprocess.run([program], capture_output=True, text=True, timeout=120)
            print(f"--- {label}: {program} (exit {r.returncode})\n{r.stdout}{r.stderr}", file=sys.stderr, end="")
            self.assertEqual(r.returncode, 0, f"{label}: the program failed:\n{r.stdout}{r.stderr}")
            self.assertIn("OK: GPU and host agree", r.stdout, label)
            outputs[label] = r.stdout
        self.assertEqual(outputs["kache miss"], outputs["plain nvcc"])
        self.assertEqual(outputs["kache hit"], outputs["plain nvcc"])


GPU_TESTS = os.path.join(kachetest.SOURCE_DIR, "tests", "gpu")
FATBIN_ARCH = ["-gencode=arch=compute_75,code=sm_75", "-gencode=arch=compute_90,code=[compute_90,sm_90]"]


class GpuFatbinRun(KacheTestCase):
    def setUp(self):
        super().setUp()
        ok, what = gpu()
        if not ok:
            self.skipTest(f"no NVIDIA GPU on this machine ({what}); the fatbin run needs one")
        self.gpus = what
        self.src = self.path("gpu")
        shutil.copytree(GPU_TESTS, self.src)

    def fatbin(self, name, compiler):
        os.makedirs(os.path.join(self.src, name))
        out = f"{name}/affine.fatbin"
        buildsys.run(compiler + ["--fatbin", "-O2"] + FATBIN_ARCH + ["affine.cu", "-o", out, "-MD", "-MF",
                                                                       out + ".d", "-MT", out],
                     cwd=self.src, env=self.env)
        return os.path.join(self.src, out)

    def test_restored_fatbin_loads_and_computes_like_plain(self):
        print(f"\nGPU: {self.gpus}", file=sys.stderr)
        fatbins = {"plain nvcc": self.fatbin("plain", [buildsys.NVCC])}
        fatbins["kache miss"] = self.fatbin("miss", [buildsys.LAUNCHER, "nvcc"])
        s = self.assert_counts(hits=0, misses=1)
        self.assertEqual(s["output_kinds"], {"fatbin": {"hits": 0, "misses": 1}})
        self.zero()
        fatbins["kache hit"] = self.fatbin("hit", [buildsys.LAUNCHER, "nvcc"])
        s = self.assert_counts(hits=1, misses=0)
        self.assertEqual(s["output_kinds"], {"fatbin": {"hits": 1, "misses": 0}})
        for label in ("kache miss", "kache hit"):
            with open(fatbins[label], "rb") as a, open(fatbins["plain nvcc"], "rb") as b:
                self.assertTrue(a.read() == b.read(), f"{label}: the fatbin differs from plain nvcc's")
        loader = os.path.join(self.src, "load_fatbin")
        buildsys.run([buildsys.NVCC, "-O2", "load_fatbin.cpp", "-o", loader, "-lcuda"], cwd=self.src, env=self.env)
        outputs = {}
        for label, fatbin in fatbins.items():
            r = subprocess.run([loader, fatbin], capture_output=True, text=True, timeout=120)
            print(f"--- {label}: {fatbin} (exit {r.returncode})\n{r.stdout}{r.stderr}", file=sys.stderr, end="")
            self.assertEqual(r.returncode, 0, f"{label}: the loader failed:\n{r.stdout}{r.stderr}")
            self.assertIn("OK: GPU and host agree", r.stdout, label)
            outputs[label] = r.stdout
        self.assertEqual(outputs["kache miss"], outputs["plain nvcc"])
        self.assertEqual(outputs["kache hit"], outputs["plain nvcc"])


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if result.wasSuccessful() and result.testsRun > 0 and len(result.skipped) == result.testsRun:
        print("test_gpu_run: SKIPPED (exit 77): " + "; ".join(reason for _, reason in result.skipped),
              file=sys.stderr)
        sys.exit(77)
    sys.exit(0 if result.wasSuccessful() else 1)
