"""Soundness traps of nvcc's stage cache (issue 24, KACHE_NVCC_STAGES=1), with the real nvcc.

Each trap builds a two-architecture object (sm_80 and sm_90) twice through kache with stages on,
changing between the builds one input that a stage key must see, and checks:
  (a) the second object is plain nvcc's for the new state (by section), and byte for byte the object
      kache gives with the stage cache off (KACHE_NVCC_STAGES=0, a cache of its own);
  (b) which stages ran and which were reused (stats()["stages"], and the debug log's "ran/reused ptx
      compute_90" lines where one architecture alone must rerun).
Every trap also checks that its change changes the device code (or the trap proves nothing).

What each trap guards in stage_key (src/compiler/nvcc/stages.cpp), shown by removing it:
  header edit (same size and mtime), device-only edit under __CUDA_ARCH__ == 900: the input content
  ("input:" fields); -Xptxas, NVVM_FLAGS, OCG_FLAGS: the arguments ("arg"); PTXAS_FLAGS: the arguments
  and the dry run's variables together; NVVM_IR_VER_CHK, CAN_FINALIZE_DEBUG (read by cicc and ptxas,
  shown on no command): the environment key fields; ptxas or cicc replaced in a toolkit of links: the
  toolchain id; __CUDA_ARCH_LIST__ used by device code, then a one-architecture build: the input content.
A one-architecture build after the two-architecture one reuses sm_80's PTX and cubin (the issue's case c).
"""
import os
import re
import shutil
import subprocess
import time

import kachetest
from kachetest import KacheTestCase

ARCHS = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
KERNEL = r"""#include "inc/h.cuh"
#include <cstdio>
__global__ void k(float* x, float a, float b) {
#if __CUDA_ARCH__ == 900
  x[threadIdx.x] = x[threadIdx.x] * a + b + 2.0f * H;
#else
  x[threadIdx.x] = x[threadIdx.x] * a + b + H;
#endif
}
int host_entry() { std::printf("host\n"); return 1; }
"""
HEADER = "#pragma once\n#define H 1.0f\n"
COMPILE = ["-c", "k.cu"] + ARCHS


class StageTraps(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.env["KACHE_NVCC_STAGES"] = "1"
        self.write("inc/h.cuh", HEADER)
        self.write("k.cu", KERNEL)
        self.whole_cache = self.path(".cache-whole")  # kache with the stage cache off
        time.sleep(0.05)  # files older than the clock tick a compile starts in (KacheTestCase.write)
        self.builds = 0

    # --- helpers -----------------------------------------------------------------------------------
    def fatbin(self, obj):
        return self.sections(obj)[".nv_fatbin"]

    def build(self, args, nvcc="nvcc", env=None):
        """One state: plain nvcc, kache with stages, kache whole (stages off, its own cache); (a) holds.
        Returns (kache's object, its debug log)."""
        self.builds += 1
        n = self.builds
        env = dict(env or {})
        plain = f"plain{n}.o"
        r = subprocess.run([nvcc if nvcc != "nvcc" else kachetest.NVCC] + args + ["-o", plain], cwd=self.ws,
                           env={**self.env, **env}, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        staged = f"staged{n}.o"
        r, log = self.log_of([nvcc] + args + ["-o", staged], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        whole = f"whole{n}.o"
        self.kache([nvcc] + args + ["-o", whole], env={**env, "KACHE_NVCC_STAGES": "0", "KACHE_DIR": self.whole_cache})
        self.assert_same_object(self.path(plain), self.path(staged))
        self.assertEqual(self.read(staged, "rb"), self.read(whole, "rb"),
                         "the stage path's object differs from the whole miss's")
        return self.path(staged), log

    def stage_counts(self):
        """{"ptx": (hits, misses), "cubin": (hits, misses)} since the last zero()."""
        s = self.stats()
        st = s.get("stages") or {}
        return {kind: (st.get(kind, {}).get("hits", 0), st.get(kind, {}).get("misses", 0)) for kind in ("ptx", "cubin")}

    def first_then_second(self, first, second, nvcc="nvcc", env1=None, env2=None, between=None):
        """Builds state 1 (all stages run), applies `between`, zeroes the counters, builds state 2 (a
        whole-object miss); returns (object 1, object 2, stage counts of build 2, log of build 2)."""
        obj1, _ = self.build(first, nvcc, env1)
        s = self.stage_counts()
        self.assertEqual(s, {"ptx": (0, 2), "cubin": (0, 2)}, "the first build runs every stage")
        if between:
            between()
            time.sleep(0.05)
        self.zero()
        obj2, log = self.build(second, nvcc, env2)
        st = self.stats()
        self.assertEqual((st["hits"], st["misses"]), (0, 1), "the second build must be a whole-object miss")
        self.assertEqual(st.get("stages_whole") or {}, {}, "the second build must take the stage path")
        return obj1, obj2, self.stage_counts(), log

    def assert_device_code_changed(self, obj1, obj2):
        self.assertNotEqual(self.fatbin(obj1), self.fatbin(obj2),
                            "the change must change the device code, or the trap proves nothing")

    @staticmethod
    def ran(log):
        """The stages the log says ran and were reused: ({"ptx compute_90", ...}, {...})."""
        return (set(re.findall(r"stage: ran (\w+ \w+)", log)), set(re.findall(r"stage: reused (\w+ \w+)", log)))

    # --- traps -------------------------------------------------------------------------------------
    def test_header_edit_keeping_size_and_mtime_reruns_every_stage(self):
        def edit():
            st = os.stat(self.path("inc/h.cuh"))
            self.write("inc/h.cuh", HEADER.replace("1.0f", "3.0f"), mtime_ns=st.st_mtime_ns)
            after = os.stat(self.path("inc/h.cuh"))
            self.assertEqual((after.st_size, after.st_mtime_ns), (st.st_size, st.st_mtime_ns))
        obj1, obj2, counts, _ = self.first_then_second(COMPILE, COMPILE, between=edit)
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts, {"ptx": (0, 2), "cubin": (0, 2)})

    def test_device_edit_only_sm_90_sees_reruns_sm_90_alone(self):
        def edit():
            self.write("k.cu", KERNEL.replace("2.0f * H", "5.0f * H"))
        obj1, obj2, counts, log = self.first_then_second(COMPILE, COMPILE, between=edit)
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts, {"ptx": (1, 1), "cubin": (1, 1)})
        ran, reused = self.ran(log)
        self.assertEqual(ran, {"ptx compute_90", "cubin sm_90"}, log)
        self.assertEqual(reused, {"ptx compute_80", "cubin sm_80"}, log)

    def test_xptxas_optimization_level_reruns_ptxas_only(self):
        obj1, obj2, counts, _ = self.first_then_second(COMPILE + ["-Xptxas", "-O3"], COMPILE + ["-Xptxas", "-O0"])
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts, {"ptx": (2, 0), "cubin": (0, 2)})

    def test_ptxas_flags_variable_reruns_ptxas(self):
        obj1, obj2, counts, _ = self.first_then_second(COMPILE, COMPILE, env2={"PTXAS_FLAGS": "-O0"})
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts["cubin"], (0, 2))
        # nvcc's variables key every stage (cicc's too, though only ptxas's command shows this one).
        self.assertEqual(sum(counts["ptx"]), 2)

    def test_ocg_flags_variable_reruns_ptxas(self):
        obj1, obj2, counts, _ = self.first_then_second(COMPILE, COMPILE, env2={"OCG_FLAGS": "-O0"})
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts["cubin"], (0, 2))
        # nvcc's variables key every stage (cicc's too, though only ptxas's command shows this one).
        self.assertEqual(sum(counts["ptx"]), 2)

    def test_nvvm_flags_variable_reruns_cicc(self):
        obj1, obj2, counts, _ = self.first_then_second(COMPILE, COMPILE, env2={"NVVM_FLAGS": "-generate-line-info"})
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts, {"ptx": (0, 2), "cubin": (0, 2)})

    def test_variables_the_tools_read_unseen_rerun_the_stages(self):
        # Read by cicc and ptxas (env_table.cpp, measured) and shown on no command of the dry run: only
        # the stage key's environment fields see them. Their effect on this kernel is nil (the objects
        # stay plain nvcc's), but a stage may not be reused across them. Each build has the baseline's
        # stages to reuse, had its variable no part in their keys.
        self.build(COMPILE)
        for name, value in (("NVVM_IR_VER_CHK", "0"), ("CAN_FINALIZE_DEBUG", "1")):
            with self.subTest(variable=name):
                self.zero()
                self.build(COMPILE, env={name: value})
                st = self.stats()
                self.assertEqual((st["hits"], st["misses"]), (0, 1))
                self.assertEqual(self.stage_counts(), {"ptx": (0, 2), "cubin": (0, 2)}, name)

    def test_one_architecture_after_two_reuses_its_stages(self):
        # CI's two architectures, then a developer's one: sm_80's PTX and cubin are reused.
        obj1, obj2, counts, _ = self.first_then_second(COMPILE, ["-c", "k.cu"] + ARCHS[:2])
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts, {"ptx": (1, 0), "cubin": (1, 0)})

    def test_architecture_list_in_device_code_reruns_cicc(self):
        # nvcc defines __CUDA_ARCH_LIST__ (every architecture of the command) in each preprocessing:
        # device code that uses it differs between lists, and sm_80's PTX may not be reused.
        listed = "static constexpr int kArchs[] = {__CUDA_ARCH_LIST__};\n__global__"
        self.write("k.cu", KERNEL.replace("__global__", listed).replace(" + H;", " + H * sizeof(kArchs);"))
        time.sleep(0.05)
        obj1, obj2, counts, _ = self.first_then_second(COMPILE, ["-c", "k.cu"] + ARCHS[:2])
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts, {"ptx": (0, 1), "cubin": (0, 1)})

    # --- a toolkit of links, one of its tools replaced ---------------------------------------------
    def toolkit_of_links(self):
        """A CUDA toolkit at ws/cuda made of links to the installed one, except bin/ptxas and
        nvvm/bin/cicc: wrapper scripts running the real ones. nvcc runs from its bin (nvcc takes its
        toolkit from the directory it was run from, _HERE_)."""
        cuda = os.path.dirname(kachetest.nvcc_home())
        root = self.path("cuda")
        os.makedirs(os.path.join(root, "bin"))
        os.makedirs(os.path.join(root, "nvvm", "bin"))
        for e in os.listdir(cuda):
            if e not in ("bin", "nvvm"):
                os.symlink(os.path.join(cuda, e), os.path.join(root, e))
        for e in os.listdir(os.path.join(cuda, "bin")):
            if e != "ptxas":
                os.symlink(os.path.join(cuda, "bin", e), os.path.join(root, "bin", e))
        for e in os.listdir(os.path.join(cuda, "nvvm")):
            if e != "bin":
                os.symlink(os.path.join(cuda, "nvvm", e), os.path.join(root, "nvvm", e))
        self.real_ptxas = os.path.join(cuda, "bin", "ptxas")
        self.real_cicc = os.path.join(cuda, "nvvm", "bin", "cicc")
        self.wrap("cuda/bin/ptxas", f'exec {self.real_ptxas} "$@"')
        self.wrap("cuda/nvvm/bin/cicc", f'exec {self.real_cicc} "$@"')
        return os.path.join(root, "bin", "nvcc")

    def wrap(self, rel, body):
        self.write(rel, "#!/bin/sh\n" + body + "\n")
        os.chmod(self.path(rel), 0o755)

    def test_ptxas_replaced_in_the_toolkit_reruns_ptxas(self):
        nvcc = self.toolkit_of_links()
        obj1, obj2, counts, _ = self.first_then_second(
            COMPILE, COMPILE, nvcc=nvcc, between=lambda: self.wrap("cuda/bin/ptxas", f'exec {self.real_ptxas} "$@" -O0'))
        self.assert_device_code_changed(obj1, obj2)
        # Every stage is keyed by the whole toolchain id: a new ptxas reruns cicc as well.
        self.assertEqual(counts["cubin"], (0, 2))
        self.assertEqual(sum(counts["ptx"]), 2)

    def test_cicc_replaced_in_the_toolkit_reruns_cicc(self):
        nvcc = self.toolkit_of_links()
        # A cicc that contracts no multiply-add (nvcc passes -fmad=1; cicc refuses a second -fmad): a
        # compiled program, since a wrapper script that rewrites its arguments is one kache passes through.
        fmad0 = ('#include <string.h>\n#include <unistd.h>\nint main(int argc, char** argv) {\n'
                 '  for (int i = 1; i < argc; ++i) if (strcmp(argv[i], "-fmad=1") == 0) argv[i] = (char*)"-fmad=0";\n'
                 f'  execv("{self.real_cicc}", argv);\n  return 127;\n}}\n')

        def replace_cicc():
            cicc = self.path("cuda", "nvvm", "bin", "cicc")
            os.unlink(cicc)
            subprocess.run(["gcc", "-x", "c", "-", "-o", cicc], input=fmad0, text=True, check=True)

        obj1, obj2, counts, _ = self.first_then_second(COMPILE, COMPILE, nvcc=nvcc, between=replace_cicc)
        self.assert_device_code_changed(obj1, obj2)
        self.assertEqual(counts, {"ptx": (0, 2), "cubin": (0, 2)})


if __name__ == "__main__":
    if shutil.which("nvcc") is None:
        print("nvcc is not on PATH: skipped")
        raise SystemExit(77)
    kachetest.main()
