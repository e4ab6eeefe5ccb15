"""CMake + Ninja on examples/mixed: C (gcc), C++ (g++) and CUDA (nvcc) in one library, and a header
generated into the build directory at configure time that all three include, built with
CMAKE_C_COMPILER_LAUNCHER, CMAKE_CXX_COMPILER_LAUNCHER and CMAKE_CUDA_COMPILER_LAUNCHER set to kache.

The build directory is then deleted and recreated at the same path (the generated header is written
again, with a new modification time) and built again: 100 % hits, for every language: misses == 0
and hits == the number of compile steps in compile_commands.json, which holds a C, a C++ and a CUDA
step at least. Every object equals the cold build's."""
import json
import os
import shutil
import tempfile
import unittest

import buildsys
import kachetest
from kachetest import KacheTestCase


def compile_steps(build):
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    steps = {}
    for e in entries:
        out = e.get("output")
        if out is None:
            args = e["command"].split()
            out = args[args.index("-o") + 1]
        steps[os.path.relpath(os.path.join(e["directory"], out), build)] = os.path.splitext(e["file"])[1]
    return steps


class MixedCMake(KacheTestCase):
    def setUp(self):
        super().setUp()
        if shutil.which("cmake") is None or shutil.which("ninja") is None:
            self.skipTest("cmake or ninja is not on PATH")

    def configure_and_build(self, checkout, build, env):
        launchers = [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={buildsys.LAUNCHER}" for lang in ("C", "CXX", "CUDA")]
        buildsys.run(["cmake", "-S", checkout, "-B", build, "-G", "Ninja", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                      "-DCMAKE_C_COMPILER=gcc", "-DCMAKE_CXX_COMPILER=g++"] + launchers, cwd=checkout, env=env)
        # Only the project's compiles: CMake's own compiler checks ran through kache too.
        buildsys.zero_stats(env)
        buildsys.run(["ninja", "-C", build, "-j", buildsys.JOBS], cwd=build, env=env)
        return buildsys.stats(env)

    def test_warm_rebuild_in_the_same_build_dir_is_all_hits(self):
        root = tempfile.mkdtemp(prefix="kache-mixed-", dir=self.ws)
        checkout = buildsys.copy_example("mixed", os.path.join(root, "mixed"))
        build = os.path.join(checkout, "build")
        env = buildsys.clean_env(self.cache, root)
        cold = self.configure_and_build(checkout, build, env)
        steps = compile_steps(build)
        self.assertEqual({".c", ".cpp", ".cu"}, set(steps.values()), steps)
        self.assertEqual((cold["misses"], cold["hits"], cold["passthrough"]), (len(steps), 0, 0), cold)
        cold_objects = {}
        for out in steps:
            with open(os.path.join(build, out), "rb") as f:
                cold_objects[out] = f.read()

        shutil.rmtree(build)
        os.makedirs(build)
        warm = self.configure_and_build(checkout, build, env)
        self.assertEqual((warm["misses"], warm["hits"], warm["passthrough"]), (0, len(steps), 0), warm)
        for out, data in cold_objects.items():
            with open(os.path.join(build, out), "rb") as f:
                self.assertEqual(data, f.read(), out)
        buildsys.run([os.path.join(build, "mixed_app")], cwd=build, env=env)


if __name__ == "__main__":
    kachetest.main()
