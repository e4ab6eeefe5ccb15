"""The local store under stress and damage: concurrent compiles, writers killed mid-store, corrupt and
truncated entries, unwritable / full / read-only cache directories, the LRU size bound, and the CLI
that manages the store. Whatever happens to the cache, the build must succeed with the right object.

Store layout (src/storage/local/local_storage.hpp): entries are files <KACHE_DIR>/<k0>/<k1k2>/<key>;
names starting with '.' (".tmp.*") are temp files of writers, never entries. An entry file is
"KACHE\\0E1", u64 uncompressed size, 32 hex chars XXH3-128 of the payload, then a zstd frame ("R1": the
payload stored as is, for manifests; "E2": a u64 head size after the size and the checksum seeded with
both sizes, for results; "B1": uncompressed results split into head and block-aligned object). One
cached compile stores a result entry (holding the object) and a manifest (direct-mode record).
"""
import ctypes
import ctypes.util
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

import kachetest
from kachetest import KACHE, KERNEL, NVCC, KacheTestCase, compiler_stderr, kache_warnings

MAGIC = b"KACHE\0E1"
RAW_MAGIC = b"KACHE\0R1"  # the same layout, payload stored as is
SPLIT_ZSTD_MAGIC = b"KACHE\0E2"  # results: + u64 head size, checksum seeded with the sizes
SPLIT_MAGIC = b"KACHE\0B1"  # results with cache.compression = false
HEADER_LEN = 8 + 8 + 32

# Prints warnings on stderr (twice from the host preprocessor, once from cudafe++) and compiles.
WARNING_SOURCE = '#warning kache-store-test\n__global__ void w(int* p) { int unused; p[0] = 1; }\n'


# --- the store, read independently of kache -----------------------------------------------------------
class _XXH128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def _load_codec():
    """libxxhash + libzstd through ctypes (the libraries kache itself links), or None."""
    try:
        xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
        zstd = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
        xxh.XXH3_128bits.restype = _XXH128
        xxh.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        xxh.XXH3_128bits_withSeed.restype = _XXH128
        xxh.XXH3_128bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
        xxh.XXH3_64bits.restype = ctypes.c_uint64
        xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        zstd.ZSTD_decompress.restype = ctypes.c_size_t
        zstd.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        zstd.ZSTD_isError.restype = ctypes.c_uint
        zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]
        return xxh, zstd
    except (OSError, AttributeError):
        return None


_CODEC = _load_codec()


def _hex128(h):
    return f"{h.high64:016x}{h.low64:016x}".encode()


def decode_entry(data):
    """The payload of a stored entry; raises ValueError when the file is not a complete, intact entry."""
    if len(data) < HEADER_LEN:
        raise ValueError(f"{len(data)} bytes, shorter than the {HEADER_LEN}-byte header")
    if data[:8] not in (MAGIC, RAW_MAGIC, SPLIT_ZSTD_MAGIC, SPLIT_MAGIC):
        raise ValueError(f"bad magic {data[:8]!r}")
    if _CODEC is None:
        return None  # header looks fine; no way to check more here
    xxh, zstd = _CODEC
    if data[:8] == SPLIT_MAGIC:
        head_size, body_size = struct.unpack_from("<QQ", data, 8)
        body_offset = (8 + 16 + 64 + head_size + 4095) // 4096 * 4096
        if body_offset + body_size != len(data):
            raise ValueError("split entry of the wrong length")
        head, body = data[88:88 + head_size], data[body_offset:]
        if (_hex128(xxh.XXH3_128bits(head, len(head))) != data[24:56]
                or _hex128(xxh.XXH3_128bits(body, len(body))) != data[56:88]):
            raise ValueError("checksum mismatch")
        return head + body
    size = struct.unpack_from("<Q", data, 8)[0]
    if data[:8] == SPLIT_ZSTD_MAGIC:
        sizes = data[8:24]
        checksum, payload = data[24:56], data[56:]
        h = xxh.XXH3_128bits_withSeed(payload, len(payload), xxh.XXH3_64bits(sizes, len(sizes)))
    else:
        checksum, payload = data[16:48], data[48:]
        h = xxh.XXH3_128bits(payload, len(payload))
    if _hex128(h) != checksum:
        raise ValueError("checksum mismatch")
    if data[:8] == RAW_MAGIC:  # stored uncompressed (manifests)
        if size != len(payload):
            raise ValueError(f"raw payload of {len(payload)} bytes, header says {size}")
        return payload
    if size > 1 << 31:
        raise ValueError(f"implausible size {size}")
    out = ctypes.create_string_buffer(max(size, 1))
    n = zstd.ZSTD_decompress(out, size, payload, len(payload))
    if zstd.ZSTD_isError(n) or n != size:
        raise ValueError(f"zstd frame does not decode to {size} bytes")
    return out.raw[:size]


def store_files(cache):
    """(entry files, temp files) of the store: regular files at <cache>/<k0>/<k1k2>/<name>."""
    entries, temps = [], []
    if not os.path.isdir(cache):
        return entries, temps
    for shard in sorted(os.listdir(cache)):
        shard_path = os.path.join(cache, shard)
        if len(shard) != 1 or shard not in "0123456789abcdef" or not os.path.isdir(shard_path):
            continue
        for sub in sorted(os.listdir(shard_path)):
            sub_path = os.path.join(shard_path, sub)
            if not os.path.isdir(sub_path):
                continue
            for name in sorted(os.listdir(sub_path)):
                p = os.path.join(sub_path, name)
                if os.path.isfile(p) and not os.path.islink(p):
                    (temps if name.startswith(".") else entries).append(p)
    return entries, temps


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def is_result_entry(payload):
    return payload is not None and b"\x7fELF" in payload


# --- plain nvcc references, compiled once per (source, flags) -------------------------------------------
_REFERENCE_DIR = None
_REFERENCES = {}


def _reference_dir():
    global _REFERENCE_DIR
    if _REFERENCE_DIR is None:
        _REFERENCE_DIR = tempfile.mkdtemp(prefix="kache-store-ref-")
        import atexit
        atexit.register(shutil.rmtree, _REFERENCE_DIR, True)
    return _REFERENCE_DIR


# A kernel whose object is large and incompressible: a __device__ table of random words.
def big_source(words, seed):
    r = random.Random(seed)
    values = ",".join(f"{r.getrandbits(32)}u" for _ in range(words))
    return (f"__device__ const unsigned int big_table[{words}] = {{{values}}};\n"
            "__global__ void use_table(unsigned int* o) { o[threadIdx.x] = big_table[threadIdx.x * 7]; }\n")


def tiny_source(tag, extra=""):
    return (f"__global__ void kern_{tag}_z(float* x) {{ x[threadIdx.x] *= 3.0f; }}\n"
            f"int host_{tag}_z() {{ return 7; }}\n{extra}")


# An LD_PRELOAD hook for the killed-writer tests: counts kache's write()/rename()/renameat() calls on files under
# SHIM_DIR and SIGKILLs the process at the SHIM_AT-th one (SHIM_OP=write: after writing half of that
# buffer; rename: before the rename; renamed: right after it). SHIM_OP=fail-entry-rename makes every
# publication of a store entry (a rename from ".tmp.<64 hex>...") fail with EIO instead, so that a
# lookup can be observed without a store replacing what it removed. nvcc does not inherit the hook.
SHIM_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* dir;
static const char* op;
static long at, writes, renames;

__attribute__((constructor)) static void init(void) {
  dir = getenv("SHIM_DIR");
  op = getenv("SHIM_OP");
  const char* n = getenv("SHIM_AT");
  at = n ? atol(n) : 0;
  unsetenv("LD_PRELOAD");
}

static int under(const char* p) { return dir && p && strncmp(p, dir, strlen(dir)) == 0; }

static int fd_under(int fd) {
  char link[64], target[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n < 0) return 0;
  target[n] = 0;
  return under(target);
}

static void die(void) {
  kill(getpid(), SIGKILL);
  for (;;) pause();
}

static int is_entry_temp(const char* from) {
  const char* base = strrchr(from, '/');
  base = base ? base + 1 : from;
  if (strncmp(base, ".tmp.", 5) != 0) return 0;
  for (int i = 5; i < 5 + 64; ++i) {
    char c = base[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
  }
  return base[5 + 64] == '.';
}

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*real)(int, const void*, size_t);
  if (!real) real = (ssize_t (*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (op && strcmp(op, "write") == 0 && fd_under(fd) && ++writes == at) {
    real(fd, buf, count / 2);
    die();
  }
  return real(fd, buf, count);
}

int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*);
  if (!real) real = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  if (op && under(to)) {
    if (strcmp(op, "fail-entry-rename") == 0 && is_entry_temp(from)) {
      errno = EIO;
      return -1;
    }
    if ((strcmp(op, "rename") == 0 || strcmp(op, "renamed") == 0) && ++renames == at) {
      if (strcmp(op, "rename") == 0) die();
      int r = real(from, to);
      die();
      return r;
    }
  }
  return real(from, to);
}

/* The store publishes below the cache dir's descriptor (util::Beneath): renameat, counted with rename. */
int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  static int (*real)(int, const char*, int, const char*);
  if (!real) real = (int (*)(int, const char*, int, const char*))dlsym(RTLD_NEXT, "renameat");
  if (op && fd_under(to_dir)) {
    if (strcmp(op, "fail-entry-rename") == 0 && is_entry_temp(from)) {
      errno = EIO;
      return -1;
    }
    if ((strcmp(op, "rename") == 0 || strcmp(op, "renamed") == 0) && ++renames == at) {
      if (strcmp(op, "rename") == 0) die();
      int r = real(from_dir, from, to_dir, to);
      die();
      return r;
    }
  }
  return real(from_dir, from, to_dir, to);
}
"""


class StoreTestCase(KacheTestCase):
    # --- references ------------------------------------------------------------------------------
    def reference(self, source_text, args, name="ref"):
        """Sections of plain nvcc's object for source_text compiled as `nvcc ARGS src.cu -o obj`."""
        key = (source_text, tuple(args), name)
        if key not in _REFERENCES:
            d = tempfile.mkdtemp(dir=_reference_dir())
            with open(os.path.join(d, name + ".cu"), "w") as f:
                f.write(source_text)
            r = subprocess.run([NVCC] + list(args) + [name + ".cu", "-o", name + ".o"], cwd=d, env=self.env,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, f"plain nvcc failed:\n{r.stderr}")
            _REFERENCES[key] = (self.sections(os.path.join(d, name + ".o")), r.stdout, r.stderr)
        return _REFERENCES[key]

    def assert_object_is_nvccs(self, obj, source_text, args, name="ref"):
        self.assertTrue(os.path.exists(self.path(obj)), f"{obj} was not written")
        want = self.reference(source_text, args, name)[0]
        got = self.sections(self.path(obj))
        for sec in want:
            self.assertEqual(got[sec], want[sec], f"section {sec} of {obj} differs from plain nvcc's object")

    # --- store -----------------------------------------------------------------------------------
    def entries(self, cache=None):
        return store_files(cache or self.cache)[0]

    def temps(self, cache=None):
        return store_files(cache or self.cache)[1]

    def classify(self, cache=None):
        """{'result': [paths], 'manifest': [paths]} for the entry files of the store."""
        out = {"result": [], "manifest": []}
        for p in self.entries(cache):
            payload = decode_entry(read_bytes(p))
            out["result" if is_result_entry(payload) else "manifest"].append(p)
        return out

    def assert_all_entries_intact(self, cache=None, why=""):
        for p in self.entries(cache):
            try:
                decode_entry(read_bytes(p))
            except ValueError as e:
                self.fail(f"{why}: store file {p} is not a complete entry ({e})")

    def entry_bytes(self, cache=None):
        """What the store keeps: its entry files and their explain records (<cache>/explain/<k0>/<k1k2>/)."""
        return sum(os.path.getsize(p) for p in self.entries(cache) + store_files(os.path.join(cache or self.cache,
                                                                                              "explain"))[0])

    def flip(self, path, offset=None):
        """Flips one bit of the file (in the middle by default); returns the new content."""
        data = bytearray(read_bytes(path))
        offset = len(data) // 2 if offset is None else offset
        data[offset] ^= 0x01
        with open(path, "wb") as f:
            f.write(data)
        return bytes(data)

    def truncate(self, path, size):
        data = read_bytes(path)[:size]
        with open(path, "wb") as f:
            f.write(data)
        return data

    def build(self, src="k.cu", obj="k.o", extra_args=(), env=None):
        """`kache nvcc -c SRC -o OBJ` after removing OBJ; the build must succeed."""
        if os.path.exists(self.path(obj)):
            os.unlink(self.path(obj))
        r = self.kache(["nvcc", "-c"] + list(extra_args) + [src, "-o", obj], env=env, check=False)
        self.assertEqual(r.returncode, 0, f"build of {src} failed:\nstdout: {r.stdout}\nstderr: {r.stderr}")
        return r

    def build_shim(self):
        return self.build_preload_hook("shim", SHIM_C)

    def shim_env(self, lib, op, at=0):
        return dict(self.preload_env(lib), SHIM_DIR=self.cache, SHIM_OP=op, SHIM_AT=str(at))

    def mount_tmpfs(self, size):
        """A fresh tmpfs of `size` (e.g. '64k'), unmounted when the test ends; skips if mounting is not allowed."""
        mnt = tempfile.mkdtemp(prefix="kache-store-mnt-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", mnt],
                           capture_output=True, text=True)
        if r.returncode != 0:
            os.rmdir(mnt)
            self.skipTest(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}); needs root / CAP_SYS_ADMIN")
        self.addCleanup(os.rmdir, mnt)
        self.addCleanup(subprocess.run, ["umount", "-l", mnt], capture_output=True)
        return mnt


# ======================================================================================================
class Concurrency(StoreTestCase):
    def test_16_concurrent_identical_compiles_on_an_empty_cache(self):
        self.write("k.cu", KERNEL)
        self.assertFalse(os.path.exists(self.cache))
        procs = [subprocess.Popen([KACHE, "nvcc", "-c", "k.cu", "-o", "k.o"], cwd=self.ws, env=self.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(16)]
        results = [(p.communicate(timeout=600), p.returncode) for p in procs]
        for i, ((out, err), rc) in enumerate(results):
            self.assertEqual(rc, 0, f"concurrent compile {i} failed:\n{out}\n{err}")
            self.assertEqual((out, err), ("", ""), f"concurrent compile {i} printed something")
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")
        first = self.read("k.o", "rb")

        s = self.stats()
        self.assertEqual(s["hits"] + s["misses"], 16, json.dumps(s, indent=1))
        self.assertEqual((s["passthrough"], s["errors"], s["corrupt_entries"]), (0, 0, 0), json.dumps(s, indent=1))
        self.assertGreaterEqual(s["misses"], 1)
        # One compile is one result entry plus one manifest, however many processes raced to store it.
        self.assertEqual(s["entries"], 2, json.dumps(s, indent=1))
        kinds = self.classify()
        self.assertEqual((len(kinds["result"]), len(kinds["manifest"])), (1, 1), kinds)
        self.assertEqual(self.temps(), [], "finished writers left temp files in the store")
        self.assertEqual(s["cache_size"], self.entry_bytes(), "the size counter lost track under concurrency")
        self.assertEqual([n for n in os.listdir(self.ws) if n.startswith(".kache-")], [], "scratch dirs left behind")

        self.build()
        s2 = self.stats()
        self.assertEqual((s2["hits"], s2["misses"]), (s["hits"] + 1, s["misses"]), "the next build is not a hit")
        self.assertEqual(self.read("k.o", "rb"), first)

    def test_16_concurrent_different_compiles_all_succeed_then_all_hit(self):
        n = 16
        for i in range(n):
            self.write(f"k{i}.cu", tiny_source(f"c{i:02d}"))

        def run_all():
            procs = [subprocess.Popen([KACHE, "nvcc", "-c", f"k{i}.cu", "-o", f"k{i}.o"], cwd=self.ws,
                                      env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for i in range(n)]
            for i, p in enumerate(procs):
                out, err = p.communicate(timeout=600)
                self.assertEqual(p.returncode, 0, f"compile of k{i}.cu failed:\n{out}\n{err}")
                self.assertEqual((out, err), ("", ""), f"compile of k{i}.cu printed something")

        run_all()
        objects = {}
        for i in range(n):
            data = self.read(f"k{i}.o", "rb")
            self.assertIn(f"kern_c{i:02d}_z".encode(), data, f"k{i}.o is not the object of k{i}.cu")
            for j in range(n):
                if j != i:
                    self.assertNotIn(f"kern_c{j:02d}_z".encode(), data, f"k{i}.o holds k{j}.cu's kernel")
            objects[i] = data
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["stored"], s["errors"], s["passthrough"]), (0, n, n, 0, 0),
                         json.dumps(s, indent=1))
        self.assertEqual(s["entries"], 2 * n)
        self.assertEqual(s["cache_size"], self.entry_bytes())
        self.assert_all_entries_intact(why="after 16 concurrent stores")

        for i in range(n):
            os.unlink(self.path(f"k{i}.o"))
        run_all()
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (n, n), json.dumps(s, indent=1))
        for i in range(n):
            self.assertEqual(self.read(f"k{i}.o", "rb"), objects[i], f"the hit for k{i}.cu restored another object")
        self.assert_object_is_nvccs("k5.o", tiny_source("c05"), ["-c"], "k5")


# ======================================================================================================
class KilledWriter(StoreTestCase):
    # Writes and renames under KACHE_DIR during a miss (toolchain memo already present): 1 result entry
    # temp, 2 its shard's size counter, 3 manifest temp, 4 its size counter, 5 the stats file.
    KILL_POINTS = [("write", 1), ("rename", 1), ("renamed", 1), ("write", 3), ("rename", 3), ("renamed", 3),
                   ("renamed", 4), ("write", 5)]

    def check_after_kill(self, why, src, obj, text):
        # Whatever the killed writer left: no file under an entry name is a partial entry.
        self.assert_all_entries_intact(why=why)
        s = self.stats()
        self.assertEqual(s["entries"], len(self.entries()), why)
        # The next build succeeds with nvcc's object, hit or miss, and sees nothing corrupt.
        r = self.build(src, obj)
        self.assertEqual((r.stdout, r.stderr), ("", ""), why)
        self.assert_object_is_nvccs(obj, text, ["-c"], os.path.splitext(src)[0])
        s1 = self.stats()
        self.assertEqual(s1["corrupt_entries"], 0, f"{why}: {json.dumps(s1, indent=1)}")
        self.assertEqual(s1["errors"], 0, f"{why}: {json.dumps(s1, indent=1)}")
        self.assert_all_entries_intact(why=why + ", then a rebuild")
        # ...and the store is usable: the build after it is a hit.
        self.build(src, obj)
        s2 = self.stats()
        self.assertEqual(s2["hits"], s1["hits"] + 1, f"{why}: the store did not recover: {json.dumps(s2, indent=1)}")
        self.assert_object_is_nvccs(obj, text, ["-c"], os.path.splitext(src)[0])

    def test_writer_killed_at_each_step_of_a_store(self):
        lib = self.build_shim()
        self.write("warm.cu", tiny_source("warm"))
        self.build("warm.cu", "warm.o")  # toolchain memo and stats exist from here on
        self.write("k.cu", KERNEL)
        for op, at in self.KILL_POINTS:
            why = f"writer killed at {op} #{at}"
            with self.subTest(kill=f"{op}:{at}"):
                self.kache(["--clear"])
                if os.path.exists(self.path("k.o")):
                    os.unlink(self.path("k.o"))
                r = self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env=self.shim_env(lib, op, at), check=False)
                if r.returncode != -signal.SIGKILL:
                    self.fail(f"{why}: the hook did not fire (exit {r.returncode}); does kache still store "
                              f"through write()/rename()?\n{r.stderr}")
                self.check_after_kill(why, "k.cu", "k.o", KERNEL)

    def test_writer_killed_by_timer_while_storing_a_large_object(self):
        text = big_source(32768, seed=7)  # an object of about 0.5 MB, a stored entry of about 0.3 MB
        self.write("big.cu", text)
        self.write("warm.cu", tiny_source("warm"))
        self.build("warm.cu", "warm.o")  # toolchain memo and stats exist from here on
        landed = []
        for attempt, delay in enumerate((0.0, 0.001, 0.004)):
            with self.subTest(attempt=attempt):
                self.kache(["--clear"])
                old = set(self.temps())
                p = subprocess.Popen([KACHE, "nvcc", "-c", "big.cu", "-o", "big.o"], cwd=self.ws, env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                # Kill as soon as the writer's first file appears in the store (plus a small delay).
                while p.poll() is None:
                    entries, temps = store_files(self.cache)
                    if entries or set(temps) - old:
                        if delay:
                            time.sleep(delay)
                        p.send_signal(signal.SIGKILL)
                        break
                p.communicate()
                landed.append(p.returncode)
                self.check_after_kill(f"writer killed {delay * 1000:.0f} ms into its store (exit {p.returncode})",
                                      "big.cu", "big.o", text)
        if all(rc == 0 for rc in landed):
            self.skipTest("no kill landed before a writer finished (machine too fast for the timer)")


# ======================================================================================================
class Corruption(StoreTestCase):
    def populate(self):
        self.write("k.cu", KERNEL)
        self.build()
        s = self.stats()
        self.assertEqual((s["misses"], s["stored"], s["entries"]), (1, 1, 2), json.dumps(s, indent=1))
        kinds = self.classify()
        self.assertEqual((len(kinds["result"]), len(kinds["manifest"])), (1, 1), kinds)
        return kinds["result"][0], kinds["manifest"][0]

    def rebuild_after_damage(self, damaged, env=None):
        """The build after damaging the store: succeeds quietly with nvcc's object, counts the corruption,
        and no damaged content is left in the store."""
        before = self.stats()
        r = self.build(env=env)
        # kache's own warning line aside (a store that failed), the output is the compiler's.
        self.assertEqual((r.stdout, compiler_stderr(r.stderr)), ("", ""), "a corrupt entry must not show in the build output")
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")
        s = self.stats()
        self.assertGreaterEqual(s["corrupt_entries"], before["corrupt_entries"] + 1, json.dumps(s, indent=1))
        self.assertEqual(s["misses"], before["misses"] + 1, "a corrupt entry must be a miss")
        self.assertEqual((s["hits"], s["passthrough"]), (before["hits"], before["passthrough"]))
        for path, content in damaged.items():
            if os.path.exists(path):
                self.assertNotEqual(read_bytes(path), content, f"{path} still holds the damaged entry")
        self.assert_all_entries_intact(why="after a rebuild over damaged entries")
        return s

    def assert_next_build_hits(self):
        before = self.stats()
        self.build()
        self.assertEqual(self.stats()["hits"], before["hits"] + 1, "the build after recovery is not a hit")
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")

    def test_bit_flip_in_every_entry_file_is_a_miss_and_is_replaced(self):
        result, manifest = self.populate()
        damaged = {p: self.flip(p) for p in (result, manifest)}
        self.rebuild_after_damage(damaged)
        self.assert_next_build_hits()

    def test_bit_flipped_entry_is_removed(self):
        # Storing is made to fail (EIO on publishing an entry) so that nothing can replace what the lookup
        # removed: the damaged file must be gone, and the failed store is counted as an error.
        lib = self.build_shim()
        result, manifest = self.populate()
        for which, path in (("result entry", result), ("manifest", manifest)):
            with self.subTest(which=which):
                errors_before = self.stats()["errors"]
                damaged = {path: self.flip(path)}
                s = self.rebuild_after_damage(damaged, env=self.shim_env(lib, "fail-entry-rename"))
                self.assertFalse(os.path.exists(path), f"the corrupt {which} was not removed")
                self.assertGreater(s["errors"], errors_before, "the failed store was not counted as an error")
                self.assertEqual(self.temps(), [], "a failed store left its temp file behind")
                # Back to normal: the next build stores again, the one after hits.
                self.build()
                self.assert_next_build_hits()
                result, manifest = self.classify()["result"][0], self.classify()["manifest"][0]

    def test_flipped_size_field_of_the_result_entry(self):
        # The checksum covers the payload, not the size field: the size must be cross-checked too.
        result, _ = self.populate()
        self.rebuild_after_damage({result: self.flip(result, offset=8)})
        self.assert_next_build_hits()

    def test_truncated_entries_are_a_miss_and_are_replaced(self):
        result, manifest = self.populate()
        for size_of in (lambda n: n // 2, lambda n: HEADER_LEN, lambda n: 0):
            damaged = {p: self.truncate(p, size_of(os.path.getsize(p))) for p in (result, manifest)}
            self.rebuild_after_damage(damaged)
            self.assert_next_build_hits()
            result, manifest = self.classify()["result"][0], self.classify()["manifest"][0]

    def test_truncated_result_entry_alone(self):
        result, _ = self.populate()
        s = self.rebuild_after_damage({result: self.truncate(result, os.path.getsize(result) // 2)})
        self.assertEqual(s["corrupt_entries"], 1)
        self.assert_next_build_hits()


def ken3_to_ken2(record):
    """The same entry in the record format before typed outputs ("KEN2": has-depfile flag, depfile,
    stdout, stderr, object size, object), from a "KEN3" record (stdout, stderr, typed outputs). A "KEN2"
    record (stored by a kache from before typed outputs) is returned as it is."""
    if record[:4] == b"2NEK":
        return record
    assert record[:4] == b"3NEK", record[:4]
    pos = 4

    def take_str():
        nonlocal pos
        n = struct.unpack_from("<Q", record, pos)[0]
        pos += 8 + n
        return record[pos - n:pos]
    stdout, stderr = take_str(), take_str()
    count = struct.unpack_from("<I", record, pos)[0]
    pos += 4
    outputs = {}
    for _ in range(count - 1):
        kind = record[pos]
        pos += 1
        outputs[kind] = take_str()
    pos += 1 + 8  # the body's type (the object) and size; its bytes follow
    depfile = outputs.get(2)

    def put_str(b):
        return struct.pack("<Q", len(b)) + b
    return (b"2NEK" + bytes([depfile is not None]) + put_str(depfile or b"") + put_str(stdout) + put_str(stderr)
            + struct.pack("<Q", len(record) - pos) + record[pos:])


def raw_container(value):
    xxh, _ = _CODEC
    return RAW_MAGIC + struct.pack("<Q", len(value)) + _hex128(xxh.XXH3_128bits(value, len(value))) + value


class FormatVersion(StoreTestCase):
    populate = Corruption.populate
    assert_next_build_hits = Corruption.assert_next_build_hits

    def test_entry_of_the_previous_record_format_is_a_plain_miss_and_is_replaced(self):
        # The typed-outputs record ("KEN3") replaced "KEN2". A kache that still read "KEN2" would hit this
        # entry; now it is a miss like any absent entry (not counted as corrupt), and the compile stores
        # the current format in its place.
        if _CODEC is None:
            self.skipTest("libxxhash/libzstd not loadable through ctypes")
        result, _ = self.populate()
        old = raw_container(ken3_to_ken2(decode_entry(read_bytes(result))))
        with open(result, "wb") as f:
            f.write(old)
        before = self.stats()
        self.build()
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (before["hits"], before["misses"] + 1), json.dumps(s, indent=1))
        self.assertEqual(s["corrupt_entries"], before["corrupt_entries"], "an older format is not corruption")
        self.assertNotEqual(read_bytes(result), old, "the old entry was not replaced")
        self.assert_next_build_hits()


# ======================================================================================================
class UnusableCache(StoreTestCase):
    def test_cache_dir_that_cannot_be_created_still_builds(self):
        # Root ignores permission bits, so "unwritable" here means a path that cannot be a directory.
        self.write("w.cu", WARNING_SOURCE)
        self.write("file", "a regular file\n")
        _, ref_out, ref_err = self.reference(WARNING_SOURCE, ["-c"], "w")
        self.assertIn("kache-store-test", ref_err)
        for cache in (self.path("file", "cache"), "/proc/kache-store-test/cache", "/dev/null/cache"):
            with self.subTest(cache=cache):
                r = self.build("w.cu", "w.o", env={"KACHE_DIR": cache})
                self.assertEqual(r.stdout, ref_out)
                self.assertEqual(compiler_stderr(r.stderr), ref_err, "kache added to or changed the compiler's stderr")
                # One line at most: the subtests are one build, and their causes differ only in the path.
                self.assertLessEqual(len(kache_warnings(r.stderr)), 1, r.stderr)
                self.assert_object_is_nvccs("w.o", WARNING_SOURCE, ["-c"], "w")
                self.assertFalse(os.path.isdir(cache))
        # The fallback is logged when asked for.
        r, log = self.log_of(["nvcc", "-c", "w.cu", "-o", "w.o"], env={"KACHE_DIR": self.path("file", "cache")})
        self.assertEqual(r.returncode, 0)
        self.assertIn(self.path("file"), "\n".join(l for l in log.splitlines() if l.startswith("[kache")),
                      "the debug log does not say what failed")

    def test_unwritable_store_counts_the_error_and_logs_it(self):
        # Statistics can be written, entries cannot: every shard directory is a regular file.
        os.makedirs(self.cache)
        for c in "0123456789abcdef":
            with open(os.path.join(self.cache, c), "w") as f:
                f.write("not a directory\n")
        self.write("w.cu", WARNING_SOURCE)
        _, ref_out, ref_err = self.reference(WARNING_SOURCE, ["-c"], "w")
        r = self.build("w.cu", "w.o")
        self.assertEqual((r.stdout, compiler_stderr(r.stderr)), (ref_out, ref_err),
                         "kache added to or changed the compiler's output")
        self.assert_object_is_nvccs("w.o", WARNING_SOURCE, ["-c"], "w")
        s = self.stats()
        self.assertGreaterEqual(s["errors"], 1, json.dumps(s, indent=1))
        self.assertEqual(sum(s["error_reasons"].values()), s["errors"], json.dumps(s, indent=1))
        self.assertEqual(s["stored"], 0)
        r, log = self.log_of(["nvcc", "-c", "w.cu", "-o", "w.o"])
        self.assertEqual(r.returncode, 0)
        kache_lines = [l for l in log.splitlines() if l.startswith("[kache")]
        self.assertTrue(any("store" in l and self.cache in l for l in kache_lines),
                        "the debug log does not report the failed store:\n" + "\n".join(kache_lines))
        self.assertGreaterEqual(self.stats()["errors"], 2)

    def test_unwritable_store_is_a_warning_in_the_log_and_in_the_stats(self):
        # A build's stderr is a pipe (Ninja): the cache that stores nothing must show in kache.log, once
        # for every compile of the hour, and as the newest warning of `kache -s`.
        os.makedirs(self.cache)
        for c in "0123456789abcdef":
            with open(os.path.join(self.cache, c), "w") as f:
                f.write("not a directory\n")
        self.write("k.cu", KERNEL)
        self.write("w.cu", WARNING_SOURCE)
        # The build's first compile shows the warning once (issue 42); the next compile of the build only logs.
        self.assertRegex(self.build().stderr,
                         rf"^kache: warning: cannot store in the cache directory {re.escape(self.cache)} [^\n]*\n$")
        self.assertEqual(kache_warnings(self.build("w.cu", "w.o").stderr), [])
        with open(os.path.join(self.cache, "kache.log")) as f:
            warnings = [l for l in f.read().splitlines() if "] warning: " in l]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn(f"cannot store in the cache directory {self.cache} (Not a directory)", warnings[0])
        s = self.stats()
        self.assertEqual(s["last_warning"], warnings[0])
        self.assertIn("last warning", self.kache(["-s"]).stdout)

    def test_full_cache_filesystem(self):
        # 160 KiB: room for the toolchain memo (a page per memoized toolchain file on tmpfs: 17 with
        # nvcc's wrapper scripts followed, as on CI's PATH) and one small entry, not for the big one.
        mnt = self.mount_tmpfs("160k")
        cache = os.path.join(mnt, "cache")
        env = {"KACHE_DIR": cache}
        text = big_source(16384, seed=3)  # an entry of about 160 KB: cannot fit in 128 KiB
        self.write("big.cu", text)
        r = self.build("big.cu", "big.o", env=env)
        self.assertEqual((r.stdout, compiler_stderr(r.stderr)), ("", ""))
        self.assert_object_is_nvccs("big.o", text, ["-c"], "big")
        s = self.stats(env=env)
        self.assertGreaterEqual(s["errors"], 1, json.dumps(s, indent=1))
        self.assertEqual(s["stored"], 0, json.dumps(s, indent=1))
        self.assertEqual(s["entries"], 0)
        self.assertEqual(self.temps(cache), [], "a failed store left a temp file filling the disk")
        r, log = self.log_of(["nvcc", "-c", "big.cu", "-o", "big.o"], env=env)
        self.assertEqual(r.returncode, 0)
        self.assertIn("No space left on device", log, "the debug log does not report the full disk")
        self.assert_object_is_nvccs("big.o", text, ["-c"], "big")
        # The space is still there for what fits: a small compile is stored and then hits.
        self.write("k.cu", KERNEL)
        self.build(env=env)
        self.build(env=env)
        s = self.stats(env=env)
        self.assertEqual(s["hits"], 1, json.dumps(s, indent=1))
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")

    def test_read_only_cache_filesystem(self):
        mnt = self.mount_tmpfs("16m")
        cache = os.path.join(mnt, "cache")
        env = {"KACHE_DIR": cache}
        self.write("k.cu", KERNEL)
        self.write("w.cu", WARNING_SOURCE)
        self.build(env=env)
        self.build("w.cu", "w.o", env=env)
        kinds = self.classify(cache)
        self.assertEqual(len(kinds["result"]), 2)
        w_result = [p for p in kinds["result"] if b"kache-store-test" in decode_entry(read_bytes(p))]
        self.assertEqual(len(w_result), 1)
        self.flip(w_result[0])  # a corrupt entry that cannot even be removed
        r = subprocess.run(["mount", "-o", "remount,ro", mnt], capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"cannot remount the tmpfs read-only: {r.stderr.strip()}")

        r, log = self.log_of(["nvcc", "-c", "k.cu", "-o", "k.o"], env=env)
        self.assertEqual(r.returncode, 0, log)
        self.assertTrue(any(re.search(r"\] debug: hit: ", l) for l in log.splitlines() if l.startswith("[kache")),
                        "a read-only cache should still serve hits:\n" + log)
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")

        _, ref_out, ref_err = self.reference(WARNING_SOURCE, ["-c"], "w")
        r = self.build("w.cu", "w.o", env=env)
        self.assertEqual((r.stdout, compiler_stderr(r.stderr)), (ref_out, ref_err))
        self.assert_object_is_nvccs("w.o", WARNING_SOURCE, ["-c"], "w")

        new = tiny_source("ro")
        self.write("n.cu", new)
        r = self.build("n.cu", "n.o", env=env)
        self.assertEqual((r.stdout, r.stderr), ("", ""))
        self.assert_object_is_nvccs("n.o", new, ["-c"], "n")

        # doctor says what a read-only cache does: it used to say every compile runs uncached.
        r = self.kache(["doctor", "--json"], env=env, check=False)
        rows = {f'{x["section"]}.{x["name"]}': x for x in json.loads(r.stdout)["rows"]}
        self.assertEqual(rows["cache.writable"]["status"], "fail")
        self.assertIn("compiles still hit what the cache holds", rows["cache.writable"]["message"])
        self.assertIn("Read-only file system", rows["cache.writable"]["message"])


# ======================================================================================================
class Eviction(StoreTestCase):
    def sizes_of_one_compile(self, src):
        """(result entry bytes, manifest bytes) of compiling src into an empty, unbounded store."""
        self.kache(["--clear"])
        self.build(src, "o.o")
        kinds = self.classify()
        self.assertEqual((len(kinds["result"]), len(kinds["manifest"])), (1, 1), kinds)
        sizes = os.path.getsize(kinds["result"][0]), os.path.getsize(kinds["manifest"][0])
        self.kache(["--clear"])
        self.kache(["--zero-stats"])
        return sizes

    def test_lru_eviction_keeps_the_store_under_its_bound(self):
        n = 17
        for i in range(n):
            self.write(f"s{i}.cu", tiny_source(f"e{i:02d}"))
        result, manifest = self.sizes_of_one_compile("s0.cu")
        # The bound covers the whole store; when a put passes it, the least recently used entries go
        # until 90% of it is left. Room for about five compiles: 17 must evict.
        max_size = int((result + manifest) * 5.5)
        env = {"KACHE_MAX_SIZE": str(max_size)}
        born = {}  # entry path -> index of the build that stored it
        for i in range(n):
            self.build(f"s{i}.cu", f"s{i}.o", env=env)
            for p in self.entries():
                born.setdefault(p, i)
            s = self.stats(env=env)
            self.assertEqual(s["max_size"], max_size)
            real = self.entry_bytes()
            self.assertLessEqual(s["cache_size"], max_size, f"after build {i}: {json.dumps(s, indent=1)}")
            self.assertLessEqual(real, max_size, f"after build {i}: entry files hold {real} bytes")
            self.assertEqual(s["cache_size"], real, f"after build {i}: the size counter is off")
        s = self.stats(env=env)
        self.assertEqual((s["misses"], s["stored"], s["errors"]), (n, n, 0), json.dumps(s, indent=1))
        self.assertLess(s["entries"], 2 * n, "nothing was evicted")

        # Least recently used first: nothing that survived is older than something evicted.
        alive = set(self.entries())
        gone = [born[p] for p in born if p not in alive]
        kept = [born[p] for p in born if p in alive]
        self.assertTrue(gone and kept)
        self.assertLessEqual(max(gone), min(kept), "a newer entry was evicted before an older one")

        # A hit makes its entries the most recently used (their mtime moves forward).
        last = [p for p in born if born[p] == n - 1]
        self.assertEqual(len(last), 2)
        self.assertTrue(all(p in alive for p in last), "the entries of the most recent compile were evicted")
        for p in last:
            os.utime(p, (time.time() - 3600, time.time() - 3600))
        self.build(f"s{n - 1}.cu", f"s{n - 1}.o", env=env)
        self.assertEqual(self.stats(env=env)["hits"], 1, "the most recent compile was evicted")
        for p in last:
            self.assertGreater(os.path.getmtime(p), time.time() - 600, f"a hit did not refresh {p}")
        self.assert_object_is_nvccs(f"s{n - 1}.o", tiny_source(f"e{n - 1:02d}"), ["-c"], f"s{n - 1}")

        # The oldest ones were evicted: rebuilding them misses (and still builds correctly).
        misses_before = self.stats(env=env)["misses"]
        for i in range(n - 1):
            self.build(f"s{i}.cu", f"s{i}.o", env=env)
            if self.stats(env=env)["misses"] > misses_before:
                break
        self.assertGreater(self.stats(env=env)["misses"], misses_before, "no early compile was evicted")
        self.assert_object_is_nvccs(f"s{i}.o", tiny_source(f"e{i:02d}"), ["-c"], f"s{i}")

    def test_bound_of_a_few_compiles_still_keeps_the_latest(self):
        # A limit that holds about four compiles: the latest compile must still be a hit.
        for i in range(4):
            self.write(f"s{i}.cu", tiny_source(f"f{i}"))
        result, manifest = self.sizes_of_one_compile("s0.cu")
        max_size = 4 * (result + manifest) + 1024
        env = {"KACHE_MAX_SIZE": str(max_size)}
        for i in range(1, 4):
            self.build(f"s{i}.cu", f"s{i}.o", env=env)
            s = self.stats(env=env)
            self.assertLessEqual(s["cache_size"], max_size)
            self.assertLessEqual(self.entry_bytes(), max_size)
        s = self.stats(env=env)
        self.assertGreaterEqual(s["entries"], 2,
                                f"a {max_size}-byte bound kept nothing of compiles of {result + manifest} bytes: "
                                f"{json.dumps(s, indent=1)}")
        self.build("s3.cu", "s3.o", env=env)
        self.assertEqual(self.stats(env=env)["hits"], 1,
                         f"the latest compile was not kept under a {max_size}-byte bound (result entry {result} B, "
                         f"manifest {manifest} B; each of the 16 shards may hold {max_size // 16} B): "
                         f"{json.dumps(self.stats(env=env), indent=1)}")

    def test_max_size_option_writes_the_config_and_trims(self):
        self.write("k.cu", KERNEL)
        self.build()
        self.assertGreater(self.stats()["cache_size"], 8 * 1024)
        r = self.kache(["-M", "1M"])
        self.assertIn("1.0 MiB", r.stdout)
        config = self.env["KACHE_CONFIG"]
        with open(config) as f:
            self.assertRegex(f.read(), r"(?m)^\s*max_size\s*=\s*['\"]1M['\"]")
        shown = self.kache(["--show-config"]).stdout
        self.assertIn(config, shown.splitlines()[0], "--show-config does not name the config file")
        line = [l for l in shown.splitlines() if l.startswith("cache.max_size")]
        self.assertEqual(len(line), 1, shown)
        self.assertIn("1.0 MiB", line[0])
        self.assertIn("file", line[0], "the origin of cache.max_size should be the config file")
        self.assertEqual(self.stats()["max_size"], 1 << 20)
        # The long form, and a limit below what is stored: the store is trimmed at once.
        self.kache(["--max-size=8K"])
        s = self.stats()
        self.assertEqual(s["max_size"], 8 << 10)
        self.assertLessEqual(s["cache_size"], 8 << 10)
        self.assertLessEqual(self.entry_bytes(), 8 << 10)
        # A malformed size is refused and leaves the file alone.
        with open(config) as f:
            before = f.read()
        r = self.kache(["-M", "lots"], check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("lots", r.stderr)
        with open(config) as f:
            self.assertEqual(f.read(), before)


# ======================================================================================================
class Cli(StoreTestCase):
    COUNTERS = ("hits", "misses", "direct_hits", "passthrough", "errors", "stored", "not_stored", "corrupt_entries")

    def test_show_stats_human_readable(self):
        self.write("k.cu", KERNEL)
        self.build()
        self.build()
        for flag in ("-s", "--show-stats"):
            out = self.kache([flag]).stdout
            self.assertRegex(out, r"(?m)^hits\s+1$")
            self.assertRegex(out, r"(?m)^misses\s+1$")
            self.assertRegex(out, r"(?mi)^cache size\s+\S+")
            self.assertIn(self.cache, out)

    def test_zero_stats(self):
        self.write("k.cu", KERNEL)
        self.build()
        self.build()
        entries = self.stats()["entries"]
        r = self.kache(["-z"])
        self.assertEqual(r.stderr, "")
        s = self.stats()
        self.assertEqual({k: s[k] for k in self.COUNTERS}, {k: 0 for k in self.COUNTERS}, json.dumps(s, indent=1))
        self.assertEqual((s["passthrough_reasons"], s["error_reasons"], s["not_stored_reasons"]), ({}, {}, {}))
        self.assertEqual(s["entries"], entries, "zeroing the statistics must keep the entries")
        self.build()
        self.assert_counts(hits=1, misses=0)

    def test_clear(self):
        self.write("k.cu", KERNEL)
        self.build()
        self.assertEqual(self.stats()["entries"], 2)
        r = self.kache(["-C"])
        self.assertEqual(r.stderr, "")
        s = self.stats()
        self.assertEqual((s["entries"], s["cache_size"]), (0, 0), json.dumps(s, indent=1))
        self.assertEqual(self.entries(), [])
        self.assertEqual(s["misses"], 1, "clearing must keep the statistics")
        self.build()
        self.assert_counts(hits=0, misses=2)
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")

    def test_version_and_help(self):
        for flag in ("--version", "-V"):
            r = self.kache([flag])
            self.assertRegex(r.stdout, r"^kache \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|[\w.-]+-g[0-9a-f]{12}|unknown)(-dirty)?\)\n")
            if os.path.exists(os.path.join(kachetest.SOURCE_DIR, ".git")):
                self.assertNotIn("(commit unknown)", r.stdout, "built from a git checkout: the commit is known")
        for flag in ("--help", "-h"):
            r = self.kache([flag])
            self.assertEqual(r.returncode, 0)
            self.assertIn("--show-stats", r.stdout)
            # Every kind of user finds their compiler and a recipe (the help opened "for nvcc." alone).
            self.assertIn("a compiler cache for nvcc, gcc/clang and hipcc", r.stdout)
            for recipe in ("kache nvcc", "kache g++", "kache hipcc", "CMAKE_CUDA_COMPILER_LAUNCHER",
                           "CMAKE_CXX_COMPILER_LAUNCHER", 'HIPCC="kache hipcc"', "PATH=/usr/lib/kache:$PATH"):
                self.assertIn(recipe, r.stdout)

    def test_bad_config_value_in_the_environment(self):
        self.write("k.cu", KERNEL)
        r = self.build(env={"KACHE_MAX_SIZE": "abc"})
        self.assertRegex(r.stderr, r"^kache: warning: KACHE_MAX_SIZE='abc' is not a size[^\n]*\n$",
                         "kache's one warning line of the build, and nothing else")
        with open(os.path.join(self.cache, "kache.log")) as f:
            log = f.read()
        lines = [l for l in log.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one line naming KACHE_MAX_SIZE, got:\n{log}")
        self.assertIn("KACHE_MAX_SIZE", lines[0])
        self.assertIn("abc", lines[0])
        self.assertEqual(r.stdout, "")
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")
        s = self.stats(env={"KACHE_MAX_SIZE": "abc"})
        self.assertEqual(s["max_size"], 10 << 30, "the default should stand in for the bad value")
        self.assertEqual(s["misses"], 1)

    def test_unknown_key_in_the_config_file(self):
        config = self.env["KACHE_CONFIG"]
        with open(config, "w") as f:
            f.write('[cache]\nmax_sise = "1G"\n')
        self.write("k.cu", KERNEL)
        r = self.build()
        self.assertRegex(r.stderr, r"^kache: warning: ignoring unknown key 'cache.max_sise'[^\n]*\n$",
                         "kache's one warning line of the build, and nothing else")
        with open(os.path.join(self.cache, "kache.log")) as f:
            log = f.read()
        lines = [l for l in log.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one line about the unknown key, got:\n{log}")
        self.assertIn("max_sise", lines[0])
        self.assertIn(config, lines[0])
        self.assert_object_is_nvccs("k.o", KERNEL, ["-c"], "k")
        self.assertEqual(self.stats()["misses"], 1)


if __name__ == "__main__":
    kachetest.main()
