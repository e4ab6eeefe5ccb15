"""A shared directory (file:///PATH) is written by others (issue 41): a group shares it, and any member
can plant a link, a FIFO or a directory in it. kache follows none of them out of the share, never waits
on one, and a group-shared share grows for every member: directories and files follow the cache umask
(KACHE_UMASK=002 with a setgid directory, docs/sharing.md), so a second user publishes into the shard
directories the first one created. The tests run as root and run kache as two other uids of one group.
"""
import json
import os
import stat
import subprocess
import time
import unittest

import kachetest

GROUP = 42100
USER_A = 42101
USER_B = 42102
# A command of kache's that hangs is a failed test, not a hung suite.
BOUND_S = 60

SOURCE = "int value_{name}(void) {{ return {n}; }}\n"


class SharedDirTrust(kachetest.KacheTestCase):
    def setUp(self):
        self.private_workspace("kache-share-trust-")
        os.chmod(self.ws, 0o755)  # the other uids read the sources and run from here
        self.shared = self.path("shared")
        os.makedirs(self.shared)
        self.url = "file://" + self.shared
        old = time.time_ns() - 10**10  # older than the compile's clock tick: stored
        for n, name in enumerate(("a", "b")):
            p = self.path(f"{name}.c")
            with open(p, "w") as f:
                f.write(SOURCE.format(name=name, n=n))
            os.utime(p, ns=(old, old))

    def run_kache(self, args, cache, uid=None, env=None, timeout=BOUND_S):
        """kache as root or (uid) as a member of GROUP, with the process umask 022 and its own cache dir."""
        e = dict(self.env, KACHE_DIR=cache, KACHE_REMOTE_STORAGE=self.url, KACHE_UMASK="002")
        e.update(env or {})
        command = [kachetest.KACHE] + list(args)
        if uid is not None:
            e["HOME"] = self.path(f"home-{uid}")
            os.makedirs(e["HOME"], exist_ok=True)
            os.chown(e["HOME"], uid, GROUP)
            os.makedirs(cache, exist_ok=True)
            os.chown(cache, uid, GROUP)  # each user's own cache dir
            command = ["setpriv", f"--reuid={uid}", f"--regid={GROUP}", "--clear-groups"] + command
        r = subprocess.run(command, cwd=self.ws, env=e, capture_output=True, text=True, umask=0o022,
                           timeout=timeout)
        self.assertEqual(r.returncode, 0, f"kache {' '.join(args)}:\n{r.stdout}\n{r.stderr}")
        return r

    def compile(self, name, cache, uid=None):
        out = self.path(f"out-{uid}")
        os.makedirs(out, exist_ok=True)
        if uid is not None:
            os.chown(out, uid, GROUP)
        return self.run_kache(["gcc", "-c", self.path(f"{name}.c"), "-o", os.path.join(out, f"{name}.o")], cache, uid)

    def stats(self, cache, uid=None):
        return json.loads(self.run_kache(["--show-stats", "--json"], cache, uid).stdout)

    def shared_files(self):
        out = []
        for root, _, files in os.walk(self.shared):
            out += [os.path.join(root, f) for f in files]
        return sorted(out)

    def test_a_second_user_publishes_into_the_first_users_shard_directories(self):
        os.chown(self.shared, 0, GROUP)
        os.chmod(self.shared, 0o2775)  # setgid: everything below belongs to the group
        # A publishes b.c's entries; they are taken away again (an eviction, say), their shard
        # directories stay: A's, and the ones B's compile of b.c publishes into.
        self.compile("b", self.path("cache-a0"), USER_A)
        for f in self.shared_files():
            os.unlink(f)
        self.compile("a", self.path("cache-a"), USER_A)
        from_a = self.shared_files()
        self.assertTrue(from_a)
        # B publishes b.c into A's shard directories, and hits A's a.c.
        self.compile("b", self.path("cache-b"), USER_B)
        from_b = [f for f in self.shared_files() if f not in from_a]
        self.assertTrue(from_b, "B's publish failed")
        for f in from_a:
            st = os.stat(f)
            self.assertEqual((st.st_uid, st.st_gid), (USER_A, GROUP), f)
            self.assertEqual(stat.S_IMODE(st.st_mode) & 0o060, 0o060, f"{f}: {oct(st.st_mode)}")
            d = os.stat(os.path.dirname(f))
            self.assertEqual(stat.S_IMODE(d.st_mode) & 0o2070, 0o2070, f"{os.path.dirname(f)}: {oct(d.st_mode)}")
        self.assertTrue(all(os.stat(f).st_uid == USER_B for f in from_b))
        self.assertEqual(self.stats(self.path("cache-b"), USER_B)["remote_errors"], 0)
        self.compile("a", self.path("cache-b"), USER_B)
        s = self.stats(self.path("cache-b"), USER_B)
        self.assertEqual((s["remote_hits"], s["remote_errors"]), (1, 0), json.dumps(s, indent=1))
        # And A, with a fresh cache, hits what B published.
        self.compile("b", self.path("cache-a2"), USER_A)
        self.assertEqual(self.stats(self.path("cache-a2"), USER_A)["remote_hits"], 1)

    def test_a_fifo_at_a_key_never_waits_and_the_next_publish_replaces_it(self):
        self.compile("a", self.path("cache-one"))
        planted = self.shared_files()
        for f in planted:
            os.unlink(f)
            os.mkfifo(f)
        self.compile("a", self.path("cache-two"))  # bounded: a hang fails the test
        s = self.stats(self.path("cache-two"))
        self.assertEqual((s["misses"], s["remote_hits"]), (1, 0), json.dumps(s, indent=1))
        for f in planted:
            self.assertTrue(stat.S_ISREG(os.lstat(f).st_mode), f"{f} is still no regular file")
        self.compile("a", self.path("cache-three"))
        self.assertEqual(self.stats(self.path("cache-three"))["remote_hits"], 1)

    def test_eviction_and_cleanup_never_follow_a_link_out_of_the_share(self):
        self.compile("a", self.path("cache-one"))
        outside = self.path("home")
        os.makedirs(outside)
        secret = os.path.join(outside, "id_rsa")
        with open(secret, "w") as f:
            f.write("secret")
        long_ago = time.time() - 30 * 86400
        os.utime(secret, (long_ago, long_ago))
        os.symlink(outside, os.path.join(self.shared, "zz"))
        self.run_kache(["--evict-older-than", "1d"], self.path("cache-one"))
        self.run_kache(["-c"], self.path("cache-one"), env={"KACHE_REMOTE_STORAGE": self.url + "|max-size=1"})
        self.assertTrue(os.path.exists(secret), "eviction deleted a file outside the share")
        self.assertTrue(os.path.islink(os.path.join(self.shared, "zz")))


if __name__ == "__main__":
    kachetest.main()
