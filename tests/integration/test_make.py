"""Make with NVCC="kache nvcc" on examples/saxpy/Makefile (which honours NVCC; -MD -MF per object,
three nvcc -c TUs, two nvcc -dc TUs, nvcc -dlink, two archives, a host-linked executable).

A second build into the emptied build directory (make clean; make) is 100 % hits, and every object, the device-link object
and the executable equal a plain-nvcc make of the same checkout; the -MF files kache restores equal
plain nvcc's (naming this build's objects), and make then finds nothing to do. The checkout copied to
another absolute path, with KACHE_PATHS_BASE_DIRS set to each checkout's root, is 100 % hits as well
(compared without __nv_module_id, which nvcc derives from the source's absolute path).

The plain build and one cold kache build (the seed cache) are made once for the class; the cold build
passes NVCC in the environment, the others on make's command line."""
import os
import shutil
import tempfile
import unittest

import buildsys
import kachetest
from kachetest import KacheTestCase

COMPILED = ["saxpy", "reduce", "scale", "device_ops", "sumsq", "main"]  # one nvcc -c / -dc each
# The -dc objects: nvcc's __nv_module_id hashes the source's real path, so they are stored per source
# path and a checkout at another path misses them (serving the first's would carry the first's id).
RDC = ["device_ops", "sumsq"]
PRODUCTS = [c + ".o" for c in COMPILED] + ["device_link.o", "saxpy"]


def make(checkout, build, env, nvcc=None):
    cmd = ["make", "-C", checkout, "-j", buildsys.JOBS, "BUILD=" + build]
    if nvcc is not None:
        cmd.append("NVCC=" + nvcc)
    return buildsys.run(cmd, cwd=checkout, env=env)


class Make(KacheTestCase):
    @classmethod
    def setUpClass(cls):
        if buildsys.NVCC is None:
            raise unittest.SkipTest("nvcc is not on PATH")
        if shutil.which("make") is None:
            raise unittest.SkipTest("make is not on PATH")
        cls.root = tempfile.mkdtemp(prefix="kache-make-")
        cls.checkout = buildsys.copy_example("saxpy", os.path.join(cls.root, "one", "saxpy"))
        make(cls.checkout, "build-plain", buildsys.clean_env(os.path.join(cls.root, "unused"), cls.root),
             nvcc=buildsys.NVCC)
        cls.seed_cache = os.path.join(cls.root, "seed-cache")
        env = buildsys.clean_env(cls.seed_cache, cls.root)
        env["KACHE_PATHS_BASE_DIRS"] = cls.checkout
        env["NVCC"] = buildsys.LAUNCHER + " nvcc"  # the spec's form: export NVCC="kache nvcc"
        buildsys.zero_stats(env)
        make(cls.checkout, "build", env)
        cls.seed_stats = buildsys.stats(env)

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("KACHE_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(cls.root, ignore_errors=True)

    def build_all_hits(self, checkout, build, label, misses=0):
        shutil.copytree(self.seed_cache, self.cache)
        self.zero()
        env = dict(self.env, KACHE_PATHS_BASE_DIRS=checkout)
        make(checkout, build, env, nvcc=buildsys.LAUNCHER + " nvcc")
        s = self.stats()
        self.assertEqual((s["misses"], s["hits"]), (misses, len(COMPILED) - misses),
                         f"{label}: want {misses} misses over {len(COMPILED)} compile steps; stats {s}")
        self.assertLessEqual(set(s["passthrough_reasons"]), {"device-link", "link"}, f"{label}: {s}")
        r = buildsys.run(["make", "-C", checkout, "-q", "BUILD=" + build, "NVCC=" + buildsys.LAUNCHER + " nvcc"],
                         cwd=checkout, env=env, check=False)
        self.assertEqual(r.returncode, 0, f"{label}: make has work left after the build")
        return env

    def assert_equivalent(self, checkout, build, label, names=buildsys.SECTIONS):
        for name in PRODUCTS:
            got = os.path.join(checkout, build, name)
            ref = os.path.join(self.checkout, "build-plain", name)
            diff = buildsys.section_diff(got, ref, names)
            self.assertEqual(diff, [], f"{label}: {build}/{name} differs from the plain-nvcc build in {diff}")
        for name in COMPILED:
            with open(os.path.join(checkout, build, name + ".d")) as f:
                got = f.read()
            with open(os.path.join(self.checkout, "build-plain", name + ".d")) as f:
                ref = f.read().replace("build-plain/", build + "/")
            self.assertEqual(got, ref, f"{label}: {build}/{name}.d is not the file plain nvcc writes")
            if checkout != self.checkout:
                self.assertNotIn(self.checkout, got, f"{label}: {name}.d names the other checkout")

    def test_cold_then_second_build_from_empty_dir_is_all_hits(self):
        s = self.seed_stats
        self.assertEqual((s["hits"], s["misses"]), (0, len(COMPILED)), f"cold build: {s}")
        self.assert_equivalent(self.checkout, "build", "cold build")
        # `make clean`, then make again. (The same BUILD: -MF and -o values are keyed as written, so
        # BUILD=other would be a different build, not an empty build directory.)
        shutil.rmtree(os.path.join(self.checkout, "build"))
        self.build_all_hits(self.checkout, "build", "second build")
        self.assert_equivalent(self.checkout, "build", "second build")

    def test_moved_checkout_hits_all_but_its_rdc_objects(self):
        moved = buildsys.copy_example("saxpy", self.path("elsewhere", "deeper", "saxpy"))
        self.build_all_hits(moved, "build", "moved checkout", misses=len(RDC))
        self.assert_equivalent(moved, "build", "moved checkout", buildsys.PATH_FREE_SECTIONS)
        # The -dc objects carry this checkout's module id, as plain nvcc's here do, not the first's.
        for name in RDC:
            here = buildsys.module_id(os.path.join(moved, "build", name + ".o"))
            first = buildsys.module_id(os.path.join(self.checkout, "build-plain", name + ".o"))
            self.assertNotEqual(here, first, f"{name}.o names the first checkout's module id")


if __name__ == "__main__":
    kachetest.main()
