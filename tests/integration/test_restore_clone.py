"""Restores with `cache.compression = false`: results are stored with the object apart, on a block
boundary, so a hit clones it into place (a reflink on XFS/Btrfs) or lets the kernel copy it, and never
links it: a later write through the restored object must not reach the cache."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import kachetest
from kachetest import KERNEL, KacheTestCase

SPLIT_MAGIC = b"KACHE\0B1"
COMPRESSED_MAGIC = b"KACHE\0E2"


class CloneRestore(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.env["KACHE_COMPRESSION"] = "0"

    def entries(self, magic):
        """Entry files in the cache whose format is `magic`."""
        found = []
        for root, _, files in os.walk(self.cache):
            for name in files:
                if re.fullmatch(r"[0-9a-f]{64}", name):
                    p = os.path.join(root, name)
                    with open(p, "rb") as f:
                        if f.read(8) == magic:
                            found.append(p)
        return found

    def restore_method(self, out="k.o"):
        r, log = self.log_of(["nvcc", "-c", "k.cu", "-o", out])
        self.assertEqual(r.returncode, 0, log)
        m = re.search(r"restored the object by (\S+)", log)
        self.assertIsNotNone(m, f"no clone restore in the log:\n{log}")
        return m.group(1)

    def check_restore(self, expect_reflink=False):
        self.write("k.cu", KERNEL)
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"])
        self.nvcc(["-c", "k.cu", "-o", "plain.o"])
        [entry] = self.entries(SPLIT_MAGIC)
        with open(entry, "rb") as f:
            stored = f.read()
        os.unlink(self.path("k.o"))
        method = self.restore_method()
        if expect_reflink:
            self.assertEqual(method, "reflink")
        else:
            self.assertIn(method, ("reflink", "copy_file_range", "read/write"))
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        with open(self.path("k.o"), "rb") as f:
            obj = f.read()
        # The object is the entry's tail, from a 4096-byte boundary on.
        body_offset = len(stored) - len(obj)
        self.assertEqual(body_offset % 4096, 0)
        self.assertEqual(stored[body_offset:], obj)

        # A build step that writes through the restored object (objcopy in place, a linker reusing it)
        # changes only that file: the next hit restores the original bytes.
        with open(self.path("k.o"), "r+b") as f:
            f.write(b"\0" * 64)
        with open(entry, "rb") as f:
            self.assertEqual(f.read(), stored, "writing through a restored object changed the cache")
        self.restore_method()
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assert_counts(hits=2, misses=1)
        return entry, body_offset

    def test_restore_on_this_filesystem(self):
        self.check_restore()

    def test_corrupt_object_in_a_split_entry_is_a_miss(self):
        entry, body_offset = self.check_restore()
        with open(entry, "r+b") as f:
            f.seek(body_offset + 200)
            b = f.read(1)
            f.seek(body_offset + 200)
            f.write(bytes([b[0] ^ 1]))
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        s = self.assert_counts(hits=2, misses=2)
        self.assertEqual(s["corrupt_entries"], 1)
        self.assertEqual([t for t in os.listdir(self.ws) if t.startswith(".tmp.")], [],
                         "a failed restore left its temp file next to the output")

    def test_switching_compression_reads_both_formats(self):
        self.write("k.cu", KERNEL)
        self.write("w.cu", KERNEL.replace("scale", "scale2"))
        self.nvcc(["-c", "k.cu", "-o", "plain_k.o"])
        self.nvcc(["-c", "w.cu", "-o", "plain_w.o"])
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"])  # stored split
        env_z = {"KACHE_COMPRESSION": "1"}
        self.kache(["nvcc", "-c", "w.cu", "-o", "w.o"], env=env_z)  # stored compressed
        self.assertEqual(len(self.entries(SPLIT_MAGIC)), 1)
        self.assertEqual(len(self.entries(COMPRESSED_MAGIC)), 1)
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env=env_z)
        self.kache(["nvcc", "-c", "w.cu", "-o", "w.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain_k.o"))
        self.assert_same_object(self.path("w.o"), self.path("plain_w.o"))
        self.assert_counts(hits=2, misses=2)

    def test_reflink_on_xfs(self):
        """On a filesystem with reflinks, the restored object shares the cache entry's blocks."""
        mnt = self.mount_xfs()
        self.addCleanup(shutil.rmtree, self.ws, ignore_errors=True)
        self.ws = os.path.join(mnt, "ws")
        os.makedirs(self.ws)
        self.cache = os.path.join(mnt, "cache")
        self.env["KACHE_DIR"] = self.cache
        self.check_restore(expect_reflink=True)
        if shutil.which("filefrag"):
            r = subprocess.run(["filefrag", "-v", self.path("k.o")], capture_output=True, text=True)
            self.assertIn("shared", r.stdout, r.stdout)

    def mount_xfs(self):
        if not shutil.which("mkfs.xfs"):
            self.skipTest("mkfs.xfs is not installed (xfsprogs)")
        img_dir = tempfile.mkdtemp(prefix="kache-xfs-")
        self.addCleanup(shutil.rmtree, img_dir, ignore_errors=True)
        img = os.path.join(img_dir, "fs.img")
        with open(img, "wb") as f:
            f.truncate(320 << 20)  # sparse; XFS wants at least 300 MB
        r = subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", img], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"mkfs.xfs failed: {r.stderr.strip()}")
        mnt = os.path.join(img_dir, "mnt")
        os.makedirs(mnt)
        r = subprocess.run(["mount", "-o", "loop", img, mnt], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"cannot mount a loop device here ({r.stderr.strip() or r.returncode}); needs root")
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], capture_output=True)
        return mnt


if __name__ == "__main__":
    kachetest.main()
