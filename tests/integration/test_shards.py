"""One remote spread over two redis-servers (shards=, issue 31): keys are spread over both by rendezvous
hashing, a second cache dir gets all hits from the two, and with one server killed a build still succeeds,
the live shard still serves its keys and only the dead one's are misses.

Which shard holds a key depends on the servers' ports, which are new each run; so the test learns where
each unit's keys went (the keys that appear while it compiles) and asserts exactly what follows from
that, over enough units that both shards hold some and some unit lives wholly on the surviving one.
"""
import os
import shutil
import subprocess

import servers
import kachetest
from kachetest import KacheTestCase

GCC = shutil.which("gcc")
UNITS = [f"u{i}" for i in range(16)]


class Shards(KacheTestCase):
    def setUp(self):
        super().setUp()
        if servers.missing("redis-server") or GCC is None:
            self.skipTest("redis-server or gcc is not installed")
        for checkout in ("one", "two"):
            self.write(f"{checkout}/include/scale.h", "static inline int twice(int x) { return 2 * x; }\n")
            for i, u in enumerate(UNITS):
                self.write(f"{checkout}/src/{u}.c", f'#include "scale.h"\nint f{i}(int x) {{ return twice(x) + {i}; }}\n')
            os.makedirs(self.path(checkout, "build"))

    def env_for(self, checkout, url, cache):
        return {"KACHE_DIR": self.path(cache), "KACHE_REMOTE_STORAGE": url,
                "KACHE_PATHS_BASE_DIRS": self.path(checkout)}

    def compile(self, checkout, unit, env):
        root = self.path(checkout)
        r = self.kache([GCC, "-c", f"{root}/src/{unit}.c", f"-I{root}/include", "-o", f"{unit}.o"],
                       cwd=self.path(checkout, "build"), env=env)
        # A dead shard's warning is kache's one line of the build (issue 42); the rest is the compiler's.
        self.assertEqual(kachetest.compiler_stderr(r.stderr), "")

    def assert_plain_equivalent(self, checkout):
        root = self.path(checkout)
        for u in UNITS:
            subprocess.run([GCC, "-c", f"{root}/src/{u}.c", f"-I{root}/include", "-o", f"plain-{u}.o"],
                           cwd=self.path(checkout, "build"), env=self.env, check=True)
            self.assert_same_object(self.path(checkout, "build", f"{u}.o"),
                                    self.path(checkout, "build", f"plain-{u}.o"))

    def test_spread_and_a_dead_shard_costs_only_its_keys(self):
        with servers.Redis() as a, servers.Redis() as b:
            url = f"redis://127.0.0.1:*|shards={a.port},{b.port}"
            one = self.env_for("one", url, "cache-one")
            # Each unit's keys: those that appear on either shard while it compiles.
            shard_of_unit = {}
            seen_a, seen_b = set(), set()
            for u in UNITS:
                self.compile("one", u, one)
                now_a, now_b = set(a.keys("kache:*")), set(b.keys("kache:*"))
                new_a, new_b = now_a - seen_a, now_b - seen_b
                self.assertTrue(new_a or new_b, f"{u} stored nothing remotely")
                shard_of_unit[u] = ("a" if new_a else "") + ("b" if new_b else "")
                seen_a, seen_b = now_a, now_b
            self.assertFalse(seen_a & seen_b, "a key stored on two shards")
            self.assertTrue(seen_a and seen_b, f"every key on one shard: {seen_a} {seen_b}")
            # The shard that will survive: the one more units live wholly on (each unit's keys are all on
            # one shard about half the time, so with 16 units some are).
            wholly_on = {shard: [u for u in UNITS if shard_of_unit[u] == shard] for shard in ("a", "b")}
            survivor = max(("a", "b"), key=lambda shard: len(wholly_on[shard]))
            self.assertTrue(wholly_on[survivor], f"every unit split over both shards: {shard_of_unit}")

            two = self.env_for("two", url, "cache-two")
            for u in UNITS:
                self.compile("two", u, two)
            s = self.stats(env=two)
            self.assertEqual((s["hits"], s["misses"], s["remote_errors"]), (len(UNITS), 0, 0), s)
            self.assert_plain_equivalent("two")

            (b if survivor == "a" else a).stop()
            # A third cache dir with the other shard dead: every compile succeeds; exactly the units whose
            # keys all live on the survivor are hits, every other one a miss.
            three = self.env_for("two", url, "cache-three")
            for u in UNITS:
                self.compile("two", u, three)
            s = self.stats(env=three)
            self.assertEqual((s["hits"], s["misses"]), (len(wholly_on[survivor]), len(UNITS) - len(wholly_on[survivor])),
                             (s, shard_of_unit))
            self.assertEqual(s["remote_hits"], len(wholly_on[survivor]), s)
            self.assertGreater(s["remote_errors"], 0, s)
            self.assert_plain_equivalent("two")


if __name__ == "__main__":
    kachetest.main()
