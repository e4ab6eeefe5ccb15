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

# An LD_PRELOAD hook: getaddrinfo of the name in HANG_HOST sleeps 60 s first, as with a DNS server that
# never answers; other names resolve as usual. The compiler kache runs does not inherit it.
HANGING_RESOLVER_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char hang_host[256];

__attribute__((constructor)) static void init(void) {
  const char* h = getenv("HANG_HOST");
  if (h) strncpy(hang_host, h, sizeof(hang_host) - 1);
  unsetenv("LD_PRELOAD");
}

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints, struct addrinfo** res) {
  if (node && hang_host[0] && strcmp(node, hang_host) == 0) sleep(60);
  int (*real)(const char*, const char*, const struct addrinfo*, struct addrinfo**) =
      (int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**))dlsym(RTLD_NEXT, "getaddrinfo");
  return real(node, service, hints, res);
}
"""

# An LD_PRELOAD hook: getaddrinfo of the name in CRAFTED_HOST answers the numeric addresses listed in
# CRAFTED_ADDRESSES ("::1,127.0.0.1"), in that order, as a DNS server with A and AAAA records would (and
# as glibc sorts them when IPv6 is preferred); the caller's hints still apply (an AF_INET-only lookup
# gets the IPv4 ones). Other names resolve as usual.
CRAFTED_RESOLVER_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

static char crafted_host[256];
static char crafted_addresses[1024];

__attribute__((constructor)) static void init(void) {
  const char* h = getenv("CRAFTED_HOST");
  const char* a = getenv("CRAFTED_ADDRESSES");
  if (h) strncpy(crafted_host, h, sizeof(crafted_host) - 1);
  if (a) strncpy(crafted_addresses, a, sizeof(crafted_addresses) - 1);
  unsetenv("LD_PRELOAD");
}

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints, struct addrinfo** res) {
  int (*real)(const char*, const char*, const struct addrinfo*, struct addrinfo**) =
      (int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**))dlsym(RTLD_NEXT, "getaddrinfo");
  if (!node || !crafted_host[0] || strcmp(node, crafted_host) != 0) return real(node, service, hints, res);
  char list[sizeof(crafted_addresses)];
  strcpy(list, crafted_addresses);
  struct addrinfo* first = NULL;
  struct addrinfo** tail = &first;
  struct addrinfo numeric = hints ? *hints : (struct addrinfo){0};
  numeric.ai_flags |= AI_NUMERICHOST;
  char* save = NULL;
  for (char* address = strtok_r(list, ",", &save); address; address = strtok_r(NULL, ",", &save)) {
    struct addrinfo* found = NULL;
    if (real(address, service, &numeric, &found) != 0) continue;
    *tail = found;  /* glibc frees each node on its own: lists chain safely */
    while (*tail) tail = &(*tail)->ai_next;
  }
  *res = first;
  return first ? 0 : EAI_NONAME;
}
"""


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
        ours = {os.path.realpath(kachetest.KACHE), os.path.realpath(os.path.join(os.path.dirname(kachetest.KACHE),
                                                                               "kache-http"))}
        return [p for p in progs if os.path.realpath(p) not in ours]

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

    def test_a_resolver_that_hangs_costs_no_more_than_connect_timeout(self):
        # getaddrinfo blocks for as long as the system's resolver takes: an LD_PRELOAD hook makes it hang
        # for HANG_HOST (60 s), as a dead DNS server would. Both remote kinds wait for it at most
        # connect-timeout, count a timeout, and the build goes on.
        hook = self.build_preload_hook("hang", HANGING_RESOLVER_C)
        for scheme in ("redis", "http"):
            env = self.env_for("one", f"{scheme}://hang.kache.invalid:1|connect-timeout=100",
                               KACHE_DIR=self.path("c-" + scheme), HANG_HOST="hang.kache.invalid",
                               **self.preload_env(hook))
            started = time.monotonic()
            self.compile("one", "a", env)
            took = time.monotonic() - started
            s = self.stats_of(env)
            self.assertEqual((s["misses"], s["remote_timeouts"]), (1, 1), s)
            # A bound, not a benchmark: the hook hangs for 60 s; the compile itself takes about 1 s.
            self.assertLess(took, 30, f"{scheme}: the compile waited for the resolver")
        self.assert_plain_equivalent("one", units=["a"])

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
        hook = self.build_preload_hook("crafted", CRAFTED_RESOLVER_C)
        with servers.Redis() as redis, servers.Nginx() as nginx:
            for scheme, port, stored in (("redis", redis.port, lambda: redis.keys("kache:*")),
                                         ("http", nginx.port, nginx.stored_files)):
                with self.subTest(scheme=scheme), servers.BlackHole(full_backlog=True, host="::1", port=port):
                    path = "/cache" if scheme == "http" else ""
                    env = self.env_for("one", f"{scheme}://dual.kache.invalid:{port}{path}|connect-timeout=1000",
                                       KACHE_DIR=self.path("c-" + scheme), CRAFTED_HOST="dual.kache.invalid",
                                       CRAFTED_ADDRESSES="::1,127.0.0.1", **self.preload_env(hook))
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
            self.assertEqual(r.stderr, "", "a compile's stderr is the compiler's; the warning goes to the log")
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
        key = self.key_file("team.key", "team secret\n")
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
                                           KACHE_REMOTE_SIGNING_KEY_FILE=self.key_file("a.key", "attacker")))
            two = self.env_for("two", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=self.key_file("b.key", "team"))
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"]), (0, 3), s)
            self.assertGreater(s["remote_bad_signature"], 0, s)
            self.assert_plain_equivalent("two")

    def test_unsigned_values_are_refused_with_a_key(self):
        with servers.Redis() as redis:
            self.build("one", self.env_for("one", redis.url))
            two = self.env_for("two", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=self.key_file("b.key", "team"))
            self.build("two", two)
            s = self.stats_of(two)
            self.assertEqual((s["hits"], s["misses"]), (0, 3), s)
            self.assertGreater(s["remote_unsigned"], 0, s)
            self.assert_plain_equivalent("two")

    def test_signed_value_with_a_forged_payload_is_refused(self):
        key = self.key_file("team.key", "team")
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

    def test_unreadable_key_file_turns_remotes_off(self):
        with servers.Redis() as redis:
            env = self.env_for("one", redis.url, KACHE_REMOTE_SIGNING_KEY_FILE=self.path("missing.key"))
            r = self.compile("one", "a", env)
            self.assertEqual(r.stderr, "")
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


def static_front_beside(kache):
    """The statically linked kache that hands remotes over to kache-http: `kache-static` beside a test
    build's kache, or kache itself in a release build (no program interpreter). None when there is none."""
    here = os.path.dirname(os.path.realpath(kache))
    for candidate in (os.path.join(here, "kache-static"), os.path.realpath(kache)):
        if os.path.exists(candidate) and os.path.exists(os.path.join(here, "kache-http")):
            with open(candidate, "rb") as f:
                if b"/lib64/ld-linux" not in f.read(4096):
                    return candidate
    return None


def by_host_name(url):
    """The same server named by host name ("localhost"), which a static kache must not resolve itself."""
    return url.replace("127.0.0.1", "localhost", 1)


class StaticFront(RemoteCase):
    """The release kache is static (a hit pays no dynamic loader): it serves Redis and http:// remotes given
    by numeric address itself, and hands https:// remotes (libcurl) and host names (NSS) over to
    kache-http, its dynamically linked sibling, which does the work."""

    def setUp(self):
        super().setUp()
        front = static_front_beside(kachetest.KACHE)
        self.assertIsNotNone(front, "no static kache (kache-static or a static kache) beside " + kachetest.KACHE)
        # The pair as installed: both in one directory, the front named kache.
        os.makedirs(self.path("inst"))
        shutil.copy2(front, self.path("inst", "kache"))
        shutil.copy2(os.path.join(os.path.dirname(front), "kache-http"), self.path("inst", "kache-http"))
        self.saved_kache = kachetest.KACHE
        kachetest.KACHE = self.path("inst", "kache")

    def tearDown(self):
        kachetest.KACHE = self.saved_kache
        super().tearDown()

    def programs_run(self, args, env, cwd):
        trace = self.path("trace-front")
        e = dict(self.env)
        e.update(env)
        subprocess.run([STRACE, "-f", "-qq", "-e", "trace=execve,openat", "-o", trace] + args, cwd=cwd, env=e,
                       check=True, capture_output=True)
        with open(trace) as f:
            lines = f.read().splitlines()
        # What the front's own process (the first pid of the trace) opened, and every program run.
        front_pid = lines[0].split()[0] if lines else None
        self.front_opened = [m.group(1) for line in lines if line.split()[0] == front_pid
                             for m in [re.search(r'openat\([^"]*"([^"]+)"', line)] if m]
        return re.findall(r'execve\("([^"]+)"', "\n".join(lines))

    def first_compile_programs(self, url):
        root = self.path("one")
        return self.programs_run([kachetest.KACHE, "nvcc", "-c", f"{root}/src/a.cu", f"-I{root}/include", "-o",
                                  "a.o"], self.env_for("one", url), self.path("one", "build"))

    def test_numeric_address_stays_in_the_front(self):
        with servers.Nginx() as nginx, servers.Redis() as redis:
            for url in (nginx.url + "/cache", redis.url):
                with self.subTest(url=url):
                    if STRACE:
                        shutil.rmtree(self.path("cache-one"), ignore_errors=True)
                        progs = self.first_compile_programs(url)
                        self.assertNotIn(self.path("inst", "kache-http"), progs)
                        self.assertEqual(progs[0], kachetest.KACHE, progs)
                        # ... and loaded nothing: no NSS module, no libcurl (a static program has no loader).
                        self.assertEqual([f for f in self.front_opened if ".so" in f], [])
            self.share_through(nginx.url + "/cache")
            self.assertTrue(nginx.stored_files())

    def test_host_name_is_handed_over(self):
        with servers.Nginx() as nginx:
            url = by_host_name(nginx.url) + "/cache"
            if STRACE:
                progs = self.first_compile_programs(url)
                self.assertEqual(progs[:2], [kachetest.KACHE, self.path("inst", "kache-http")], progs)
            self.share_through(url)
            self.assertTrue(nginx.stored_files())

    def test_no_remote_no_hand_over(self):
        if not STRACE:
            self.skipTest("strace is not installed")
        root = self.path("one")
        progs = self.programs_run([kachetest.KACHE, "nvcc", "-c", f"{root}/src/a.cu", f"-I{root}/include", "-o",
                                   "a.o"], {"KACHE_DIR": self.path("cache-one")}, self.path("one", "build"))
        self.assertNotIn(self.path("inst", "kache-http"), progs)

    def test_link_named_nvcc_does_not_run_the_front_as_the_compiler(self):
        # nvcc -> kache first on PATH: kache-http must skip the front too when it looks for nvcc.
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

    def test_missing_sibling_builds_without_remotes_it_would_serve(self):
        os.unlink(self.path("inst", "kache-http"))
        with servers.Nginx() as nginx:
            env = self.env_for("one", by_host_name(nginx.url) + "/cache")
            self.build("one", env)
            self.assertEqual(nginx.stored_files(), [])
            s = self.stats_of(env)
            self.assertEqual((s["misses"], s["remote_writes"]), (3, 0), s)
        self.assert_plain_equivalent("one")

    def replace_sibling_by_one_that_cannot_load(self):
        """kache-http executable but its dynamic loader fails (an older glibc on the host, a missing .so):
        here a program linked to a library deleted since."""
        gone = self.path("gone")
        os.makedirs(gone)
        self.write("gone/gone.c", "int gone(void) { return 0; }\n")
        self.write("gone/main.c", "int gone(void);\nint main(void) { return gone(); }\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", os.path.join(gone, "libkachegone.so"),
                        os.path.join(gone, "gone.c")], check=True)
        helper = self.path("inst", "kache-http")
        os.unlink(helper)
        subprocess.run(["gcc", "-o", helper, os.path.join(gone, "main.c"), "-L" + gone, "-lkachegone",
                        "-Wl,-rpath," + gone], check=True)
        os.unlink(os.path.join(gone, "libkachegone.so"))
        r = subprocess.run([helper], capture_output=True, text=True)
        self.assertEqual(r.returncode, 127, r.stderr)  # what an execv of it would have made of every compile

    def test_sibling_that_cannot_load_runs_the_compiler(self):
        self.replace_sibling_by_one_that_cannot_load()
        self.write("w/foo.c", "int twice(int x) { return 2 * x; }\n")
        self.write("w/bad.c", "int bad(void) { return undeclared; }\n")
        env = {"KACHE_DIR": self.path("cache-one"), "KACHE_REMOTE_STORAGE": "http://localhost:9/cache"}
        cwd = self.path("w")
        for _ in range(2):  # a miss, then a local hit
            r = self.kache(["gcc", "-c", "foo.c", "-o", "foo.o"], cwd=cwd, env=env, check=False)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        plain = subprocess.run(["gcc", "-c", "foo.c", "-o", "plain.o"], cwd=cwd, capture_output=True, text=True)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assert_same_object(self.path("w", "foo.o"), self.path("w", "plain.o"))
        s = self.stats_of(env)
        self.assertEqual((s["misses"], s["hits"]), (1, 1), s)
        # A failing compile: the compiler's exit code and diagnostics, nothing of the loader's.
        plain = subprocess.run(["gcc", "-c", "bad.c", "-o", "bad.o"], cwd=cwd, capture_output=True, text=True)
        r = self.kache(["gcc", "-c", "bad.c", "-o", "bad.o"], cwd=cwd, env=env, check=False)
        self.assertNotEqual(plain.returncode, 0)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))

    def sibling_rows(self):
        r = self.kache(["doctor", "--json"], check=False)
        rows = json.loads(r.stdout)["rows"]
        return [(row["status"], row["fix"]) for row in rows if row["name"] == "kache-http"]

    def test_doctor_names_a_sibling_that_cannot_run(self):
        self.assertEqual(self.sibling_rows(), [])  # doctor ran in kache-http
        self.replace_sibling_by_one_that_cannot_load()
        rows = self.sibling_rows()
        self.assertEqual([status for status, _ in rows], ["warn"], rows)
        self.assertIn("same directory", rows[0][1])
        os.unlink(self.path("inst", "kache-http"))
        self.assertEqual([status for status, _ in self.sibling_rows()], ["warn"])


if __name__ == "__main__":
    kachetest.main()
