"""nvcc names anonymous namespaces after the source's real path (_GLOBAL__N__<hash>_..., measured with
nvcc 13): two files of one content at two paths (two plugins built from one template) are two objects,
and serving the first's for the second makes their link fail with a multiple definition. Such an object
is stored per source path (issue 39): the second file misses and gets its own object, a fresh build dir
of the same file still hits, and explain says why without offering a prefix map."""
import os
import re
import shutil
import subprocess

import kachetest
from kachetest import KacheTestCase

# Everything internal: the only symbols of external linkage are the ones nvcc names after the path.
SOURCE = """namespace {
__device__ int helper(int x) { return x + 1; }
__global__ void kernel(int *p) { *p = helper(*p); }
}
"""


def path_hashes(obj):
    """The <hash> of every _GLOBAL__N__<hash>_ name in the object's symbol table."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    return sorted(set(re.findall(r"_GLOBAL__N__([0-9a-f]{8})_", out)))


class SourcePathIds(KacheTestCase):
    def setUp(self):
        super().setUp()
        if shutil.which("nvcc") is None:
            self.skipTest("nvcc is not on PATH")
        for plugin in ("p1", "p2"):
            self.write(f"{plugin}/k.cu", SOURCE)

    def compile(self, plugin, out):
        self.kache(["nvcc", "-c", "k.cu", "-o", out, "-Xcompiler", "-fPIC"], cwd=self.path(plugin))

    def test_same_content_at_two_paths_links_together(self):
        self.compile("p1", "k.o")
        self.compile("p2", "k.o")
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (0, 2), s)  # p2 was served p1's object before
        subprocess.run(["nvcc", "-c", "k.cu", "-o", "plain.o", "-Xcompiler", "-fPIC"], cwd=self.path("p2"),
                       env=self.env, check=True)
        # The path's hash in the anonymous namespace's name is plain nvcc's for p2, not p1's. (Whole objects
        # differ run to run here: nvcc's kernel names also carry its temporary file's name.)
        self.assertEqual(path_hashes(self.path("p2", "k.o")), path_hashes(self.path("p2", "plain.o")))
        self.assertNotEqual(path_hashes(self.path("p1", "k.o")), path_hashes(self.path("p2", "k.o")))
        # The two plugins in one library: a multiple definition with one object served for both.
        subprocess.run(["nvcc", "-shared", "-o", self.path("lib.so"), self.path("p1", "k.o"), self.path("p2", "k.o")],
                       cwd=self.ws, env=self.env, check=True, capture_output=True)
        # Another build of the same file (another output dir) still hits.
        self.compile("p1", os.path.join(self.ws, "other.o"))
        self.assertEqual(self.stats()["hits"], 1)

    def test_explain_names_the_source_path(self):
        self.compile("p1", "k.o")
        r = self.kache(["explain", "--", "nvcc", "-c", "k.cu", "-o", "k.o", "-Xcompiler", "-fPIC"],
                       cwd=self.path("p1"), check=False)
        self.assertIn("stored per source path", r.stdout)
        self.assertIn("_GLOBAL__N__", r.stdout)
        self.assertNotIn("-ffile-prefix-map", r.stdout.split("stored per source path")[1].split("\n")[0])


if __name__ == "__main__":
    kachetest.main()
