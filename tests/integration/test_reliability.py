"""Reliability: locks held by a stopped process, cache permissions (umask, world-writable cache dirs),
outputs in a read-only directory, and clock faults (future timestamps, a clock stepped backwards, a
filesystem with 2 s timestamps). The concurrent stress run is tests/stress/stress.py."""
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import kachetest  # noqa: E402

SHARD_NAMES = "0123456789abcdef"
HANG_GUARD_S = 300  # not a timing assertion: only turns a hang into a failure instead of a stuck CI

HOLDER = r"""
import fcntl, os, signal, sys
fds = []
for path in sys.argv[1:]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    fds.append(fd)
print("locked", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
"""


def wait_stopped(pid):
    while True:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        time.sleep(0.01)


class StoppedLockHolder:
    """A process that takes exclusive flocks on the given paths and then stops itself (SIGSTOP)."""

    def __init__(self, paths):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER] + list(paths), stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "locked"
        wait_stopped(self.proc.pid)

    def release(self):
        self.proc.kill()
        self.proc.send_signal(signal.SIGCONT)
        self.proc.wait()
        self.proc.stdout.close()


class LockTest(kachetest.KacheTestCase):
    def compile_bounded(self, src, out, env):
        e = dict(self.env)
        e.update(env)
        return subprocess.run([kachetest.KACHE, "nvcc", "-c", src, "-o", out], cwd=self.ws, env=e,
                              capture_output=True, text=True, timeout=HANG_GUARD_S)

    def test_shard_locks_held_by_a_stopped_process_do_not_hang_the_compile(self):
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        self.nvcc(["-c", src, "-o", self.path("plain.o")])
        locks = [os.path.join(self.cache, s, "lock") for s in SHARD_NAMES] + [os.path.join(self.cache, "cleanup.lock")]
        holder = StoppedLockHolder(locks)
        try:
            r = self.compile_bounded(src, self.path("a.o"), {"KACHE_LOCK_TIMEOUT": "0.5"})
        finally:
            holder.release()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_same_object(self.path("a.o"), self.path("plain.o"))
        s = self.stats()
        self.assertEqual((s["misses"], s["stored"], s["errors"]), (1, 0, 0), json.dumps(s, indent=1))
        self.assertEqual(s["not_stored_reasons"], {"lock-timeout": 1})
        # The lock is free again: the next compile stores, the one after hits.
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")])
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")])
        self.assert_counts(hits=1, misses=2)
        self.assert_same_object(self.path("a.o"), self.path("plain.o"))

    def test_stats_journal_locked_by_a_stopped_compaction(self):
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        self.nvcc(["-c", src, "-o", self.path("plain.o")])
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")])  # stored
        holder = StoppedLockHolder([os.path.join(self.cache, "stats.journal")])
        try:
            env = {"KACHE_LOCK_TIMEOUT": "0.5", "KACHE_LOG": "kache=debug"}
            os.unlink(self.path("a.o"))
            r = self.compile_bounded(src, self.path("a.o"), env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("hit: ", r.stderr)  # a hit; only its stats record is dropped
            self.assert_same_object(self.path("a.o"), self.path("plain.o"))
            # kache -s neither hangs nor fails: it reads the journal without the lock.
            e = dict(self.env)
            e["KACHE_LOCK_TIMEOUT"] = "0.5"
            st = subprocess.run([kachetest.KACHE, "-s", "--json"], env=e, capture_output=True, text=True,
                                timeout=HANG_GUARD_S)
            self.assertEqual(st.returncode, 0, st.stderr)
            self.assertEqual(json.loads(st.stdout)["misses"], 1)
        finally:
            holder.release()

    def test_lock_timeout_config_is_checked(self):
        r = self.kache(["--show-config"], env={"KACHE_LOCK_TIMEOUT": "soon"})
        self.assertIn("KACHE_LOCK_TIMEOUT", r.stderr)
        self.assertIn("is not a number of seconds", r.stderr)
        r = self.kache(["--show-config"], env={"KACHE_LOCK_TIMEOUT": "2.5"})
        self.assertIn("2.5s", r.stdout)


class CleanupTest(kachetest.KacheTestCase):
    def test_stale_temp_of_the_stats_files_is_cleaned(self):
        # A kache killed between writing the stats totals' temp file and renaming it leaves it in the
        # cache dir itself, where the shard scans never looked (found by tests/stress).
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")])
        old = time.time() - 2 * 3600
        stale = os.path.join(self.cache, ".tmp.stats.12345.0123456789abcdef")
        fresh = os.path.join(self.cache, ".tmp.stats.12346.0123456789abcdef")
        for p in (stale, fresh):
            with open(p, "w") as f:
                f.write("a\n")
        os.utime(stale, (old, old))
        self.kache(["-C"])
        self.assertFalse(os.path.exists(stale), "a temp file two hours old survived kache -C")
        self.assertTrue(os.path.exists(fresh), "a live writer's temp file was removed")


class KilledCleanupTest(kachetest.KacheTestCase):
    def entry_sizes(self, shard_names=SHARD_NAMES):
        """The store's files: entries, and their explain records (explain/<k0>/<k1k2>/<key>.json)."""
        sizes = {}
        for shard in shard_names:
            for top in (os.path.join(self.cache, shard), os.path.join(self.cache, "explain", shard)):
                for sub in os.listdir(top) if os.path.isdir(top) else []:
                    d = os.path.join(top, sub)
                    if os.path.isdir(d) and not sub.startswith("."):
                        for name in os.listdir(d):
                            if not name.startswith("."):
                                sizes[os.path.join(d, name)] = os.path.getsize(os.path.join(d, name))
        return sizes

    def test_size_accounting_survives_a_kill_in_the_middle_of_a_cleanup(self):
        # Found by tests/stress: a kache killed between the unlinks of an eviction (or kache -C) and the
        # counter's rewrite left a counter that still counted the removed files.
        if shutil.which("strace") is None:
            self.skipTest("strace is not installed (scripts/setup-tests.sh installs it)")
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")])
        # Several entries in one shard (copies under other keys), with counters that match the files.
        entry = max(self.entry_sizes().items(), key=lambda kv: kv[1])[0]
        name = os.path.basename(entry)
        for i in range(6):
            copy = name[:-4] + "%04x" % (0xf000 + i)
            if copy != name:
                shutil.copy(entry, os.path.join(os.path.dirname(entry), copy))
        for shard in SHARD_NAMES:
            top = os.path.join(self.cache, shard)
            if os.path.isdir(top):
                files = self.entry_sizes([shard])
                entries = sum(1 for p in files if not p.endswith(".json"))
                with open(os.path.join(top, "size"), "w") as f:
                    f.write(f"{sum(files.values())} {entries}\n")
        self.assertEqual(self.stats()["cache_size"], sum(self.entry_sizes().values()))
        snapshot = self.path("snapshot")
        shutil.copytree(self.cache, snapshot)
        wrong = []
        for when in range(1, 10):
            shutil.rmtree(self.cache)
            shutil.copytree(snapshot, self.cache)
            # The when-th unlink of kache -C kills it (SIGKILL, as kill -9 would).
            subprocess.run(["strace", "-qq", "-o", "/dev/null", "-e", "trace=unlink,unlinkat",
                            "-e", f"inject=unlink,unlinkat:signal=KILL:when={when}", kachetest.KACHE, "-C"],
                           env=self.env, capture_output=True, timeout=HANG_GUARD_S)
            reported, on_disk = self.stats()["cache_size"], sum(self.entry_sizes().values())
            if reported != on_disk:
                wrong.append(f"killed at unlink {when}: kache reports {reported} B, the entry files hold {on_disk} B")
        self.assertEqual(wrong, [])


class PermissionTest(kachetest.KacheTestCase):
    def run_with_umask(self, args, mask, env=None):
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run([kachetest.KACHE] + args, cwd=self.ws, env=e, capture_output=True, text=True, umask=mask)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def cache_modes(self):
        modes = {}
        for root, dirs, files in os.walk(self.cache):
            for name in dirs + files:
                p = os.path.join(root, name)
                if os.path.islink(p):
                    continue  # explain/<source>/<key>.json: links, whose own mode Linux ignores
                modes[os.path.relpath(p, self.cache)] = stat.S_IMODE(os.lstat(p).st_mode)
        return modes

    def test_cache_umask_makes_a_group_shared_cache(self):
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        env = {}
        self.env["KACHE_UMASK"] = "002"  # for every kache run, `kache -s` (which compacts the stats) too
        self.run_with_umask(["nvcc", "-c", src, "-o", self.path("a.o")], 0o077, env)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("a.o")).st_mode), 0o600, "nvcc's output")
        os.unlink(self.path("a.o"))
        self.run_with_umask(["nvcc", "-c", src, "-o", self.path("a.o")], 0o077, env)  # a hit restores a.o
        self.assertEqual(self.stats()["hits"], 1)
        modes = self.cache_modes()
        self.assertTrue(any(len(p) > 40 for p in modes), modes)  # entries are there
        for p, mode in modes.items():
            isdir = os.path.isdir(os.path.join(self.cache, p))
            want = 0o775 if isdir else 0o664
            # Files are created 0666/0777 & ~umask; some (lock files) are opened with 0666 only.
            self.assertEqual(mode & 0o070, want & 0o070, f"{p}: {oct(mode)} is not group-writable")
            self.assertEqual(mode & 0o002, 0, f"{p}: {oct(mode)} is world-writable")
        # The outputs keep the user's umask (077), the hit's restore included.
        self.assertEqual(stat.S_IMODE(os.stat(self.path("a.o")).st_mode), 0o600, "the hit's output")

    def test_bad_umask_is_named(self):
        r = self.kache(["--show-config"], env={"KACHE_UMASK": "0999"})
        self.assertIn("KACHE_UMASK", r.stderr)
        self.assertIn("is not an octal umask", r.stderr)

    def test_world_writable_cache_is_not_used(self):
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        self.nvcc(["-c", src, "-o", self.path("plain.o")])
        os.makedirs(self.cache)
        os.chmod(self.cache, 0o777)
        for _ in range(2):
            r = self.kache(["nvcc", "-c", src, "-o", self.path("a.o")])
            self.assert_same_object(self.path("a.o"), self.path("plain.o"))
        # The compile's stderr is nvcc's; kache says why in -s and in doctor (no log file is written in a
        # directory others may write).
        self.assertEqual(r.stderr, "")
        d = self.kache(["doctor", "--json"], check=False)
        rows = {f'{x["section"]}.{x["name"]}': x for x in json.loads(d.stdout)["rows"]}
        self.assertEqual(rows["cache.world-writable"]["status"], "fail", d.stdout)
        self.assertIn(f"chmod o-w {self.cache}", rows["cache.world-writable"]["fix"])
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["stored"]), (0, 0, 0), json.dumps(s, indent=1))
        self.assertEqual(s["passthrough_reasons"], {"cache-world-writable": 2})
        # Opted in: the same cache is used.
        env = {"KACHE_ALLOW_WORLD_WRITABLE": "1"}
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")], env=env)
        r = self.kache(["nvcc", "-c", src, "-o", self.path("a.o")], env=env)
        self.assertNotIn("writable by every user", r.stderr)
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (1, 1), json.dumps(s, indent=1))
        self.assert_same_object(self.path("a.o"), self.path("plain.o"))

    def test_output_in_read_only_directory_gets_the_compilers_error(self):
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")])  # an entry exists: the hit path is tried too
        ro = self.path("ro")
        os.makedirs(ro)
        # Root ignores permission bits: a read-only mount is what makes the directory unwritable here.
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro], capture_output=True, text=True)
        if m.returncode != 0:
            if os.geteuid() == 0:
                self.skipTest(f"cannot mount a read-only tmpfs: {m.stderr.strip()}")
            os.chmod(ro, 0o555)
        try:
            plain = self.nvcc(["-c", src, "-o", os.path.join(ro, "a.o")], check=False)
            cached = self.kache(["nvcc", "-c", src, "-o", os.path.join(ro, "a.o")], check=False)
        finally:
            if m.returncode == 0:
                subprocess.run(["umount", ro], check=True)
        self.assertNotEqual(plain.returncode, 0)
        self.assertEqual((cached.returncode, cached.stdout, cached.stderr),
                         (plain.returncode, plain.stdout, plain.stderr))


class ClockTest(kachetest.KacheTestCase):
    def edit_same_size(self, path, old, new, mtime_ns=None):
        """Rewrites the file with content of the same size, keeping (or setting) its mtime."""
        st = os.stat(path)
        with open(path) as f:
            text = f.read()
        text2 = text.replace(old, new)
        self.assertEqual(len(text), len(text2))
        with open(path, "w") as f:
            f.write(text2)
        ns = st.st_mtime_ns if mtime_ns is None else mtime_ns
        os.utime(path, ns=(ns, ns))

    def check_no_stale_hit(self, src, env_first=None, env_second=None, edit_mtime_ns=None):
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")], env=env_first)
        self.kache(["nvcc", "-c", src, "-o", self.path("a.o")], env=env_first)
        self.edit_same_size(src, "x[threadIdx.x] *= a", "x[threadIdx.x] += a", edit_mtime_ns)
        self.kache(["nvcc", "-c", src, "-o", self.path("b.o")], env=env_second)
        self.nvcc(["-c", src, "-o", self.path("plain.o")])
        self.assert_same_object(self.path("b.o"), self.path("plain.o"))
        self.assert_different_object(self.path("a.o"), self.path("b.o"))

    def test_source_with_a_timestamp_in_the_future(self):
        future = time.time_ns() + 3600 * 10**9
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=future)
        self.check_no_stale_hit(src, edit_mtime_ns=future)

    def faketime_env(self, offset):
        lib = None
        for cand in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                     "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"):
            if os.path.exists(cand):
                lib = cand
        if lib is None:
            self.skipTest("libfaketime is not installed (Debian package faketime; scripts/setup-tests.sh installs it)")
        # nvcc itself hangs under libfaketime (recursive clock_gettime in its start-up): kache runs
        # nvcc through a wrapper on PATH that drops the preload, so only kache sees the fake clock.
        wrapper_dir = self.path("faketime-bin")
        if not os.path.isdir(wrapper_dir):
            os.makedirs(wrapper_dir)
            with open(os.path.join(wrapper_dir, "nvcc"), "w") as f:
                f.write(f"#!/bin/sh\nunset LD_PRELOAD FAKETIME\nexec {kachetest.nvcc_home()}/nvcc \"$@\"\n")
            os.chmod(os.path.join(wrapper_dir, "nvcc"), 0o755)
        return {"LD_PRELOAD": lib, "FAKETIME": offset, "FAKETIME_DONT_RESET": "1",
                "PATH": wrapper_dir + os.pathsep + self.env["PATH"]}

    def test_faketime_reaches_kache(self):
        # kache is dynamic in the test build, so the preload takes: the clock it reads is the fake one.
        env = self.faketime_env("-1d")
        e = dict(self.env)
        e.update(env)
        r = subprocess.run(["date", "+%s"], env=e, capture_output=True, text=True, check=True)
        self.assertLess(int(r.stdout), time.time() - 3600)

    def test_clock_stepped_backwards_between_builds(self):
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        # First build with the clock an hour ahead, the second after it stepped back to the real time:
        # the edit's mtime is now "before" the moment the first build saw.
        self.check_no_stale_hit(src, env_first=self.faketime_env("+1h"))

    def test_clock_stepped_backwards_by_a_day(self):
        src = self.write("a.cu", kachetest.KERNEL, mtime_ns=time.time_ns() - 10**10)
        self.check_no_stale_hit(src, env_second=self.faketime_env("-1d"))

    def test_two_second_timestamps_racy_rule(self):
        img = self.path("vfat.img")
        mnt = self.path("vfat")
        os.makedirs(mnt)
        if shutil.which("mkfs.vfat") is None:
            self.skipTest("mkfs.vfat is not installed (Debian package dosfstools; scripts/setup-tests.sh installs it)")
        with open(img, "wb") as f:
            f.truncate(16 << 20)
        subprocess.run(["mkfs.vfat", img], check=True, capture_output=True)
        m = subprocess.run(["mount", "-o", "loop", img, mnt], capture_output=True, text=True)
        if m.returncode != 0:
            self.skipTest(f"cannot mount a vfat loop image (needs root, loop devices and the vfat module): "
                          f"{m.stderr.strip()}")
        try:
            src = os.path.join(mnt, "a.cu")
            with open(src, "w") as f:
                f.write(kachetest.KERNEL)
            # Edited within the same 2 s granule, same size: mtime and size are unchanged on vfat.
            self.check_no_stale_hit(src)
        finally:
            subprocess.run(["umount", mnt], check=True)


if __name__ == "__main__":
    kachetest.main()
