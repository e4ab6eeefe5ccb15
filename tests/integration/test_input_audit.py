"""Input audit: every file a kache miss reads must be something kache keys.

Each case runs one miss under strace (-f, openat and execve) and checks that every regular file the
compile opened for reading, and every program it executed, is
  - in the closure kache recorded (its "closure file" trace lines, __has_include targets included),
  - a program of the toolchain (computed here from `nvcc --dryrun`; kache keys the toolchain by its
    identity), or
  - in the short allow-list below, each entry with the reason it is not an input of the object.
A compile kache refused to store (a not_stored.<reason> was counted) may read anything: nothing of
it will ever be served. A new hidden input (a file some tool reads that no dependency list names)
fails this test instead of shipping as a stale hit.
"""
import glob
import os
import re
import shutil
import subprocess
import textwrap
import time

import kachetest
from kachetest import KacheTestCase

STRACE = shutil.which("strace")

# Opens that are not inputs of the object, by path prefix or pattern. One reason each.
ALLOWED_PREFIXES = [
    "/etc/ld.so.cache",     # the dynamic loader's cache of library locations
    "/proc/",               # process information (self/exe, cpuinfo, meminfo...)
    "/sys/",                # CPU topology (sysconf of online CPUs)
    "/dev/",                # /dev/null, /dev/urandom (temp names, not object content)
    "/usr/lib/locale/",     # locale data: message language only
    "/usr/share/locale/",   # translated messages
    "/etc/locale.alias",    # locale name aliases
    "/usr/lib/x86_64-linux-gnu/gconv/",  # character set converters for messages
    "/etc/nsswitch.conf",   # name service setup (getpwuid for home directory lookups)
    "/etc/passwd",          # the same
    # Time zone rules, read by localtime(): they only reach an object through __TIMESTAMP__ (not
    # stored: not_stored.timestamp); __DATE__/__TIME__ follow the pinned SOURCE_DATE_EPOCH in UTC.
    "/usr/share/zoneinfo/",
    "/etc/localtime",
]
# Shared libraries the tools load: part of the installed tools themselves, like their executables.
SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")
# Files of the CUDA toolkit that are not headers: the toolkit's version is in kache's toolchain id.
TOOLKIT_DATA = [
    "bin/nvcc.profile",          # nvcc's own configuration (the env helper keys its identity)
    "nvvm/libdevice/",           # cicc's device math library (bitcode), versioned with the toolkit
    # Headers that only nvcc's generated intermediates (the .cudafe1.cpp / .stub.c host files, the
    # fatbin .c) include, so no -MD list names them; keyed only through the toolkit's version. Named
    # one by one: a new one fails this test.
    "include/crt/host_runtime.h",
    "include/crt/func_macro.h",
    "include/crt/storage_class.h",
    "include/fatbinary_section.h",
    "include/math_constants.h",
]


def content(p):
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError:
        return None


def realpath(p):
    return os.path.realpath(p)


class InputAudit(KacheTestCase):
    def setUp(self):
        super().setUp()
        if STRACE is None:
            self.skipTest("strace is not installed")
        self.nvcc_home = kachetest.nvcc_home()
        self.cuda_root = realpath(os.path.join(self.nvcc_home, ".."))

    # --- the toolchain as nvcc itself names it ----------------------------------------------------
    def toolchain_programs(self, args):
        """Programs nvcc --dryrun says it runs for these args, plus what gcc runs below itself."""
        r = self.nvcc(["--dryrun"] + args)
        env = {}
        # nvcc as the build names it (perhaps a wrapper script) and the real one it runs.
        progs = {realpath(kachetest.NVCC), realpath(os.path.join(self.nvcc_home, "nvcc")), realpath(kachetest.KACHE)}
        for line in r.stderr.splitlines():
            if not line.startswith("#$ "):
                continue
            cmd = line[3:].strip()
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", cmd)
            if m and " " not in m.group(2).strip('"'):
                env[m.group(1)] = m.group(2).strip('"')
                continue
            word = cmd.split()[0].strip('"')
            word = re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", lambda v: env.get(v.group(1), ""), word)
            path = word if "/" in word else shutil.which(word, path=env.get("PATH", os.environ["PATH"]))
            if path:
                progs.add(realpath(path))
        # The host compiler driver's own programs (compiler proper, assembler), as it resolves them.
        for prog in ("cc1plus", "as"):
            out = subprocess.run(["gcc", "-print-prog-name=" + prog], capture_output=True, text=True).stdout.strip()
            path = out if "/" in out else shutil.which(out)
            if path:
                progs.add(realpath(path))
        # nvcc runs each step of its plan through the shell.
        progs.add(realpath("/bin/sh"))
        return progs

    # --- running one miss under strace ------------------------------------------------------------
    def traced_miss(self, args, cwd=None):
        trace = self.path("strace", "t")
        os.makedirs(os.path.dirname(trace), exist_ok=True)
        log_file = self.path("kache.log")
        env = dict(self.env)
        env.update({"KACHE_LOG": "kache=trace", "KACHE_LOG_FILE": log_file})
        r = subprocess.run([STRACE, "-f", "-ff", "-qq", "-y", "-e", "trace=openat,execve", "-o", trace,
                            kachetest.KACHE, "nvcc"] + args, cwd=cwd or self.ws, env=env, capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(log_file) as f:
            log = f.read()
        closure = set()
        for m in re.finditer(r"closure file (\S+)", log):
            closure.add(realpath(m.group(1)))
        reads, written, execs = set(), set(), set()
        for name in glob.glob(trace + ".*"):
            with open(name, errors="replace") as f:
                for line in f:
                    m = re.match(r'execve\("([^"]+)".* = 0$', line)
                    if m:
                        execs.add(realpath(m.group(1)))
                        continue
                    m = re.match(r"openat\(.*?, \"[^\"]*\", ([A-Z_|]+)(?:, [0-9]+)?\) = [0-9]+<(.*)>$", line)
                    if not m:
                        continue  # failed opens (ENOENT...) read nothing
                    flags, path = m.group(1).split("|"), realpath(m.group(2))
                    if "O_WRONLY" in flags or "O_RDWR" in flags or "O_CREAT" in flags:
                        written.add(path)
                    elif "O_DIRECTORY" not in flags:
                        reads.add(path)
        shutil.rmtree(os.path.dirname(trace))
        return closure, reads, written, execs

    def uncovered(self, args, cwd=None):
        """Runs one miss; returns (uncovered reads, uncovered programs, not-stored reasons)."""
        self.zero()
        closure, reads, written, execs = self.traced_miss(args, cwd=cwd)
        s = self.stats()
        self.assertEqual(s["misses"], 1, s)
        scratch_roots = [realpath(self.cache), realpath(self.env["KACHE_CONFIG"]), realpath(self.path("kache.log"))]
        toolkit = [os.path.join(self.cuda_root, d) for d in TOOLKIT_DATA]
        programs = self.toolchain_programs(args)

        def covered(p):
            return (p in closure
                    or p in programs  # kache hashes nvcc and the host compiler into the toolchain id
                    or p in written  # an intermediate the compile wrote itself (temp files, scratch dir)
                    or os.path.isdir(p)
                    or any(p.startswith(a) for a in ALLOWED_PREFIXES)
                    or SHARED_LIBRARY.search(p)
                    or any(p.startswith(t) for t in toolkit)
                    or any(p.startswith(r) for r in scratch_roots))

        # GCC opens a #pragma once header and skips it, unlisted, when its content equals a header
        # already included. kache records the project's own such files by their #include names (they
        # are then in `closure`); in the toolkit (thrust's system/cpp/detail/*.h are identical copies)
        # they change only with the toolkit's version. Accepted only while still identical.
        closure_contents = {content(c) for c in closure if c.startswith(self.cuda_root)}

        def toolkit_duplicate(p):
            return p.startswith(self.cuda_root) and content(p) in closure_contents

        reads_left = sorted(p for p in reads if not covered(p) and not toolkit_duplicate(p))
        progs_left = sorted(execs - programs)
        return reads_left, progs_left, s.get("not_stored_reasons", {})

    def assert_audited(self, args, cwd=None):
        reads, progs, not_stored = self.uncovered(args, cwd=cwd)
        self.assertEqual(not_stored, {}, "this case is expected to be stored")
        self.assertEqual(reads, [], "files read outside the closure, the toolchain and the allow-list")
        self.assertEqual(progs, [], "programs run outside the toolchain")

    # --- the corpus ---------------------------------------------------------------------------------
    def test_tiny_tu(self):
        self.write("k.cu", kachetest.KERNEL)
        self.assert_audited(["-c", "k.cu", "-o", "k.o"])

    def test_rdc(self):
        src = os.path.join(kachetest.SOURCE_DIR, "examples", "saxpy")
        shutil.copytree(src, self.path("saxpy"))
        self.assert_audited(["-rdc=true", "-c", "rdc/device_ops.cu", "-Iinclude", "-o", "d.o"], cwd=self.path("saxpy"))

    def test_two_archs_and_host_flags(self):
        src = os.path.join(kachetest.SOURCE_DIR, "examples", "saxpy")
        shutil.copytree(src, self.path("saxpy"))
        self.assert_audited(["-c", "src/saxpy.cu", "-Iinclude", "-gencode", "arch=compute_75,code=sm_75",
                             "-gencode", "arch=compute_90,code=sm_90", "-Xcompiler", "-Wall", "-o", "s.o"],
                            cwd=self.path("saxpy"))

    def test_thrust_and_cub(self):
        self.write("t.cu", textwrap.dedent("""
            #include <thrust/device_vector.h>
            #include <thrust/reduce.h>
            #include <cub/block/block_reduce.cuh>
            __global__ void k(int* x) {
              using R = cub::BlockReduce<int, 32>;
              __shared__ typename R::TempStorage t;
              x[0] = R(t).Sum(x[threadIdx.x]);
            }
            int sum(const thrust::device_vector<int>& v) { return thrust::reduce(v.begin(), v.end()); }
            """))
        self.assert_audited(["-c", "t.cu", "-o", "t.o"])

    def test_has_include_target_and_pre_include(self):
        # opt.h is opened by the __has_include test without being #included; pre.cuh comes from -include.
        self.write("opt.h", "// tested, never included\n")
        self.write("inc/pre.cuh", "#define PRE 1\n")
        self.write("src/k.cu", '#if __has_include("../opt.h")\n#define V PRE\n#endif\n'
                   "__global__ void k(int* x) { x[0] = V; }\n")
        self.assert_audited(["-c", "src/k.cu", "-Iinc", "-include", "pre.cuh", "-o", "k.o"])

    def test_pragma_once_duplicate(self):
        # b.h is opened and skipped as a copy of a.h: no -MD list names it, kache records it by name.
        t = time.time_ns() - 100 * 10**9  # GCC 12 compares mtimes too before contents
        self.write("a.h", "#pragma once\n", mtime_ns=t)
        self.write("b.h", "#pragma once\n", mtime_ns=t)
        self.write("k.cu", '#include "a.h"\n#include "b.h"\n' + kachetest.KERNEL)
        self.assert_audited(["-c", "k.cu", "-o", "k.o"])

    def test_incbin_is_a_hidden_input_and_is_not_stored(self):
        # The audit sees what no dependency list names: the assembler reads blob.bin. kache must not
        # store such a compile (and counts why); the audit accepts it only because of that count.
        self.write("blob.bin", "payload\n")
        self.write("k.cu", kachetest.KERNEL +
                   'asm(".section .rodata\\n.incbin \\"blob.bin\\"\\n.previous\\n");\n')
        reads, progs, not_stored = self.uncovered(["-c", "k.cu", "-o", "k.o"])
        self.assertIn(realpath(self.path("blob.bin")), reads)
        self.assertEqual(progs, [])
        self.assertEqual(not_stored, {"incbin": 1}, f"blob.bin is read outside the closure: {reads}")


if __name__ == "__main__":
    kachetest.main()
