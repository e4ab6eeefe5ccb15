"""Cost flat as the cache and the team grow (issue 26), counted in system calls and server commands,
never in time:

- `kache -s` reads per-shard counters: the same file system calls at 100 entries as at 5,000;
- a compile that crosses the size limit evicts a bounded sample, not the whole cache: at 5,000 entries
  over a small limit it unlinks and stats no more than a fixed bound beyond a compile without eviction;
- a second machine (empty cache dir, the same Redis) building all hits writes nothing to the server;
- an absolute include dir spelled with ".." shares between build directories (gcc and nvcc), and a
  ".." through a symbolic link stays correct (specific to its checkout, with the reason logged);
- `kache -C` shows its progress on a terminal, and prints nothing more when stderr is no terminal.
"""
import hashlib
import os
import pty
import re
import shutil
import subprocess
import time
import unittest

import kachetest
import servers
from kachetest import KacheTestCase

STRACE = shutil.which("strace")
GCC = shutil.which("gcc")
OLD_NS = time.time_ns() - 3600 * 10**9


def fill_cache(cache, n, size=2048, prefix="fill"):
    """n synthetic entries written straight into the store's layout (<k0>/<k1k2>/<key>), an hour old,
    and each shard's counters ("<bytes> <entries>") to match."""
    payload = os.urandom(size)
    shards = {}
    for i in range(n):
        key = hashlib.sha256(f"{prefix}{i}".encode()).hexdigest()
        d = os.path.join(cache, key[0], key[1:3])
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, key)
        with open(p, "wb") as f:
            f.write(payload)
        os.utime(p, ns=(OLD_NS + i, OLD_NS + i))
        b, e = shards.get(key[0], (0, 0))
        shards[key[0]] = (b + size, e + 1)
    for shard, (b, e) in shards.items():
        with open(os.path.join(cache, shard, "size"), "w") as f:
            f.write(f"{b} {e}\n")
    return n * size


def strace_counts(argv, env, cwd, calls):
    """{syscall: calls} of argv and its children (strace -f -c)."""
    out = os.path.join(cwd, "strace.%d.txt" % time.time_ns())
    r = subprocess.run([STRACE, "-f", "-c", "-o", out, "-e", "trace=" + calls] + argv, env=env, cwd=cwd,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    counts = {}
    with open(out) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m.group(2) != "total":
                counts[m.group(2)] = int(m.group(1))
    os.unlink(out)
    return counts


class ScaleCase(KacheTestCase):
    def env_with(self, **extra):
        e = dict(self.env)
        e.update(extra)
        return e


class StatsCost(ScaleCase):
    def file_calls_of_stats(self, entries):
        cache = self.path(f"cache-{entries}")
        fill_cache(cache, entries)
        env = self.env_with(KACHE_DIR=cache)
        self.kache(["-s"], env={"KACHE_DIR": cache})  # the stats journal and config, as on any later call
        counts = strace_counts([kachetest.KACHE, "-s"], env, self.ws, "%file,getdents64")
        return sum(counts.values()), counts

    @unittest.skipUnless(STRACE, "strace is not installed")
    def test_show_stats_costs_the_same_at_100_and_5000_entries(self):
        small, small_counts = self.file_calls_of_stats(100)
        large, large_counts = self.file_calls_of_stats(5000)
        # A walk costs at least one stat per entry: 4,900 more calls. Counters cost 16 reads either way.
        self.assertLessEqual(large - small, 20, f"100 entries: {small_counts}\n5000 entries: {large_counts}")
        s = self.stats(env={"KACHE_DIR": self.path("cache-5000")})
        self.assertEqual((s["entries"], s["cache_size"]), (5000, 5000 * 2048))


@unittest.skipUnless(GCC, "gcc is not installed")
class EvictionCost(ScaleCase):
    def compile_counts(self, limit):
        cache = self.path("cache")
        shutil.rmtree(cache, ignore_errors=True)
        total = fill_cache(cache, 5000)
        src = self.write("src/a.c", "int a(int x) { return x + 1; }\n", mtime_ns=OLD_NS)
        env = self.env_with(KACHE_DIR=cache, KACHE_MAX_SIZE=str(limit or total * 4))
        counts = strace_counts([kachetest.KACHE, "gcc", "-c", src, "-o", self.path("a.o")], env, self.ws,
                               "unlink,unlinkat,stat,lstat,newfstatat,fstatat64,statx")
        unlinks = counts.get("unlink", 0) + counts.get("unlinkat", 0)
        stats = sum(v for k, v in counts.items() if "stat" in k)
        return unlinks, stats, total

    @unittest.skipUnless(STRACE, "strace is not installed")
    def test_a_compile_at_the_limit_does_a_bounded_cleanup(self):
        base_unlinks, base_stats, total = self.compile_counts(None)
        unlinks, stats, _ = self.compile_counts(total // 2)
        # Two puts (the result and the manifest), each stat'ing a sample of about 1,024 entries and evicting
        # at most 128; an eviction down to 90 % of the limit over the whole cache would unlink some 2,700
        # and stat 5,000.
        self.assertLessEqual(unlinks - base_unlinks, 2 * 128 + 16, (unlinks, base_unlinks))
        self.assertLessEqual(stats - base_stats, 2 * 1024 + 64, (stats, base_stats))
        self.assertGreater(unlinks - base_unlinks, 0, "nothing was evicted at the limit")
        s = self.stats(env={"KACHE_DIR": self.path("cache")})
        self.assertEqual(s["errors"], 0, s)


@unittest.skipUnless(GCC, "gcc is not installed")
class SecondMachineOverRedis(ScaleCase):
    UNITS = 6
    WRITES = ("set", "setex", "psetex", "setnx", "mset", "append", "del", "unlink", "expire", "pexpire", "getset")

    def setUp(self):
        super().setUp()
        if servers.missing("redis-server"):
            self.skipTest("redis-server is not installed")
        for checkout in ("one", "two"):
            self.write(f"{checkout}/include/h.h", "#define BASE 40\n", mtime_ns=OLD_NS)
            for i in range(self.UNITS):
                self.write(f"{checkout}/src/u{i}.c", f'#include "h.h"\nint u{i}(void) {{ return BASE + {i}; }}\n',
                           mtime_ns=OLD_NS)
            os.makedirs(self.path(checkout, "build"))

    def build(self, checkout, redis):
        env = {"KACHE_DIR": self.path("cache-" + checkout), "KACHE_REMOTE_STORAGE": redis.url,
               "KACHE_PATHS_BASE_DIRS": self.path(checkout)}
        root = self.path(checkout)
        for i in range(self.UNITS):
            self.kache(["gcc", "-c", f"{root}/src/u{i}.c", f"-I{root}/include", "-o", f"u{i}.o"],
                       cwd=self.path(checkout, "build"), env=env)
        return self.stats(env=env)

    @staticmethod
    def write_commands(redis):
        info = redis.command("INFO", "commandstats").decode()
        calls = {m.group(1): int(m.group(2)) for m in re.finditer(r"cmdstat_(\w+):calls=(\d+)", info)}
        return {c: calls.get(c, 0) for c in SecondMachineOverRedis.WRITES}

    def test_an_all_hit_build_from_a_remote_writes_nothing_back(self):
        with servers.Redis() as redis:
            a = self.build("one", redis)
            self.assertEqual((a["misses"], a["stored"]), (self.UNITS, self.UNITS), a)
            before = self.write_commands(redis)
            self.assertGreater(before["set"], 0, "machine A stored nothing remotely")
            b = self.build("two", redis)
            after = self.write_commands(redis)
            self.assertEqual((b["hits"], b["misses"]), (self.UNITS, 0), b)
            self.assertGreater(b["remote_hits"], 0, b)
            self.assertEqual({c: after[c] - before[c] for c in self.WRITES if after[c] != before[c]}, {},
                             f"machine B's all-hit build wrote to Redis: {b}")
            self.assertEqual(b["remote_bytes_written"], 0, b)
            print(f"\nremote hits {b['remote_hits']}: {b['remote_bytes_read'] / b['remote_hits']:.0f} B read and "
                  f"{b['remote_bytes_written'] / b['remote_hits']:.0f} B written per remote hit")
            # Its own next build is local: what it read was kept here.
            again = self.build("two", redis)
            self.assertEqual((again["hits"], again["remote_hits"]), (2 * self.UNITS, b["remote_hits"]), again)
            self.assertEqual(self.write_commands(redis), after)


class DotDotIncludeDir(ScaleCase):
    """A project whose headers live outside the source, output and build directories, named through an
    absolute include dir that climbs: <ws>/proj/lib/x/../inc."""
    def setUp(self):
        super().setUp()
        self.write("proj/lib/inc/h.h", "#define VAL 7\n", mtime_ns=OLD_NS)
        os.makedirs(self.path("proj/lib/x"))
        for b in ("b1", "b2"):
            os.makedirs(self.path(b))

    def compile_in(self, build, compiler, src, include, env=None):
        out = "o.o"
        return self.log_of([compiler, "-c", src, f"-I{include}", "-o", out], cwd=self.path(build), env=env)

    def hits_from_a_second_build_dir(self, compiler, src):
        include = self.path("proj/lib/x/../inc")
        r, log1 = self.compile_in("b1", compiler, src, include)
        self.assertEqual(r.returncode, 0, log1)
        self.assertNotIn("specific to this checkout", log1)
        r, log2 = self.compile_in("b2", compiler, src, include)
        self.assertEqual(r.returncode, 0, log2)
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (1, 1), f"{log1}\n{log2}")

    @unittest.skipUnless(GCC, "gcc is not installed")
    def test_gcc_dotdot_include_dir_shares_between_build_dirs(self):
        src = self.write("proj/src/a.c", '#include "h.h"\nint a(void) { return VAL; }\n', mtime_ns=OLD_NS)
        self.hits_from_a_second_build_dir("gcc", src)

    def test_nvcc_dotdot_include_dir_shares_between_build_dirs(self):
        src = self.write("proj/src/k.cu", '#include "h.h"\n__global__ void k(int* x) { *x = VAL; }\n',
                         mtime_ns=OLD_NS)
        self.hits_from_a_second_build_dir("nvcc", src)

    @unittest.skipUnless(GCC, "gcc is not installed")
    def test_dotdot_through_a_symlink_stays_correct(self):
        # proj/lib/link -> <ws>/other/deep: "proj/lib/link/../inc" is <ws>/other/inc for the kernel and
        # the compiler, though it reads as proj/lib/inc.
        self.write("other/inc/h.h", "#define VAL 9\n", mtime_ns=OLD_NS)
        os.makedirs(self.path("other/deep"))
        os.symlink(self.path("other/deep"), self.path("proj/lib/link"))
        src = self.write("proj/src/a.c", '#include "h.h"\nint a(void) { return VAL; }\n', mtime_ns=OLD_NS)
        include = self.path("proj/lib/link/../inc")
        logs = ""
        for build in ("b1", "b2"):
            r, log = self.compile_in(build, "gcc", src, include)
            self.assertEqual(r.returncode, 0, log)
            logs += log
            subprocess.run(["gcc", "-c", src, f"-I{include}", "-o", "plain.o"], cwd=self.path(build), check=True)
            self.assert_same_object(self.path(build, "o.o"), self.path(build, "plain.o"))
        # The header lies in the -I dir as spelled, which is keyed as written (issue 35: a literal dir is
        # known as spelled and as it resolves), so no entry of another spelling is ever taken for it.
        self.assertNotIn("specific to this checkout", logs)
        # The link now leads elsewhere: proj/lib/inc is what the compiler reads; never the old object.
        os.unlink(self.path("proj/lib/link"))
        os.symlink(self.path("proj/lib/x"), self.path("proj/lib/link"))
        r, log = self.compile_in("b2", "gcc", src, include)
        self.assertEqual(r.returncode, 0, log)
        subprocess.run(["gcc", "-c", src, f"-I{include}", "-o", "plain.o"], cwd=self.path("b2"), check=True)
        self.assert_same_object(self.path("b2", "o.o"), self.path("b2", "plain.o"))


class Progress(ScaleCase):
    def test_clear_shows_progress_on_a_terminal_only(self):
        fill_cache(self.cache, 300)
        plain = self.kache(["-C"])
        self.assertEqual(plain.stderr, "")
        self.assertIn("Removed 300 cache entries", plain.stdout)
        fill_cache(self.cache, 300)
        leader, follower = pty.openpty()
        try:
            r = subprocess.run([kachetest.KACHE, "-C"], env=self.env, stdout=subprocess.PIPE, stderr=follower,
                               text=True, timeout=120)
            os.close(follower)
            follower = None
            shown = b""
            while True:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                shown += chunk
        finally:
            if follower is not None:
                os.close(follower)
            os.close(leader)
        self.assertEqual(r.returncode, 0)
        self.assertIn("Removed 300 cache entries", r.stdout)
        self.assertIn(b"100 %", shown)
        self.assertEqual(self.stats()["entries"], 0)


if __name__ == "__main__":
    unittest.main()
