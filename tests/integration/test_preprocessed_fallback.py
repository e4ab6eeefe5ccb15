"""The preprocessed-mode fallback (issue 39): a compile whose closure direct mode cannot record (a
computed `#include CFG`) is stored and found by its compiler's own preprocessed output; for nvcc, the
host pass and every device pass its dry run lists, never `nvcc -E` alone (one device pass, with
__CUDA_ARCH__ defined).

Every case first shows the fallback's hit (from a fresh build directory, or a second checkout where
direct mode would share), which a kache without the fallback never gives (such a compile missed in
every build), then the stale-hit trap: one input changes, the rebuild must miss, and its object must
equal the plain compiler's by every allocated section."""
import json
import os
import shutil
import subprocess

import kachetest
from kachetest import KacheTestCase

C_COMPILERS = [c for c in ("gcc-12", "clang-14") if shutil.which(c)]

# The header is found only through a macro: the direct-mode scan cannot list what it would look up.
C_SOURCE = '#define CFG "cfg.h"\n#include CFG\nint value = VAL;\nint twice(int x) { return 2 * x + VAL; }\n'

GENCODES = ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80"]
CUDA_SOURCE = r"""
#define CFG "cfg.cuh"
#include CFG
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#include "arch80.cuh"
#endif
#ifndef __CUDA_ARCH__
#include "host.cuh"
#else
#define HOST 0
#endif
__global__ void k(int* p) { *p = DEV * SCALE; }
int host_value() { return HOST * SCALE; }
"""


class Fallback(KacheTestCase):
    def checkout(self, name, source, headers):
        for rel, text in headers.items():
            self.write(f"{name}/src/{rel}", text)
        self.write(f"{name}/src/{source[0]}", source[1])
        for build in ("b1", "b2"):
            os.makedirs(self.path(name, build), exist_ok=True)
        return self.path(name)

    def plain(self, tool, args, cwd):
        r = subprocess.run([tool] + args, cwd=cwd, env=self.env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def build(self, tool, root, build, args):
        """kache TOOL ARGS in root/build, then the plain compiler to plain.o; the objects must agree."""
        cwd = os.path.join(root, build)
        self.kache([tool] + args + ["-o", "k.o"], cwd=cwd)
        self.plain(tool, args + ["-o", "plain.o"], cwd)
        self.assert_same_object(os.path.join(cwd, "k.o"), os.path.join(cwd, "plain.o"))
        with open(os.path.join(cwd, "k.o"), "rb") as f:
            return f.read()

    def assert_fallback(self, hits, misses):
        s = self.assert_counts(hits=hits, misses=misses)
        self.assertEqual(s["preprocessed_hits"], hits, json.dumps(s, indent=1))
        self.assertEqual(s["direct_hits"], 0)

    def each_compiler(self, body):
        self.assertIn("gcc-12", C_COMPILERS)
        for cc in C_COMPILERS:
            with self.subTest(compiler=cc):
                self.zero()
                body(cc, self.checkout(cc, ("a.c", C_SOURCE), {"cfg.h": "#define VAL 1\n"}))

    # --- gcc and clang -------------------------------------------------------------------------------
    def test_hits_from_a_fresh_build_dir_and_a_second_checkout(self):
        # -g: the restored object names this checkout's paths in its debug info, as plain's does.
        args = ["-c", "../src/a.c", "-g", "-O1"]

        def case(cc, one):
            self.build(cc, one, "b1", args)
            self.build(cc, one, "b2", args)
            two = self.checkout(cc + "-two", ("a.c", C_SOURCE), {"cfg.h": "#define VAL 1\n"})
            restored = self.build(cc, two, "b1", args)
            self.assert_fallback(hits=2, misses=1)
            self.assertTrue((two + "/b1").encode() in restored, "the restored object names this build directory")
            self.assertFalse((one + "/").encode() in restored, "the restored object names the first checkout")
        self.each_compiler(case)

    def test_absolute_paths_as_cmake_writes_them_share_between_checkouts(self):
        # CMake's absolute source and -I: line markers name the checkout's paths, keyed by the roots' names.
        def case(cc, one):
            two = self.checkout(cc + "-two", ("a.c", C_SOURCE), {"cfg.h": "#define VAL 1\n"})
            for root in (one, two):
                self.build(cc, root, "b1", ["-c", os.path.join(root, "src", "a.c"), "-I", os.path.join(root, "src")])
            self.assert_fallback(hits=1, misses=1)
        self.each_compiler(case)

    def test_edit_of_the_computed_header_misses(self):
        def case(cc, one):
            args = ["-c", "../src/a.c"]
            first = self.build(cc, one, "b1", args)
            self.build(cc, one, "b2", args)
            self.write(f"{cc}/src/cfg.h", "#define VAL 2\n")
            edited = self.build(cc, one, "b2", args)
            self.assertNotEqual(first, edited)
            self.assert_fallback(hits=1, misses=2)
        self.each_compiler(case)

    def test_header_shadowing_the_computed_name_misses(self):
        # The name now resolves to another file: what direct mode cannot watch for a computed name.
        def case(cc, one):
            self.write(f"{cc}/src/b/cfg.h", "#define VAL 1\n")
            os.makedirs(os.path.join(one, "src", "a"))
            os.unlink(os.path.join(one, "src", "cfg.h"))
            self.write(f"{cc}/src/a.c", C_SOURCE.replace('"cfg.h"', "<cfg.h>"))
            args = ["-c", "../src/a.c", "-I../src/a", "-I../src/b"]
            first = self.build(cc, one, "b1", args)
            self.build(cc, one, "b2", args)
            self.write(f"{cc}/src/a/cfg.h", "#define VAL 3\n")
            self.assertNotEqual(first, self.build(cc, one, "b2", args))
            self.assert_fallback(hits=1, misses=2)
        self.each_compiler(case)

    def test_setting_off_misses_every_build(self):
        one = self.checkout("gcc", ("a.c", C_SOURCE), {"cfg.h": "#define VAL 1\n"})
        off = {"KACHE_PREPROCESSED_FALLBACK": "0"}
        for build in ("b1", "b2", "b1"):
            self.kache(["gcc-12", "-c", "../src/a.c", "-o", "k.o"], cwd=os.path.join(one, build), env=off)
        self.assert_counts(hits=0, misses=3)
        self.assertEqual(self.stats()["preprocessed_hits"], 0)

    def test_explain_and_report_say_it(self):
        one = self.checkout("gcc", ("a.c", C_SOURCE), {"cfg.h": "#define VAL 1\n"})
        args = ["gcc-12", "-c", "../src/a.c", "-o", "k.o"]
        for build in ("b1", "b2"):
            self.kache(args, cwd=os.path.join(one, build))
        v = json.loads(self.kache(["explain", "--json", "--"] + args, cwd=os.path.join(one, "b1")).stdout)
        self.assertEqual((v["status"], v["preprocessed_fallback"]), ("computed-include", True), v)
        self.assertIn("preprocessed output", v["message"])
        report = self.kache(["report", "--all"]).stdout
        self.assertIn("1 of the hits came through the preprocessed fallback", report)
        self.assertEqual(json.loads(self.kache(["report", "--all", "--json"]).stdout)["preprocessed_hits"], 1)
        self.assertIn("preprocessed hits", self.kache(["-s"]).stdout)

    # --- nvcc ----------------------------------------------------------------------------------------
    def cuda_checkout(self, name):
        return self.checkout(name, ("k.cu", CUDA_SOURCE), {
            "cfg.cuh": "#define DEV 1\n#define SCALE 3\n",
            "arch80.cuh": "#undef DEV\n#define DEV 8\n",
            "host.cuh": "#define HOST 4\n",
        })

    def nvcc_trap(self, edit):
        """A miss, a preprocessed hit from a fresh build directory, then edit: a miss equal to plain nvcc's."""
        one = self.cuda_checkout("cu")
        args = ["-c", "../src/k.cu"] + GENCODES
        first = self.build(kachetest.NVCC, one, "b1", args)
        self.build(kachetest.NVCC, one, "b2", args)
        self.assert_fallback(hits=1, misses=1)
        edit(one)
        self.assertNotEqual(first, self.build(kachetest.NVCC, one, "b2", args))
        self.assert_fallback(hits=1, misses=2)

    def test_nvcc_edit_of_a_header_of_one_architecture_misses(self):
        # nvcc -E preprocesses one device pass (sm_75 here): a key made from it alone serves the old sm_80 code.
        self.nvcc_trap(lambda root: self.write("cu/src/arch80.cuh", "#undef DEV\n#define DEV 9\n"))

    def test_nvcc_host_only_edit_misses(self):
        # nvcc -E defines __CUDA_ARCH__: host-only code is absent from its output.
        self.nvcc_trap(lambda root: self.write("cu/src/host.cuh", "#define HOST 5\n"))

    def test_nvcc_edit_of_the_computed_header_misses(self):
        self.nvcc_trap(lambda root: self.write("cu/src/cfg.cuh", "#define DEV 1\n#define SCALE 7\n"))


if __name__ == "__main__":
    kachetest.main()
