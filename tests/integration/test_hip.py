"""hipcc through kache (issue 23): `kache hipcc --genco|-c` with the real hipcc (ROCm 5.2 on Debian 12,
clang 15); exits 77 (skipped) where hipcc is absent.

A miss and a hit give the same bytes as plain hipcc, and each input of hipcc's chain that no dependency
list names is keyed: traps edit one and expect a miss whose output is plain hipcc's new one, never the
stale entry.
"""
import os
import shutil
import subprocess
import sys
import time
import unittest

import kachetest
from kachetest import KacheTestCase

HIPCC = shutil.which("hipcc")

KERNEL = r"""
#include <hip/hip_runtime.h>
#include "inc/q.h"
#if defined(__gfx90a__)
#include "inc/only90a.h"
#else
#define ONLY90A 0.0f
#endif
#if defined(__gfx1030__)
#include "inc/only1030.h"
#else
#define ONLY1030 0.0f
#endif
#ifndef SCALE
#define SCALE 1
#endif
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x + 1]) * Q * SCALE + ONLY90A + ONLY1030; }
"""
TARGET = "--offload-arch=gfx90a"


class HipTest(KacheTestCase):
    def setUp(self):
        # KacheTestCase's workspace without its nvcc requirement.
        self.private_workspace("kache-hip-", kachetest.HIP_VARIABLES)
        self.write("inc/q.h", "#define Q 1.0f\n")
        self.write("inc/only90a.h", "#define ONLY90A 2.0f\n")
        self.write("inc/only1030.h", "#define ONLY1030 4.0f\n")
        self.write("k.hip", KERNEL)
        # Files older than the clock tick a compile starts in (see KacheTestCase.write).
        time.sleep(0.05)

    def hipcc(self, args, env=None):
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run([HIPCC] + args, cwd=self.ws, env=e, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def plain_and_cached(self, args, out, env=None):
        """Plain hipcc's output, then kache's (which must equal it); returns both bytes."""
        self.hipcc(args + ["-o", "plain-" + out], env)
        self.kache(["hipcc"] + args + ["-o", out], env=env)
        plain, cached = self.read("plain-" + out, "rb"), self.read(out, "rb")
        self.assertEqual(plain, cached, f"kache's {out} differs from plain hipcc's")
        return plain

    def test_genco_miss_then_hit_is_plain_hipccs_bundle(self):
        args = ["--genco", TARGET, "k.hip"]
        plain = self.plain_and_cached(args, "k.hsaco")
        self.assertTrue(plain.startswith(b"__CLANG_OFFLOAD_BUNDLE__"))
        os.remove(self.path("k.hsaco"))
        self.kache(["hipcc"] + args + ["-o", "k.hsaco"])
        self.assertEqual(self.read("k.hsaco", "rb"), plain)
        s = self.assert_counts(hits=1, misses=1, passthrough=0)
        self.assertEqual(s["output_kinds"]["offload-bundle"], {"hits": 1, "misses": 1})
        # A direct hit runs no process: hipcc's probe is memoized (only kache itself is executed).
        strace = shutil.which("strace")
        if strace:
            os.remove(self.path("k.hsaco"))
            trace = self.path("execs.txt")
            r = subprocess.run([strace, "-f", "-qq", "-e", "trace=execve", "-o", trace, kachetest.KACHE, "hipcc"] + args
                               + ["-o", "k.hsaco"], cwd=self.ws, env=self.env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(trace) as f:
                execs = [line for line in f if "execve(" in line]
            self.assertEqual(len(execs), 1, "".join(execs))
            self.assertEqual(self.read("k.hsaco", "rb"), plain)
            self.assert_counts(hits=2, misses=1)

    def test_two_targets_and_host_object(self):
        self.plain_and_cached(["--genco", TARGET, "--offload-arch=gfx1030", "k.hip"], "two.hsaco")
        self.plain_and_cached(["-c", TARGET, "k.hip"], "k.o")
        os.remove(self.path("k.o"))
        self.kache(["hipcc", "-c", TARGET, "k.hip", "-o", "k.o"])
        self.assertEqual(self.read("k.o", "rb"), self.read("plain-k.o", "rb"))
        s = self.assert_counts(hits=1, misses=2, passthrough=0)
        self.assertEqual(s["output_kinds"]["object"], {"hits": 1, "misses": 1})

    def test_clang_x_hip(self):
        # clang's HIP route without hipcc: Debian's layout needs the ROCm paths on the line.
        clang = shutil.which("clang++-15")
        if clang is None:
            self.skipTest("clang++-15 is not installed")
        rocm = ["--rocm-path=/usr", "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"]
        for args, out in ((rocm + [TARGET, "--offload-arch=gfx1030", "-O2", "-x", "hip", "-c", "k.hip"], "k.o"),
                          (rocm + [TARGET, "--offload-device-only", "-x", "hip", "-c", "k.hip"], "d.o")):
            r = subprocess.run([clang] + args + ["-o", "plain-" + out], cwd=self.ws, env=self.env,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            plain = self.read("plain-" + out, "rb")
            for _ in range(2):
                self.kache(["clang++-15"] + args + ["-o", out])
                self.assertEqual(self.read(out, "rb"), plain)
                os.remove(self.path(out))
        s = self.assert_counts(hits=2, misses=2, passthrough=0)
        self.assertEqual(s["output_kinds"]["offload-bundle"], {"hits": 1, "misses": 1})

    def test_output_kinds_host_only_rdc_device_only(self):
        for extra, kind in ((["--offload-host-only"], "host-object"), (["-fgpu-rdc", "-cuid=k1"], "object-rdc"),
                            (["--offload-device-only"], "offload-bundle")):
            args = ["-c", TARGET] + extra + ["k.hip"]
            plain = self.plain_and_cached(args, "k.o")
            os.remove(self.path("k.o"))
            self.kache(["hipcc"] + args + ["-o", "k.o"])
            self.assertEqual(self.read("k.o", "rb"), plain, extra)
            self.assertEqual(self.stats()["output_kinds"][kind], {"hits": 1, "misses": 1}, extra)
        # -fgpu-rdc without -cuid=: clang's names would follow kache's scratch -o (offload-cuid).
        self.kache(["hipcc", "-c", TARGET, "-fgpu-rdc", "k.hip", "-o", "r.o"])
        s = self.assert_counts(hits=3, misses=3, passthrough=1)
        self.assertEqual(s["passthrough_reasons"].get("offload-cuid"), 1, s)

    def test_device_only_assembly(self):
        # -S device-only, one target: that target's AMDGPU assembly, as plain hipcc and clang write it.
        clang = shutil.which("clang++-15")
        rocm = ["--rocm-path=/usr", "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "-x", "hip"]
        runs = [("hipcc", [HIPCC], ["--offload-device-only"]), ("hipcc", [HIPCC], ["--cuda-device-only"])]
        if clang:
            runs.append(("clang++-15", [clang], rocm + ["--offload-device-only"]))
        for name, compiler, extra in runs:
            args = extra + ["-S", TARGET, "k.hip"]
            r = subprocess.run(compiler + args + ["-o", "plain-k.s"], cwd=self.ws, env=self.env,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            plain = self.read("plain-k.s", "rb")
            self.assertIn(b'.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"', plain)
            for _ in range(2):
                self.kache([name] + args + ["-o", "k.s"])
                self.assertEqual(self.read("k.s", "rb"), plain, extra)
                os.remove(self.path("k.s"))
        s = self.assert_counts(hits=len(runs), misses=len(runs), passthrough=0)
        self.assertEqual(s["output_kinds"]["device-assembly"], {"hits": len(runs), "misses": len(runs)})

    def test_header_edit_keeping_size_and_mtime_misses(self):
        args = ["--genco", TARGET, "k.hip"]
        before = self.plain_and_cached(args, "k.hsaco")
        # The header only gfx90a includes: edited with its size and mtime kept.
        st = os.stat(self.path("inc/only90a.h"))
        self.write("inc/only90a.h", "#define ONLY90A 3.0f\n", mtime_ns=st.st_mtime_ns)
        self.assertEqual(os.stat(self.path("inc/only90a.h")).st_size, st.st_size)
        time.sleep(0.05)
        after = self.plain_and_cached(args, "k.hsaco")
        self.assertNotEqual(before, after, "the edit must change the device code, or the trap proves nothing")
        self.assert_counts(hits=0, misses=2)

    def test_header_of_one_target_among_two(self):
        # Each device compile writes the same dependency file and the last one wins, so a header only
        # the first target includes is in no -MD file: the key's closure comes from a listing per
        # compile (measured: without it this edit was a stale hit).
        # only1030.h, which kache's scan of the source names anyway, includes deep1030.h, which nothing
        # kache reads names.
        self.write("inc/only1030.h", '#include "deep1030.h"\n')
        self.write("inc/deep1030.h", "#define ONLY1030 4.0f\n")
        time.sleep(0.05)
        for args in (["--genco", TARGET, "--offload-arch=gfx1030", "k.hip"],
                     ["-c", TARGET, "--offload-arch=gfx1030", "k.hip"]):
            out = "k.o" if "-c" in args else "k.hsaco"
            before = self.plain_and_cached(args, out)
            st = os.stat(self.path("inc/deep1030.h"))
            self.write("inc/deep1030.h", "#define ONLY1030 5.0f\n", mtime_ns=st.st_mtime_ns)
            time.sleep(0.05)
            after = self.plain_and_cached(args, out)
            self.assertNotEqual(before, after, "the edit must change the device code")
            self.write("inc/deep1030.h", "#define ONLY1030 4.0f\n")
            time.sleep(0.05)
        self.assert_counts(hits=0, misses=4)

    def test_spec_003_depfile_form_restored_exactly(self):
        dep = ["-Xclang", "-dependency-file", "-Xclang", "out/k.d", "-Xclang", "-MT", "-Xclang", "out/k.hsaco"]
        args = ["--genco", TARGET, "--offload-arch=gfx1030"] + dep + ["k.hip", "-o", "out/k.hsaco"]
        os.makedirs(self.path("out"))
        self.hipcc(args)
        plain_d, plain_o = self.read("out/k.d"), self.read("out/k.hsaco", "rb")
        self.assertIn("out/k.hsaco: k.hip inc/q.h", plain_d)
        for f in ("out/k.d", "out/k.hsaco"):
            os.remove(self.path(f))
        self.kache(["hipcc"] + args)
        self.assertEqual((self.read("out/k.d"), self.read("out/k.hsaco", "rb")), (plain_d, plain_o))
        for f in ("out/k.d", "out/k.hsaco"):
            os.remove(self.path(f))
        self.kache(["hipcc"] + args)
        self.assertEqual((self.read("out/k.d"), self.read("out/k.hsaco", "rb")), (plain_d, plain_o))
        self.assert_counts(hits=1, misses=1, passthrough=0)

    def test_hipcc_flags_append_passes_through(self):
        # hipcc pastes HIPCC_COMPILE_FLAGS_APPEND (and, on a line that links device code, HIPCC_LINK_FLAGS_APPEND)
        # into a /bin/sh command: the compile runs unchanged, never the entry cached without it.
        args = ["--genco", TARGET, "k.hip"]
        before = self.plain_and_cached(args, "k.hsaco")
        after = self.plain_and_cached(args, "k.hsaco", env={"HIPCC_COMPILE_FLAGS_APPEND": "-DSCALE=3"})
        self.assertNotEqual(before, after)
        self.plain_and_cached(["-c", TARGET, "k.hip"], "k.o", env={"HIPCC_LINK_FLAGS_APPEND": "-lm"})
        self.assert_counts(hits=0, misses=1, passthrough=2)
        s = self.stats()
        self.assertEqual(s["passthrough_reasons"].get("env-flags-shell"), 2, s["passthrough_reasons"])

    def test_hipcc_flags_append_shell_expansion_is_never_stale(self):
        # The shell expands $KV in the variable: the text kache could key stays the same while the
        # compile changes (review #1a).
        env = {"HIPCC_COMPILE_FLAGS_APPEND": "-DSCALE=$KV", "KV": "1"}
        args = ["--genco", TARGET, "k.hip"]
        one = self.plain_and_cached(args, "k.hsaco", env=env)
        env["KV"] = "2"
        two = self.plain_and_cached(args, "k.hsaco", env=env)
        self.assertNotEqual(one, two, "the expansion must change the code, or the trap proves nothing")
        self.assert_counts(hits=0, misses=0, passthrough=2)

    def test_clang_behind_hipcc_replaced_misses(self):
        # A scratch HIP installation (HIP_PATH) whose bin/ holds the clang hipcc runs: hipvars.pm takes
        # HIP_PATH/bin when HIP_PATH/bin/clang exists (it ignores HIP_CLANG_PATH then). Its clang++-15 is
        # a wrapper script, replaced by one that compiles differently.
        hp = self.path("hip")
        os.makedirs(os.path.join(hp, "bin"))
        os.makedirs(os.path.join(hp, "include"))
        os.symlink("/usr/lib", os.path.join(hp, "lib"))  # clang finds its GCC installation beside itself
        for name in ("clang", "clang++"):
            os.symlink("/usr/bin/clang++-15", os.path.join(hp, "bin", name))
        wrapper = os.path.join(hp, "bin", "clang++-15")
        self.write(wrapper, '#!/bin/sh\nexec /usr/bin/clang++-15 "$@"\n')
        os.chmod(wrapper, 0o755)
        env = {"HIP_PATH": hp, "ROCM_PATH": "/usr"}
        args = ["--genco", TARGET, "--rocm-path=/usr", "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
                "k.hip"]
        before = self.plain_and_cached(args, "k.hsaco", env=env)
        self.write(wrapper, '#!/bin/sh\nexec /usr/bin/clang++-15 -DSCALE=3 "$@"\n')
        os.chmod(wrapper, 0o755)
        time.sleep(0.05)
        after = self.plain_and_cached(args, "k.hsaco", env=env)
        self.assertNotEqual(before, after, "the new clang must compile differently, or the trap proves nothing")
        self.assert_counts(hits=0, misses=2)

    def test_swapped_device_library_misses(self):
        # A scratch copy of the bitcode directory hipcc reads through DEVICE_LIB_PATH, two of its
        # files swapped: the kernel's sqrtf links the other one.
        bitcode = self.path("bitcode")
        shutil.copytree("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", bitcode)
        env = {"DEVICE_LIB_PATH": bitcode}
        args = ["--genco", TARGET, "k.hip"]
        before = self.plain_and_cached(args, "k.hsaco", env=env)
        on, off = os.path.join(bitcode, "oclc_correctly_rounded_sqrt_on.bc"), os.path.join(bitcode, "oclc_correctly_rounded_sqrt_off.bc")
        os.rename(on, on + ".tmp")
        os.rename(off, on)
        os.rename(on + ".tmp", off)
        after = self.plain_and_cached(args, "k.hsaco", env=env)
        self.assertNotEqual(before, after, "the swap must change the device code, or the trap proves nothing")
        self.assert_counts(hits=0, misses=2)

    def test_device_library_appearing_where_hipcc_looks_misses(self):
        # hipcc picks the bitcode directory by testing paths (hipcc.pl: $ROCM_PATH/amdgcn/bitcode before
        # the glob $ROCM_PATH/lib/*/amdgcn/bitcode): one appearing there, its sqrt files swapped, must
        # be seen by the memo of hipcc's probe (review #2).
        rocm = self.path("rocm")
        os.makedirs(rocm)
        for d in ("include", "share", "lib"):
            os.symlink("/usr/" + d, os.path.join(rocm, d))
        env = {"ROCM_PATH": rocm}
        args = ["--genco", TARGET, "k.hip"]
        before = self.plain_and_cached(args, "k.hsaco", env=env)
        bitcode = os.path.join(rocm, "amdgcn", "bitcode")
        shutil.copytree("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", bitcode)
        on, off = os.path.join(bitcode, "oclc_correctly_rounded_sqrt_on.bc"), os.path.join(bitcode, "oclc_correctly_rounded_sqrt_off.bc")
        os.rename(on, on + ".tmp")
        os.rename(off, on)
        os.rename(on + ".tmp", off)
        after = self.plain_and_cached(args, "k.hsaco", env=env)
        self.assertNotEqual(before, after, "the new directory must change the device code, or the trap proves nothing")
        self.assert_counts(hits=0, misses=2)

    def test_header_appearing_in_an_include_dir_hipcc_adds_misses(self):
        # hipcc adds -isystem $HSA_PATH/include BEFORE the user's -isystem: a header appearing there
        # shadows the user's, so the absent-path watch must cover the dirs of hipcc's clang jobs (review #5).
        os.makedirs(self.path("hsa/include"))
        self.write("sys2/myhdr.h", "#define KVAL 1\n")
        self.write("m.hip", "#include <hip/hip_runtime.h>\n#include <myhdr.h>\n"
                   "__global__ void k(int* x) { x[threadIdx.x] = KVAL; }\n")
        time.sleep(0.05)
        env = {"HSA_PATH": self.path("hsa")}
        args = ["--genco", TARGET, "-isystem", "sys2", "m.hip"]
        before = self.plain_and_cached(args, "k.hsaco", env=env)
        self.write("hsa/include/myhdr.h", "#define KVAL 2\n")
        after = self.plain_and_cached(args, "k.hsaco", env=env)
        self.assertNotEqual(before, after, "the shadowing header must change the device code, or the trap proves nothing")
        self.assert_counts(hits=0, misses=2)

    def test_md_depfile_restored_exactly(self):
        args = ["--genco", TARGET, "-MD", "k.hip"]
        self.hipcc(args + ["-MF", "plain.d", "-o", "k.hsaco"])
        plain = self.read("plain.d")
        self.assertIn("inc/only90a.h", plain)
        self.kache(["hipcc"] + args + ["-MF", "k.d", "-o", "k.hsaco"])
        self.assertEqual(self.read("k.d"), plain)
        os.remove(self.path("k.d"))
        self.kache(["hipcc"] + args + ["-MF", "k.d", "-o", "k.hsaco"])
        self.assertEqual(self.read("k.d"), plain)
        self.assert_counts(hits=1, misses=1)

    def test_no_target_passes_through(self):
        # hipcc then asks rocm_agent_enumerator, which fails without a GPU: kache runs it unchanged.
        self.kache(["hipcc", "--genco", "k.hip", "-o", "k.hsaco"], check=False)
        self.kache(["hipcc", "--genco", "--offload-arch=native", "k.hip", "-o", "k.hsaco"], check=False)
        s = self.assert_counts(hits=0, misses=0, passthrough=2)
        self.assertEqual(s["passthrough_reasons"].get("offload-target-machine"), 2, s)

    def test_hipcc_pl_beside_a_link_to_hipcc_is_keyed(self):
        # hipcc 5.2's wrapper runs the hipcc.pl beside the path it was invoked by, links not followed: a
        # link to hipcc in a directory with its own hipcc.pl runs that one (and its hipvars.pm).
        real = os.path.realpath(HIPCC)
        bindir = self.path("hl")
        os.makedirs(bindir)
        os.symlink(real, os.path.join(bindir, "hipcc"))
        for f in ("hipcc.pl", "hipvars.pm"):
            shutil.copy(os.path.join(os.path.dirname(real), f), os.path.join(bindir, f))
        args = ["--genco", TARGET, "k.hip"]
        env = {"HIP_PATH": "/usr"}

        def plain_and_cached(out):
            r = subprocess.run([os.path.join(bindir, "hipcc")] + args + ["-o", "plain-" + out], cwd=self.ws,
                               env=dict(self.env, **env), capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.kache([os.path.join(bindir, "hipcc")] + args + ["-o", out], env=env)
            self.assertEqual(self.read(out, "rb"), self.read("plain-" + out, "rb"), f"kache's {out} differs from plain's")
            return self.read(out, "rb")

        before = plain_and_cached("k.hsaco")
        script = os.path.join(bindir, "hipcc.pl")
        with open(script) as f:
            text = f.read()
        self.assertIn('$CMD .= " $toolArgs";', text)
        with open(script, "w") as f:
            f.write(text.replace('$CMD .= " $toolArgs";', '$CMD .= " $toolArgs -O0";'))
        time.sleep(0.05)
        after = plain_and_cached("k.hsaco")
        self.assertNotEqual(before, after, "the edited hipcc.pl must change the code, or the trap proves nothing")
        self.assert_counts(hits=0, misses=2, passthrough=0)

    def test_masquerade_link_named_hipcc_caches(self):
        # PATH=/usr/lib/kache:$PATH: a build that runs plain `hipcc` reaches kache, which runs the real
        # hipcc further along PATH (never itself).
        links = os.path.join(self.ws, "links")
        os.makedirs(links)
        os.symlink(os.path.abspath(kachetest.KACHE), os.path.join(links, "hipcc"))
        env = dict(self.env, PATH=links + os.pathsep + self.env["PATH"])
        args = ["hipcc", "--genco", TARGET, "k.hip", "-o", "k.hsaco"]
        for _ in range(2):
            r = subprocess.run(args, cwd=self.ws, env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.hipcc(["--genco", TARGET, "k.hip", "-o", "plain.hsaco"])
        self.assertEqual(self.read("k.hsaco", "rb"), self.read("plain.hsaco", "rb"))
        self.assert_counts(hits=1, misses=1, passthrough=0)


if __name__ == "__main__":
    if HIPCC is None:
        print("hipcc is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
