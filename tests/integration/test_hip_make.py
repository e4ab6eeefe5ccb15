"""A Make project built with HIPCC="kache hipcc" (issue 23, item 1); exits 77 (skipped) where hipcc or make
is absent.

The Makefile calls $(HIPCC) for a --genco code object and a -c object, each with an -MD dependency
file that make includes. A second build after `make clean` is all hits with plain hipcc's bytes; a
header edit rebuilds (and kache misses) exactly the target that includes it, and make then has nothing
to do, which shows the restored dependency files are the ones hipcc writes.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import buildsys
import kachetest

HIPCC = shutil.which("hipcc")
MAKE = shutil.which("make")

MAKEFILE = """\
HIPCC ?= hipcc
ARCH = --offload-arch=gfx90a --offload-arch=gfx906
all: scale.hsaco add.o
scale.hsaco: scale.hip
\t$(HIPCC) --genco $(ARCH) -Iinc -MD -MF scale.d scale.hip -o $@
add.o: add.hip
\t$(HIPCC) -c $(ARCH) -Iinc -MD -MF add.d add.hip -o $@
clean:
\trm -f scale.hsaco add.o
-include scale.d add.d
"""
SCALE = """#include <hip/hip_runtime.h>
#include "factor.h"
__global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; }
"""
ADD = """#include <hip/hip_runtime.h>
#include "offset.h"
__global__ void add(float* x) { x[threadIdx.x] += OFFSET; }
"""
OUTPUTS = ("scale.hsaco", "add.o")


class HipMake(unittest.TestCase):
    def setUp(self):
        self.ws = tempfile.mkdtemp(prefix="kache-hip-make-")
        self.addCleanup(shutil.rmtree, self.ws, True)
        self.env = buildsys.clean_env(os.path.join(self.ws, ".cache"), self.ws)
        self.env = {k: v for k, v in self.env.items() if not k.startswith("HIP")}
        for tree in ("kache", "plain"):
            self.write(tree, "Makefile", MAKEFILE)
            self.write(tree, "scale.hip", SCALE)
            self.write(tree, "add.hip", ADD)
            self.write(tree, "inc/factor.h", "#define FACTOR 2.0f\n")
            self.write(tree, "inc/offset.h", "#define OFFSET 1.0f\n")

    def write(self, tree, name, text):
        path = os.path.join(self.ws, tree, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def make(self, tree, *targets):
        args = [MAKE] + list(targets)
        if tree == "kache":
            args.append("HIPCC=%s hipcc" % buildsys.LAUNCHER)
        return buildsys.run(args, cwd=os.path.join(self.ws, tree), env=self.env).stdout

    def assert_equal_to_plain(self):
        for name in OUTPUTS + ("scale.d", "add.d"):
            with open(os.path.join(self.ws, "kache", name), "rb") as a, open(os.path.join(self.ws, "plain", name), "rb") as b:
                self.assertEqual(a.read(), b.read(), "%s differs from plain hipcc's" % name)

    def counts(self):
        s = buildsys.stats(self.env)
        return s["hits"], s["misses"], s["passthrough"]

    def test_make_clean_rebuild_hits_and_a_header_edit_rebuilds_one_target(self):
        self.make("plain")
        self.make("kache")
        self.assertEqual(self.counts(), (0, 2, 0))
        self.assert_equal_to_plain()

        self.make("kache", "clean")
        self.make("plain", "clean")
        self.make("plain")
        self.make("kache")
        self.assertEqual(self.counts(), (2, 2, 0))
        self.assert_equal_to_plain()

        for tree in ("kache", "plain"):
            self.write(tree, "inc/offset.h", "#define OFFSET 3.0f\n")
        self.make("plain")
        out = self.make("kache")
        self.assertIn("add.hip", out)
        self.assertNotIn("scale.hip", out, "make rebuilt a target whose headers did not change")
        self.assertEqual(self.counts(), (2, 3, 0))
        self.assert_equal_to_plain()
        self.assertIn("Nothing to be done", self.make("kache"))
        self.assertEqual(self.counts(), (2, 3, 0))


if __name__ == "__main__":
    if HIPCC is None or MAKE is None:
        print("hipcc or make is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
