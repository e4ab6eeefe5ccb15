"""Remote storage on real servers (issue 16): redis-server and nginx (WebDAV) started here on loopback.

Two checkouts of one project at different paths, each with its own local cache, share entries through
the server: the second build is all remote hits, its objects equal a plain nvcc build in that checkout,
and no compiler process runs on those hits. A read-only remote is never written; a dead, restarted or
black-holed server and a corrupt or unauthenticated one never break a build and never give a wrong
object, and the stats count what happened.
"""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import time

import kachetest
import servers
from kachetest import KacheTestCase

STRACE = shutil.which("strace")

HEADER = """#pragma once
__device__ inline float twice(float x) { return 2.0f * x; }
"""
KERNEL = """#include "scale.cuh"
__global__ void k%d(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]) + %d.0f; }
int host%d() { return %d; }
"""
UNITS = ["a", "b", "c"]

class RemoteCase(KacheTestCase):
    def setUp(self):
        super().setUp()
        for name in ("redis-server", "nginx"):
            if servers.missing(name):
                self.skipTest(f"{name} is not installed")
        for checkout in ("one", "two"):
            self.write(f"{checkout}/include/scale.cuh", HEADER)
            for i, u in enumerate(UNITS):
                self.write(f"{checkout}/src/{u}.cu", KERNEL % (i, i, i, i))
            os.makedirs(self.path(checkout, "build"))

    def env_for(self, checkout, url, **extra):
        env = {"KACHE_DIR": self.path("cache-" + checkout), "KACHE_REMOTE_STORAGE": url,
               "KACHE_PATHS_BASE_DIRS": self.path(checkout)}
        env.update(extra)
        return env

    def compile(self, checkout, unit, env, check=True):
        root = self.path(checkout)
        return self.kache(["nvcc", "-c", f"{root}/src/{unit}.cu", f"-I{root}/include", "-o", f"{unit}.o"],
                          cwd=self.path(checkout, "build"), env=env, check=check)

    def cache_log(self, checkout):
        """The warnings kache logged in the cache dir env_for gives this checkout."""
        with open(os.path.join(self.path("cache-" + checkout), "kache.log")) as f:
            return f.read()

    def stats_of(self, env):
        return self.stats(env=env)

    def build(self, checkout, env):
        for u in UNITS:
            self.compile(checkout, u, env)

    def assert_plain_equivalent(self, checkout, units=UNITS):
        root = self.path(checkout)
        for u in units:
            self.nvcc(["-c", f"{root}/src/{u}.cu", f"-I{root}/include", "-o", f"plain-{u}.o"],
                      cwd=self.path(checkout, "build"))
            self.assert_same_object(self.path(checkout, "build", f"{u}.o"),
                                    self.path(checkout, "build", f"plain-{u}.o"))

    def executed(self, checkout, unit, env):
        """The programs one compile runs (strace -f), kache itself excluded."""
        trace = self.path("trace-" + unit)
        root = self.path(checkout)
        e = dict(self.env)
        e.update(env)
        subprocess.run([STRACE, "-f", "-qq", "-e", "trace=execve", "-o", trace, kachetest.KACHE, "nvcc", "-c",
                        f"{root}/src/{unit}.cu", f"-I{root}/include", "-o", f"{unit}.o"],
                       cwd=self.path(checkout, "build"), env=e, check=True, capture_output=True)
        with open(trace) as f:
            progs = re.findall(r'execve\("([^"]+)"', f.read())
        return [p for p in progs if os.path.realpath(p) != os.path.realpath(kachetest.KACHE)]

    def share_through(self, url):
        one = self.env_for("one", url)
        two = self.env_for("two", url)
        self.build("one", one)
        s = self.stats_of(one)
        self.assertEqual((s["misses"], s["remote_writes"] > 0), (3, True), s)
        # The second checkout's cache is empty: the first compile also probes the toolchain (once per
        # cache dir), the others must run nothing at all.
        self.compile("two", UNITS[0], two)
        if STRACE:
            for u in UNITS[1:]:
                self.assertEqual(self.executed("two", u, two), [], f"{u}: a remote hit ran a process")
        else:
            for u in UNITS[1:]:
                self.compile("two", u, two)
        s = self.stats_of(two)
        self.assertEqual((s["hits"], s["misses"]), (3, 0), s)
        self.assertEqual(s["remote_hits"] > 0, True, s)
        self.assert_plain_equivalent("two")
        # Hits were written back: the same build again is local only.
        before = s["remote_hits"]
        self.build("two", two)
        self.assertEqual(self.stats_of(two)["remote_hits"], before)


class SharedThroughServers(RemoteCase):
    def test_redis(self):
        with servers.Redis() as redis:
            self.share_through(redis.url)
            self.assertTrue(any(k.startswith("kache:") for k in redis.keys()))

    def test_redis_with_password(self):
        with servers.Redis(password="s3cret") as redis:
            self.share_through(redis.url)

    def test_webdav(self):
        with servers.Nginx() as nginx:
            self.share_through(nginx.url + "/cache")
            self.assertTrue(nginx.stored_files())

    def test_webdav_basic_auth(self):
        with servers.Nginx(basic_auth=("kache", "pw")) as nginx:
            self.share_through(nginx.url.replace("http://", "http://kache:pw@") + "/cache")

    def test_https_with_a_ca_file(self):
        with servers.Nginx(tls=True) as nginx:
            self.env["KACHE_REMOTE_CA_FILE"] = nginx.ca_cert
            self.share_through(nginx.url + "/cache|layout=bazel")

    def test_ca_file_is_an_extra_ca_beside_the_systems(self):
        # remote.ca_file adds a CA; the system's (here OpenSSL's SSL_CERT_FILE, holding a second CA made
        # here) stay trusted beside it. Each server is signed by its own CA.
        with servers.Nginx(tls=True) as private, servers.Nginx(tls=True) as public:
            for name, nginx in (("private", private), ("public", public)):
                with self.subTest(server=name):
                    env = self.env_for("one", nginx.url + "/cache", KACHE_DIR=self.path("cache-" + name),
                                       KACHE_REMOTE_CA_FILE=private.ca_cert, SSL_CERT_FILE=public.ca_cert)
                    self.compile("one", "a", env)
                    s = self.stats_of(env)
                    self.assertEqual((s["remote_errors"], s["remote_writes"] > 0), (0, True), s)
                    self.assertTrue(nginx.stored_files())
            # Neither CA trusts a server signed by another: the ca_file widens trust by its own CA only.
            env = self.env_for("one", public.url + "/cache", KACHE_DIR=self.path("cache-neither"),
                               KACHE_REMOTE_CA_FILE=private.ca_cert, SSL_CERT_FILE=private.ca_cert)
            self.compile("one", "a", env)
            s = self.stats_of(env)
            self.assertEqual((s["remote_errors"] > 0, s["remote_writes"]), (True, 0), s)

    def test_show_config_redacts_the_password(self):
        r = self.kache(["--show-config"], env={"KACHE_REMOTE_STORAGE": "redis://:hunter2@127.0.0.1:1"})
        self.assertIn("redis://:***@127.0.0.1:1", r.stdout)
        self.assertNotIn("hunter2", r.stdout + r.stderr)


class Modes(RemoteCase):
    def test_read_only_stores_nothing_remotely(self):
        with servers.Redis() as redis:
            self.build("one", self.env_for("one", redis.url + "|read-only"))
            self.assertEqual(redis.keys(), [])
            self.build("one", self.env_for("one", redis.url, KACHE_REMOTE_READ_ONLY="1", KACHE_DIR=self.path("c2")))
            self.assertEqual(redis.keys(), [])

    def test_remote_only_writes_no_local_entries(self):
        with servers.Redis() as redis:
            env = self.env_for("one", redis.url, KACHE_REMOTE_ONLY="1")
            self.build("one", env)
            self.assertEqual(self.stats_of(env)["entries"], 0)
            self.assertTrue(redis.keys())
            two = self.env_for("two", redis.url)
            self.build("two", two)
            self.assertEqual(self.stats_of(two)["hits"], 3)


class Outages(RemoteCase):
    def test_dead_server_never_breaks_a_build(self):
        url = f"redis://127.0.0.1:{servers.free_port()}"
        env = self.env_for("one", url)
        self.build("one", env)
        s = self.stats_of(env)
        self.assertEqual((s["misses"], s["remote_errors"], s["remote_skipped"]), (3, 3, 0), s)
        # After three failures the breaker skips the server without connecting, for 30 s from the third;
        # its state file holds the end of that window. What runs before the next build's lookups counts
        # against it: the objects are compared with nvcc's after that build, and its compiles start
        # together (one after the other, a loaded machine stretched them past the window).
        states = glob.glob(os.path.join(env["KACHE_DIR"], "remote-state", "*.state"))
        self.assertEqual(len(states), 1, states)
        with open(states[0]) as f:
            failures, open_until_ns = map(int, f.read().split())
        self.assertEqual(failures, 3)
        for u in UNITS:
            os.rename(self.path("one", "build", f"{u}.o"), self.path("one", "build", f"first-{u}.o"))
        self.kache(["-C"], env=env)
        root = self.path("one")
        procs = [subprocess.Popen([kachetest.KACHE, "nvcc", "-c", f"{root}/src/{u}.cu", f"-I{root}/include", "-o",
                                   f"{u}.o"], cwd=self.path("one", "build"), env=dict(self.env, **env),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for u in UNITS]
        for u, p in zip(UNITS, procs):
            out, err = p.communicate()
            self.assertEqual(p.returncode, 0, f"{u}: {out}{err}")
        # Read after the build: a build that ended before the window did was in it from start to end.
        build_ended_ns = time.time_ns()
        s = self.stats_of(env)
        self.assertEqual(s["misses"], 6, s)
        self.assert_plain_equivalent("one")
        for u in UNITS:
            self.assert_same_object(self.path("one", "build", f"first-{u}.o"),
                                    self.path("one", "build", f"plain-{u}.o"))
        if build_ended_ns >= open_until_ns:
            self.skipTest("the second build outlasted the breaker's 30 s window (a slow machine)")
        self.assertEqual((s["misses"], s["remote_errors"], s["remote_skipped"]), (6, 3, 3), s)

    def test_refused_server_is_a_warning_in_the_log_and_in_the_stats(self):
        # Under Ninja a compile's stderr is a pipe: a refused remote must still reach the user, in the cache's
        # kache.log (with what to do), in `kache -s` (the top `errors` line and the newest warning) and doctor.
        url = f"redis://127.0.0.1:{servers.free_port()}"
        env = self.env_for("one", url)
        r = self.compile("one", "a", env)
        self.assertRegex(r.stderr, r"^kache: warning: remote storage redis://127\.0\.0\.1:\d+ failed to read[^\n]*\n$",
                         "the build's one warning line (issue 42), and nothing else")
        log = self.cache_log("one")
        self.assertRegex(log, r"\] warning: remote storage redis://127\.0\.0\.1:\d+ failed to read: .*kache doctor")
        s = self.stats_of(env)
        self.assertEqual((s["errors"], s["error_reasons"]), (1, {"remote-failed": 1}), s)
        self.assertIn("remote storage redis://127.0.0.1", s["last_warning"])
        text = self.kache(["-s"], env=env).stdout
        self.assertRegex(text, r"(?m)^errors +1$")
        self.assertRegex(text, r"(?m)^last warning +\[kache .*remote storage redis://127\.0\.0\.1")
        r = self.kache(["doctor", "--json"], env=env, check=False)
        rows = {f'{x["section"]}.{x["name"]}': x for x in json.loads(r.stdout)["rows"]}
        self.assertIn("remote storage", rows["cache.last-warning"]["value"])

    def test_black_holed_server_times_out(self):
        for full in (False, True):
            with servers.BlackHole(full_backlog=full) as hole:
                env = self.env_for("one", hole.url("redis") + "|connect-timeout=100|operation-timeout=300",
                                   KACHE_DIR=self.path(f"c-{full}"))
                self.build("one", env)
                s = self.stats_of(env)
                self.assertEqual(s["misses"], 3, s)
                self.assertGreater(s["remote_timeouts"] + s["remote_skipped"], 0, s)
        self.assert_plain_equivalent("one")

    def test_a_name_whose_ipv6_address_black_holes_connects_over_ipv4(self):
        # A name with an AAAA record whose route drops packets (a firewall that drops IPv6) and an A
        # record of the server: hiredis, which resolved Redis names itself, tried IPv4 first; kache
        # resolving names now (for both remote kinds) must too, not spend all of connect-timeout on the
        # IPv6 address and lose the remote.
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError:
            self.skipTest("no IPv6 loopback (::1) for the black hole")
        # The name's two addresses come from a hosts file of the test's own (CARES_HOSTS), in this order.
        hosts = self.write("hosts", "::1 dual.kache.invalid\n127.0.0.1 dual.kache.invalid\n")
        with servers.Redis() as redis, servers.Nginx() as nginx:
            for scheme, port, stored in (("redis", redis.port, lambda: redis.keys("kache:*")),
                                         ("http", nginx.port, nginx.stored_files)):
                with self.subTest(scheme=scheme), servers.BlackHole(full_backlog=True, host="::1", port=port):
                    path = "/cache" if scheme == "http" else ""
                    env = self.env_for("one", f"{scheme}://dual.kache.invalid:{port}{path}|connect-timeout=1000",
                                       KACHE_DIR=self.path("c-" + scheme), CARES_HOSTS=hosts)
                    self.compile("one", "a", env)
                    s = self.stats_of(env)
                    self.assertEqual((s["misses"], s["remote_timeouts"], s["remote_errors"]), (1, 0, 0), s)
                    self.assertTrue(stored(), "nothing was written to the server")
        self.assert_plain_equivalent("one", units=["a"])

    def test_server_killed_and_restarted(self):
        redis = servers.Redis()
        env = self.env_for("one", redis.url)
        try:
            self.compile("one", "a", env)
            redis.stop()
            self.compile("one", "b", env)
            s = self.stats_of(env)
            self.assertGreater(s["remote_errors"], 0, s)
        finally:
            redis.stop()
        # The server restarted on the same port (same URL): written again (one failure does not open
        # the breaker).
        redis = servers.Redis(port=redis.port)
        try:
            self.compile("one", "c", env)
            self.assertTrue(redis.keys())
        finally:
            redis.stop()
        self.assert_plain_equivalent("one")

    def test_wrong_password_warns_and_builds(self):
        with servers.Redis(password="right") as redis:
            env = self.env_for("one", redis.url.replace(":right@", ":wrong@"))
            r = self.compile("one", "a", env)
            self.assertRegex(r.stderr, r"^kache: warning: remote storage redis://:\*\*\*@[^\n]*\n$",
                             "the build's one warning line (issue 42), and nothing else")
            log = self.cache_log("one")
            self.assertIn("refused the credentials", log)
            self.assertNotIn("wrong", log.replace("wrong@", ""))
            self.compile("one", "b", env)
            self.compile("one", "c", env)
            self.assert_plain_equivalent("one")
            self.assertEqual(redis.keys(), [])


class Signing(RemoteCase):
    """remote.signing_key_file: values carry an HMAC-SHA-256 over their key and bytes; a reader with a
    key refuses unsigned and wrongly signed values (a miss, counted), never serving them."""

    def key_file(self, name, text):
        return self.write(name, text)

    def test_same_key_shares(self):
        key = self.key_file("team.key", "team secret of sixteen bytes or more\n")
        with servers.Redis() as redis:
            self.build("one", self.env_for("one", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=key))
            two = self.env_for("two", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=key)
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"], s["remote_bad_signature"]), (3, 0, 0), s)
            self.assert_plain_equivalent("two")
            for k in redis.keys():
                self.assertTrue(redis.get(k).endswith(b"KACHESG1"), k)

    def test_other_key_is_refused(self):
        with servers.Redis() as redis:
            self.build("one", self.env_for("one", redis.url,
                                           KACHE_REMOTE_SIGNING_KEY_FILE=self.key_file("a.key", "attacker secret of sixteen bytes")))
            two = self.env_for("two", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=self.key_file("b.key", "team secret of sixteen bytes"))
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"]), (0, 3), s)
            self.assertGreater(s["remote_bad_signature"], 0, s)
            self.assert_plain_equivalent("two")

    def test_unsigned_values_are_refused_with_a_key(self):
        with servers.Redis() as redis:
            self.build("one", self.env_for("one", redis.url))
            two = self.env_for("two", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=self.key_file("b.key", "team secret of sixteen bytes"))
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"]), (0, 3), s)
            self.assertGreater(s["remote_unsigned"], 0, s)
            self.assert_plain_equivalent("two")

    def test_signed_value_with_a_forged_payload_is_refused(self):
        key = self.key_file("team.key", "team secret of sixteen bytes")
        with servers.Redis() as redis:
            self.build("one", self.env_for("one", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=key))
            # Keep every trailer, change the payload: the signature no longer matches.
            for k in redis.keys():
                v = redis.get(k)
                redis.command("SET", k, bytes([v[0] ^ 1]) + v[1:])
            two = self.env_for("two", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=key)
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"]), (0, 3), s)
            self.assertGreater(s["remote_bad_signature"], 0, s)

    def test_short_key_turns_remotes_off(self):
        # A 4-byte key was accepted: a secret anyone can guess signs nothing.
        with servers.Redis() as redis:
            env = self.env_for("one", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=self.key_file("short.key", "team"))
            r = self.compile("one", "a", env)
            self.assertRegex(r.stderr, r"^kache: warning: [^\n]*holds 4 bytes, fewer than 16; remote storage is off[^\n]*\n$")
            self.assertIn("holds 4 bytes, fewer than 16; remote storage is off", self.cache_log("one"))
            self.assertEqual(redis.keys(), [])

    def test_unreadable_key_file_turns_remotes_off(self):
        with servers.Redis() as redis:
            env = self.env_for("one", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=self.path("missing.key"))
            r = self.compile("one", "a", env)
            self.assertRegex(r.stderr, r"^kache: warning: cannot read remote\.signing_key_file [^\n]*\n$")
            self.assertIn("remote storage is off", self.cache_log("one"))
            self.assertEqual(redis.keys(), [])


class Poisoning(RemoteCase):
    def corrupt_every_value(self, redis, how):
        for key in redis.keys():
            value = redis.get(key)
            redis.command("SET", key, how(value))

    def check_never_served(self, how):
        with servers.Redis() as redis:
            self.build("one", self.env_for("one", redis.url))
            self.corrupt_every_value(redis, how)
            two = self.env_for("two", redis.url)
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"]), (0, 3), s)
            self.assert_plain_equivalent("two")

    def test_flipped_byte(self):
        self.check_never_served(lambda v: v[:-20] + bytes([v[-20] ^ 0x40]) + v[-19:])

    def test_truncated(self):
        self.check_never_served(lambda v: v[: len(v) // 2])

    def test_garbage(self):
        self.check_never_served(lambda v: b"\x00" * len(v))


def static_kache_beside(kache):
    """The statically linked kache: `kache-static` beside a test build's kache, or kache itself in a release
    build (no program interpreter). None when there is none."""
    here = os.path.dirname(os.path.realpath(kache))
    for candidate in (os.path.join(here, "kache-static"), os.path.realpath(kache)):
        if os.path.exists(candidate):
            with open(candidate, "rb") as f:
                if b"/lib64/ld-linux" not in f.read(4096):
                    return candidate
    return None


def by_host_name(url):
    """The same server named by host name ("localhost", from /etc/hosts)."""
    return url.replace("127.0.0.1", "localhost", 1)


class SingleStaticBinary(RemoteCase):
    """The release kache is one static program (a hit pays no dynamic loader) that serves every remote
    itself: Redis, http and https, by numeric address or by host name (c-ares, no NSS), TLS by OpenSSL
    linked in. It runs no other program than the compiler and opens no shared library."""

    def setUp(self):
        super().setUp()
        static = static_kache_beside(kachetest.KACHE)
        self.assertIsNotNone(static, "no static kache (kache-static or a static kache) beside " + kachetest.KACHE)
        os.makedirs(self.path("inst"))
        shutil.copy2(static, self.path("inst", "kache"))
        self.saved_kache = kachetest.KACHE
        kachetest.KACHE = self.path("inst", "kache")

    def tearDown(self):
        kachetest.KACHE = self.saved_kache
        super().tearDown()

    def programs_run(self, args, env, cwd):
        trace = self.path("trace-static")
        e = dict(self.env)
        e.update(env)
        subprocess.run([STRACE, "-f", "-qq", "-e", "trace=execve,openat", "-o", trace] + args, cwd=cwd, env=e,
                       check=True, capture_output=True)
        with open(trace) as f:
            lines = f.read().splitlines()
        # What kache's own process (the first pid of the trace) opened, and every program run.
        kache_pid = lines[0].split()[0] if lines else None
        self.kache_opened = [m.group(1) for line in lines if line.split()[0] == kache_pid
                             for m in [re.search(r'openat\([^"]*"([^"]+)"', line)] if m]
        return re.findall(r'execve\("([^"]+)"', "\n".join(lines))

    def first_compile_programs(self, url):
        root = self.path("one")
        return self.programs_run([kachetest.KACHE, "nvcc", "-c", f"{root}/src/a.cu", f"-I{root}/include", "-o",
                                  "a.o"], self.env_for("one", url), self.path("one", "build"))

    def check_served_in_process(self, url):
        if not STRACE:
            return
        shutil.rmtree(self.path("cache-one"), ignore_errors=True)
        progs = self.first_compile_programs(url)
        self.assertEqual(progs[0], kachetest.KACHE, progs)
        self.assertEqual([p for p in progs if os.path.basename(p).startswith("kache")], [kachetest.KACHE], progs)
        # ... and loaded nothing: no NSS module, no libcurl (a static program has no loader).
        self.assertEqual([f for f in self.kache_opened if ".so" in f], [])

    def test_numeric_address_and_host_name(self):
        with servers.Nginx() as nginx, servers.Redis() as redis:
            for url in (nginx.url + "/cache", redis.url, by_host_name(nginx.url) + "/cache", by_host_name(redis.url)):
                with self.subTest(url=url):
                    self.check_served_in_process(url)
        shutil.rmtree(self.path("cache-one"), ignore_errors=True)
        with servers.Nginx() as nginx:  # a server that has not seen these compiles
            self.share_through(by_host_name(nginx.url) + "/cache")
            self.assertTrue(nginx.stored_files())

    def test_https_by_host_name(self):
        with servers.Nginx(tls=True) as nginx:
            self.env["KACHE_REMOTE_CA_FILE"] = nginx.ca_cert
            url = by_host_name(nginx.url) + "/cache|connect-timeout=2000"
            self.check_served_in_process(url)
            self.share_through(url)
            self.assertTrue(nginx.stored_files())

    def test_https_with_ssl_cert_file(self):
        # No remote.ca_file: the system's CAs, here replaced through OpenSSL's SSL_CERT_FILE.
        with servers.Nginx(tls=True) as nginx:
            url = by_host_name(nginx.url) + "/cache|connect-timeout=2000"
            env = self.env_for("one", url, SSL_CERT_FILE=nginx.ca_cert)
            self.compile("one", "a", env)
            s = self.stats_of(env)
            self.assertEqual((s["misses"], s["remote_errors"], s["remote_writes"] > 0), (1, 0, True), s)
            # Without it the self-signed CA is not trusted: an error, the build goes on.
            env = self.env_for("one", url, KACHE_DIR=self.path("c-untrusted"))
            self.compile("one", "b", env)
            s = self.stats_of(env)
            self.assertEqual((s["misses"], s["remote_errors"] > 0, s["remote_writes"]), (1, True, 0), s)

    def test_link_named_nvcc_does_not_run_itself_as_the_compiler(self):
        os.symlink(self.path("inst", "kache"), self.path("inst", "nvcc"))
        with servers.Nginx() as nginx:
            env = self.env_for("one", by_host_name(nginx.url) + "/cache")
            env["PATH"] = self.path("inst") + os.pathsep + kachetest.nvcc_home() + os.pathsep + os.environ["PATH"]
            root = self.path("one")
            e = dict(self.env)
            e.update(env)
            r = subprocess.run([self.path("inst", "nvcc"), "-c", f"{root}/src/a.cu", f"-I{root}/include", "-o",
                                "a.o"], cwd=self.path("one", "build"), env=e, capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            s = self.stats_of(env)
            self.assertEqual((s["misses"], s["remote_writes"] > 0), (1, True), s)


if __name__ == "__main__":
    kachetest.main()
