"""Spec "What passes through": every invocation kache does not model runs the real nvcc unchanged.

Each case runs the same command through kache (in k<n>/) and through plain nvcc (in p<n>/, same
files, same relative paths) and checks that the results are the real compiler's (exit code, stdout,
stderr without kache's own log lines, the files written), that the stats count exactly one
passthrough under the stable reason name, and that KACHE_LOG=kache=debug names the reason, the
argument that blocked caching and the reason's sentence from `kache --reasons`."""
import os
import shutil
import subprocess
import tempfile

import kachetest
from kachetest import KERNEL, NVCC, KacheTestCase

MAIN = r"""
#include <cstdio>
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
int main() { std::printf("linked\n"); return 0; }
"""


class Passthrough(KacheTestCase):
    prebuilt = None  # a -dc object with main(), shared by the link-mode cases

    @classmethod
    def setUpClass(cls):
        if NVCC is None:
            return
        cls.prebuilt = tempfile.mkdtemp(prefix="kache-it-pre-")
        with open(os.path.join(cls.prebuilt, "main.cu"), "w") as f:
            f.write(MAIN)
        subprocess.run([NVCC, "-dc", "main.cu", "-o", "main.o"], cwd=cls.prebuilt, check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        if cls.prebuilt:
            shutil.rmtree(cls.prebuilt, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.case = 0

    # --- helper --------------------------------------------------------------------------------
    def reason_sentences(self):
        """{(category, name): sentence} from `kache --reasons` (one "category name sentence" line each)."""
        rows = {}
        for line in self.kache(["--reasons"]).stdout.splitlines():
            category, name, sentence = line.split(None, 2)
            rows[(category, name)] = sentence
        return rows

    def check(self, args, reason, flag=None, files=None, env=None, outputs=(), same_listing=False, copy_main=False,
              compare=True):
        """Runs `nvcc args` through kache and plainly; returns (kache dir, plain dir)."""
        self.case += 1
        kd, pd = self.path(f"k{self.case}"), self.path(f"p{self.case}")
        for d in (kd, pd):
            os.makedirs(d)
            for name, text in (files if files is not None else {"k.cu": KERNEL}).items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            if copy_main:
                shutil.copy(os.path.join(self.prebuilt, "main.o"), os.path.join(d, "main.o"))
        self.zero()
        kenv = dict(env or {})
        kenv["KACHE_LOG"] = "kache=debug"
        r = self.kache(["nvcc"] + list(args), cwd=kd, env=kenv, check=False)
        p = self.nvcc(list(args), cwd=pd, env=env, check=False)
        what = f"nvcc {' '.join(args)} env={env}"
        # (a) the real compiler's result
        self.assertEqual(r.returncode, p.returncode, f"{what}\nkache: {r.stderr}\nplain: {p.stderr}")
        self.assertEqual(r.stdout, p.stdout, what)
        own = "".join(l for l in r.stderr.splitlines(True) if not l.startswith("[kache "))
        self.assertEqual(own, p.stderr, what)
        for out in outputs:
            ko, po = os.path.join(kd, out), os.path.join(pd, out)
            self.assertTrue(os.path.exists(po), f"{what}: plain nvcc wrote no {out}")
            self.assertTrue(os.path.exists(ko), f"{what}: no {out} through kache")
            if not compare:
                continue
            if out.endswith(".o"):
                self.assert_same_object(ko, po)
            elif out.endswith((".ptx", ".d", ".ii", ".i")):
                with open(ko, "rb") as a, open(po, "rb") as b:
                    self.assertEqual(a.read(), b.read(), f"{what}: {out} differs")
        if same_listing:
            self.assertEqual(sorted(os.listdir(kd)), sorted(os.listdir(pd)), what)
        # (c) the log names the reason and the blocking argument
        lines = [l for l in r.stderr.splitlines() if f"passthrough ({reason})" in l]
        self.assertEqual(len(lines), 1, f"{what}: want 'passthrough ({reason})' in\n{r.stderr}")
        if flag is not None:
            self.assertIn(flag, lines[0], what)
        # (d) the reason is a row of kache's reason table, and the log line explains it with the row's sentence
        sentence = self.reason_sentences().get(("passthrough", reason))
        self.assertIsNotNone(sentence, f"{what}: 'kache --reasons' lists no passthrough reason {reason}")
        self.assertIn(sentence, lines[0], what)
        # (b) exactly one passthrough, under that reason
        s = self.stats()
        self.assertEqual(s["passthrough_reasons"], {reason: 1}, what)
        self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (0, 0, 1), what)
        return kd, pd

    # --- modes -----------------------------------------------------------------------------------
    def test_link(self):
        self.check(["main.o", "-o", "app"], "link", files={}, copy_main=True, outputs=["app"])
        kd, _ = self.check(["main.cu", "-o", "app"], "link", files={"main.cu": MAIN}, outputs=["app"])
        self.assertEqual(subprocess.run([os.path.join(kd, "app")], capture_output=True, text=True).stdout, "linked\n")

    def test_device_link(self):
        self.check(["-dlink", "main.o", "-o", "dlink.o"], "device-link", flag="-dlink", files={}, copy_main=True,
                   outputs=["dlink.o"])

    def test_lib(self):
        self.check(["-lib", "main.o", "-o", "libm.a"], "lib", flag="-lib", files={}, copy_main=True,
                   outputs=["libm.a"])
        self.check(["--lib", "main.o", "-o", "libm.a"], "lib", flag="--lib", files={}, copy_main=True,
                   outputs=["libm.a"])

    def test_multiple_sources(self):
        files = {"a.cu": KERNEL, "b.cu": "__global__ void other(int* p) { *p = 3; }\n"}
        self.check(["-c", "a.cu", "b.cu"], "multiple-sources", flag="b.cu", files=files, outputs=["a.o", "b.o"])

    def test_output_kinds(self):
        # -ptx / -cubin / -fatbin are cached (test_device_outputs.py); with the switch off, spec 000's passthrough.
        off = {"KACHE_NVCC_CACHE_DEVICE_OUTPUTS": "0"}
        self.check(["-ptx", "k.cu", "-o", "k.ptx"], "output-kind", flag="-ptx", outputs=["k.ptx"], env=off)
        self.check(["-cubin", "-arch=sm_80", "k.cu", "-o", "k.cubin"], "output-kind", flag="-cubin",
                   outputs=["k.cubin"], env=off)
        self.check(["-fatbin", "k.cu", "-o", "k.fatbin"], "output-kind", flag="-fatbin", outputs=["k.fatbin"], env=off)
        # NVVM IR outputs name the working directory and the source's spelling.
        self.check(["--optix-ir", "k.cu", "-o", "k.optixir"], "device-ir", flag="--optix-ir",
                   outputs=["k.optixir"])
        self.check(["-fatbin", "-arch=lto_75", "k.cu", "-o", "k.fatbin"], "device-ir", flag="lto_75",
                   outputs=["k.fatbin"], compare=False)
        # Also when -c is on the line: the other artifact is still what comes out.
        self.check(["-c", "-ptx", "k.cu", "-o", "k.ptx"], "output-kind", flag="-ptx", outputs=["k.ptx"])

    def test_preprocess(self):
        self.check(["-E", "k.cu"], "preprocess", flag="-E")
        self.check(["-E", "k.cu", "-o", "k.ii"], "preprocess", flag="-E", outputs=["k.ii"])

    def test_device_debug(self):
        # -G embeds the absolute source path in the device image: the two objects differ by directory.
        self.check(["-c", "-G", "k.cu", "-o", "k.o"], "device-debug", flag="-G", outputs=["k.o"], compare=False)
        self.check(["-c", "--device-debug", "k.cu", "-o", "k.o"], "device-debug", flag="--device-debug",
                   outputs=["k.o"], compare=False)

    # --- machine-resolved values ---------------------------------------------------------------
    def test_machine_native(self):
        self.check(["-c", "k.cu", "-o", "k.o", "-arch=native"], "machine-native", flag="-arch=native",
                   outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-march=native"], "machine-native",
                   flag="-march=native", outputs=["k.o"])

    def test_machine_native_refused_even_when_allowlisted(self):
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "-arch=native,-march=native,-Xcompiler=-march=native"}
        self.check(["-c", "k.cu", "-o", "k.o", "-arch=native"], "machine-native", flag="-arch=native", env=env,
                   outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-march=native"], "machine-native",
                   flag="-march=native", env=env, outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler=-march=native"], "machine-native",
                   flag="-march=native", env=env, outputs=["k.o"])

    # --- dependency files ----------------------------------------------------------------------
    def test_dependency_only(self):
        files = {"k.cu": '#include "h.h"\n' + KERNEL, "h.h": "#define H 1\n"}
        for spelling in ("-M", "-MM", "--generate-dependencies"):
            kd, _ = self.check([spelling, "k.cu"], "dependency-only", flag=spelling, files=files)
        # and with an output file for the list
        self.check(["-M", "k.cu", "-o", "k.d"], "dependency-only", flag="-M", files=files, outputs=["k.d"])

    def test_depfile_modifiers(self):
        files = {"k.cu": '#include "h.h"\n' + KERNEL, "h.h": "#define H 1\n"}
        self.check(["-c", "k.cu", "-o", "k.o", "-MD", "-MF", "k.d", "-MP"], "depfile-modifier", flag="-MP",
                   files=files, outputs=["k.o", "k.d"])
        # nvcc itself rejects -MG; kache passes the command through and nvcc says so.
        self.check(["-c", "k.cu", "-o", "k.o", "-MD", "-MF", "k.d", "-MG"], "depfile-modifier", flag="-MG",
                   files=files)

    def test_depfile_without_mf(self):
        for dep in ("-MD", "-MMD"):
            self.check(["-c", "k.cu", "-o", "k.o", dep], "depfile-without-mf", flag=dep, outputs=["k.o", "k.d"],
                       same_listing=True)

    def test_no_output(self):
        self.check(["-c", "k.cu"], "no-output", outputs=["k.o"], same_listing=True)

    # --- extra outputs and hidden arguments ----------------------------------------------------
    def test_keep_temps(self):
        for keep in ("-keep", "--save-temps"):
            self.check(["-c", "k.cu", "-o", "k.o", keep], "keep-temps", flag=keep, outputs=["k.o"],
                       same_listing=True)

    def test_profiling(self):
        kd, _ = self.check(["-c", "k.cu", "-o", "k.o", "--time", "t.csv"], "profiling", flag="--time",
                           outputs=["k.o", "t.csv"])
        with open(os.path.join(kd, "t.csv")) as f:
            self.assertIn("cicc", f.read())

    def test_response_file(self):
        files = {"k.cu": KERNEL, "opts": "-c k.cu -o k.o\n"}
        # nvcc 13 itself rejects "@file" ("Don't know what to do with '@opts'"): the same error comes out.
        self.check(["@opts"], "response-file", flag="@opts", files=files)
        self.check(["-c", "k.cu", "-o", "k.o", "@opts"], "response-file", flag="@opts", files=files)
        # nvcc's own spelling of a response file
        self.check(["--options-file", "opts"], "response-file", flag="--options-file", files=files, outputs=["k.o"])
        self.check(["-optf", "opts"], "response-file", flag="-optf", files=files, outputs=["k.o"])

    def test_unknown_flag(self):
        self.check(["-c", "k.cu", "-o", "k.o", "--maxrregcount=64"], "unknown-flag", flag="--maxrregcount=64",
                   outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o", "--extra-device-vectorization"], "unknown-flag",
                   flag="--extra-device-vectorization", outputs=["k.o"])
        # A flag nvcc does not know either: nvcc's own error comes out unchanged.
        self.check(["-c", "k.cu", "-o", "k.o", "--no-such-nvcc-flag"], "unknown-flag", flag="--no-such-nvcc-flag")

    def test_hidden_input(self):
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-I/x"], "hidden-input", flag="-I/x", outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-DX"], "hidden-input", flag="-DX", outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-Wall,-DX=2"], "hidden-input", flag="-DX=2",
                   outputs=["k.o"])

    def test_hidden_input_refused_even_when_allowlisted(self):
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "-Xcompiler,-DX,-I/x"}
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-DX"], "hidden-input", flag="-DX", env=env,
                   outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o", "-Xcompiler", "-I/x"], "hidden-input", flag="-I/x", env=env,
                   outputs=["k.o"])

    # --- the driver environment ----------------------------------------------------------------
    def test_env_flag_include_dir(self):
        self.check(["-c", "k.cu", "-o", "k.o"], "env-flag", flag="-I/x", env={"NVCC_APPEND_FLAGS": "-I/x"},
                   outputs=["k.o"])
        self.check(["-c", "k.cu", "-o", "k.o"], "env-flag", flag="-I/x", env={"NVCC_PREPEND_FLAGS": "-I/x"},
                   outputs=["k.o"])

    def test_env_device_debug_keeps_its_reason(self):
        # The planner reports -G from NVCC_PREPEND_FLAGS as device debug, like -G on the command line.
        self.check(["-c", "k.cu", "-o", "k.o"], "device-debug", flag="-G", env={"NVCC_PREPEND_FLAGS": "-G"},
                   outputs=["k.o"], compare=False)

    def test_env_machine_native_keeps_its_reason(self):
        self.check(["-c", "k.cu", "-o", "k.o"], "machine-native", flag="-march=native",
                   env={"NVCC_APPEND_FLAGS": "-Xcompiler -march=native"}, outputs=["k.o"])

    def test_env_codegen_tuning_is_cached(self):
        env = {"NVCC_APPEND_FLAGS": "-O2 -gencode arch=compute_80,code=sm_80"}
        self.write("k.cu", KERNEL)
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env=env)
        self.assert_counts(hits=0, misses=1, passthrough=0)
        os.unlink(self.path("k.o"))
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env=env)
        self.assert_counts(hits=1, misses=1, passthrough=0)
        self.nvcc(["-c", "k.cu", "-o", "plain.o"], env=env)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        # and it keys apart from the same build without the tuning
        self.nvcc(["-c", "k.cu", "-o", "default.o"])
        self.assert_different_object(self.path("k.o"), self.path("default.o"))


if __name__ == "__main__":
    kachetest.main()
