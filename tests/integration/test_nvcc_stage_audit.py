"""Input audit of nvcc's stage cache (issue 24, KACHE_NVCC_STAGES=1): strace over stage-path misses.

A two-architecture compile (sm_80, sm_90) misses through kache with stages on, under strace -f. Every
file cicc and ptxas open for reading (openat/open, successful, neither O_WRONLY nor O_RDWR) must be
  - in the miss's scratch directory: a temporary nvcc passes between stages, whose content the stage
    key hashes (the directory is the one the tools' -o values name);
  - inside the toolkit: nvcc's directory tree (the directory above nvcc_home()), covered by the
    toolchain id;
  - or a system library, locale or time zone file (/lib, /usr/lib, /etc/ld.so.cache, /proc, /sys,
    /dev, /etc/localtime: cicc reads the time zone, measured).
Anything else fails the test with its path: a file a stage reads that no stage key holds.

The counts of the tools' runs (execve) are checked too:
  - the first miss: 2 cicc and 2 ptxas (one each per architecture);
  - a host-only edit of a host function (its body reaches cicc's input): no ptxas;
  - a host-only edit under #ifndef __CUDA_ARCH__ (blank lines in every device preprocessing): no cicc
    and no ptxas.
Each build's object is plain nvcc's (by section). Exits 77 (skipped) without strace or nvcc.
"""
import glob
import os
import re
import shutil
import subprocess
import time

import kachetest
from kachetest import KACHE, KacheTestCase

STRACE = shutil.which("strace")
ARCHS = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
SOURCE = r"""#include "inc/h.cuh"
#include <cstdio>
__global__ void k(float* x, float a) { x[threadIdx.x] = x[threadIdx.x] * a + H; }
#ifndef __CUDA_ARCH__
static const char* banner() { return "banner 1"; }
#endif
int host_entry() { std::printf("host 1\n"); return 1; }
"""
SYSTEM = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/share/locale/", "/proc/", "/sys/", "/dev/",
          # The time zone: cicc calls localtime() (glibc reads /etc/localtime, a link into zoneinfo).
          # Its input is preprocessed, __DATE__ and __TIME__ already expanded by gcc -E.
          "/usr/share/zoneinfo/")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")

# A line of strace -y: syscall(args) = result<the path of a returned descriptor>
SYSCALL = re.compile(r"^(\w+)\((.*)\)\s+= (-?\d+|\?)(?:<(.*)>)?")
# open("path", FLAGS...) or openat(DIRFD<dir>, "path", FLAGS...)
OPEN_ARGS = re.compile(r'^(?:[^"]*?(?:<(?P<dir>[^>]*)>)?, )?"(?P<path>(?:[^"\\]|\\.)*)", (?P<flags>[\w|]+)')


class StageAudit(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.env["KACHE_NVCC_STAGES"] = "1"
        self.write("inc/h.cuh", "#pragma once\n#define H 1.0f\n")
        self.write("k.cu", SOURCE)
        time.sleep(0.05)  # files older than the clock tick a compile starts in (KacheTestCase.write)
        self.toolkit = os.path.realpath(os.path.dirname(kachetest.nvcc_home()))
        probe = subprocess.run([STRACE, "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            self.skipTest(f"strace cannot trace here (ptrace refused?): {probe.stderr.strip()}")
        self.traces = 0

    def traced_build(self, out):
        """kache nvcc -c k.cu (two architectures) under strace -ff; returns {pid: [(syscall, args,
        result, path of the returned descriptor or None)]} in each process's order. The object must be plain nvcc's."""
        self.traces += 1
        prefix = self.path(f"trace{self.traces}", "t")
        os.makedirs(os.path.dirname(prefix))
        args = ["-c", "k.cu"] + ARCHS
        r = subprocess.run([STRACE, "-ff", "-qq", "-y", "-s", "4096", "-e",
                            "trace=execve,open,openat,clone,clone3,fork,vfork", "-o", prefix,
                            KACHE, "nvcc"] + args + ["-o", out], cwd=self.ws, env=self.env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.nvcc(args + ["-o", "plain-" + out])
        self.assert_same_object(self.path("plain-" + out), self.path(out))
        calls = {}
        for f in glob.glob(prefix + ".*"):
            pid = int(f.rsplit(".", 1)[1])
            with open(f) as fh:
                calls[pid] = [m.groups() for m in map(SYSCALL.match, fh) if m]
        return calls

    @staticmethod
    def exec_path(args):
        m = re.match(r'"((?:[^"\\]|\\.)*)"', args)
        return m.group(1) if m else ""

    def tool_runs(self, calls):
        """{pid: tool} for every process that executed cicc or ptxas (successfully)."""
        runs = {}
        for pid, seq in calls.items():
            for name, args, result, _ in seq:
                if name == "execve" and result == "0":
                    tool = os.path.basename(self.exec_path(args))
                    if tool in ("cicc", "ptxas"):
                        runs[pid] = tool
        return runs

    def counts(self, calls):
        runs = list(self.tool_runs(calls).values())
        return runs.count("cicc"), runs.count("ptxas")

    def reads_of_tools(self, calls):
        """[(tool, path, resolved path)] for every successful read-only open by cicc, ptxas or their
        children after their execve, and the scratch directories their -o values name."""
        reads, scratch = [], set()
        tools = self.tool_runs(calls)
        pending = list(tools.items())
        seen = set()
        while pending:
            pid, tool = pending.pop()
            if pid in seen:
                continue
            seen.add(pid)
            started = pid not in tools  # a child of a tool is the tool's from its start
            cwd = self.ws  # kache runs the stages in the compile's directory
            for name, args, result, fd_path in calls.get(pid, []):
                if name == "execve" and result == "0":
                    path = self.exec_path(args)
                    if os.path.basename(path) == tool:
                        started = True
                        argv = re.findall(r'"((?:[^"\\]|\\.)*)"', args)
                        if "-o" in argv[:-1]:
                            scratch.add(os.path.dirname(os.path.realpath(os.path.join(cwd, argv[argv.index("-o") + 1]))))
                    continue
                if not started:
                    continue
                if name in ("clone", "clone3", "fork", "vfork") and result.isdigit() and int(result) > 0:
                    pending.append((int(result), tool))
                    continue
                if name not in ("open", "openat") or not result.isdigit():
                    continue
                m = OPEN_ARGS.match(args)
                self.assertIsNotNone(m, f"cannot read {name}({args})")
                if "O_WRONLY" in m["flags"] or "O_RDWR" in m["flags"]:
                    continue
                path = m["path"]
                # The file opened, as the kernel names it (links resolved), else the name as given.
                resolved = fd_path or os.path.realpath(os.path.join(m["dir"] or cwd, path))
                reads.append((tool, path, resolved))
        return reads, scratch

    def outside_keys(self, reads, scratch):
        bad = []
        for tool, path, resolved in reads:
            if any(resolved == d or resolved.startswith(d + "/") for d in scratch):
                continue
            if resolved == self.toolkit or resolved.startswith(self.toolkit + "/"):
                continue
            if resolved.startswith(SYSTEM) or resolved in SYSTEM_FILES or path.startswith(SYSTEM) or path in SYSTEM_FILES:
                continue
            bad.append(f"{tool} read {path} ({resolved})")
        return sorted(set(bad))

    def test_stage_reads_are_keyed_and_runs_are_counted(self):
        calls = self.traced_build("k1.o")
        self.assertEqual(self.counts(calls), (2, 2), "the first miss runs cicc and ptxas once per architecture")
        reads, scratch = self.reads_of_tools(calls)
        self.assertEqual(len(scratch), 1, f"the tools' outputs lie in one scratch directory: {scratch}")
        self.assertNotIn(os.path.realpath(self.ws), scratch, "the scratch directory is the miss's own")
        self.assertTrue(reads, "strace saw no file the tools read")
        scratch_reads = [r for r in reads if any(r[2].startswith(d + "/") for d in scratch)]
        self.assertTrue(any(t == "cicc" for t, _, _ in scratch_reads), "cicc reads its input from the scratch directory")
        self.assertTrue(any(t == "ptxas" for t, _, _ in scratch_reads), "ptxas reads its input from the scratch directory")
        self.assertEqual(self.outside_keys(reads, scratch), [], "files the stages read that no stage key holds")
        s = self.stats()
        self.assertEqual(s["stages"]["ptx"]["misses"], 2, s)
        self.assertEqual(s["stages"]["cubin"]["misses"], 2, s)

        # A host function edited: its body reaches cicc's input (cicc reruns), the PTX does not change.
        self.write("k.cu", SOURCE.replace('"host 1\\n"', '"host 2\\n"'))
        time.sleep(0.05)
        calls = self.traced_build("k2.o")
        cicc, ptxas = self.counts(calls)
        self.assertEqual(ptxas, 0, "a host-only edit runs no ptxas")
        self.assertEqual(cicc, 2, "the edited host function is in cicc's input")
        reads, scratch = self.reads_of_tools(calls)
        self.assertEqual(self.outside_keys(reads, scratch), [], "files the stages read that no stage key holds")

        # Host code no device preprocessing sees: no cicc, no ptxas.
        self.write("k.cu", SOURCE.replace('"host 1\\n"', '"host 2\\n"').replace("banner 1", "banner 2"))
        time.sleep(0.05)
        calls = self.traced_build("k3.o")
        self.assertEqual(self.counts(calls), (0, 0), "an edit under #ifndef __CUDA_ARCH__ runs no cicc and no ptxas")
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (0, 3), s)


if __name__ == "__main__":
    if STRACE is None or kachetest.NVCC is None:
        print("strace or nvcc is not on PATH: skipped")
        raise SystemExit(77)
    kachetest.main()
