"""Standalone device outputs (nvcc -fatbin, -cubin, -ptx with an explicit -o) are cached like objects.

For each kind, one kernel whose device code reads a shared header (common.cuh) and, per GPU
architecture, a header included only under __CUDA_ARCH__ (arch75.cuh below sm_90, arch90.cuh from
sm_90 on; -fatbin builds sm_75 and sm_90, -cubin/-ptx build sm_90 only):
  * a cold compile misses and writes the very bytes plain nvcc writes (these outputs are
    deterministic: no object-style section compare is needed), and the -MF depfile plain nvcc writes;
  * a second build directory hits: the same bytes, and the depfile restored with its own -MT target,
    naming the source and the headers of the architectures built (and not the others');
  * an edit of common.cuh, and of each built architecture's header, that keeps the size and the
    modification time misses, and the output equals plain nvcc's on the edited tree (a cache keyed on
    nvcc -E, which sees only the first architecture, or on file times, would serve the old one);
  * an edit of a header of an architecture not built still hits (the closure is the passes that ran);
  * the statistics name the kind (output_kinds in `kache -s --json`, a line in `kache -s`);
  * nvcc.cache_device_outputs off (KACHE_NVCC_CACHE_DEVICE_OUTPUTS=0) restores spec 000's
    passthrough (output-kind) and the output is still plain nvcc's.
Against a kache without device-output caching, every kind passes through: the miss/hit counts fail."""
import os
import time

import kachetest
from kachetest import KacheTestCase

KERNEL = r"""#include "common.cuh"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include "arch90.cuh"
#define ARCH_VALUE ARCH90_VALUE
#elif defined(__CUDA_ARCH__)
#include "arch75.cuh"
#define ARCH_VALUE ARCH75_VALUE
#else
#define ARCH_VALUE 0.0f
#endif
extern "C" __global__ void scale(float* x, float a) {
  x[threadIdx.x] = x[threadIdx.x] * a * COMMON_VALUE + ARCH_VALUE;
}
"""
HEADERS = {
    "common.cuh": "#define COMMON_VALUE 2.0f\n",
    "arch75.cuh": "#define ARCH75_VALUE 3.0f\n",
    "arch90.cuh": "#define ARCH90_VALUE 4.0f\n",
}
# Same size, another value: the edit keeps the size (and the test puts the mtime back).
EDITS = {name: text.replace(" 2.0f", " 7.0f").replace(" 3.0f", " 8.0f").replace(" 4.0f", " 9.0f")
         for name, text in HEADERS.items()}


class DeviceOutputCase(KacheTestCase):
    KIND = None
    ARCH = None
    BUILT = None  # the arch headers the architectures built include

    def setUp(self):
        super().setUp()
        if self.KIND is None:
            self.skipTest("base class")
        self.write("src/k.cu", KERNEL)
        for name, text in HEADERS.items():
            self.write("src/" + name, text)
        os.makedirs(self.path("plain"))

    def args(self, out_dir):
        out = f"{out_dir}/k.{self.KIND}"
        return [f"--{self.KIND}"] + self.ARCH + ["-O2", "src/k.cu", "-o", out, "-MD", "-MF", out + ".d",
                                                   "-MT", out]

    def plain(self):
        """Plain nvcc's output and depfile for the current tree (in plain/; the -MT target is out/'s)."""
        args = self.args("out")
        args[args.index("-o") + 1] = "plain/k." + self.KIND
        args[args.index("-MF") + 1] = "plain/k.d"
        self.nvcc(args)
        return self.read("plain/k." + self.KIND, "rb"), self.read("plain/k.d")

    def build(self, out_dir):
        """kache into a fresh out_dir; returns (output bytes, depfile text)."""
        os.makedirs(self.path(out_dir), exist_ok=True)
        for f in os.listdir(self.path(out_dir)):
            os.unlink(self.path(out_dir, f))
        # Its depfile names the target out/k.<kind>, as plain()'s does: they compare as text.
        self.kache(["nvcc"] + self.args("out"))
        return self.read(f"out/k.{self.KIND}", "rb"), self.read(f"out/k.{self.KIND}.d")

    def edit_keeping_size_and_mtime(self, name, text):
        p = self.path("src", name)
        st = os.stat(p)
        self.assertEqual(len(text), st.st_size)
        with open(p, "w") as f:
            f.write(text)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        # As after a human edit: older than a file-time tick when the compile starts, so it is stored.
        time.sleep(0.05)

    def assert_kind_counts(self, hits, misses, what):
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (hits, misses, 0), f"{what}: {s}")
        self.assertEqual(s["output_kinds"].get(self.KIND), {"hits": hits, "misses": misses}, f"{what}: {s}")
        self.zero()

    def test_hit_miss_depfile_and_arch_headers(self):
        ref, ref_dep = self.plain()
        out, dep = self.build("out")
        self.assert_kind_counts(0, 1, "cold compile")
        self.assertEqual(out, ref, "the miss's output differs from plain nvcc's")
        self.assertEqual(dep, ref_dep, "the miss's depfile differs from plain nvcc's")

        # Listed: the source, the shared header and the built architectures' headers, not the others'.
        self.assertTrue(dep.startswith(f"out/k.{self.KIND} :"), dep[:200])
        listed = {name for name in list(HEADERS) + ["k.cu"] if "src/" + name in dep}
        self.assertEqual(listed, {"k.cu", "common.cuh"} | set(self.BUILT), dep)

        # A hit: the output and the depfile restored, as plain nvcc writes them.
        out, dep = self.build("out")
        self.assert_kind_counts(1, 0, "rebuild")
        self.assertEqual(out, ref)
        self.assertEqual(dep, ref_dep)
        text = self.kache(["--show-stats"]).stdout
        self.assertNotIn(f"  {self.KIND} ", text)  # zeroed above

        # A header of an architecture not built: not in the closure, and the output does not change
        # (direct mode records the #include names it did not follow, so this may be a miss).
        for name in sorted(set(("arch75.cuh", "arch90.cuh")) - set(self.BUILT)):
            self.edit_keeping_size_and_mtime(name, EDITS[name])
            out, _ = self.build("out")
            self.assertEqual(out, ref)
            self.zero()

        # Each header the output depends on, edited in place (same size, same mtime): a miss, the new
        # output is plain nvcc's of the edited tree, and it differs from the one before.
        previous = ref
        for name in ["common.cuh"] + list(self.BUILT):
            self.edit_keeping_size_and_mtime(name, EDITS[name])
            ref, ref_dep = self.plain()
            self.assertNotEqual(ref, previous, f"the edit of {name} must change the {self.KIND}")
            out, dep = self.build("out")
            self.assert_kind_counts(0, 1, f"after an edit of {name}")
            self.assertEqual(out, ref, f"after an edit of {name}: a stale {self.KIND}")
            self.assertEqual(dep, ref_dep)
            out, _ = self.build("out")
            self.assert_kind_counts(1, 0, f"rebuild after the edit of {name}")
            self.assertEqual(out, ref)
            previous = ref

        # Back to the first tree: the first output. (A hit for -fatbin; for -cubin/-ptx the entry of the
        # first tree was replaced by the one recorded after the edit of the header not built, which
        # gives the same result: direct mode then misses, which is conservative.)
        for name, text in HEADERS.items():
            self.edit_keeping_size_and_mtime(name, text)
        first, _ = self.plain()
        out, _ = self.build("out")
        self.assertEqual(out, first)
        s = self.stats()
        kind = s["output_kinds"][self.KIND]
        self.assertEqual((s["hits"] + s["misses"], kind["hits"] + kind["misses"]), (1, 1), s)
        if not set(("arch75.cuh", "arch90.cuh")) - set(self.BUILT):
            self.assertEqual(kind, {"hits": 1, "misses": 0}, s)
        # `kache -s` names the kind.
        text = self.kache(["--show-stats"]).stdout
        self.assertRegex(text, rf"\n  {self.KIND} +{kind['hits']} hits, {kind['misses']} misses\n")

    def test_second_build_directory_shares(self):
        # Another build directory, another output name: the second directory's first compile hits (the
        # output names neither -o nor the working directory, so neither is keyed).
        src = self.path("src", "k.cu")
        args = [f"--{self.KIND}"] + self.ARCH + ["-O2", src, "-o"]
        for d in ("b1", "b2"):
            os.makedirs(self.path(d))
        self.kache(["nvcc"] + args + [f"first.{self.KIND}"], cwd=self.path("b1"))
        self.assert_kind_counts(0, 1, "cold compile")
        self.kache(["nvcc"] + args + [f"second.{self.KIND}"], cwd=self.path("b2"))
        self.assert_kind_counts(1, 0, "a second build directory")
        self.nvcc(args + [f"plain.{self.KIND}"], cwd=self.path("b2"))
        self.assertEqual(self.read(f"b2/second.{self.KIND}", "rb"), self.read(f"b2/plain.{self.KIND}", "rb"))

    def test_switch_off_passes_through(self):
        ref, _ = self.plain()
        os.makedirs(self.path("out"))
        off = {"KACHE_NVCC_CACHE_DEVICE_OUTPUTS": "0"}
        for _ in range(2):
            self.kache(["nvcc"] + self.args("out"), env=off)
            self.assertEqual(self.read(f"out/k.{self.KIND}", "rb"), ref)
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (0, 0, 2), s)
        self.assertEqual(s["passthrough_reasons"], {"output-kind": 2}, s)
        # The config key does the same.
        self.zero()
        with open(self.env["KACHE_CONFIG"], "w") as f:
            f.write("[nvcc]\ncache_device_outputs = false\n")
        self.kache(["nvcc"] + self.args("out"))
        self.assertEqual(self.stats()["passthrough_reasons"], {"output-kind": 1})


class Fatbin(DeviceOutputCase):
    KIND = "fatbin"
    ARCH = ["-gencode=arch=compute_75,code=sm_75", "-gencode=arch=compute_90,code=[compute_90,sm_90]"]
    BUILT = ("arch75.cuh", "arch90.cuh")


class Cubin(DeviceOutputCase):
    KIND = "cubin"
    ARCH = ["-arch=sm_90"]
    BUILT = ("arch90.cuh",)


class Ptx(DeviceOutputCase):
    KIND = "ptx"
    ARCH = ["-arch=sm_75"]
    BUILT = ("arch75.cuh",)


del DeviceOutputCase  # only the kinds run


class Rejected(KacheTestCase):
    """What nvcc itself rejects (-cubin or -ptx for several architectures: "not allowed when compiling
    for multiple GPU architectures") fails through kache exactly as without it: the miss fails, the
    command reruns unchanged, nvcc's exit status and message reach the user, nothing is written."""

    def test_several_architectures_for_one_cubin_or_ptx(self):
        self.write("k.cu", kachetest.KERNEL)
        arch = ["-gencode=arch=compute_75,code=sm_75", "-gencode=arch=compute_90,code=sm_90"]
        for kind in ("cubin", "ptx"):
            args = [f"-{kind}"] + arch + ["k.cu", "-o", f"k.{kind}"]
            plain = self.nvcc(args, check=False)
            self.assertNotEqual(plain.returncode, 0)
            r = self.kache(["nvcc"] + args, check=False)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
            self.assertFalse(os.path.exists(self.path(f"k.{kind}")))
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["compile_failed"]), (0, 0, 2), s)

if __name__ == "__main__":
    kachetest.main()
