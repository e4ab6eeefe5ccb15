"""Outputs that are not regular files. The compiler opens its output (and -MF depfile) and writes
through whatever the path names; kache's hit and miss rename a new file over it instead. A symlink,
a device node (as root, `-o /dev/null` would lose /dev/null) or a FIFO must stay what it is, so kache
passes through (output-special). And `nvcc -o -` writes to stdout, which kache passes through
(output-kind) instead of storing a file named "-".

Nothing here touches the real /dev/null or /dev/stdout: device nodes are made (mknod, root only) in
the test's own directory."""
import os
import shutil
import stat
import subprocess
import time
import unittest

import kachetest
from kachetest import KERNEL, NVCC, KacheTestCase

GCC = shutil.which("gcc-12") or shutil.which("gcc")
C_SOURCE = "int value = 3;\nint twice(int x) { return 2 * x; }\n"
IS_ROOT = os.geteuid() == 0


class OutputSpecial(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.case = 0

    def dirs(self, files):
        """A fresh kache directory and plain directory, each holding `files`."""
        self.case += 1
        kd, pd = self.path(f"k{self.case}"), self.path(f"p{self.case}")
        for d in (kd, pd):
            os.makedirs(d)
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
        # A file modified in the clock tick a compile starts in is not stored (kachetest.write says why).
        time.sleep(0.02)
        return kd, pd

    def plain(self, tool, args, cwd):
        exe = NVCC if tool == "nvcc" else GCC
        return subprocess.run([exe] + list(args), cwd=cwd, env=self.env, capture_output=True)

    def through_kache(self, tool, args, cwd):
        e = dict(self.env)
        e["KACHE_LOG"] = "kache=debug"
        return subprocess.run([kachetest.KACHE, tool] + list(args), cwd=cwd, env=e, capture_output=True)

    def warm(self, tool, args, cwd, output):
        """Stores args' result (compiled in cwd to a regular `output`), so the same command with
        another output would hit; checks that it does."""
        self.zero()
        for _ in range(2):
            r = self.through_kache(tool, list(args) + ["-o", output], cwd)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_counts(hits=1, misses=1)
        os.unlink(os.path.join(cwd, output))

    def assert_passed_through(self, r, reason):
        self.assertIn(f"passthrough ({reason})".encode(), r.stderr, r.stderr)

    def same_bytes(self, a, b, what):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            ta, tb = fa.read(), fb.read()
        if ta.startswith(b"\x7fELF") and ta != tb:
            self.assert_same_object(a, b)  # nvcc objects differ in the order-independent parts only
        else:
            self.assertEqual(ta, tb, what)

    # --- a symlink as the output -----------------------------------------------------------------
    def check_symlink_output(self, tool, args, files, target):
        """`args -o out.lnk` with out.lnk -> target: the link and its target end as the compiler leaves
        them, on a would-be hit (warm cache) and on a miss."""
        for fresh_key in (False, True):
            run_files = dict(files)
            if fresh_key:  # a source no entry was stored for: a miss
                name = next(iter(files))
                run_files[name] = files[name] + "\n// changed\n"
            kd, pd = self.dirs(run_files)
            if not fresh_key:
                self.warm(tool, args, kd, "warm" + os.path.splitext(target)[1])
            for d in (kd, pd):
                with open(os.path.join(d, target), "w") as f:
                    f.write("old contents\n")
                os.symlink(target, os.path.join(d, "out.lnk"))
            what = f"{tool} {' '.join(args)} -o out.lnk (-> {target}), {'miss' if fresh_key else 'hit'}"
            r = self.through_kache(tool, list(args) + ["-o", "out.lnk"], kd)
            p = self.plain(tool, list(args) + ["-o", "out.lnk"], pd)
            self.assertEqual((r.returncode, p.returncode), (0, 0), f"{what}\n{r.stderr}\n{p.stderr}")
            # The compiler decides: nvcc -ptx writes through the link, while GNU as (the object of
            # gcc -c and nvcc -c) unlinks a link and writes a new file; either way, as plain.
            klink, plink = os.path.join(kd, "out.lnk"), os.path.join(pd, "out.lnk")
            self.assertEqual(os.path.islink(klink), os.path.islink(plink), f"{what}: the symlink was replaced")
            self.same_bytes(os.path.join(kd, target), os.path.join(pd, target), what)
            if not os.path.islink(plink):
                self.same_bytes(klink, plink, what)
            self.assert_passed_through(r, "output-special")

    def test_gcc_symlink_output(self):
        if GCC is None:
            self.skipTest("no gcc")
        self.check_symlink_output("gcc", ["-c", "c.c"], {"c.c": C_SOURCE}, "real.o")

    def test_nvcc_symlink_output(self):
        self.check_symlink_output("nvcc", ["-c", "k.cu"], {"k.cu": KERNEL}, "real.o")

    def test_nvcc_ptx_symlink_output(self):
        self.check_symlink_output("nvcc", ["-ptx", "-arch=sm_90", "k.cu"], {"k.cu": KERNEL}, "real.ptx")

    def test_gcc_symlink_depfile(self):
        if GCC is None:
            self.skipTest("no gcc")
        args = ["-c", "c.c", "-MD", "-MF", "dep.lnk", "-o", "c.o"]
        kd, pd = self.dirs({"c.c": C_SOURCE})
        self.warm("gcc", ["-c", "c.c", "-MD", "-MF", "dep.lnk"], kd, "c.o")
        os.unlink(os.path.join(kd, "dep.lnk"))
        for d in (kd, pd):
            with open(os.path.join(d, "real.d"), "w") as f:
                f.write("old contents\n")
            os.symlink("real.d", os.path.join(d, "dep.lnk"))
        r = self.through_kache("gcc", args, kd)
        p = self.plain("gcc", args, pd)
        self.assertEqual((r.returncode, p.returncode), (0, 0), r.stderr)
        self.assertTrue(os.path.islink(os.path.join(kd, "dep.lnk")), "the depfile symlink was replaced")
        self.same_bytes(os.path.join(kd, "real.d"), os.path.join(pd, "real.d"), "depfile through the link")
        self.same_bytes(os.path.join(kd, "c.o"), os.path.join(pd, "c.o"), "object")
        self.assert_passed_through(r, "output-special")

    # --- a character device as the output (a private null device, never /dev/null) --------------
    def check_device_output(self, tool, args, files, suffix):
        if not IS_ROOT:
            self.skipTest("mknod needs root")
        kd, pd = self.dirs(files)
        self.warm(tool, args, kd, "warm" + suffix)
        for d in (kd, pd):
            os.mknod(os.path.join(d, "nulldev"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        what = f"{tool} {' '.join(args)} -o nulldev"
        r = self.through_kache(tool, list(args) + ["-o", "nulldev"], kd)
        p = self.plain(tool, list(args) + ["-o", "nulldev"], pd)
        self.assertEqual(r.returncode, p.returncode, f"{what}\n{r.stderr}\n{p.stderr}")
        mode = os.lstat(os.path.join(kd, "nulldev")).st_mode
        self.assertTrue(stat.S_ISCHR(mode), f"{what}: the device node became {oct(mode)}")
        self.assertEqual(os.lstat(os.path.join(kd, "nulldev")).st_rdev, os.makedev(1, 3), what)
        self.assertEqual(sorted(os.listdir(kd)), sorted(os.listdir(pd)), what)
        self.assert_passed_through(r, "output-special")

    def test_gcc_device_output(self):
        if GCC is None:
            self.skipTest("no gcc")
        self.check_device_output("gcc", ["-c", "c.c"], {"c.c": C_SOURCE}, ".o")

    def test_nvcc_device_output(self):
        self.check_device_output("nvcc", ["-c", "k.cu"], {"k.cu": KERNEL}, ".o")

    def test_nvcc_ptx_device_output(self):
        self.check_device_output("nvcc", ["-ptx", "-arch=sm_90", "k.cu"], {"k.cu": KERNEL}, ".ptx")

    # --- nvcc -o - (stdout) ----------------------------------------------------------------------
    def test_nvcc_output_to_stdout(self):
        for spelling in (["-o", "-"], ["-o=-"], ["--output-file=-"], ["--output-file", "-"]):
            args = ["-ptx", "-arch=sm_90", "k.cu"] + spelling
            kd, pd = self.dirs({"k.cu": KERNEL})
            p = self.plain("nvcc", args, pd)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(b".entry", p.stdout)  # nvcc 13 writes the PTX to stdout
            for run in ("first", "second"):  # a miss, then what would be a hit
                r = self.through_kache("nvcc", args, kd)
                what = f"nvcc {' '.join(args)} ({run} run)"
                self.assertEqual(r.returncode, 0, f"{what}\n{r.stderr}")
                self.assertEqual(r.stdout, p.stdout, what)
                self.assertFalse(os.path.lexists(os.path.join(kd, "-")), f"{what}: wrote a file named '-'")
                self.assert_passed_through(r, "output-kind")


    def test_gcc_depfile_to_stdout(self):
        if GCC is None:
            self.skipTest("no gcc")
        args = ["-c", "c.c", "-o", "c.o", "-MD", "-MF", "-"]
        kd, pd = self.dirs({"c.c": C_SOURCE})
        p = self.plain("gcc", args, pd)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"c.o: c.c", p.stdout)  # gcc writes "-MF -" dependencies to stdout
        for run in ("first", "second"):
            r = self.through_kache("gcc", args, kd)
            what = f"gcc {' '.join(args)} ({run} run)"
            self.assertEqual(r.returncode, 0, f"{what}\n{r.stderr}")
            self.assertEqual(r.stdout, p.stdout, what)
            self.assertFalse(os.path.lexists(os.path.join(kd, "-")), f"{what}: wrote a file named '-'")
            self.same_bytes(os.path.join(kd, "c.o"), os.path.join(pd, "c.o"), what)
            self.assert_passed_through(r, "output-kind")

if __name__ == "__main__":
    kachetest.main()
