"""The shared-directory remote (file:///PATH, issue 31): a directory that several machines mount (NFS,
SMB), here a local directory that two cache dirs share. Entries are published by rename, so concurrent
writers and readers of the same keys lose and corrupt nothing; a cut-short or vanished file is a miss,
never a failed build; read-only writes nothing; `kache --evict-older-than` run by one machine evicts by
age; a share that is not mounted never breaks a build.
"""
import os
import shutil
import subprocess

import kachetest
from test_remote import UNITS, RemoteCase


class SharedDirectory(RemoteCase):
    def setUp(self):
        super().setUp()
        self.shared = self.path("shared")
        os.makedirs(self.shared)
        self.url = "file://" + self.shared

    def shared_files(self):
        out = []
        for root, _, files in os.walk(self.shared):
            out += [os.path.relpath(os.path.join(root, f), self.shared) for f in files]
        return sorted(out)

    def test_miss_then_hit_across_two_cache_dirs(self):
        self.share_through(self.url)
        self.assertTrue(self.shared_files())

    def test_concurrent_writers_and_readers_lose_and_corrupt_nothing(self):
        root = {c: self.path(c) for c in ("one", "two")}
        for round in range(3):
            # Empty local caches and an empty share: the two cache dirs race on the same keys, each
            # compile writing what the other may be reading.
            for checkout in ("one", "two"):
                shutil.rmtree(self.path("cache-" + checkout), ignore_errors=True)
            for f in self.shared_files():
                os.unlink(os.path.join(self.shared, f))
            procs = []
            for checkout in ("one", "two"):
                env = dict(self.env, **self.env_for(checkout, self.url))
                for u in UNITS:
                    procs.append(subprocess.Popen(
                        [kachetest.KACHE, "nvcc", "-c", f"{root[checkout]}/src/{u}.cu", f"-I{root[checkout]}/include",
                         "-o", f"{u}.o"], cwd=self.path(checkout, "build"), env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True))
            for p in procs:
                out, err = p.communicate()
                self.assertEqual((p.returncode, err), (0, ""), out)
            for checkout in ("one", "two"):
                self.assert_plain_equivalent(checkout)
                s = self.stats_of(self.env_for(checkout, self.url))
                self.assertEqual((s["corrupt_entries"], s["remote_errors"]), (0, 0), s)
            self.assertFalse([f for f in self.shared_files() if ".tmp." in f], "a temporary file was left")
        # A third cache dir reads every entry the race left: all hits, none damaged.
        three = self.env_for("one", self.url, KACHE_DIR=self.path("cache-three"))
        self.build("one", three)
        s = self.stats_of(three)
        self.assertEqual((s["hits"], s["misses"], s["corrupt_entries"]), (3, 0, 0), s)
        self.assert_plain_equivalent("one")

    def entries_by_kind(self):
        """The share's files by what they hold: {"manifest": [...], "object": [...]}, each sorted. A
        manifest is a raw record (magic KACHE\\0R1, the value's size, its 32-digit checksum) whose value
        opens with a manifest's magic ("KMN" and a version digit, little-endian); an object is a stored
        compile (KACHE\\0E1, E2 or B1). Read from the bytes, so which file is which never depends on its
        name or on directory order."""
        kinds = {"manifest": [], "object": [], "other": []}
        for f in self.shared_files():
            with open(os.path.join(self.shared, f), "rb") as h:
                head = h.read(52)
            if head[:8] == b"KACHE\0R1" and head[49:52] == b"NMK":
                kinds["manifest"].append(f)
            elif head[:8] in (b"KACHE\0E1", b"KACHE\0E2", b"KACHE\0B1"):
                kinds["object"].append(f)
            else:
                kinds["other"].append(f)
        return kinds

    def test_cut_short_or_vanished_files_are_misses(self):
        # One named manifest and one named object, each cut short and each vanished, each on a copy of
        # the share one build published: the unit it belongs to is a miss (a damaged file counted as
        # corrupt, a vanished one not), the two other units hit, and nothing reaches the compile's stderr.
        self.build("one", self.env_for("one", self.url))
        kinds = self.entries_by_kind()
        # Three units: a manifest and an object each (nvcc's whole compile, no stages stored).
        self.assertEqual((len(kinds["manifest"]), len(kinds["object"])), (3, 3), kinds)
        published = self.path("published")
        shutil.copytree(self.shared, published)
        for kind in ("manifest", "object"):
            for damage in ("cut short", "vanished"):
                with self.subTest(kind=kind, damage=damage):
                    shutil.rmtree(self.shared)
                    shutil.copytree(published, self.shared)
                    victim = os.path.join(self.shared, kinds[kind][0])
                    if damage == "cut short":
                        os.truncate(victim, os.path.getsize(victim) // 2)
                    else:
                        os.unlink(victim)
                    two = self.env_for("two", self.url, KACHE_DIR=self.path(f"cache-{kind}-{damage}"))
                    for u in UNITS:
                        self.assertEqual(self.compile("two", u, two).stderr, "")
                    s = self.stats_of(two)
                    corrupt = 1 if damage == "cut short" else 0
                    self.assertEqual((s["hits"], s["misses"], s["corrupt_entries"], s["remote_errors"]),
                                     (2, 1, corrupt, 0), s)
                    self.assert_plain_equivalent("two")

    def test_read_only_writes_nothing(self):
        self.build("one", self.env_for("one", self.url + "|read-only"))
        self.assertEqual(self.shared_files(), [])

    def test_evict_older_than_by_one_machine(self):
        env = self.env_for("one", self.url)
        self.build("one", env)
        files = self.shared_files()
        old = files[: len(files) // 2]
        for f in old:
            os.utime(os.path.join(self.shared, f), (1, 1))
        r = self.kache(["--evict-older-than", "1d"], env=env)
        self.assertIn(f"Removed {len(old)} entries not used in the last 1d from {self.url}", r.stdout)
        self.assertEqual(self.shared_files(), sorted(set(files) - set(old)))

    def test_cleanup_trims_to_max_size(self):
        env = self.env_for("one", self.url)
        self.build("one", env)
        files = self.shared_files()
        sizes = {f: os.path.getsize(os.path.join(self.shared, f)) for f in files}
        for age, f in enumerate(files):  # files[0] the least recently used
            os.utime(os.path.join(self.shared, f), (1000 + age, 1000 + age))
        keep = files[-2:]
        limited = self.env_for("one", f"{self.url}|max-size={sum(sizes[f] for f in keep)}")
        r = self.kache(["-c"], env=limited)
        self.assertIn(f"Removed {len(files) - 2} entries from {self.url}", r.stdout)
        self.assertEqual(self.shared_files(), keep)

    def test_unmounted_share_never_breaks_a_build(self):
        env = self.env_for("one", "file://" + self.path("not-mounted"))
        self.build("one", env)
        s = self.stats_of(env)
        self.assertEqual(s["misses"], 3, s)
        self.assertGreater(s["remote_errors"] + s["remote_skipped"], 0, s)
        self.assert_plain_equivalent("one")
        r = self.kache(["doctor", "--json"], env=env, check=False)
        self.assertIn("is not a directory (is the share mounted?)", r.stdout)


if __name__ == "__main__":
    kachetest.main()
