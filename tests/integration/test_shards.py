"""One remote spread over two redis-servers (shards=, issue 31): keys are spread over both by rendezvous
hashing, a second cache dir gets all hits from the two, and with one server killed a build still succeeds,
the live shard still serves its keys and only the dead one's are misses.
"""
import servers
import kachetest
from test_remote import UNITS, RemoteCase


class Shards(RemoteCase):
    def test_spread_and_a_dead_shard_costs_only_its_keys(self):
        with servers.Redis() as a, servers.Redis() as b:
            url = f"redis://127.0.0.1:*|shards={a.port},{b.port}"
            self.build("one", self.env_for("one", url))
            on_a, on_b = a.keys("kache:*"), b.keys("kache:*")
            self.assertFalse(set(on_a) & set(on_b), "a key stored on two shards")
            self.assertTrue(on_a and on_b, f"every key on one shard: {on_a} {on_b}")
            two = self.env_for("two", url)
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"], s["remote_errors"]), (3, 0, 0), s)
            self.assert_plain_equivalent("two")
            b.stop()
            # A third cache dir with shard b dead: every compile succeeds, a's keys are still hits.
            three = self.env_for("two", url, KACHE_DIR=self.path("cache-three"))
            for u in UNITS:
                self.assertEqual(self.compile("two", u, three).stderr, "")
            s = self.stats_of(three)
            self.assertEqual(s["hits"] + s["misses"], 3, s)
            self.assertGreater(s["remote_hits"], 0, s)
            self.assertGreater(s["remote_errors"], 0, s)
            self.assert_plain_equivalent("two")


if __name__ == "__main__":
    kachetest.main()
