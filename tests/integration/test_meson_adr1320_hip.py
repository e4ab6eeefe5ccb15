"""ADR-1320's HIP half through kache (examples/adr1320, -Dhip=enabled -Dcuda=disabled): four hip_hsaco_*
custom_targets running `hipcc --genco -O2 -std=c++17 --offload-arch=gfx90a --offload-arch=gfx940 IN -o OUT
-Xclang -dependency-file -Xclang @DEPFILE@ -Xclang -MT -Xclang @OUTPUT@` (spec 003's depfile form) with
depfile: and depend_files: (the shared header set on adm, vif and motion), the native file saying
`hipcc = ['kache', 'hipcc']`. A plain build directory beside it runs hipcc itself. Exits 77 (skipped)
without hipcc, meson or ninja.

  * cold: every HSACO a miss, byte-identical to plain hipcc's; a clean rebuild hits for all four;
  * a by-value struct edit in adm_params_hip.h: ninja rebuilds exactly adm, vif (they include it) and
    motion (declares it), in both directories; kache explain names the header for adm and vif and finds
    motion's and psnr's entries; kache misses for adm and vif and hits for motion; every HSACO equals
    plain hipcc's; a clean rebuild then hits for all four;
  * an edit of adm_gfx90a.h, which only adm.hip's `#if defined(__gfx90a__)` branch includes and which
    is declared nowhere: hipcc writes the depfile of the LAST target it compiles (gfx940), so the
    header is in no depfile (plain's nor the one kache restored) and ninja, in both directories, has
    no work to do: the HSACO left there is stale (it differs from what plain hipcc now writes). That is
    hipcc's and the build's gap, not the cache's: kache's key holds every target's closure (explain
    names adm_gfx90a.h), so when the target is rebuilt (a clean rebuild) kache misses for adm only and
    hits for the other three, and adm.hsaco is plain hipcc's new one;
  * reverting both edits rebuilds adm, vif and motion as hits, giving the original HSACOs back.
HSACOs are compared before statistics, so a cache that serves stale HSACOs fails on the bytes:
KACHE_UNDER_TEST=tests/integration/stale_wrapper.py makes this test fail.
"""
import json
import os
import shutil
import sys
import tempfile
import time

import buildsys
import kachetest
from kachetest import KacheTestCase

HIPCC = shutil.which("hipcc")
STRUCT_HEADER = os.path.join("include", "adm_params_hip.h")
GFX90A_HEADER = os.path.join("include", "adm_gfx90a.h")
HSACOS = ("adm.hsaco", "vif.hsaco", "motion.hsaco", "psnr.hsaco")
INCLUDE_STRUCT = {"adm.hsaco", "vif.hsaco"}            # kernels/adm.hip and vif.hip include adm_params_hip.h
DECLARE_SHARED = {"adm.hsaco", "vif.hsaco", "motion.hsaco"}  # depend_files: hip_kernel_shared_headers


class HipHsacoTargets(KacheTestCase):
    def setUp(self):
        # KacheTestCase's workspace without its nvcc requirement; hipcc's own variables left out.
        self.ws = tempfile.mkdtemp(prefix="kache-adr1320-hip-")
        self.cache = self.path(".cache")
        self.env = {k: v for k, v in buildsys.clean_env(self.cache, self.ws).items()
                    if not k.startswith("HIP") and k not in ("DEVICE_LIB_PATH", "HCC_AMDGPU_TARGET")}
        self.src = buildsys.copy_example("adr1320", self.path("src"))
        self.native = self.write("kache.ini", f"[binaries]\nhipcc = ['{buildsys.LAUNCHER}', 'hipcc']\n")
        time.sleep(0.05)  # sources older than the clock tick the first compile starts in (kachetest.write)

    # --- helpers -------------------------------------------------------------------------------------
    def setup_build(self, name, native):
        build = self.path(name)
        cmd = ["meson", "setup", build, self.src, "-Dcuda=disabled", "-Dhip=enabled"]
        buildsys.run(cmd + (["--native-file", native] if native else []), cwd=self.ws, env=self.env)
        return build

    def build(self, build, clean=False):
        """Runs ninja (after `ninja -t clean` when clean); returns the outputs it ran a command for and
        its explain text. Afterwards ninja must have nothing left to do."""
        if clean:
            buildsys.run(["ninja", "-C", build, "-t", "clean"], cwd=build, env=self.env)
        rebuilt, explain = buildsys.ninja_rebuilt(build, self.env)
        idle, dry = buildsys.ninja_dry_run_is_empty(build, self.env)
        self.assertTrue(idle, f"ninja has work left right after a build:\n{dry}")
        return rebuilt, explain

    def hsacos(self, build):
        out = {}
        for name in HSACOS:
            with open(os.path.join(build, name), "rb") as f:
                out[name] = f.read()
        return out

    def assert_same_as(self, build, refs, when):
        got = self.hsacos(build)
        for name in HSACOS:
            self.assertTrue(got[name] == refs[name],
                            f"{when}: {build}/{name} differs from plain hipcc's HSACO (a stale device binary)")

    def plain_hipcc_now(self, plain, name):
        """What plain hipcc writes now for name, running the very command ninja runs (into a scratch file)."""
        cmd = buildsys.ninja_command(plain, name, self.env)
        self.assertEqual(os.path.basename(cmd[0]), "hipcc", cmd)
        out = self.path("fresh-" + name)
        args = list(cmd)
        args[args.index("-o") + 1] = out
        args[args.index("-dependency-file") + 2] = out + ".d"
        buildsys.run(args, cwd=plain, env=self.env)
        with open(out, "rb") as f:
            return f.read()

    def assert_stats(self, when, hits, misses):
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (hits, misses, 0), f"{when}: {json.dumps(s)}")
        if not os.environ.get("KACHE_UNDER_TEST"):  # stale_wrapper.py counts no kinds
            self.assertEqual(s["output_kinds"].get("offload-bundle", {"hits": 0, "misses": 0}),
                             {"hits": hits, "misses": misses}, f"{when}: {json.dumps(s)}")
        self.zero()

    def assert_explain(self, build, expected, when):
        """`kache explain` of every HSACO's command as ninja runs it now must give expected: {name: (status,
        basenames of the headers that differ from the closest entry)}. (stale_wrapper.py has no explain.)"""
        if not os.environ.get("KACHE_UNDER_TEST"):
            self.assertEqual(self.explain(build), expected, when)

    def explain(self, build):
        out = {}
        for name in HSACOS:
            cmd = buildsys.ninja_command(build, name, self.env)
            self.assertEqual(cmd[:2], [buildsys.LAUNCHER, "hipcc"], "the build runs hipcc through kache")
            r = buildsys.run([kachetest.KACHE, "explain", "--json", "--"] + cmd[1:], cwd=build, env=self.env)
            e = json.loads(r.stdout)
            out[name] = (e["status"], {os.path.basename(d.get("path", d["field"])) for d in e["differences"]})
        return out

    def recorded_deps(self, build, name):
        """The headers ninja recorded from name's depfile (`ninja -t deps`), as basenames."""
        text = buildsys.run(["ninja", "-C", build, "-t", "deps", name], cwd=build, env=self.env).stdout
        return {os.path.basename(line.strip()) for line in text.splitlines()[1:] if line.strip()}

    def edit(self, rel, old, new):
        p = os.path.join(self.src, rel)
        with open(p) as f:
            text = f.read()
        self.assertIn(old, text)
        with open(p, "w") as f:
            f.write(text.replace(old, new))
        # As after a human edit: older than a file-time tick when the build starts, so misses are stored.
        time.sleep(0.05)

    # --- the scenario --------------------------------------------------------------------------------
    def test_hsaco_targets_struct_edit_and_a_header_of_one_target(self):
        plain = self.setup_build("plain", None)
        build = self.setup_build("build", self.native)

        # Cold: plain hipcc, then kache (misses); a clean rebuild hits for all four.
        for b in (plain, build):
            rebuilt, explain = self.build(b)
            self.assertEqual(rebuilt, set(HSACOS), explain)
        original = self.hsacos(plain)
        self.assertTrue(all(h.startswith(b"__CLANG_OFFLOAD_BUNDLE__") for h in original.values()),
                        "two --offload-arch: every HSACO is an offload bundle")
        self.assert_same_as(build, original, "cold build")
        self.assert_stats("cold build", hits=0, misses=len(HSACOS))
        for b in (plain, build):  # the depfiles ninja read (kache's are restored hipcc's)
            self.assertEqual(self.recorded_deps(b, "adm.hsaco"), {"adm.hip", "adm_params_hip.h", "device_common_hip.h"})
            self.assertEqual(self.recorded_deps(b, "psnr.hsaco"), {"psnr.hip"})
        self.assertEqual(self.build(build, clean=True)[0], set(HSACOS))
        self.assert_same_as(build, original, "clean rebuild")
        self.assert_stats("clean rebuild", hits=len(HSACOS), misses=0)

        # The ADR's edit: a field in front changes the layout of the struct passed by value.
        self.edit(STRUCT_HEADER, "  float scale;", "  int version;  // new first field\n  float scale;")
        self.assert_explain(build, {"adm.hsaco": ("differs", {"adm_params_hip.h"}),
                                    "vif.hsaco": ("differs", {"adm_params_hip.h"}),
                                    "motion.hsaco": ("match", set()),
                                    "psnr.hsaco": ("match", set())}, "after the struct edit")
        for b in (plain, build):
            rebuilt, explain = self.build(b)
            self.assertEqual(rebuilt, DECLARE_SHARED, f"{b}: ninja rebuilt the wrong targets\n{explain}")
        edited = self.hsacos(plain)
        for name in HSACOS:
            self.assertEqual(edited[name] != original[name], name in INCLUDE_STRUCT, f"the edit changes {name}?")
        self.assert_same_as(build, edited, "after the struct edit")
        self.assert_stats("after the struct edit", hits=len(DECLARE_SHARED - INCLUDE_STRUCT), misses=len(INCLUDE_STRUCT))
        self.assertEqual(self.build(build, clean=True)[0], set(HSACOS))
        self.assert_same_as(build, edited, "clean rebuild after the struct edit")
        self.assert_stats("clean rebuild after the struct edit", hits=len(HSACOS), misses=0)

        # A header only adm.hip's gfx90a branch includes, declared nowhere: no depfile names it (hipcc's
        # is the last target's, gfx940), so ninja rebuilds nothing and adm.hsaco is left stale, with
        # plain hipcc as with kache.
        self.edit(GFX90A_HEADER, "kAdmGfx90aGain = 1.0f", "kAdmGfx90aGain = 2.0f")
        fresh = self.plain_hipcc_now(plain, "adm.hsaco")
        self.assertNotEqual(fresh, edited["adm.hsaco"], "the edit changes adm.hsaco's gfx90a code object")
        for b in (plain, build):
            self.assertNotIn("adm_gfx90a.h", self.recorded_deps(b, "adm.hsaco"))
            rebuilt, explain = self.build(b)
            self.assertEqual(rebuilt, set(), f"{b}: hipcc's depfile lacks adm_gfx90a.h, ninja has no work\n{explain}")
        self.assert_same_as(build, edited, "ninja rebuilt nothing (the stale HSACO is the build's)")
        self.assert_stats("nothing rebuilt", hits=0, misses=0)
        # kache's key covers every target's closure: it would miss for adm only.
        self.assert_explain(build, {"adm.hsaco": ("differs", {"adm_gfx90a.h"}),
                                    "vif.hsaco": ("match", set()),
                                    "motion.hsaco": ("match", set()),
                                    "psnr.hsaco": ("match", set())}, "after the gfx90a-only edit")
        for b in (plain, build):
            self.assertEqual(self.build(b, clean=True)[0], set(HSACOS))
        rebuilt_plain = self.hsacos(plain)
        self.assertTrue(rebuilt_plain["adm.hsaco"] == fresh)
        self.assert_same_as(build, rebuilt_plain, "clean rebuild after the gfx90a-only edit")
        self.assert_stats("clean rebuild after the gfx90a-only edit", hits=len(HSACOS) - 1, misses=1)

        # Revert both: ninja rebuilds the struct's targets (adm's gfx90a header it still does not see),
        # all hits, the original HSACOs.
        self.edit(GFX90A_HEADER, "kAdmGfx90aGain = 2.0f", "kAdmGfx90aGain = 1.0f")
        self.edit(STRUCT_HEADER, "  int version;  // new first field\n  float scale;", "  float scale;")
        for b in (plain, build):
            rebuilt, explain = self.build(b)
            self.assertEqual(rebuilt, DECLARE_SHARED, f"{b}: ninja rebuilt the wrong targets\n{explain}")
        self.assert_same_as(plain, original, "plain after the revert")
        self.assert_same_as(build, original, "after the revert")
        self.assert_stats("after the revert", hits=len(DECLARE_SHARED), misses=0)


if __name__ == "__main__":
    missing = [tool for tool in ("hipcc", "meson", "ninja") if shutil.which(tool) is None]
    if missing:
        print(f"{', '.join(missing)} not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
