"""ADR-1320's silent stale device binary, with kache in front of nvcc (Meson + Ninja custom_targets,
examples/adr1320). A shared header holds a struct passed by value to kernels; its layout changes.

For both header-tracking variants of the ADR (nvcc's -MD -MF @DEPFILE@ -MT @OUTPUT@ with depfile:,
and declared depend_files without a depfile), in a build directory whose objects kache compiled
(misses) and in one whose objects and depfiles kache restored (hits):
  * ninja rebuilds exactly the targets that depend on the header (read from .ninja_log), then has no
    work left;
  * kache misses for exactly the objects whose include closure changed, and hits for a target that
    only declares the header (depend_files);
  * every object equals plain nvcc's object from the same command on the edited tree (a stale object
    differs in .nv_fatbin and .text: the kernel reads the struct at other offsets);
  * reverting the edit rebuilds the same targets as hits, and the objects are the original ones.
The checkout is KACHE_PATHS_BASE_DIRS, so the two build directories share entries. Objects are
compared before statistics, so a cache that serves stale objects fails on the objects."""
import os
import time

import buildsys
import kachetest
from kachetest import KacheTestCase

HEADER = os.path.join("include", "adm_params.cuh")
OBJECTS = ("adm.o", "vif.o", "motion.o", "psnr.o")
LIBRARY = "libkernels.a"
INCLUDE_HEADER = {"adm.o", "vif.o"}  # kernels/adm.cu and kernels/vif.cu include adm_params.cuh


class Adr1320Case(KacheTestCase):
    VARIANT = None
    REBUILT_ON_EDIT = None  # the objects ninja must rebuild when adm_params.cuh changes

    def setUp(self):
        super().setUp()
        if self.VARIANT is None:
            self.skipTest("base class")
        self.src = buildsys.copy_example("adr1320", self.path("src"))
        self.native = self.write("kache.ini", f"[binaries]\nnvcc = ['{buildsys.LAUNCHER}', 'nvcc']\n")
        # The shared headers (include/) lie outside each kernel's directory and the build directories:
        # with the checkout as base dir, the second build directory can share the first one's entries.
        self.env["KACHE_PATHS_BASE_DIRS"] = self.src

    # --- helpers -------------------------------------------------------------------------------------
    def setup_build(self, name):
        build = self.path(name)
        buildsys.run(["meson", "setup", build, self.src, "--native-file", self.native,
                      "-Ddep_tracking=" + self.VARIANT, "-Dhip=disabled"], cwd=self.ws, env=self.env)
        return build

    def build(self, build):
        """Runs ninja; returns the outputs it rebuilt. Afterwards ninja must have nothing left to do."""
        rebuilt, explain = buildsys.ninja_rebuilt(build, self.env)
        idle, dry = buildsys.ninja_dry_run_is_empty(build, self.env)
        self.assertTrue(idle, f"ninja has work left right after a build:\n{dry}")
        return rebuilt, explain

    def plain_objects(self, build, names, into):
        """Plain nvcc, running the very command ninja runs for each object, on the current tree."""
        os.makedirs(self.path(into), exist_ok=True)
        refs = {}
        for name in names:
            cmd = buildsys.ninja_command(build, name, self.env)
            out = self.path(into, name)
            buildsys.run(buildsys.plain_nvcc_command(cmd, out, out + ".d"), cwd=build, env=self.env)
            refs[name] = out
        return refs

    def assert_objects(self, build, refs, when):
        for name in OBJECTS:
            diff = buildsys.section_diff(os.path.join(build, name), refs[name])
            self.assertEqual(diff, [], f"{when}: {name} differs from plain nvcc's object of the current "
                                       f"sources in sections {diff} (a stale device binary)")

    def assert_stats(self, when, hits, misses):
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (hits, misses), f"{when}: kache statistics {s}")
        self.zero()

    def edit_header(self, text):
        with open(os.path.join(self.src, HEADER), "w") as f:
            f.write(text)
        # As after a human edit: the header is older than a file-time tick when the build starts, so
        # the miss is stored and the next build directory can hit it.
        time.sleep(0.05)

    # --- the scenario --------------------------------------------------------------------------------
    def test_struct_layout_edit_then_revert(self):
        expected_rebuilt = set(self.REBUILT_ON_EDIT) | {LIBRARY}
        declares_only = set(self.REBUILT_ON_EDIT) - INCLUDE_HEADER

        # Cold build (misses), then a second build directory served from the cache (hits, restored
        # depfiles in the depfile variant).
        b1 = self.setup_build("build-miss")
        rebuilt, _ = self.build(b1)
        self.assertEqual(rebuilt, set(OBJECTS) | {LIBRARY})
        original = self.plain_objects(b1, OBJECTS, "plain-original")
        self.assert_objects(b1, original, "cold build")
        self.assert_stats("cold build", hits=0, misses=len(OBJECTS))
        b2 = self.setup_build("build-hit")
        self.build(b2)
        self.assert_objects(b2, original, "second build directory")
        self.assert_stats("second build directory", hits=len(OBJECTS), misses=0)

        # The ADR's edit: a field added in front changes the layout of the struct passed by value.
        with open(os.path.join(self.src, HEADER)) as f:
            before = f.read()
        self.edit_header(before.replace("  float scale;", "  int version;  // new first field\n  float scale;"))
        edited = dict(original)
        edited.update(self.plain_objects(b1, sorted(INCLUDE_HEADER), "plain-edited"))
        for name in INCLUDE_HEADER:
            diff = buildsys.section_diff(original[name], edited[name])
            self.assertIn(".nv_fatbin", diff, f"the edit must change {name}'s device code")

        for build, label in ((b1, "after the edit, build dir of misses"), (b2, "after the edit, build dir of hits")):
            rebuilt, explain = self.build(build)
            self.assertEqual(rebuilt, expected_rebuilt, f"{label}: ninja rebuilt the wrong targets\n{explain}")
            self.assert_objects(build, edited, label)
            if build == b1:  # the edited tree's objects are new: misses, except declared-only targets
                self.assert_stats(label, hits=len(declares_only), misses=len(INCLUDE_HEADER))
            else:  # now stored by the build above
                self.assert_stats(label, hits=len(self.REBUILT_ON_EDIT), misses=0)

        # Revert: the same targets rebuild, all of them hits, and the objects are the original ones.
        self.edit_header(before)
        for build, label in ((b1, "after the revert, build dir of misses"), (b2, "after the revert, build dir of hits")):
            rebuilt, explain = self.build(build)
            self.assertEqual(rebuilt, expected_rebuilt, f"{label}: ninja rebuilt the wrong targets\n{explain}")
            self.assert_objects(build, original, label)
            self.assert_stats(label, hits=len(self.REBUILT_ON_EDIT), misses=0)


class Depfile(Adr1320Case):
    """nvcc -c ... -MD -MF @DEPFILE@ -MT @OUTPUT@ with depfile: (POSIX hosts in the ADR)."""
    VARIANT = "depfile"
    REBUILT_ON_EDIT = ("adm.o", "vif.o")


class DependFiles(Adr1320Case):
    """depend_files: the shared header set on adm, vif and motion, no depfile (the ADR's Windows
    fallback). motion.cu does not include adm_params.cuh: ninja rebuilds it, kache must hit."""
    VARIANT = "depend_files"
    REBUILT_ON_EDIT = ("adm.o", "vif.o", "motion.o")


del Adr1320Case  # only the variants run


FATBINS = ("adm.fatbin", "vif.fatbin", "motion.fatbin", "psnr.fatbin")


class FatbinTargets(KacheTestCase):
    """Spec 003's real shape (-Dkernel_output=fatbin): every kernel a custom_target running
    `nvcc --fatbin -gencode ... -gencode ... -MD -MF @DEPFILE@ -MT @OUTPUT@` with depfile: and
    depend_files: (the shared header set on adm, vif and motion). After the struct's layout changes:
    ninja rebuilds exactly adm, vif and motion (motion only declares the header), kache misses exactly
    for adm and vif and hits for motion, and every fatbin equals plain nvcc's byte for byte (fatbins are
    deterministic). A second build directory is served from the cache (fatbins and depfiles restored).
    Against a kache that passes fatbins through, the miss and hit counts fail."""

    def setUp(self):
        super().setUp()
        self.src = buildsys.copy_example("adr1320", self.path("src"))
        self.native = self.write("kache.ini", f"[binaries]\nnvcc = ['{buildsys.LAUNCHER}', 'nvcc']\n")
        self.env["KACHE_PATHS_BASE_DIRS"] = self.src

    def setup_build(self, name):
        build = self.path(name)
        buildsys.run(["meson", "setup", build, self.src, "--native-file", self.native, "-Dkernel_output=fatbin",
                      "-Dhip=disabled"],
                     cwd=self.ws, env=self.env)
        return build

    def build(self, build):
        rebuilt, explain = buildsys.ninja_rebuilt(build, self.env)
        idle, dry = buildsys.ninja_dry_run_is_empty(build, self.env)
        self.assertTrue(idle, f"ninja has work left right after a build:\n{dry}")
        return rebuilt, explain

    def plain_fatbins(self, build, into):
        """Plain nvcc, running the very command ninja runs for each fatbin, on the current tree."""
        os.makedirs(self.path(into), exist_ok=True)
        refs = {}
        for name in FATBINS:
            out = self.path(into, name)
            cmd = buildsys.plain_nvcc_command(buildsys.ninja_command(build, name, self.env), out, out + ".d")
            buildsys.run(cmd, cwd=build, env=self.env)
            with open(out, "rb") as f:
                refs[name] = f.read()
        return refs

    def assert_fatbins(self, build, refs, when):
        for name in FATBINS:
            with open(os.path.join(build, name), "rb") as f:
                self.assertTrue(f.read() == refs[name], f"{when}: {name} differs from plain nvcc's fatbin "
                                                        f"of the current sources (a stale device binary)")

    def assert_stats(self, when, hits, misses):
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (hits, misses, 0), f"{when}: {s}")
        if not os.environ.get("KACHE_UNDER_TEST"):  # stale_wrapper.py counts no kinds
            self.assertEqual(s["output_kinds"].get("fatbin", {"hits": 0, "misses": 0}), {"hits": hits, "misses": misses},
                             f"{when}: {s}")
        self.zero()

    def edit_header(self, text):
        with open(os.path.join(self.src, HEADER), "w") as f:
            f.write(text)
        time.sleep(0.05)

    def recorded_deps(self, build, target):
        """What ninja recorded from target's depfile (`ninja -t deps`)."""
        return buildsys.run(["ninja", "-C", build, "-t", "deps", target], cwd=build, env=self.env).stdout

    def test_struct_layout_edit_rebuilds_exactly_the_dependent_fatbins(self):
        b1 = self.setup_build("build-miss")
        rebuilt, _ = self.build(b1)
        self.assertEqual(rebuilt, set(FATBINS) | {LIBRARY})
        original = self.plain_fatbins(b1, "plain-original")
        self.assert_fatbins(b1, original, "cold build")
        self.assert_stats("cold build", hits=0, misses=len(FATBINS))
        self.assertIn("adm_params.cuh", self.recorded_deps(b1, "adm.fatbin"))
        b2 = self.setup_build("build-hit")
        self.build(b2)
        self.assert_fatbins(b2, original, "second build directory")
        self.assert_stats("second build directory", hits=len(FATBINS), misses=0)
        # The restored depfiles reached ninja (which reads and deletes them): adm's lists the header,
        # psnr's does not.
        self.assertIn("adm_params.cuh", self.recorded_deps(b2, "adm.fatbin"))
        self.assertNotIn("adm_params.cuh", self.recorded_deps(b2, "psnr.fatbin"))

        with open(os.path.join(self.src, HEADER)) as f:
            before = f.read()
        self.edit_header(before.replace("  float scale;", "  int version;  // new first field\n  float scale;"))
        edited = self.plain_fatbins(b1, "plain-edited")
        for name in ("adm.fatbin", "vif.fatbin"):
            self.assertNotEqual(edited[name], original[name], f"the edit must change {name}")
        for name in ("motion.fatbin", "psnr.fatbin"):
            self.assertEqual(edited[name], original[name], name)

        expected = {"adm.fatbin", "vif.fatbin", "motion.fatbin", LIBRARY}
        for build, label, hits, misses in ((b1, "after the edit, build dir of misses", 1, 2),
                                           (b2, "after the edit, build dir of hits", 3, 0)):
            rebuilt, explain = self.build(build)
            self.assertEqual(rebuilt, expected, f"{label}: ninja rebuilt the wrong targets\n{explain}")
            self.assert_fatbins(build, edited, label)
            self.assert_stats(label, hits=hits, misses=misses)

        self.edit_header(before)
        for build, label in ((b1, "after the revert, build dir of misses"), (b2, "after the revert, build dir of hits")):
            rebuilt, explain = self.build(build)
            self.assertEqual(rebuilt, expected, f"{label}: ninja rebuilt the wrong targets\n{explain}")
            self.assert_fatbins(build, original, label)
            self.assert_stats(label, hits=3, misses=0)

if __name__ == "__main__":
    kachetest.main()
