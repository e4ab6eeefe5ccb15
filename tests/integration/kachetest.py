"""Shared helpers for kache's integration tests: the real kache binary, the real nvcc, real files.

Each test gets a private workspace and cache directory; nothing reads the user's own config or cache.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import elfsections

KACHE = os.environ.get("KACHE_BIN") or os.path.join(os.path.dirname(__file__), "..", "..", "build", "kache")
KACHE = os.path.abspath(KACHE)
SOURCE_DIR = os.path.abspath(os.environ.get("KACHE_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", ".."))
# What the HIP tests leave out of the caller's environment: hipcc's variables and its device libraries.
HIP_VARIABLES = ("HIP", "DEVICE_LIB_PATH")
NVCC = shutil.which("nvcc")


def nvcc_home():
    """The directory of the nvcc executable that really runs, as nvcc itself reports it (_HERE_ in a
    dry run): `nvcc` on PATH may be a wrapper script (`exec /usr/local/cuda/bin/nvcc "$@"`) or a link,
    and nvcc.profile, the tools and the toolkit lie beside the real one."""
    r = subprocess.run([NVCC, "--dryrun", "-E", "-x", "cu", "/dev/null"], capture_output=True, text=True)
    for line in (r.stderr + r.stdout).splitlines():
        if line.startswith("#$ _HERE_="):
            return os.path.realpath(line[len("#$ _HERE_="):].strip())
    return os.path.dirname(os.path.realpath(NVCC))

KERNEL = r"""
#include <cstdio>
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
int host_entry() { std::printf("host\n"); return 1; }
"""


# The one line kache adds to a compile's stderr: the first warning of each cause in a build (issue 42).
KACHE_WARNING_LINE = re.compile(r"^kache: warning: [^\n]*\n", re.M)


def compiler_stderr(text):
    """A compile's stderr without kache's warning lines: what is left is the compiler's alone."""
    return KACHE_WARNING_LINE.sub("", text)


def kache_warnings(text):
    """kache's warning lines on a compile's stderr."""
    return KACHE_WARNING_LINE.findall(text)


class KacheTestCase(unittest.TestCase):
    """A workspace (self.ws), a cache (self.cache) and helpers to run kache and nvcc in it."""

    def setUp(self):
        if NVCC is None:
            self.skipTest("nvcc is not on PATH")
        self.ws = tempfile.mkdtemp(prefix="kache-it-")
        self.cache = os.path.join(self.ws, ".cache")
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith("KACHE_") or k in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH"):
                del self.env[k]
        self.env["KACHE_DIR"] = self.cache
        self.env["KACHE_CONFIG"] = os.path.join(self.ws, ".kache.toml")
        self.env["XDG_CONFIG_HOME"] = os.path.join(self.ws, ".config")
        # tests/CMakeLists.txt runs some files again with nvcc's stage cache on.
        if os.environ.get("KACHE_TEST_NVCC_STAGES") == "1":
            self.env["KACHE_NVCC_STAGES"] = "1"

    def private_workspace(self, prefix, drop=()):
        """setUp's workspace without its nvcc requirement (the hipcc and clang offload tests): a private
        cache and config, the caller's environment without KACHE_*, CPATH and any name starting with one
        of drop."""
        self.ws = tempfile.mkdtemp(prefix=prefix)
        self.cache = os.path.join(self.ws, ".cache")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("KACHE_",) + tuple(drop)) and k != "CPATH"}
        self.env["KACHE_DIR"] = self.cache
        self.env["KACHE_CONFIG"] = os.path.join(self.ws, ".kache.toml")
        self.env["XDG_CONFIG_HOME"] = os.path.join(self.ws, ".config")

    def tearDown(self):
        if os.environ.get("KACHE_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(self.ws, ignore_errors=True)

    # --- files -----------------------------------------------------------------------------------
    def path(self, *parts):
        return os.path.join(self.ws, *parts)

    def write(self, rel, text, mtime_ns=None):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        if mtime_ns is not None:
            os.utime(p, ns=(mtime_ns, mtime_ns))
        # A file modified in the clock tick a compile starts in is (rightly) not stored: kache cannot
        # tell it from an edit during the compile. Tests that expect a store need their files older.
        time.sleep(0.01)
        return p

    def read(self, rel, mode="r"):
        with open(self.path(rel), mode) as f:
            return f.read()

    # --- running ---------------------------------------------------------------------------------
    def kache(self, args, cwd=None, env=None, check=True, input=None):
        e = dict(self.env)
        if env:
            for k, v in env.items():
                if v is None:
                    e.pop(k, None)
                else:
                    e[k] = v
        r = subprocess.run([KACHE] + list(args), cwd=cwd or self.ws, env=e, capture_output=True, text=True,
                           input=input)
        if check and r.returncode != 0:
            self.fail(f"kache {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def nvcc(self, args, cwd=None, env=None, check=True):
        e = dict(self.env)
        if env:
            e.update({k: v for k, v in env.items() if v is not None})
        r = subprocess.run([NVCC] + list(args), cwd=cwd or self.ws, env=e, capture_output=True, text=True)
        if check and r.returncode != 0:
            self.fail(f"nvcc {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
        return r

    def stats(self, env=None):
        r = self.kache(["--show-stats", "--json"], env=env)
        return json.loads(r.stdout)

    def zero(self):
        self.kache(["--zero-stats"])

    def assert_counts(self, hits=None, misses=None, passthrough=None):
        s = self.stats()
        got = {"hits": s["hits"], "misses": s["misses"], "passthrough": s["passthrough"]}
        want = {k: v for k, v in (("hits", hits), ("misses", misses), ("passthrough", passthrough)) if v is not None}
        self.assertEqual({k: got[k] for k in want}, want, f"stats: {json.dumps(s, indent=1)}")
        return s

    def log_of(self, args, cwd=None, env=None):
        """Runs kache with KACHE_LOG=kache=debug and returns (result, log text)."""
        e = dict(env or {})
        e["KACHE_LOG"] = "kache=debug"
        r = self.kache(args, cwd=cwd, env=e, check=False)
        return r, r.stderr

    # --- objects ---------------------------------------------------------------------------------
    def sections(self, obj):
        """Every allocated section of an ELF object (elfsections.allocated_sections: code, data, the
        string sections, .nv_fatbin, __nv_module_id, ...); a file that is not ELF as a whole."""
        try:
            return elfsections.allocated_sections(obj)
        except ValueError:
            with open(obj, "rb") as f:
                return {"<whole file>": f.read()}

    def assert_same_object(self, a, b):
        sa, sb = self.sections(a), self.sections(b)
        self.assertEqual(sorted(sa), sorted(sb), f"{a} and {b} have different allocated sections")
        for sec in sa:
            self.assertEqual(sa[sec], sb[sec], f"section {sec} differs between {a} and {b}")

    def assert_different_object(self, a, b):
        self.assertNotEqual(self.sections(a), self.sections(b), f"{a} and {b} should differ")

    def build_preload_hook(self, name, c_source):
        """Compiles `c_source` into NAME.so in the workspace, an LD_PRELOAD hook; skips without gcc."""
        if shutil.which("gcc") is None:
            self.skipTest("gcc is needed to build the LD_PRELOAD hook")
        src = self.path(name + ".c")
        with open(src, "w") as f:
            f.write(c_source)
        hook = self.path(name + ".so")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", hook, src, "-ldl"], check=True, capture_output=True)
        return hook

    def loop_mount(self, name, mkfs, size_mb):
        """A file system image made by `mkfs` (argv; the image's path is appended), loop-mounted at
        <ws>/NAME and unmounted at cleanup. Skips when the mkfs tool is missing or the mount fails (it
        needs root and loop devices)."""
        if shutil.which(mkfs[0]) is None:
            self.skipTest(f"{mkfs[0]} is not installed")
        img = self.path(name + ".img")
        mnt = self.path(name)
        os.makedirs(mnt)
        with open(img, "wb") as f:
            f.truncate(size_mb << 20)
        r = subprocess.run(mkfs + [img], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"{' '.join(mkfs)} failed: {r.stderr.strip()}")
        r = subprocess.run(["mount", "-o", "loop", img, mnt], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"cannot loop-mount a {mkfs[0]} image (needs root and loop devices): {r.stderr.strip()}")
        self.addCleanup(self._unmount, mnt)
        return mnt

    def _unmount(self, mnt):
        if subprocess.run(["umount", mnt], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mnt], capture_output=True)  # still busy: detach it now
        # tearDown ran first and could not remove the mount point (nor the workspace holding it).
        if os.environ.get("KACHE_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(self.ws, ignore_errors=True)

    def mount_whole_second_fs(self, name="whole-second"):
        """A loop-mounted ext4 with 128-byte inodes: no room for the times' nanoseconds, so file times
        are whole seconds and a file rewritten in place, same size, within its second keeps its
        identity. Skips where it cannot be mounted or its times turn out finer."""
        mnt = self.loop_mount(name, ["mkfs.ext4", "-q", "-F", "-I", "128"], 64)
        probe = os.path.join(mnt, "time-probe")
        with open(probe, "w") as f:
            f.write("t\n")
        st = os.stat(probe)
        os.unlink(probe)
        if st.st_mtime_ns % 10**9 or st.st_ctime_ns % 10**9:
            self.skipTest(f"ext4 with 128-byte inodes keeps sub-second times here (mtime {st.st_mtime_ns} ns)")
        return mnt

    def skip_unless_kept_its_identity(self, log, gdb_output):
        """After two rewrite_script() runs logging to `log`: skips unless both rewrites left the file the
        same identity (the second landed in the first one's second: a slow machine may miss it)."""
        lines = []
        if os.path.exists(log):
            with open(log) as f:
                lines = f.read().splitlines()
        if len(lines) != 2:
            self.skipTest(f"gdb did not run both rewrites ({lines}):\n{gdb_output}")
        if lines[0] != lines[1]:
            self.skipTest(f"the second rewrite did not land in the first one's second (inode size mtime ctime: "
                          f"{lines[0]!r} then {lines[1]!r}): the machine was too slow to place it")

    @staticmethod
    def preload_env(hook):
        """LD_PRELOAD of `hook`; under the sanitizer build the hook precedes ASan's runtime in the load
        order, which ASAN_OPTIONS then allows."""
        asan = ":".join(o for o in (os.environ.get("ASAN_OPTIONS"), "verify_asan_link_order=0") if o)
        return {"LD_PRELOAD": hook, "ASAN_OPTIONS": asan}


def repoint(link, target):
    """Points the symlink `link` at `target` by a rename, as an install by rename or update-alternatives
    does: the files on either side keep their identities."""
    tmp = link + ".tmp"
    os.symlink(target, tmp)
    os.replace(tmp, link)


def repoint_script(script, link, target):
    """A shell script doing repoint(link, target), for a debugger's `shell` command at a breakpoint."""
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nln -s {target} {link}.tmp && mv -T {link}.tmp {link}\n")
    os.chmod(script, 0o755)
    return script


def rewrite_script(script, target, text, log, at_second_start=False, sleep_after=0.0):
    """A shell script, for a debugger's `shell` command at a breakpoint, that rewrites `target` in place
    (same inode) with `text`, then appends its identity (inode, size, whole-second mtime and ctime) to
    `log`. With at_second_start it first waits until just after the next second begins (file times
    come from the coarse clock, a tick behind); with sleep_after it then sleeps that long."""
    with open(script + ".text", "w") as f:
        f.write(text)
    wait = f"{sys.executable} -c 'import time; time.sleep(1.02 - time.time() % 1)'\n" if at_second_start else ""
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n{wait}cat {script}.text > {target}\nstat -c '%i %s %Y %Z' {target} >> {log}\n"
                + (f"sleep {sleep_after}\n" if sleep_after else ""))
    os.chmod(script, 0o755)
    return script


def main():
    unittest.main(verbosity=2)
