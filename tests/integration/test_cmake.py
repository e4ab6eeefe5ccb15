"""CMake 3.25 + Ninja on examples/saxpy (three whole-program TUs in one static library, two -rdc TUs
in another, an executable that device-links them; CMAKE_CUDA_ARCHITECTURES "75;90"), in both set-up
forms of the spec: CUDACXX="kache nvcc" and -DCMAKE_CUDA_COMPILER_LAUNCHER=kache.

A second build from an empty build directory (another directory, and the same one emptied) is 100 %
hits: misses == 0 and hits == the number of CUDA compile steps in compile_commands.json. Every object,
the device-link object and the executable equal those of a plain-nvcc CMake build of the same checkout
(sections .text .data .rodata .nv_fatbin __nv_relfatbin __nv_module_id).

The compiler form runs without [paths] base_dirs, from an empty cache. The launcher form runs with
KACHE_PATHS_BASE_DIRS set to the checkout's root, so that the checkout copied to another absolute path
(with its own root as base dir, the same cache) is 100 % hits too; there the comparison leaves out
__nv_module_id, which nvcc derives from the source's absolute path (two plain builds at two paths
differ in it), and checks that no two -rdc objects share one. One object built in two build
directories without base_dirs checks that the launcher form shares entries between build directories
without that setting as well.

The plain build and one cold launcher-form build (the seed cache) are made once for the class."""
import os
import shutil
import tempfile
import unittest

import buildsys
import kachetest
from kachetest import KacheTestCase

CHECKOUT = "saxpy"




def cmake_build(build, src, env, extra=()):
    buildsys.run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]
                 + list(extra), cwd=src, env=env)
    return build


def ninja(build, env):
    buildsys.run(["ninja", "-C", build, "-j", buildsys.JOBS], cwd=build, env=env)


class CMake(KacheTestCase):
    @classmethod
    def setUpClass(cls):
        if buildsys.NVCC is None:
            raise unittest.SkipTest("nvcc is not on PATH")
        if shutil.which("cmake") is None or shutil.which("ninja") is None:
            raise unittest.SkipTest("cmake or ninja is not on PATH")
        cls.root = tempfile.mkdtemp(prefix="kache-cmake-")
        cls.checkout = buildsys.copy_example("saxpy", os.path.join(cls.root, "one", CHECKOUT))
        plain_env = buildsys.clean_env(os.path.join(cls.root, "unused-cache"), cls.root)
        cls.plain = cmake_build(os.path.join(cls.checkout, "build-plain"), cls.checkout, plain_env)
        ninja(cls.plain, plain_env)
        cls.objects = buildsys.compile_outputs(cls.plain)
        # The seed: a cold launcher-form build with its own cache, which the other tests copy.
        cls.seed_cache = os.path.join(cls.root, "seed-cache")
        env = buildsys.clean_env(cls.seed_cache, cls.root)
        env["KACHE_PATHS_BASE_DIRS"] = cls.checkout
        seed = cmake_build(os.path.join(cls.checkout, "build"), cls.checkout, env,
                           ["-DCMAKE_CUDA_COMPILER_LAUNCHER=" + buildsys.LAUNCHER])
        buildsys.zero_stats(env)
        ninja(seed, env)
        cls.seed_stats = buildsys.stats(env)
        # Kept for the cold build's checks; "build" itself is then an empty build directory again.
        cls.seed = os.path.join(cls.checkout, "build-seed")
        os.rename(seed, cls.seed)

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("KACHE_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(cls.root, ignore_errors=True)

    # --- helpers -------------------------------------------------------------------------------------
    def env_for(self, checkout, **extra):
        env = dict(self.env)
        env["KACHE_PATHS_BASE_DIRS"] = checkout
        env.update(extra)
        return env

    def build_and_count(self, build, src, env, cmake_args=()):
        """Configures (uncounted: CMake's own compiler checks), builds, returns kache's statistics."""
        cmake_build(build, src, env, cmake_args)
        self.assertEqual(buildsys.compile_outputs(build), self.objects)
        buildsys.zero_stats(env)
        ninja(build, env)
        return buildsys.stats(env)

    def assert_all_hits(self, s, label):
        self.assertEqual((s["misses"], s["hits"]), (0, len(self.objects)),
                         f"{label}: want 100 % hits over {len(self.objects)} compile steps; stats {s}")
        self.assertLessEqual(set(s["passthrough_reasons"]), {"device-link", "link"}, f"{label}: {s}")

    def assert_equivalent(self, build, label, names=buildsys.SECTIONS):
        for rel in self.objects + ["CMakeFiles/saxpy.dir/cmake_device_link.o", "saxpy"]:
            diff = buildsys.section_diff(os.path.join(build, rel), os.path.join(self.plain, rel), names)
            self.assertEqual(diff, [], f"{label}: {rel} differs from the plain-nvcc build in {diff}")

    # --- tests ---------------------------------------------------------------------------------------
    def test_launcher_form_cold_build(self):
        s = self.seed_stats
        self.assertEqual((s["hits"], s["misses"]), (0, len(self.objects)), f"cold launcher build: {s}")
        self.assert_equivalent(self.seed, "cold launcher build")

    def test_launcher_form_second_build_from_empty_dir_is_all_hits(self):
        launcher = ["-DCMAKE_CUDA_COMPILER_LAUNCHER=" + buildsys.LAUNCHER]
        shutil.copytree(self.seed_cache, self.cache)
        env = self.env_for(self.checkout)
        for name in ("build", "build-launcher-2"):  # the cold build's directory emptied, another one
            build = os.path.join(self.checkout, name)
            s = self.build_and_count(build, self.checkout, env, launcher)
            self.assert_all_hits(s, f"second launcher build in {name}")
            self.assert_equivalent(build, f"second launcher build in {name}")
            shutil.rmtree(build)

    def test_launcher_form_shares_between_build_dirs_without_base_dirs(self):
        # One object (scale.cu, which includes ../include/ops.cuh from outside its own directory), two
        # build directories of one checkout, no [paths] base_dirs: the second must hit.
        env = dict(self.env)
        launcher = ["-DCMAKE_CUDA_COMPILER_LAUNCHER=" + buildsys.LAUNCHER]
        obj = "CMakeFiles/saxpy_kernels.dir/src/scale.cu.o"
        for i, name in enumerate(("build-nobase-1", "build-nobase-2")):
            build = cmake_build(os.path.join(self.checkout, name), self.checkout, env, launcher)
            self.zero()
            buildsys.run(["ninja", "-C", build, obj], cwd=build, env=env)
            s = self.stats()
            self.assertEqual((s["hits"], s["misses"]), (i, 1 - i),
                             f"{name}: want {'a hit' if i else 'a miss'}; a second build directory of the same "
                             f"checkout must share the first one's entry; stats {s}")
            diff = buildsys.section_diff(os.path.join(build, obj), os.path.join(self.plain, obj))
            self.assertEqual(diff, [], f"{name}: {obj} differs from the plain-nvcc build in {diff}")

    def test_compiler_form_second_build_from_empty_dir_is_all_hits(self):
        # The spec's first form, from an empty cache and without base_dirs: cold build, then the same
        # directory emptied, then another directory.
        env = dict(self.env, CUDACXX=buildsys.LAUNCHER + " nvcc")
        first = os.path.join(self.checkout, "build-cudacxx")
        try:
            s = self.build_and_count(first, self.checkout, env)
        except AssertionError as e:
            self.fail('CMake does not configure with CUDACXX="kache nvcc" (CMake 3.25 leaves '
                      "CMAKE_CUDA_COMPILER_ARG1 out of its try_compile projects, so kache is run as "
                      "`kache -forward-unknown-to-host-compiler ...`):\n" + str(e)[-3000:])
        self.assertEqual((s["hits"], s["misses"]), (0, len(self.objects)), f"cold CUDACXX build: {s}")
        self.assert_equivalent(first, "cold CUDACXX build")
        shutil.rmtree(first)
        for name in ("build-cudacxx", "build-cudacxx-2"):
            build = os.path.join(self.checkout, name)
            s = self.build_and_count(build, self.checkout, env)
            self.assert_all_hits(s, f"second CUDACXX build in {name}")
            self.assert_equivalent(build, f"second CUDACXX build in {name}")

    def test_moved_checkout_hits_all_but_its_rdc_objects(self):
        shutil.copytree(self.seed_cache, self.cache)
        self.zero()
        moved = buildsys.copy_example("saxpy", self.path("elsewhere", "deeper", CHECKOUT))
        self.assertNotEqual(os.path.realpath(moved), os.path.realpath(self.checkout))
        env = self.env_for(moved)
        build = os.path.join(moved, "build")
        s = self.build_and_count(build, moved, env, ["-DCMAKE_CUDA_COMPILER_LAUNCHER=" + buildsys.LAUNCHER])
        # The -rdc objects are stored per source path (nvcc's __nv_module_id hashes it): they miss here.
        rdc = [o for o in self.objects if "/rdc/" in o]
        self.assertEqual(len(rdc), 2)
        self.assertEqual((s["misses"], s["hits"]), (len(rdc), len(self.objects) - len(rdc)), f"moved checkout: {s}")
        self.assert_equivalent(build, "moved checkout", buildsys.PATH_FREE_SECTIONS)
        ids = [buildsys.module_id(os.path.join(build, o)) for o in rdc]
        self.assertEqual(len(set(ids)), len(ids), f"two -rdc objects share a module id: {ids}")
        # Each carries this checkout's module id, as plain nvcc's here does, not the first checkout's.
        for o, here in zip(rdc, ids):
            self.assertNotEqual(here, buildsys.module_id(os.path.join(self.plain, o)), o)


if __name__ == "__main__":
    kachetest.main()
