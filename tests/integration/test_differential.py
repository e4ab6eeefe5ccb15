"""Differential test: random nvcc command lines, through kache and plainly, must give the same build.

Each case draws a command line from a vocabulary of real nvcc flags and a few small sources (one with a
warning, one with an error, one including a header through -I, one including a missing header) and runs
it in two twin directories A and B (same tree, different absolute paths):
  plain nvcc in A | kache in A (a miss, or a hit of an earlier case) | kache in A again (a hit) |
  kache in B (a hit of A's entry from another directory) | plain nvcc in B.
Every kache run must match the plain run of its directory: exit status, stdout and stderr (the
directory's path replaced by <dir>), the set of files and directories created, objects by section,
depfiles by text, any other output byte for byte. Created files are removed between runs.

CI runs a few cases with a fixed seed; by hand: KACHE_DIFF_COUNT=200 KACHE_DIFF_SEED=7 python3 ...
(case i uses seed SEED+i, so a failing case is reproduced alone with KACHE_DIFF_SEED=<its seed>
KACHE_DIFF_COUNT=1)."""
import os
import random
import re
import shlex
import shutil
import subprocess

import kachetest
from kachetest import KACHE, NVCC, KacheTestCase

COUNT = int(os.environ.get("KACHE_DIFF_COUNT", "6"))
SEED = int(os.environ.get("KACHE_DIFF_SEED", "19296"))  # its 6 cases cover the issue-12 failures

# The tree of each twin directory. Mtimes are set in the past so kache may store every miss.
TREE = {
    "src/ok.cu": "#include <cstdio>\n__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
                 "int host_entry() { std::printf(\"ok\\n\"); return 1; }\n",
    "src/warn.cu": "__global__ void k(float* x) { int unused = 1; x[0] = 1.0f; }\n",
    "src/err.cu": "__global__ void k(float* x) { x[0] = 1.0f }\n",
    "src/inc.cu": "#include \"h.cuh\"\n__global__ void k(float* x) { x[0] = H_VALUE; }\n",
    "src/missing.cu": "#include \"nope.h\"\n__global__ void k(float* x) { x[0] = 1.0f; }\n",
    "src/macro.cu": "#ifndef VAL\n#define VAL 1\n#endif\n#if VAL == 3\n#error VAL must not be 3\n#endif\n"
                    "__global__ void k(float* x) { x[0] = VAL; }\n",
    "inc/h.cuh": "#pragma once\n#define H_VALUE 4.0f\n",
}
DIRS = ["out", "deps"]  # existing output directories; "nodir" never exists

# The vocabulary: each entry picks one alternative (a list of arguments) for a part of the command.
SOURCES = ["ok", "ok", "warn", "warn", "err", "inc", "missing", "macro"]
MODES = [["-c"], ["-c"], ["-c"], ["-dc"], ["-c", "-rdc=true"]]
OUTPUTS = [None, "{s}.o", "out/{s}.o", "out/{s}.o", "nodir/{s}.o"]
DEPFILES = [[], [], ["-MD", "-MF", "{o}.d"], ["-MD", "-MF", "deps/{s}.d"], ["-MMD", "-MF", "deps/{s}.d"],
            ["-MD", "-MF", "nodir/{s}.d"], ["-MMD", "-MF", "{s}.mmd"], ["-MD"]]
TARGETS = [[], [], [], ["-MT", "custom_target"]]  # only with a depfile
OPTIONAL = [  # each present or not
    ["-DVAL=2"], ["-DVAL=3"], ["-UVAL"], ["-Iinc"], ["-Iinc"], ["-O0"], ["-O3"], ["-lineinfo"],
    ["-Xcompiler", "-Wall"], ["-w"], ["--use_fast_math"], ["-std=c++17"],
]
ARCHES = [[], [], ["-arch=sm_75"], ["-arch=sm_90"], ["-gencode", "arch=compute_75,code=sm_75"],
          ["-gencode", "arch=compute_90,code=sm_90"]]


def command(rng, absolute_root):
    """One random nvcc argument list; absolute_root: a placeholder spelled into absolute paths."""
    s = rng.choice(SOURCES)
    src = f"src/{s}.cu"
    if rng.random() < 0.25:
        src = absolute_root + "/" + src
    args = list(rng.choice(MODES)) + [src]
    out = rng.choice(OUTPUTS)
    obj = out.format(s=s) if out else f"{s}.o"
    if out:
        args += ["-o", obj]
    dep = [a.format(s=s, o=obj) for a in rng.choice(DEPFILES)]
    args += dep
    if dep:
        args += rng.choice(TARGETS)
    for opt in OPTIONAL:
        if rng.random() < 0.2:
            args += opt
    args += rng.choice(ARCHES)
    # Drawn last, so the cases above keep their draws: an output spelled through a missing directory.
    if out and rng.random() < 0.1:
        args[args.index("-o") + 1] = "nodir/../" + obj
    return args


def snapshot(root):
    """Every file and directory under root, relative."""
    found = set()
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(d, name), root))
    return found


def make_twins(test, tree, dirs, prefix="twin"):
    """The twin directories A and B (same tree, different absolute paths), mtimes in the past so kache may
    store every miss: {name: (root, snapshot of the tree)}."""
    twins = {}
    for name in ("A", "B"):
        root = test.path(prefix + name)
        for rel, text in tree.items():
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
            os.utime(p, (1_700_000_000, 1_700_000_000))
        for d in dirs:
            os.makedirs(os.path.join(root, d), exist_ok=True)
        twins[name] = (root, snapshot(root))
    return twins


class Differential(KacheTestCase):
    PLAIN = "nvcc"  # the plain tool's name in differences(); test_differential_cc.py reuses it

    def setUp(self):
        super().setUp()
        self.twins = make_twins(self, TREE, DIRS)

    # --- one run -----------------------------------------------------------------------------------
    def run_in(self, twin, tool, args):
        """Runs args in a twin; returns what a build sees, normalized, and removes what it created."""
        root, initial = self.twins[twin]
        args = [a.replace("@ROOT@", root) for a in args]
        cmd = ([KACHE, "nvcc"] if tool == "kache" else [NVCC]) + args
        r = subprocess.run(cmd, cwd=root, env=self.env, capture_output=True, text=True)
        created = sorted(snapshot(root) - initial)
        files = {}
        for rel in created:
            p = os.path.join(root, rel)
            if os.path.isdir(p):
                files[rel] = ("dir",)
            elif rel.endswith(".o"):
                files[rel] = ("object", self.sections(p))
            else:
                with open(p, "rb") as f:
                    data = f.read()
                if rel.endswith(".d") or rel.endswith(".mmd"):
                    files[rel] = ("text", self.normalize(data.decode(errors="replace"), root))
                else:
                    files[rel] = ("bytes", data)
        for rel in sorted(created, key=len, reverse=True):  # contents before their directories
            p = os.path.join(root, rel)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.lexists(p):
                os.unlink(p)
        return {"exit": r.returncode, "stdout": self.normalize(r.stdout, root),
                "stderr": self.normalize(r.stderr, root), "files": files}

    @staticmethod
    def normalize(text, root):
        text = text.replace(root, "<dir>")
        return re.sub(r"tmpxft_[0-9a-f]+_[0-9a-f]+-\d+", "tmpxft_N", text)

    def differences(self, plain, got):
        out = []
        for k in ("exit", "stdout", "stderr"):
            if plain[k] != got[k]:
                out.append(f"{k}: {self.PLAIN} {plain[k]!r} / kache {got[k]!r}")
        if sorted(plain["files"]) != sorted(got["files"]):
            out.append(f"files created: {self.PLAIN} {sorted(plain['files'])} / kache {sorted(got['files'])}")
        for rel in sorted(set(plain["files"]) & set(got["files"])):
            a, b = plain["files"][rel], got["files"][rel]
            if a[0] == "object" and b[0] == "object":
                bad = [sec for sec in a[1] if a[1][sec] != b[1].get(sec)]
                if bad:
                    out.append(f"{rel}: sections {bad} differ")
            elif a != b:
                out.append(f"{rel}: content differs: {self.PLAIN} {a[1:]!r:.300} / kache {b[1:]!r:.300}")
        return out

    # --- the test ----------------------------------------------------------------------------------
    def test_random_command_lines_build_like_nvcc(self):
        failures = []
        for i in range(COUNT):
            seed = SEED + i
            args = command(random.Random(f"kache-diff-{seed}"), "@ROOT@")  # a string seed is hashed
            label = f"case {i} (KACHE_DIFF_SEED={seed} KACHE_DIFF_COUNT=1): nvcc {shlex.join(args)}"
            print(label, flush=True)
            plain_a = self.run_in("A", "nvcc", args)
            runs = [("kache in A", plain_a, self.run_in("A", "kache", args)),
                    ("kache in A again", plain_a, self.run_in("A", "kache", args))]
            # B's plain build only when kache's differs from A's (paths in objects, e.g. -lineinfo).
            got_b = self.run_in("B", "kache", args)
            plain_b = plain_a if not self.differences(plain_a, got_b) else self.run_in("B", "nvcc", args)
            runs.append(("kache in B", plain_b, got_b))
            for what, plain, got in runs:
                diff = self.differences(plain, got)
                if diff and any("sections" in d for d in diff):
                    # A section that differs between two plain compiles says nothing about kache.
                    twin = "B" if what.endswith("B") else "A"
                    again = self.run_in(twin, "nvcc", args)
                    unstable = {d for d in self.differences(plain, again) if "sections" in d}
                    diff = [d for d in diff if d not in unstable]
                for d in diff:
                    failures.append(f"{label}\n  {what}: {d}")
        s = self.stats()
        print(f"{COUNT} cases: hits {s['hits']} misses {s['misses']} passthrough {s['passthrough']} "
              f"compile_failed {s.get('compile_failed')} errors {s['errors']} {s['passthrough_reasons']} "
              f"{s['error_reasons']}", flush=True)
        self.assertEqual(failures, [], "\n".join(failures))
        self.assertEqual(s["errors"], 0, s["error_reasons"])  # a failing compile is the user's, not kache's


class DifferentialOverStages(Differential):
    """The same cases with nvcc's stage cache on (KACHE_NVCC_STAGES=1, issue 24): every miss replays
    nvcc's dry run stage by stage, reusing cicc's PTX and ptxas's cubins of earlier cases where their
    keys match; what a build sees must still be plain nvcc's. The stage path must have been taken."""

    def setUp(self):
        super().setUp()
        self.env["KACHE_NVCC_STAGES"] = "1"

    def test_random_command_lines_build_like_nvcc(self):
        super().test_random_command_lines_build_like_nvcc()
        s = self.stats()
        ran = sum(k.get("hits", 0) + k.get("misses", 0) for k in (s.get("stages") or {}).values())
        print(f"stages {s.get('stages')} run whole {s.get('stages_whole')}", flush=True)
        self.assertGreater(ran, 0, f"no miss took the stage path: {s.get('stages_whole')}")


if __name__ == "__main__":
    kachetest.main()
