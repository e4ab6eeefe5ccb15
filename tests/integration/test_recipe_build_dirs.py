"""The portable-path recipe (-ffile-prefix-map=<checkout>=., docs/sharing.md) with build directories
inside the checkout: DW_AT_comp_dir is the working directory mapped, `./build-a` in build-a and
`./build-b` in build-b, which no root rewrites. build-b was served build-a's object (`./build-a`); the
part of the working directory below the map's OLD is keyed now (issue 39), and a build dir of the same
name in another checkout still shares."""
import os
import re
import shutil
import subprocess

import kachetest
from kachetest import KacheTestCase

GCC = shutil.which("gcc")


def comp_dirs(obj):
    out = subprocess.run(["readelf", "--debug-dump=info", obj], capture_output=True, text=True, check=True).stdout
    return re.findall(r"DW_AT_comp_dir\s*:\s*(?:\(indirect[^)]*\):\s*)?(\S+)", out)


class RecipeBuildDirs(KacheTestCase):
    def setUp(self):
        super().setUp()
        if GCC is None:
            self.skipTest("gcc is not installed")

    def build(self, checkout, build_dir):
        os.makedirs(os.path.join(checkout, build_dir), exist_ok=True)
        cwd = os.path.join(checkout, build_dir)
        args = [GCC, "-g", f"-ffile-prefix-map={checkout}=.", "-c", "../src/x.c", "-o", "x.o"]
        self.kache(args, cwd=cwd, env=dict(self.env, KACHE_PATHS_BASE_DIRS=checkout))
        subprocess.run(args[:-1] + ["plain.o"], cwd=cwd, env=self.env, check=True)
        self.assertEqual(comp_dirs(os.path.join(cwd, "x.o")), comp_dirs(os.path.join(cwd, "plain.o")))
        return comp_dirs(os.path.join(cwd, "x.o"))

    def test_build_dirs_inside_the_checkout(self):
        a = self.path("ckout-a")
        self.write("ckout-a/src/x.c", "int x(void) { return 1; }\n")
        self.assertEqual(self.build(a, "build-a"), ["./build-a"])
        self.assertEqual(self.build(a, "build-b"), ["./build-b"])
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (0, 2), s)
        # The same build dir name in another checkout: the same bytes, shared.
        b = self.path("ckout-b")
        self.write("ckout-b/src/x.c", "int x(void) { return 1; }\n")
        self.assertEqual(self.build(b, "build-a"), ["./build-a"])
        self.assertEqual(self.stats()["hits"], 1)


class MacroMapGeneratedHeader(KacheTestCase):
    """-fmacro-prefix-map=<checkout>/= with a header generated into each build directory (CMake's
    -I<build>/gen): its __FILE__ reads build-a/gen/config.h in build-a, build-bb/gen/config.h in build-bb;
    sizeof(__FILE__) leaves only a number in the object. build-bb was served build-a's number."""

    def test_generated_header_in_two_build_dirs(self):
        if GCC is None:
            self.skipTest("gcc is not installed")
        ckout = self.path("ckout")
        self.write("ckout/src/x.c", '#include "config.h"\nint where_size = (int)sizeof(WHERE);\n')
        for build in ("build-a", "build-bb"):
            self.write(f"ckout/{build}/gen/config.h", "#define WHERE __FILE__\n")
            cwd = os.path.join(ckout, build)
            args = [GCC, f"-fmacro-prefix-map={ckout}/=", f"-I{cwd}/gen", "-c", "../src/x.c", "-o", "x.o"]
            self.kache(args, cwd=cwd, env=dict(self.env, KACHE_PATHS_BASE_DIRS=ckout))
            subprocess.run(args[:-1] + ["plain.o"], cwd=cwd, env=self.env, check=True)
            self.assert_same_object(os.path.join(cwd, "x.o"), os.path.join(cwd, "plain.o"))


if __name__ == "__main__":
    kachetest.main()
